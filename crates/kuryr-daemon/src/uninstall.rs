//! What the daemon removes from its host when kuryr-rs is uninstalled (not when it restarts,
//! see [`kuryr_runtime::uninstall`]): the CNI network configuration and the plugin executable
//! that the DaemonSet's init container (`kuryr-cni install`) wrote. A conflist that is no longer
//! kuryr-rs's (another CNI took over the name) is left alone.

use std::path::{Path, PathBuf};

/// The installed plugin's file name (the conflist's plugin `type`).
pub const PLUGIN_NAME: &str = "kuryr-cni";

/// Where `kuryr-cni install` put its files on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniFiles {
    /// The host's CNI bin dir (holds `kuryr-cni`).
    pub bin_dir: PathBuf,
    /// The host's CNI conf dir (holds the conflist).
    pub conf_dir: PathBuf,
    /// The conflist's file name.
    pub conflist_name: String,
}

/// Whether a conflist's text is kuryr-rs's: one of its plugins has type `kuryr-cni` (pure).
pub fn is_ours(conflist: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(conflist) else {
        return false;
    };
    let plugin_is_ours = |p: &serde_json::Value| p["type"].as_str() == Some(PLUGIN_NAME);
    plugin_is_ours(&v)
        || v["plugins"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(plugin_is_ours))
}

/// Removes the conflist (when it is ours) and the plugin; returns what was removed. Blocking
/// file I/O: call it from a blocking task.
pub fn remove_cni_files(files: &CniFiles) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let conflist = files.conf_dir.join(&files.conflist_name);
    match std::fs::read(&conflist) {
        Ok(text) if is_ours(&text) => remove(&conflist, &mut removed),
        Ok(_) => {
            tracing::warn!(path = %conflist.display(), "uninstall: the CNI configuration is not kuryr-rs's any more, left alone")
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(path = %conflist.display(), error = %e, "uninstall: cannot read the CNI configuration")
        }
    }
    remove(&files.bin_dir.join(PLUGIN_NAME), &mut removed);
    removed
}

fn remove(path: &Path, removed: &mut Vec<PathBuf>) {
    match std::fs::remove_file(path) {
        Ok(()) => removed.push(path.to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "uninstall: cannot remove"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_its_conflist() {
        assert!(is_ours(
            br#"{"cniVersion":"1.0.0","name":"kuryr","plugins":[{"type":"kuryr-cni"}]}"#
        ));
        assert!(is_ours(
            br#"{"cniVersion":"0.3.1","name":"kuryr","type":"kuryr-cni"}"#
        ));
        assert!(!is_ours(br#"{"name":"x","plugins":[{"type":"bridge"}]}"#));
        assert!(!is_ours(b"not json"));
    }

    #[test]
    fn removes_only_what_is_ours() {
        let d = tempfile::tempdir().unwrap();
        let files = CniFiles {
            bin_dir: d.path().join("bin"),
            conf_dir: d.path().join("net.d"),
            conflist_name: "10-kuryr.conflist".into(),
        };
        std::fs::create_dir_all(&files.bin_dir).unwrap();
        std::fs::create_dir_all(&files.conf_dir).unwrap();
        std::fs::write(files.bin_dir.join("kuryr-cni"), b"elf").unwrap();
        std::fs::write(files.bin_dir.join("bridge"), b"elf").unwrap();
        std::fs::write(
            files.conf_dir.join("10-kuryr.conflist"),
            br#"{"name":"kuryr","plugins":[{"type":"kuryr-cni"}]}"#,
        )
        .unwrap();
        assert_eq!(remove_cni_files(&files).len(), 2);
        assert!(files.bin_dir.join("bridge").exists());
        assert!(remove_cni_files(&files).is_empty(), "a second run finds nothing");
        // Someone else's conflist under the same name stays.
        std::fs::write(
            files.conf_dir.join("10-kuryr.conflist"),
            br#"{"plugins":[{"type":"calico"}]}"#,
        )
        .unwrap();
        assert!(remove_cni_files(&files).is_empty());
        assert!(files.conf_dir.join("10-kuryr.conflist").exists());
    }
}
