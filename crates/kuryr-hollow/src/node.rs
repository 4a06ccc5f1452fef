//! One hollow node: kube-sandbox's node logic (registration, lease, pod watch, sandboxes, CNI
//! chaining and result cache, pod status) over placeholder namespaces, and the real
//! kuryr-daemon of that node (its two watches, registry and verbs) over a recording binding,
//! the one serving the other's CNI calls in-process.

use std::{net::IpAddr, path::Path, sync::Arc, time::Duration};

use kube_sandbox_node::node::{Hollow, NodeConfig, run_node_with};
use kuryr_daemon::{
    binding::record::{OnPlug, RecordingBindings},
    instance::NodeDaemon,
    state::StateStore,
};
use tokio::task::JoinHandle;

use crate::{Error, plugin::InProcess};

/// A running hollow node.
pub struct HollowNode {
    /// Its name.
    pub name: String,
    /// What its binding was asked.
    pub bindings: Arc<RecordingBindings>,
    /// Its daemon (dropped: its watches stop).
    pub daemon: NodeDaemon,
    node: JoinHandle<()>,
}

/// How a hollow node is made.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Node name.
    pub name: String,
    /// Its InternalIP (any address: nothing is bound to it).
    pub ip: IpAddr,
    /// Its state (kubelet records, daemon state files, placeholder namespaces).
    pub dir: std::path::PathBuf,
    /// The CNI conf dir (shared by the fleet).
    pub cni_conf_dir: std::path::PathBuf,
    /// What each wiring takes.
    pub wiring_delay: Duration,
    /// Lease renewal period (kubelet's: 10 s).
    pub lease_interval: Duration,
}

impl HollowNode {
    /// Starts node `spec` with the daemon configuration `config`; `on_plug` is told each port
    /// its binding wires (the cloud's side of a plug).
    pub fn start(
        client: kube::Client,
        spec: &Spec,
        config: &kuryr_config::Config,
        on_plug: Option<OnPlug>,
    ) -> Result<Self, Error> {
        let state = StateStore::open(&spec.dir.join("daemon")).map_err(|e| Error::State {
            node: spec.name.clone(),
            message: e.to_string(),
        })?;
        let bindings = RecordingBindings::new(spec.wiring_delay, on_plug);
        let daemon = NodeDaemon::start(client.clone(), &spec.name, config, state, bindings.clone());
        let mut cfg = NodeConfig::new(&spec.name);
        cfg.node_ip = spec.ip;
        cfg.cni_conf_dir = spec.cni_conf_dir.clone();
        cfg.cni_bin_dirs = Vec::new();
        cfg.state_dir = spec.dir.join("kubelet");
        cfg.lease_interval = spec.lease_interval;
        let hollow = Hollow {
            plugins: Arc::new(InProcess {
                daemon: daemon.daemon.clone(),
            }),
            netns_dir: spec.dir.join("netns"),
        };
        let name = spec.name.clone();
        let node = tokio::spawn(async move {
            if let Err(e) = run_node_with(client, cfg, Some(hollow), std::future::pending()).await {
                tracing::error!(node = %name, error = %e, "hollow node stopped");
            }
        });
        Ok(HollowNode {
            name: spec.name.clone(),
            bindings,
            daemon,
            node,
        })
    }

    /// Whether its node loop ended (an error is logged).
    pub fn is_finished(&self) -> bool {
        self.node.is_finished()
    }
}

impl Drop for HollowNode {
    fn drop(&mut self) {
        self.node.abort();
    }
}

/// Writes the conflist kuryr-rs installs (one `kuryr-cni` plugin) into `dir`.
pub fn write_conflist(dir: &Path) -> Result<(), Error> {
    let conf = serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "kuryr",
        "plugins": [{"type": crate::plugin::KURYR_TYPE, "kuryr_conf": "/etc/kuryr/kuryr.conf", "debug": false}],
    });
    let io = |e: std::io::Error| Error::Io {
        what: format!("writing the conflist in {}", dir.display()),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::write(dir.join("10-kuryr.conflist"), conf.to_string()).map_err(io)
}
