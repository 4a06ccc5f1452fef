//! The conf dir's network config kept between sandboxes, as CRI runtimes keep it (containerd
//! loads it again when inotify reports a change in the dir): reloaded here when the dir or one
//! of its files changes modification time or size, checked with one `stat` per file instead of
//! listing and reading the dir for every pod (over a VM node's 9p share each of those is a
//! round trip to the host). A stamp younger than a second is not trusted (see [`SETTLE`]).

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Mutex,
    time::{Duration, SystemTime},
};

use super::{
    Error,
    config::{FileStamp as Stamp, NetworkConfigList, file_stamp},
};

/// What a file looks like now: a changed file changes its modification time or size.
fn stamp(path: &Path) -> Option<Stamp> {
    fs::metadata(path).ok().as_ref().map(file_stamp)
}

/// How old a modification must be before a stamp is trusted. The kernel stamps files with a
/// coarse clock (a tick, a few milliseconds), so a change made in the same tick as the one
/// before leaves the stamp as it was; a dir or file changed that recently is read again on
/// every call until its stamp is older than this (as git treats "racily clean" entries).
const SETTLE: Duration = Duration::from_secs(1);

fn settled(s: &Stamp) -> bool {
    s.0.and_then(|m| SystemTime::now().duration_since(m).ok())
        .is_some_and(|age| age >= SETTLE)
}

#[derive(Debug)]
struct Loaded {
    dir: PathBuf,
    dir_stamp: Stamp,
    /// Every candidate file of the dir, stamped before it was read.
    files: Vec<(PathBuf, Stamp)>,
    list: NetworkConfigList,
}

/// The cached network config of one conf dir.
#[derive(Debug, Default)]
pub struct ConfCache {
    loaded: Mutex<Option<Loaded>>,
}

impl ConfCache {
    /// The network config of `dir`: the cached one while nothing in the dir changed, else read
    /// again ([`super::config::load_from_dir`]'s rules). Errors are not cached: a dir without a
    /// valid config is read again on the next call.
    pub fn load(&self, dir: &Path) -> Result<NetworkConfigList, Error> {
        let dir_stamp = stamp(dir);
        {
            let cached = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(c) = cached.as_ref()
                && c.dir == dir
                && Some(c.dir_stamp) == dir_stamp
                && c.files.iter().all(|(p, s)| stamp(p) == Some(*s))
            {
                return Ok(c.list.clone());
            }
        }
        let (list, files) = super::config::load_from_dir_stamped(dir)?;
        let settled = dir_stamp.is_some_and(|s| settled(&s)) && files.iter().all(|(_, s)| settled(s));
        let mut cached = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        *cached = dir_stamp.filter(|_| settled).map(|dir_stamp| Loaded {
            dir: dir.to_path_buf(),
            dir_stamp,
            files,
            list: list.clone(),
        });
        Ok(list)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::fs::{File, FileTimes};

    use super::*;

    fn conflist(name: &str) -> String {
        format!(r#"{{"cniVersion":"1.0.0","name":"{name}","plugins":[{{"type":"kuryr-cni"}}]}}"#)
    }

    /// Sets `path`'s modification time (a file or a dir).
    fn set_mtime(path: &Path, t: SystemTime) {
        File::open(path)
            .unwrap()
            .set_times(FileTimes::new().set_modified(t))
            .unwrap();
    }

    /// Makes the dir and its files look settled (changed a minute ago).
    fn settle(dir: &Path) {
        let past = SystemTime::now() - Duration::from_secs(60);
        for e in fs::read_dir(dir).unwrap() {
            set_mtime(&e.unwrap().path(), past);
        }
        set_mtime(dir, past);
    }

    #[test]
    fn serves_the_cached_config_until_the_dir_or_a_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("10-kuryr.conflist");
        fs::write(&file, conflist("aaaa")).unwrap();
        settle(dir.path());
        let cache = ConfCache::default();
        assert_eq!(cache.load(dir.path()).unwrap().name, "aaaa");

        // Same size, modification time put back: unchanged to the cache, which serves the
        // config it read (this is what spares the reads).
        let mtime = fs::metadata(&file).unwrap().modified().unwrap();
        fs::write(&file, conflist("bbbb")).unwrap();
        set_mtime(&file, mtime);
        assert_eq!(cache.load(dir.path()).unwrap().name, "aaaa");

        // Rewritten in place: read again.
        fs::write(&file, conflist("cc")).unwrap();
        assert_eq!(cache.load(dir.path()).unwrap().name, "cc");

        // A new file sorted first (the dir changes): read again, and it wins.
        settle(dir.path());
        assert_eq!(cache.load(dir.path()).unwrap().name, "cc");
        fs::write(dir.path().join("00-first.conflist"), conflist("first")).unwrap();
        assert_eq!(cache.load(dir.path()).unwrap().name, "first");

        // No valid config left: an error, not cached; a config written later is found.
        fs::remove_file(dir.path().join("00-first.conflist")).unwrap();
        fs::remove_file(&file).unwrap();
        assert!(cache.load(dir.path()).is_err());
        assert!(cache.load(dir.path()).is_err());
        fs::write(&file, conflist("back")).unwrap();
        assert_eq!(cache.load(dir.path()).unwrap().name, "back");
    }

    #[test]
    fn a_change_too_recent_to_trust_its_stamp_is_read_every_time() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("10-kuryr.conflist");
        fs::write(&file, conflist("aaaa")).unwrap();
        let cache = ConfCache::default();
        assert_eq!(cache.load(dir.path()).unwrap().name, "aaaa");
        // Same size and stamp (as a second write within one clock tick would leave it): the
        // fresh stamp was not trusted, so the new contents are read.
        let mtime = fs::metadata(&file).unwrap().modified().unwrap();
        fs::write(&file, conflist("bbbb")).unwrap();
        set_mtime(&file, mtime);
        assert_eq!(cache.load(dir.path()).unwrap().name, "bbbb");
    }

    #[test]
    fn another_dir_is_read_on_its_own() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fs::write(a.path().join("10.conflist"), conflist("a")).unwrap();
        fs::write(b.path().join("10.conflist"), conflist("b")).unwrap();
        settle(a.path());
        settle(b.path());
        let cache = ConfCache::default();
        assert_eq!(cache.load(a.path()).unwrap().name, "a");
        assert_eq!(cache.load(b.path()).unwrap().name, "b");
        assert_eq!(cache.load(a.path()).unwrap().name, "a");
    }
}
