//! The node's persistent state (its sandboxes) and the CNI result cache, as JSON files written
//! atomically (temp file + rename) under the node's state dir: one file per sandbox
//! (`sandboxes/<sandbox id>.json`), as containerd keeps a record per sandbox, so a pod start
//! writes its own record and not every sandbox of the node.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cni::NetworkConfigList;

/// Errors of state persistence.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing a file failed.
    #[error("cannot write {path}")]
    Write {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Reading a file failed.
    #[error("cannot read {path}")]
    Read {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A sandbox id that cannot name a record file.
    #[error("sandbox id {0:?} cannot name a record file")]
    BadId(String),
    /// A file is not valid JSON of the expected shape.
    #[error("cannot parse {path}")]
    Parse {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: serde_json::Error,
    },
}

/// One pod sandbox this node created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRecord {
    /// Pod UID.
    pub pod_uid: String,
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// 64-hex sandbox id (`CNI_CONTAINERID`).
    pub sandbox_id: String,
    /// Name of the netns under /var/run/netns.
    pub netns: String,
    /// Interface name given to the plugins.
    pub ifname: String,
    /// Name of the network the sandbox is (being) attached to: teardown runs CNI DEL for it.
    /// `None` only in records of older versions written before the network was chosen.
    #[serde(default)]
    pub network: Option<String>,
    /// Pod IPs from the ADD result.
    #[serde(default)]
    pub pod_ips: Vec<String>,
    /// 64-hex id of the emulated container.
    pub container_id: String,
    /// RFC 3339 time the sandbox was created.
    pub created: String,
    /// RFC 3339 time the container started (ADD done and responders up), UTC with
    /// microseconds (pod status shows it in whole seconds, as Kubernetes does).
    #[serde(default)]
    pub started: Option<String>,
}

/// Everything the node remembers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Sandboxes by sandbox id.
    #[serde(default)]
    pub sandboxes: BTreeMap<String, SandboxRecord>,
}

/// A cached CNI ADD (like libcni's result cache): what DEL and CHECK need later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CachedResult {
    /// Always `cniCacheV1`.
    pub kind: String,
    /// Sandbox id.
    pub container_id: String,
    /// Interface name.
    pub if_name: String,
    /// Network name.
    pub network_name: String,
    /// The network config used for ADD.
    pub config: NetworkConfigList,
    /// `CNI_ARGS` used for ADD.
    pub cni_args: String,
    /// Capability args used for ADD (`runtimeConfig` sources).
    #[serde(default)]
    pub capability_args: serde_json::Map<String, Value>,
    /// Final result of ADD (absent when ADD failed half-way).
    #[serde(default)]
    pub result: Option<Value>,
}

/// The state dir.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let err = |source| Error::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(err)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| Error::Parse {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

impl Store {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The root dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where releases before per-sandbox files kept every sandbox in one file.
    fn legacy_state_path(&self) -> PathBuf {
        self.dir.join("state.json")
    }

    fn result_path(&self, network: &str, container_id: &str, ifname: &str) -> PathBuf {
        self.dir
            .join("results")
            .join(format!("{network}-{container_id}-{ifname}"))
    }

    fn sandboxes_dir(&self) -> PathBuf {
        self.dir.join("sandboxes")
    }

    fn sandbox_path(&self, sandbox_id: &str) -> Result<PathBuf, Error> {
        // Ids are 64 hex digits made by the node; a record edited by hand must not make it
        // write or remove anything outside its directory.
        if sandbox_id.is_empty() || !sandbox_id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(Error::BadId(sandbox_id.to_owned()));
        }
        Ok(self.sandboxes_dir().join(format!("{sandbox_id}.json")))
    }

    /// Loads the state (empty when there is none yet). A state left by an older release in
    /// one `state.json` is moved into per-sandbox files.
    pub fn load(&self) -> Result<State, Error> {
        let mut state = State::default();
        let dir = self.sandboxes_dir();
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries {
                    let path = entry
                        .map_err(|source| Error::Read {
                            path: dir.clone(),
                            source,
                        })?
                        .path();
                    // Temp files of an interrupted write are not records: they go.
                    if path.extension().is_none_or(|e| e != "json") {
                        if path
                            .extension()
                            .is_some_and(|e| e.to_string_lossy().starts_with("tmp-"))
                        {
                            let _ = std::fs::remove_file(&path);
                        }
                        continue;
                    }
                    if let Some(rec) = read_json::<SandboxRecord>(&path)? {
                        state.sandboxes.insert(rec.sandbox_id.clone(), rec);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(Error::Read { path: dir, source }),
        }
        let legacy = self.legacy_state_path();
        if let Some(old) = read_json::<State>(&legacy)? {
            for rec in old.sandboxes.into_values() {
                self.save_sandbox(&rec)?;
                state.sandboxes.entry(rec.sandbox_id.clone()).or_insert(rec);
            }
            std::fs::remove_file(&legacy).map_err(|source| Error::Write { path: legacy, source })?;
        }
        Ok(state)
    }

    /// Saves one sandbox's record atomically (compact JSON).
    pub fn save_sandbox(&self, rec: &SandboxRecord) -> Result<(), Error> {
        let bytes = serde_json::to_vec(rec).unwrap_or_default();
        write_atomic(&self.sandbox_path(&rec.sandbox_id)?, &bytes)
    }

    /// Removes one sandbox's record (missing is fine).
    pub fn remove_sandbox(&self, sandbox_id: &str) -> Result<(), Error> {
        let path = self.sandbox_path(sandbox_id)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(Error::Write { path, source }),
        }
    }

    /// Writes a cached result.
    pub fn save_result(&self, entry: &CachedResult) -> Result<(), Error> {
        let bytes = serde_json::to_vec(entry).unwrap_or_default();
        write_atomic(
            &self.result_path(&entry.network_name, &entry.container_id, &entry.if_name),
            &bytes,
        )
    }

    /// Reads a cached result.
    pub fn load_result(
        &self,
        network: &str,
        container_id: &str,
        ifname: &str,
    ) -> Result<Option<CachedResult>, Error> {
        read_json(&self.result_path(network, container_id, ifname))
    }

    /// Removes a cached result (missing is fine).
    pub fn remove_result(&self, network: &str, container_id: &str, ifname: &str) {
        let _ = std::fs::remove_file(self.result_path(network, container_id, ifname));
    }
}

#[cfg(test)]
impl SandboxRecord {
    /// A record of pod `ns/p` (uid `u`) in sandbox `abc`, not started: the tests' fixture.
    pub(crate) fn sample() -> Self {
        SandboxRecord {
            pod_uid: "u".into(),
            namespace: "ns".into(),
            name: "p".into(),
            sandbox_id: "abc".into(),
            netns: "cni-1".into(),
            ifname: "eth0".into(),
            network: Some("net".into()),
            pod_ips: vec!["10.0.0.1".into()],
            container_id: "def".into(),
            created: "2026-01-01T00:00:00Z".into(),
            started: None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_and_results_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("n1"));
        assert_eq!(store.load().unwrap(), State::default());
        let mut st = State::default();
        let rec = SandboxRecord::sample();
        st.sandboxes.insert("abc".into(), rec.clone());
        store.save_sandbox(&rec).unwrap();
        assert_eq!(store.load().unwrap(), st);
        store.remove_sandbox("abc").unwrap();
        store.remove_sandbox("abc").unwrap();
        assert_eq!(store.load().unwrap(), State::default());
        let entry = CachedResult {
            kind: "cniCacheV1".into(),
            container_id: "abc".into(),
            if_name: "eth0".into(),
            network_name: "net".into(),
            config: NetworkConfigList {
                name: "net".into(),
                cni_version: "1.0.0".into(),
                plugins: vec![],
                source: PathBuf::new(),
            },
            cni_args: "IgnoreUnknown=1".into(),
            capability_args: serde_json::Map::new(),
            result: Some(serde_json::json!({"cniVersion":"1.0.0"})),
        };
        store.save_result(&entry).unwrap();
        assert_eq!(store.load_result("net", "abc", "eth0").unwrap(), Some(entry));
        store.remove_result("net", "abc", "eth0");
        assert_eq!(store.load_result("net", "abc", "eth0").unwrap(), None);
    }

    #[test]
    fn a_broken_record_is_an_error_naming_its_file_and_temp_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        store.save_sandbox(&SandboxRecord::sample()).unwrap();
        std::fs::write(store.sandboxes_dir().join("abc.tmp-7"), b"{half").unwrap();
        assert_eq!(store.load().unwrap().sandboxes.len(), 1);
        assert!(!store.sandboxes_dir().join("abc.tmp-7").exists());
        std::fs::write(store.sandboxes_dir().join("xyz.json"), b"{garbage").unwrap();
        let err = store.load().unwrap_err().to_string();
        assert!(err.contains("xyz.json"), "{err}");
    }

    #[test]
    fn ids_that_are_not_one_plain_name_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        for id in ["", "../x", "a/b", "."] {
            let rec = SandboxRecord {
                sandbox_id: id.into(),
                ..SandboxRecord::sample()
            };
            assert!(matches!(store.save_sandbox(&rec), Err(Error::BadId(_))), "{id:?}");
            assert!(matches!(store.remove_sandbox(id), Err(Error::BadId(_))), "{id:?}");
        }
    }

    #[test]
    fn a_single_file_state_of_an_older_release_is_moved_into_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut old = State::default();
        old.sandboxes.insert("abc".into(), SandboxRecord::sample());
        std::fs::write(dir.path().join("state.json"), serde_json::to_vec(&old).unwrap()).unwrap();
        assert_eq!(store.load().unwrap(), old);
        assert!(!dir.path().join("state.json").exists());
        assert_eq!(store.load().unwrap(), old);
        std::fs::write(dir.path().join("state.json"), b"{garbage").unwrap();
        assert!(store.load().is_err());
    }
}
