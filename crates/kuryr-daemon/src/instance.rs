//! One node's daemon without its process: the registry fed by the node's two watches (its
//! KuryrPorts by label, its pods' metadata by field), the CNI verbs over a binding, health and
//! metrics. `cli::run` serves it on its sockets; a hollow node (scale tests: hundreds of nodes
//! in one process) calls [`crate::server::call`] on it in-process.

use std::sync::Arc;

use kuryr_config::Config;
use tokio::task::JoinHandle;

use crate::{
    binding::Bindings,
    daemon::{Daemon, Settings},
    health::Health,
    metrics::Metrics,
    registry::Registry,
    state::StateStore,
    watcher,
};

/// A running node daemon; its watches stop when it is dropped.
pub struct NodeDaemon {
    /// The verbs.
    pub daemon: Arc<Daemon>,
    /// Its health (served by `cli::run`).
    pub health: Arc<Health>,
    /// Its metrics (served by `cli::run`).
    pub metrics: Arc<Metrics>,
    /// The two watches (taken by `cli::run` to supervise them).
    pub watchers: Vec<JoinHandle<()>>,
}

/// The daemon's settings from the configuration.
pub fn settings(config: &Config) -> Settings {
    Settings {
        vif_timeout: config.cni_daemon.vif_annotation_timeout,
        default_bridge: bridge(config),
        network_device_mtu: config.neutron_defaults.network_device_mtu,
        netns_proc_dir: config
            .cni_daemon
            .netns_proc_dir
            .clone()
            .filter(|_| config.cni_daemon.docker_mode),
    }
}

/// `[neutron_defaults] ovs_bridge`, when set.
pub fn bridge(config: &Config) -> Option<String> {
    config
        .neutron_defaults
        .ovs_bridge
        .clone()
        .filter(|b| !b.is_empty())
}

impl NodeDaemon {
    /// Starts the daemon of `node` with `config`, its `state` files and its `bindings`.
    pub fn start(
        client: kube::Client,
        node: &str,
        config: &Config,
        state: StateStore,
        bindings: Arc<dyn Bindings>,
    ) -> Self {
        let registry = Arc::new(Registry::default());
        let metrics = Arc::new(Metrics::default());
        let health = Arc::new(Health::new(
            config.cni_daemon.cni_failures_count,
            registry.clone(),
            bindings.clone(),
            bridge(config),
            client.clone(),
        ));
        let daemon = Arc::new(
            Daemon::new(
                settings(config),
                registry.clone(),
                state,
                bindings,
                metrics.clone(),
            )
            .with_health(health.clone()),
        );
        let watchers = vec![
            tokio::spawn(watcher::watch_ports(
                client.clone(),
                node.to_string(),
                registry.clone(),
                health.clone(),
            )),
            tokio::spawn(watcher::watch_pods(
                client,
                node.to_string(),
                registry,
                health.clone(),
            )),
        ];
        NodeDaemon {
            daemon,
            health,
            metrics,
            watchers,
        }
    }
}

impl Drop for NodeDaemon {
    fn drop(&mut self) {
        for w in &self.watchers {
            w.abort();
        }
    }
}
