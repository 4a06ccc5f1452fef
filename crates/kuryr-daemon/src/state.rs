//! What this daemon has wired, kept on disk under `--state-dir` (one JSON file per container,
//! written atomically before wiring starts), so DEL and GC can clean up after a daemon restart
//! or after the KuryrPort is gone. A restarted daemon only reads these files; it never touches
//! running pods on start.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Mutex,
};

use serde::{Deserialize, Serialize};

use crate::binding::WireSpec;

/// A failed state operation.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The directory cannot be created or listed.
    #[error("state directory {path}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A file cannot be written or removed.
    #[error("state file {path}")]
    File {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A record cannot be encoded.
    #[error("encoding state")]
    Encode(#[source] serde_json::Error),
}

/// One container's attachment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// Pod namespace.
    pub pod_namespace: String,
    /// Pod name.
    pub pod_name: String,
    /// Pod UID.
    pub pod_uid: String,
    /// The VIFs wired (or being wired) with their binding class.
    pub vifs: Vec<WiredVif>,
}

/// One wired VIF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WiredVif {
    /// os-vif class (`VIFOpenVSwitch`).
    pub class: String,
    /// What was wired.
    pub spec: WireSpec,
}

impl Attachment {
    /// What makes a record read from disk unfit to act on, if anything: its container ID, and
    /// every VIF's names — the host device must be the one derived from its port ID, the pod
    /// interface a device name. Records drive deletions (DEL, GC): a planted or damaged one
    /// must not name a host link.
    pub fn problem(&self) -> Option<String> {
        use crate::binding::spec::{host_dev_name, valid_ifname, valid_port_id};
        if self.container_id.is_empty()
            || self.container_id.len() > 256
            || self.container_id.chars().any(char::is_control)
        {
            return Some(format!("container ID {:?} is not one", self.container_id));
        }
        for v in &self.vifs {
            let s = &v.spec;
            if !valid_port_id(&s.port_id) {
                return Some(format!("port ID {:?} is not one", s.port_id));
            }
            if s.host_dev != host_dev_name(&s.port_id) {
                return Some(format!(
                    "host device {:?} is not the port's ({})",
                    s.host_dev,
                    host_dev_name(&s.port_id)
                ));
            }
            if !valid_ifname(&s.ifname) {
                return Some(format!("interface name {:?} is not one", s.ifname));
            }
        }
        None
    }
}

/// The store: files on disk plus an in-memory index by container ID.
#[derive(Debug)]
pub struct StateStore {
    dir: PathBuf,
    index: Mutex<HashMap<String, Attachment>>,
}

/// A file name for `container_id` that cannot escape the directory.
fn file_name(container_id: &str) -> String {
    let safe: String = container_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.json")
}

impl StateStore {
    /// Opens (creating) `dir` and loads every record; unreadable files, files not named after
    /// their container and records naming devices the daemon would not have made
    /// ([`Attachment::problem`]) are logged and skipped.
    pub fn open(dir: &Path) -> Result<Self, StateError> {
        let derr = |source| StateError::Dir {
            path: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(derr)?;
        let mut index = HashMap::new();
        for entry in std::fs::read_dir(dir).map_err(derr)? {
            let path = entry.map_err(derr)?.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match std::fs::read(&path).map(|b| serde_json::from_slice::<Attachment>(&b)) {
                Ok(Ok(a)) => {
                    // Only a record under its own container's file name, naming only what the
                    // daemon would have made: anything else is not acted on.
                    let own_name = path
                        .file_name()
                        .is_some_and(|n| *n == *file_name(&a.container_id));
                    match a.problem() {
                        None if own_name => {
                            index.insert(a.container_id.clone(), a);
                        }
                        None => tracing::warn!(file = %path.display(), container = %a.container_id,
                            "ignoring a state file not named after its container"),
                        Some(why) => tracing::warn!(file = %path.display(), problem = %why,
                            "ignoring a state file that names what this daemon would not have made"),
                    }
                }
                Ok(Err(e)) => {
                    tracing::warn!(file = %path.display(), error = %e, "ignoring unreadable state file")
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "ignoring unreadable state file")
                }
            }
        }
        tracing::info!(dir = %dir.display(), attachments = index.len(), "state loaded");
        Ok(Self {
            dir: dir.to_owned(),
            index: Mutex::new(index),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Attachment>> {
        self.index.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes `a` (atomically: temporary file, then rename).
    pub fn put(&self, a: &Attachment) -> Result<(), StateError> {
        let path = self.dir.join(file_name(&a.container_id));
        let tmp = path.with_extension("json.tmp");
        let body = serde_json::to_vec_pretty(a).map_err(StateError::Encode)?;
        let ferr = |source| StateError::File {
            path: path.clone(),
            source,
        };
        std::fs::write(&tmp, body).map_err(ferr)?;
        std::fs::rename(&tmp, &path).map_err(ferr)?;
        self.lock().insert(a.container_id.clone(), a.clone());
        Ok(())
    }

    /// Forgets `container_id`.
    pub fn remove(&self, container_id: &str) -> Result<(), StateError> {
        let path = self.dir.join(file_name(container_id));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(StateError::File { path, source }),
        }
        self.lock().remove(container_id);
        Ok(())
    }

    /// The attachment of `container_id`.
    pub fn get(&self, container_id: &str) -> Option<Attachment> {
        self.lock().get(container_id).cloned()
    }

    /// Every attachment.
    pub fn all(&self) -> Vec<Attachment> {
        self.lock().values().cloned().collect()
    }

    /// The attachments of pod `namespace/name`.
    pub fn of_pod(&self, namespace: &str, name: &str) -> Vec<Attachment> {
        self.lock()
            .values()
            .filter(|a| a.pod_namespace == namespace && a.pod_name == name)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape() {
        assert_eq!(file_name("abc-1"), "abc-1.json");
        assert_eq!(file_name("../../etc/x"), ".._.._etc_x.json");
    }

    #[test]
    fn survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateStore::open(dir.path()).unwrap();
        let a = Attachment {
            container_id: "c1".into(),
            ifname: "eth0".into(),
            netns: "/run/netns/x".into(),
            pod_namespace: "ns".into(),
            pod_name: "p".into(),
            pod_uid: "u".into(),
            vifs: vec![],
        };
        s.put(&a).unwrap();
        std::fs::write(dir.path().join("junk.json"), "{").unwrap();
        let s2 = StateStore::open(dir.path()).unwrap();
        assert_eq!(s2.get("c1"), Some(a.clone()));
        assert_eq!(s2.of_pod("ns", "p").len(), 1);
        s2.remove("c1").unwrap();
        s2.remove("c1").unwrap();
        assert!(StateStore::open(dir.path()).unwrap().all().is_empty());
    }

    #[test]
    fn records_naming_devices_the_daemon_would_not_make_are_not_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let s = StateStore::open(dir.path()).unwrap();
        let vif = |host_dev: &str| WiredVif {
            class: "VIFOpenVSwitch".into(),
            spec: crate::binding::WireSpec {
                port_id: "3e5f2a1b-7c8d".into(),
                host_dev: host_dev.into(),
                ifname: "eth0".into(),
                mac: [0xfa, 0x16, 0x3e, 0, 0, 1],
                mtu: None,
                addresses: vec![],
                routes: vec![],
                bridge: "br-int".into(),
                vlan_id: None,
                pod_uid: "u".into(),
            },
        };
        let good = Attachment {
            container_id: "good".into(),
            ifname: "eth0".into(),
            netns: "/run/netns/x".into(),
            pod_namespace: "ns".into(),
            pod_name: "p".into(),
            pod_uid: "u".into(),
            vifs: vec![vif("tap3e5f2a1b-7c")],
        };
        s.put(&good).unwrap();
        // A record naming the host's eth0 as its device, and one planted under another name.
        let bad = Attachment {
            container_id: "bad".into(),
            vifs: vec![vif("eth0")],
            ..good.clone()
        };
        s.put(&bad).unwrap();
        let planted = Attachment {
            container_id: "victim".into(),
            ..good.clone()
        };
        std::fs::write(
            dir.path().join("other.json"),
            serde_json::to_vec(&planted).unwrap(),
        )
        .unwrap();
        let s2 = StateStore::open(dir.path()).unwrap();
        assert_eq!(s2.get("good"), Some(good));
        assert!(s2.get("bad").is_none() && s2.get("victim").is_none());
        assert!(bad.problem().is_some_and(|p| p.contains("eth0")));
    }
}
