//! Named network namespaces (created in-process like a CRI runtime does, in [`named`], in
//! iproute2's layout) under /var/run/netns or the node's `--netns-dir` (CRI-O's
//! `namespaces_dir`), and binding sockets inside a namespace from a short-lived dedicated OS
//! thread.

mod named;

pub use named::{create, delete};

use std::{
    net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket},
    path::{Path, PathBuf},
    sync::OnceLock,
};

use nix::sched::CloneFlags;

/// Where named namespaces live by default (iproute2's and the CRI runtimes' dir).
pub const NETNS_DIR: &str = "/var/run/netns";

static DIR: OnceLock<PathBuf> = OnceLock::new();

/// The dir of this process's named namespaces: [`NETNS_DIR`] unless [`set_dir`] chose another.
pub fn dir() -> &'static Path {
    DIR.get().map_or(Path::new(NETNS_DIR), PathBuf::as_path)
}

/// `--netns-dir`'s value: an absolute path (a relative one would follow the working dir).
pub fn parse_dir(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(format!("{s:?} is not an absolute path"))
    }
}

/// Chooses the namespace dir of this process, once, before any namespace is made (a node's
/// `--netns-dir`). Fails with the dir already in use when another was chosen before.
pub fn set_dir(dir: PathBuf) -> Result<(), PathBuf> {
    let chosen = DIR.get_or_init(|| dir.clone());
    if *chosen == dir {
        Ok(())
    } else {
        Err(chosen.clone())
    }
}

/// Errors of namespace operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A namespace name that is not one path component.
    #[error("invalid netns name {0:?}: it must be one path component")]
    Name(String),
    /// Creating a named namespace failed at `step`.
    #[error("cannot create netns {path}: {step}")]
    Create {
        /// Path.
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Deleting a named namespace failed at `step`.
    #[error("cannot delete netns {path}: {step}")]
    Delete {
        /// Path.
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The namespace file could not be opened.
    #[error("cannot open netns {path}")]
    Open {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// setns failed.
    #[error("cannot enter netns {path}")]
    Enter {
        /// Path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: nix::Error,
    },
    /// Binding a socket inside the namespace failed.
    #[error("cannot bind {proto} port {port} in netns {path}")]
    Bind {
        /// Path.
        path: PathBuf,
        /// tcp/udp.
        proto: &'static str,
        /// Port.
        port: u16,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The helper thread died.
    #[error("netns helper thread panicked")]
    Thread,
}

/// Path of the named namespace.
pub fn path(name: &str) -> PathBuf {
    dir().join(name)
}

/// Whether the named namespace exists.
pub fn exists(name: &str) -> bool {
    path(name).exists()
}

/// Sockets bound inside a namespace.
#[derive(Debug)]
pub struct BoundSockets {
    /// TCP listeners (non-blocking), in the order of the requested ports.
    pub tcp: Vec<(u16, TcpListener)>,
    /// UDP sockets (non-blocking).
    pub udp: Vec<(u16, UdpSocket)>,
}

/// Binds TCP listeners and UDP sockets on 0.0.0.0 (or `ip`) inside the namespace at `ns_path`,
/// from a dedicated thread that enters it (never a runtime worker thread). The sockets stay in
/// that namespace for their whole life.
pub fn bind_in(
    ns_path: &Path,
    ip: Ipv4Addr,
    tcp_ports: &[u16],
    udp_ports: &[u16],
) -> Result<BoundSockets, Error> {
    let path = ns_path.to_path_buf();
    let tcp_ports = tcp_ports.to_vec();
    let udp_ports = udp_ports.to_vec();
    run_in(ns_path, move || -> Result<BoundSockets, Error> {
        let bind_err = |proto, port| {
            let path = path.clone();
            move |source| Error::Bind {
                path,
                proto,
                port,
                source,
            }
        };
        let mut out = BoundSockets {
            tcp: Vec::new(),
            udp: Vec::new(),
        };
        for port in tcp_ports {
            let l = TcpListener::bind(SocketAddr::from((ip, port))).map_err(bind_err("tcp", port))?;
            l.set_nonblocking(true).map_err(bind_err("tcp", port))?;
            out.tcp.push((port, l));
        }
        for port in udp_ports {
            let s = UdpSocket::bind(SocketAddr::from((ip, port))).map_err(bind_err("udp", port))?;
            s.set_nonblocking(true).map_err(bind_err("udp", port))?;
            out.udp.push((port, s));
        }
        Ok(out)
    })?
}

/// Runs `f` on a dedicated thread inside the namespace at `ns_path` (for tests and tools that
/// must connect from inside a pod).
pub fn run_in<T: Send + 'static>(ns_path: &Path, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Error> {
    let ns_path = ns_path.to_path_buf();
    std::thread::spawn(move || -> Result<T, Error> {
        let file = std::fs::File::open(&ns_path).map_err(|source| Error::Open {
            path: ns_path.clone(),
            source,
        })?;
        nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).map_err(|source| Error::Enter {
            path: ns_path.clone(),
            source,
        })?;
        Ok(f())
    })
    .join()
    .map_err(|_| Error::Thread)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dir_is_chosen_once_and_names_the_paths() {
        // The default again (other tests of this process keep using it), then another: refused.
        assert_eq!(set_dir(PathBuf::from(NETNS_DIR)), Ok(()));
        assert_eq!(dir(), Path::new(NETNS_DIR));
        assert_eq!(path("cni-1"), Path::new("/var/run/netns/cni-1"));
        assert_eq!(
            set_dir(PathBuf::from("/run/netns")),
            Err(PathBuf::from(NETNS_DIR))
        );
        assert_eq!(dir(), Path::new(NETNS_DIR));
    }

    #[test]
    fn the_dir_option_wants_an_absolute_path() {
        assert_eq!(parse_dir("/run/netns"), Ok(PathBuf::from("/run/netns")));
        for bad in ["run/netns", "", "./netns"] {
            assert!(parse_dir(bad).is_err(), "{bad:?}");
        }
    }
}
