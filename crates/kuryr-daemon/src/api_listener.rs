//! The CNI API's transport: by default a unix socket in a root-only directory, serving only
//! callers whose credentials (`SO_PEERCRED`) say root — the container runtime, which runs the
//! plugin as root — like Cilium's and Multus' daemons; or, for upstream configurations,
//! `host:port` over TCP, which any process on the node can reach (a start-up warning says so).
//!
//! Upstream Kuryr served `127.0.0.1:5036` to everyone on the node: a process without
//! privileges could unwire every pod (GC), delete host links (DEL) or move a pod's port into
//! its own namespace (ADD).

use std::{
    io,
    os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    time::Duration,
};

use tokio::net::{UnixListener, UnixStream, unix::SocketAddr};
use tracing::warn;

/// Where the daemon listens by default, and the plugin connects (kuryr-rs; upstream: TCP
/// `127.0.0.1:5036`).
pub const DEFAULT_SOCKET: &str = kuryr_cni_api::daemon::DEFAULT_DAEMON_ADDRESS;

/// The API address `addr` is a unix socket: its path.
pub fn socket_path(addr: &str) -> Option<&Path> {
    addr.strip_prefix("unix://")
        .or_else(|| addr.strip_prefix("unix:"))
        .map(Path::new)
}

/// Why the socket could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// Something other than a socket is at the path: it is not removed.
    #[error("{0} exists and is not a socket: refusing to replace it")]
    NotASocket(PathBuf),
    /// A file operation failed.
    #[error("{what} {path}")]
    Io {
        /// What was done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
}

/// Binds the socket at `path`: its directory made `0700` when the daemon creates it (an
/// existing directory that others may write to is reported), a stale socket of an earlier run
/// replaced (nothing else is), the socket itself `0600`.
pub fn bind(path: &Path) -> Result<PeerChecked, SocketError> {
    let io = |what, path: &Path| {
        let path = path.to_path_buf();
        move |source| SocketError::Io { what, path, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        match std::fs::metadata(dir) {
            Ok(m) if m.mode() & 0o022 != 0 => warn!(
                dir = %dir.display(), mode = format!("{:o}", m.mode() & 0o7777),
                "the CNI API socket's directory is writable by others: any local user could replace the socket"
            ),
            Ok(_) => {}
            Err(_) => std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io("creating the socket directory", dir))?,
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(io("removing the stale socket", path))?
        }
        Ok(_) => return Err(SocketError::NotASocket(path.to_path_buf())),
        Err(_) => {}
    }
    let inner = UnixListener::bind(path).map_err(io("binding", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("restricting the mode of", path))?;
    Ok(PeerChecked {
        inner,
        allowed: allowed_uids(),
    })
}

/// The users served: root (the runtime) and, when the daemon is not root, its own user.
fn allowed_uids() -> Vec<u32> {
    let me = nix::unistd::geteuid().as_raw();
    if me == 0 { vec![0] } else { vec![0, me] }
}

/// A unix listener that hands over only connections of allowed users; others are closed at
/// once (before any byte is read) and logged.
pub struct PeerChecked {
    inner: UnixListener,
    allowed: Vec<u32>,
}

impl PeerChecked {
    /// Whether a connection from `uid` is served.
    pub fn allows(&self, uid: u32) -> bool {
        self.allowed.contains(&uid)
    }
}

impl axum::serve::Listener for PeerChecked {
    type Io = UnixStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.inner.accept().await {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors and the like: do not spin.
                    warn!(error = %e, "accepting a CNI API connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            match stream.peer_cred() {
                Ok(c) if self.allows(c.uid()) => return (stream, addr),
                Ok(c) => warn!(
                    uid = c.uid(), pid = ?c.pid(),
                    "refused a CNI API connection: only the container runtime (root) is served"
                ),
                Err(e) => warn!(error = %e, "refused a CNI API connection whose credentials cannot be read"),
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// The start-up warning of a TCP API address (upstream's configuration), naming the risk.
pub fn tcp_warning(addr: &str) -> String {
    format!(
        "[cni_daemon] bind_address = {addr}: the CNI API is served over TCP to every process that can reach it \
         (any user and host-network pod on this node can unwire pods or delete links); use a unix socket \
         (the default, {DEFAULT_SOCKET}) unless an upstream CNI plugin must reach this daemon"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(socket_path("unix:/run/x.sock"), Some(Path::new("/run/x.sock")));
        assert_eq!(socket_path("unix:///run/x.sock"), Some(Path::new("/run/x.sock")));
        assert_eq!(socket_path("127.0.0.1:5036"), None);
        assert!(DEFAULT_SOCKET.starts_with("unix:"));
        assert!(tcp_warning("127.0.0.1:5036").contains("bind_address"));
    }

    #[tokio::test]
    async fn the_socket_is_private_and_nothing_else_is_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("new/cni.sock");
        let l = bind(&sock).expect("bind");
        let dmode = std::fs::metadata(sock.parent().expect("parent"))
            .expect("dir")
            .mode()
            & 0o777;
        assert_eq!(dmode, 0o700, "a directory the daemon creates is root's only");
        assert_eq!(std::fs::metadata(&sock).expect("sock").mode() & 0o777, 0o600);
        assert!(l.allows(0));
        drop(l);
        // A stale socket is replaced; a file that is not a socket is not.
        bind(&sock).expect("rebind over the stale socket");
        let file = dir.path().join("file");
        std::fs::write(&file, b"keep").expect("write");
        assert!(matches!(bind(&file), Err(SocketError::NotASocket(_))));
        assert_eq!(std::fs::read(&file).expect("kept"), b"keep");
    }
}
