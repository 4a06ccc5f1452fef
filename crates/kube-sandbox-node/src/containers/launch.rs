//! Starting one container process: the node writes a [`LaunchSpec`] and runs
//! `kube-sandbox run-container <spec>`, which — still single-threaded, before any runtime
//! starts — enters the pod's network namespace, takes a private mount namespace with the
//! container's volumes bind-mounted at their mount paths (read-only where asked), changes to the
//! working directory, asks for SIGKILL when the node dies, starts its own session, confines
//! itself as the container's securityContext says ([`super::security`]: read-only root,
//! `no_new_privs`, capability bounding and inheritable sets, user and group), and replaces
//! itself with the container's command. The node waits on it as on any child.

use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
};

use nix::{
    mount::{MsFlags, mount},
    sched::{CloneFlags, setns, unshare},
};
use serde::{Deserialize, Serialize};

use super::security::Security;

/// One bind mount of a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// The prepared volume directory (or host path) on the machine.
    pub source: PathBuf,
    /// The mount path inside the container.
    pub target: PathBuf,
    /// Mounted read-only.
    pub read_only: bool,
}

/// Everything `run-container` needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The executable (already resolved through the image table).
    pub program: PathBuf,
    /// Its arguments (after `argv[0]`).
    pub args: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Working directory (`/` when the container names none).
    pub working_dir: PathBuf,
    /// The network namespace to enter (`/var/run/netns/<name>`), if not the node's own.
    pub netns: Option<PathBuf>,
    /// Volume mounts, in the container's order.
    pub mounts: Vec<Mount>,
    /// Its securityContext (default: unconfined, as the node's own helpers run).
    #[serde(default)]
    pub security: Security,
}

/// Why a container could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The spec file cannot be read or parsed.
    #[error("reading the launch spec {path}: {message}")]
    Spec {
        /// Path.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// A namespace or mount operation failed.
    #[error("{step}: {source}")]
    Sys {
        /// What was being done.
        step: String,
        /// Cause.
        #[source]
        source: nix::Error,
    },
    /// A file operation failed.
    #[error("{step}: {source}")]
    Io {
        /// What was being done.
        step: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Reads a spec written by the node.
pub fn read_spec(path: &Path) -> Result<LaunchSpec, LaunchError> {
    let spec_err = |message: String| LaunchError::Spec {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read(path).map_err(|e| spec_err(e.to_string()))?;
    serde_json::from_slice(&text).map_err(|e| spec_err(e.to_string()))
}

fn sys(step: impl Into<String>) -> impl FnOnce(nix::Error) -> LaunchError {
    let step = step.into();
    move |source| LaunchError::Sys { step, source }
}

/// Enters the namespaces, mounts, and execs the program. Returns only on failure. Must be
/// called while the process has a single thread (before any async runtime starts).
pub fn exec(spec: &LaunchSpec) -> LaunchError {
    match prepare(spec) {
        Ok(()) => {}
        Err(e) => return e,
    }
    let err = std::process::Command::new(&spec.program)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.working_dir)
        .exec();
    LaunchError::Io {
        step: format!("starting {}", spec.program.display()),
        source: err,
    }
}

fn prepare(spec: &LaunchSpec) -> Result<(), LaunchError> {
    // Die with the node, as containers die with their runtime shim here (there is no shim).
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL).map_err(sys("PR_SET_PDEATHSIG"))?;
    nix::unistd::setsid().map_err(sys("setsid"))?;
    if let Some(ns) = &spec.netns {
        let f = std::fs::File::open(ns).map_err(|source| LaunchError::Io {
            step: format!("opening netns {}", ns.display()),
            source,
        })?;
        setns(&f, CloneFlags::CLONE_NEWNET).map_err(sys(format!("entering netns {}", ns.display())))?;
    }
    unshare(CloneFlags::CLONE_NEWNS).map_err(sys("unshare(CLONE_NEWNS)"))?;
    // Nothing mounted here propagates back to the machine, while the machine's new mounts (a
    // pod's netns under /var/run/netns) still show up here: `HostToContainer` for everything.
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SLAVE,
        None::<&str>,
    )
    .map_err(sys("making / a slave mount"))?;
    for m in &spec.mounts {
        // A mount point inside an earlier mount (conf.d in a ConfigMap volume) is made there.
        if !m.target.exists() {
            let made = if m.source.is_dir() {
                std::fs::create_dir_all(&m.target)
            } else {
                m.target
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&m.target, b""))
            };
            made.map_err(|source| LaunchError::Io {
                step: format!("creating mount point {}", m.target.display()),
                source,
            })?;
        }
        mount(
            Some(&m.source),
            &m.target,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(sys(format!(
            "bind-mounting {} at {}",
            m.source.display(),
            m.target.display()
        )))?;
    }
    // Read-only last: a later mount point may lie inside an earlier read-only volume.
    for m in &spec.mounts {
        if m.read_only {
            mount(
                None::<&str>,
                &m.target,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None::<&str>,
            )
            .map_err(sys(format!("making {} read-only", m.target.display())))?;
        }
    }
    confine(&spec.security)
}

/// Applies `sec` to this process; what it keeps passes to the program it execs. Order matters:
/// the mount before capabilities go, the capability sets while `CAP_SETPCAP` is still held, the
/// user last (changing it needs `CAP_SETUID`, which the program may not keep).
fn confine(sec: &Security) -> Result<(), LaunchError> {
    if sec.read_only_root {
        // A bind remount changes this namespace's mount only (never the file system itself);
        // the flags the machine mounted it with are kept.
        let st = nix::sys::statvfs::statvfs("/").map_err(sys("statvfs /"))?;
        let mut flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        use nix::sys::statvfs::FsFlags;
        for (f, m) in [
            (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
            (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if st.flags().contains(f) {
                flags |= m;
            }
        }
        mount(None::<&str>, "/", None::<&str>, flags, None::<&str>).map_err(sys("making / read-only"))?;
    }
    if sec.no_new_privs {
        nix::sys::prctl::set_no_new_privs().map_err(sys("PR_SET_NO_NEW_PRIVS"))?;
    }
    if let Some(keep) = &sec.caps {
        let keep: caps::CapsHashSet = keep.iter().filter_map(|c| c.parse().ok()).collect();
        let cap_err = |step: &str, e: caps::errors::CapsError| LaunchError::Io {
            step: step.to_string(),
            source: std::io::Error::other(e.to_string()),
        };
        for c in caps::all().difference(&keep) {
            // A capability newer than this kernel is not in its bounding set to begin with.
            if caps::has_cap(None, caps::CapSet::Bounding, *c).unwrap_or(false) {
                caps::drop(None, caps::CapSet::Bounding, *c)
                    .map_err(|e| cap_err(&format!("dropping {c} from the bounding set"), e))?;
            }
        }
        // Root's program gets (inheritable | bounding): exactly `keep`.
        caps::set(None, caps::CapSet::Inheritable, &keep)
            .map_err(|e| cap_err("setting the inheritable set", e))?;
        caps::clear(None, caps::CapSet::Ambient).map_err(|e| cap_err("clearing the ambient set", e))?;
    }
    if sec.uid.is_some() || sec.gid.is_some() {
        let gid = nix::unistd::Gid::from_raw(sec.gid.unwrap_or(0));
        nix::unistd::setgroups(&[gid]).map_err(sys("setgroups"))?;
        nix::unistd::setresgid(gid, gid, gid).map_err(sys(format!("setting the group {gid}")))?;
        let uid = nix::unistd::Uid::from_raw(sec.uid.unwrap_or(0));
        nix::unistd::setresuid(uid, uid, uid).map_err(sys(format!("setting the user {uid}")))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn specs_round_trip_and_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let spec = LaunchSpec {
            program: "/bin/true".into(),
            args: vec!["a".into()],
            env: vec![("K".into(), "V".into())],
            working_dir: "/".into(),
            netns: None,
            mounts: vec![Mount {
                source: "/tmp".into(),
                target: "/mnt".into(),
                read_only: true,
            }],
            security: Security::default(),
        };
        let p = dir.path().join("spec.json");
        std::fs::write(&p, serde_json::to_vec(&spec).unwrap()).unwrap();
        assert_eq!(read_spec(&p).unwrap(), spec);
        std::fs::write(&p, b"{").unwrap();
        let e = read_spec(&p).unwrap_err().to_string();
        assert!(e.contains("spec.json"), "{e}");
    }
}
