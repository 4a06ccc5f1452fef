//! Hollow nodes (kubemark's idea, for kuryr-rs): hundreds of emulated nodes in one process,
//! each running kube-sandbox's node logic and the real kuryr-daemon of that node — its
//! node-scoped watches of KuryrPorts and pods, its registry, its ADD/DEL/GC decisions — with a
//! binding that records instead of wiring ([`node`]), the CNI calls made in-process
//! ([`plugin`]). The API server and the controller see the traffic of N real nodes (3N
//! node-scoped watches, N leases, N daemons' reads); no namespace, link or OVS port is made.

pub mod node;
pub mod plugin;
pub mod report;

use std::{net::IpAddr, path::PathBuf, time::Duration};

pub use node::{HollowNode, Spec, write_conflist};

/// Why a hollow node could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The daemon's state directory.
    #[error("hollow node {node}: daemon state: {message}")]
    State {
        /// Node.
        node: String,
        /// What went wrong.
        message: String,
    },
    /// A file of the fleet.
    #[error("{what}: {message}")]
    Io {
        /// What was being done.
        what: String,
        /// What went wrong.
        message: String,
    },
}

/// The specs of a fleet of `n` nodes named `<prefix><i>` (i from 1), with addresses from
/// 10.200.0.0/16 (node i: 10.200.i/256.i%256), state under `root`.
pub fn fleet(prefix: &str, n: usize, root: &std::path::Path, wiring_delay: Duration) -> Vec<Spec> {
    (1..=n)
        .map(|i| {
            let name = format!("{prefix}{i}");
            Spec {
                ip: IpAddr::from([10, 200, (i / 256) as u8, (i % 256) as u8]),
                dir: root.join("nodes").join(&name),
                cni_conf_dir: root.join("net.d"),
                wiring_delay,
                lease_interval: Duration::from_secs(10),
                name,
            }
        })
        .collect()
}

/// The fleet's shared CNI conf dir under `root`.
pub fn conf_dir(root: &std::path::Path) -> PathBuf {
    root.join("net.d")
}
