//! Durable state across restarts of the emulated API server (`--data-dir`), as etcd gives a real
//! one. Every committed change is appended to `wal.jsonl` under the store lock, before it is
//! broadcast: a server killed even with SIGKILL comes back with every object it acknowledged
//! (the kernel keeps what was written; a machine crash is not emulated) and the same
//! resourceVersion counter. At start the log is folded into `snapshot.json` and truncated, and
//! again whenever it outgrows [`COMPACT_BYTES`]. The TLS material (clients keep trusting the CA)
//! and the minted ServiceAccount tokens are kept beside them.
//!
//! Not kept: the watch history. A watch resuming from a resourceVersion older than the restart
//! gets 410 Gone and its client lists again, as from a real server whose watch cache starts
//! after the version asked for.

use std::{
    fs::{File, OpenOptions},
    io::{self, BufRead, BufReader, BufWriter, Write},
    path::{Path, PathBuf},
};

use serde_json::Value;

use crate::{meta, registry::ResKey, store::WatchEvent};

/// Log size above which the store is snapshotted and the log truncated.
pub const COMPACT_BYTES: u64 = 64 * 1024 * 1024;

const SNAPSHOT: &str = "snapshot.json";
const WAL: &str = "wal.jsonl";

/// Why the persisted state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// A file could not be read or written.
    #[error("{what} {path}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A file holds something else than this server writes.
    #[error("{path}: {message} (move the data dir away to start empty)")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> PersistError + 'a {
    move |source| PersistError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// What a data dir held: the last resourceVersion and every object with its resource.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The highest resourceVersion committed.
    pub rv: u64,
    /// Objects, in no particular order.
    pub objects: Vec<(ResKey, Value)>,
}

impl Loaded {
    /// Whether nothing was persisted (a new data dir).
    pub fn is_empty(&self) -> bool {
        self.rv == 0 && self.objects.is_empty()
    }
}

/// The append-only log of committed changes.
#[derive(Debug)]
pub struct Wal {
    file: BufWriter<File>,
    path: PathBuf,
    dir: PathBuf,
    bytes: u64,
}

impl Wal {
    /// Appends one committed event: `{"g":..,"r":..,"type":..,"object":..}` (the event's own
    /// serialized line with its resource in front, so no object is serialized twice).
    pub fn append(&mut self, ev: &WatchEvent) -> io::Result<()> {
        let head = serde_json::json!({"g": ev.key.0, "r": ev.key.1}).to_string();
        // `{"g":"","r":"pods"}` + `,` + the event line without its opening brace.
        let head = head.trim_end_matches('}');
        let line = &ev.line[1..];
        self.file.write_all(head.as_bytes())?;
        self.file.write_all(b",")?;
        self.file.write_all(line)?;
        self.bytes += (head.len() + 1 + line.len()) as u64;
        Ok(())
    }

    /// Hands the buffered lines to the kernel (once per store transaction).
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// Whether the log has grown enough to be folded into a snapshot.
    pub fn wants_compaction(&self) -> bool {
        self.bytes > COMPACT_BYTES
    }

    /// Writes a snapshot of `objects` at `rv` and truncates the log.
    pub fn compact<'a>(
        &mut self,
        rv: u64,
        objects: impl Iterator<Item = (&'a ResKey, &'a Value)>,
    ) -> Result<(), PersistError> {
        write_snapshot(&self.dir, rv, objects)?;
        self.file.flush().map_err(io_err("flushing", &self.path))?;
        self.file
            .get_ref()
            .set_len(0)
            .map_err(io_err("truncating", &self.path))?;
        self.bytes = 0;
        Ok(())
    }
}

/// Reads `dir` (created when missing): the snapshot, then the log replayed over it. A torn last
/// line (a server killed in the middle of a write) is dropped; any other unreadable line is an
/// error, since objects after it would be lost silently.
pub fn load(dir: &Path) -> Result<Loaded, PersistError> {
    std::fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
    let mut objects: std::collections::HashMap<ResKey, std::collections::BTreeMap<(String, String), Value>> =
        Default::default();
    let mut rv = 0u64;
    let snap = dir.join(SNAPSHOT);
    match File::open(&snap) {
        Ok(f) => {
            let v: Value = serde_json::from_reader(BufReader::new(f)).map_err(|e| PersistError::Corrupt {
                path: snap.clone(),
                message: e.to_string(),
            })?;
            rv = v["rv"].as_u64().unwrap_or(0);
            for o in v["objects"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let key = (str_of(&o["g"]), str_of(&o["r"]));
                let obj = o["object"].clone();
                objects.entry(key).or_default().insert(
                    (meta::namespace(&obj).to_string(), meta::name(&obj).to_string()),
                    obj,
                );
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("reading", &snap)(e)),
    }
    let wal = dir.join(WAL);
    match File::open(&wal) {
        Ok(f) => {
            let lines: Vec<String> = BufReader::new(f)
                .lines()
                .collect::<Result<_, _>>()
                .map_err(io_err("reading", &wal))?;
            let n = lines.len();
            for (i, line) in lines.iter().enumerate() {
                let rec: Value = match serde_json::from_str(line) {
                    Ok(v) => v,
                    Err(_) if i + 1 == n => {
                        tracing::warn!(path = %wal.display(), line = i + 1, "dropping a torn last log line");
                        break;
                    }
                    Err(e) => {
                        return Err(PersistError::Corrupt {
                            path: wal.clone(),
                            message: format!("line {}: {e}", i + 1),
                        });
                    }
                };
                let key = (str_of(&rec["g"]), str_of(&rec["r"]));
                let obj = rec["object"].clone();
                if let Some(v) = meta::meta_str(&obj, "resourceVersion").and_then(|s| s.parse::<u64>().ok()) {
                    rv = rv.max(v);
                }
                let at = (meta::namespace(&obj).to_string(), meta::name(&obj).to_string());
                let objs = objects.entry(key).or_default();
                if rec["type"] == "DELETED" {
                    objs.remove(&at);
                } else {
                    objs.insert(at, obj);
                }
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err("reading", &wal)(e)),
    }
    let objects = objects
        .into_iter()
        .flat_map(|(k, objs)| objs.into_values().map(move |o| (k.clone(), o)))
        .collect();
    Ok(Loaded { rv, objects })
}

/// Opens the log of `dir` for appending after [`load`] (a snapshot of what was loaded is written
/// first, so the log starts empty).
pub fn open_wal<'a>(
    dir: &Path,
    rv: u64,
    objects: impl Iterator<Item = (&'a ResKey, &'a Value)>,
) -> Result<Wal, PersistError> {
    write_snapshot(dir, rv, objects)?;
    let path = dir.join(WAL);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(io_err("opening", &path))?;
    file.set_len(0).map_err(io_err("truncating", &path))?;
    Ok(Wal {
        file: BufWriter::with_capacity(64 * 1024, file),
        path,
        dir: dir.to_owned(),
        bytes: 0,
    })
}

fn write_snapshot<'a>(
    dir: &Path,
    rv: u64,
    objects: impl Iterator<Item = (&'a ResKey, &'a Value)>,
) -> Result<(), PersistError> {
    let path = dir.join(SNAPSHOT);
    let tmp = dir.join(format!("{SNAPSHOT}.tmp"));
    let write = || -> io::Result<()> {
        let mut w = BufWriter::new(File::create(&tmp)?);
        write!(w, "{{\"rv\":{rv},\"objects\":[")?;
        for (i, ((g, r), obj)) in objects.enumerate() {
            if i > 0 {
                w.write_all(b",\n")?;
            }
            serde_json::to_writer(&mut w, &serde_json::json!({"g": g, "r": r, "object": obj}))?;
        }
        w.write_all(b"]}\n")?;
        w.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(io_err("writing", &path))
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// Reads a small JSON file of this dir (TLS material, tokens); `None` when it does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, PersistError> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| PersistError::Corrupt {
                path: path.to_owned(),
                message: e.to_string(),
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("reading", path)(e)),
    }
}

/// Writes a small JSON file atomically (temporary file, then rename), readable by root only.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), PersistError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let write = || -> io::Result<()> {
        let mut f = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        serde_json::to_writer(&mut f, value)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(io_err("writing", path))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::store::{EventType, event_line};
    use serde_json::json;
    use std::sync::Arc;

    fn ev(rv: u64, etype: EventType, ns: &str, name: &str) -> WatchEvent {
        let obj = json!({"kind": "ConfigMap", "metadata": {"namespace": ns, "name": name, "resourceVersion": rv.to_string()}});
        WatchEvent {
            rv,
            key: (String::new(), "configmaps".into()),
            etype,
            line: event_line(etype.as_str(), &obj),
            object: Arc::new(obj),
            prev: None,
        }
    }

    #[test]
    fn the_log_replays_over_the_snapshot_and_a_torn_line_is_dropped() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path()).unwrap().is_empty());
        let mut w = open_wal(d.path(), 0, std::iter::empty()).unwrap();
        w.append(&ev(1, EventType::Added, "a", "x")).unwrap();
        w.append(&ev(2, EventType::Added, "a", "y")).unwrap();
        w.append(&ev(3, EventType::Deleted, "a", "x")).unwrap();
        w.flush().unwrap();
        let l = load(d.path()).unwrap();
        assert_eq!(l.rv, 3);
        let names: Vec<&str> = l.objects.iter().map(|(_, o)| meta::name(o)).collect();
        assert_eq!(names, ["y"]);
        // Compaction keeps the same state in the snapshot alone.
        let key: ResKey = (String::new(), "configmaps".into());
        let objs: Vec<(ResKey, Value)> = l.objects.clone();
        w.compact(3, objs.iter().map(|(k, v)| (k, v))).unwrap();
        assert_eq!(std::fs::metadata(d.path().join(WAL)).unwrap().len(), 0);
        w.append(&ev(4, EventType::Modified, "a", "y")).unwrap();
        w.flush().unwrap();
        drop(w);
        // A write cut in the middle (SIGKILL) leaves a torn last line.
        let mut f = OpenOptions::new().append(true).open(d.path().join(WAL)).unwrap();
        f.write_all(br#"{"g":"","r":"configmaps","type":"ADDED","obj"#)
            .unwrap();
        let l = load(d.path()).unwrap();
        assert_eq!(l.rv, 4);
        assert_eq!(l.objects.len(), 1);
        assert_eq!(l.objects[0].0, key);
        assert_eq!(meta::meta_str(&l.objects[0].1, "resourceVersion"), Some("4"));
    }

    #[test]
    fn a_corrupt_line_in_the_middle_is_an_error_naming_the_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(WAL), "garbage\n{\"g\":\"\"}\n").unwrap();
        let e = load(d.path()).unwrap_err().to_string();
        assert!(e.contains("wal.jsonl") && e.contains("line 1"), "{e}");
    }
}
