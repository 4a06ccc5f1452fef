//! The daemon process: command line ([`Args`]), configuration ([`load_config`]) and the wiring
//! of registry, watchers, CNI server, health and metrics servers ([`run`]).

use std::{path::PathBuf, sync::Arc};

use axum::Router;
use kuryr_config::{Config, ConfigErrors};
use kuryr_runtime::{
    ConfigArgs, KubeArgs, ServeArgs,
    http::{self, BindError},
    kubeclient, shutdown_signal,
};
use tokio::task::JoinHandle;
use tracing::{error, info};

use crate::{
    binding::{NodeBindings, ovs::OvsBinding},
    daemon::{Daemon, Settings},
    health::{self, Health},
    metrics::{self, Metrics},
    ovsdb::Ovsdb,
    registry::Registry,
    server,
    state::{StateError, StateStore},
    watcher,
};

/// Command line of `kuryr-daemon` (oslo.config style options plus kuryr-rs additions).
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "kuryr-daemon", version, about = "Kuryr-Kubernetes CNI daemon")]
pub struct Args {
    /// kuryr.conf files and directories.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How to reach Kubernetes.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Health (`[cni_health_server] port`) and metrics (`[prometheus_exporter]
    /// cni_exporter_port`) listen addresses.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// This node's name (upstream: `KUBERNETES_NODE_NAME`, else the lower-cased hostname).
    #[arg(long, env = "KUBERNETES_NODE_NAME")]
    pub node_name: Option<String>,
    /// Where the record of wired containers is kept (default `/var/lib/kuryr-daemon/<node>`).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// CNI API address, overriding `[cni_daemon] bind_address` (`host:port` or `unix:/path`).
    #[arg(long)]
    pub bind_address: Option<String>,
    /// OVSDB socket (default `unix:$OVS_RUNDIR/db.sock`, else `/var/run/openvswitch/db.sock`).
    #[arg(long, env = "KURYR_OVSDB")]
    pub ovsdb: Option<String>,
}

/// Why the daemon stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration has errors (all of them are listed).
    #[error("{0}")]
    Config(#[source] ConfigErrors),
    /// No node name.
    #[error("no node name: set KUBERNETES_NODE_NAME or --node-name")]
    NodeName,
    /// No Kubernetes client.
    #[error("connecting to Kubernetes")]
    Client(#[source] kubeclient::Error),
    /// The health or metrics server could not listen.
    #[error(transparent)]
    BindHttp(#[from] BindError),
    /// The state directory is unusable.
    #[error("opening the state directory")]
    State(#[source] StateError),
    /// A listening socket could not be bound.
    #[error("binding {what} on {addr}")]
    Bind {
        /// Which server.
        what: &'static str,
        /// The address.
        addr: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A server or watcher stopped.
    #[error("{0} stopped")]
    Stopped(&'static str),
}

/// The node name: `--node-name`/`KUBERNETES_NODE_NAME`, else the lower-cased hostname.
pub fn node_name(args: &Args) -> Result<String, Error> {
    if let Some(n) = args.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Ok(n.to_owned());
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_lowercase())
        .filter(|h| !h.is_empty())
        .ok_or(Error::NodeName)
}

/// A bound listener of either kind.
enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

async fn bind_api(addr: &str) -> Result<Listener, Error> {
    let err = |source| Error::Bind {
        what: "CNI API",
        addr: addr.to_owned(),
        source,
    };
    if let Some(path) = addr
        .strip_prefix("unix://")
        .or_else(|| addr.strip_prefix("unix:"))
    {
        // A stale socket of an earlier run.
        let _ = std::fs::remove_file(path);
        if let Some(dir) = std::path::Path::new(path).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        return tokio::net::UnixListener::bind(path)
            .map(Listener::Unix)
            .map_err(err);
    }
    let hostport = addr.strip_prefix("http://").unwrap_or(addr);
    tokio::net::TcpListener::bind(hostport)
        .await
        .map(Listener::Tcp)
        .map_err(err)
}

fn serve(l: Listener, router: Router) -> JoinHandle<()> {
    tokio::spawn(async move {
        let r = match l {
            Listener::Tcp(l) => axum::serve(l, router).await,
            Listener::Unix(l) => axum::serve(l, router).await,
        };
        if let Err(e) = r {
            error!(error = %e, "HTTP server failed");
        }
    })
}

/// Runs the daemon with an already loaded `config` until SIGINT/SIGTERM.
pub async fn run(args: &Args, config: Config) -> Result<(), Error> {
    let node = node_name(args)?;
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/var/lib/kuryr-daemon").join(&node));
    let state = StateStore::open(&state_dir).map_err(Error::State)?;
    let client = kubeclient::client(args.kube.kubeconfig.as_deref(), &config.kubernetes)
        .await
        .map_err(Error::Client)?;
    let ovsdb_target = args
        .ovsdb
        .clone()
        .unwrap_or_else(|| Ovsdb::default_target(std::env::var("OVS_RUNDIR").ok().as_deref()));
    let bindings: Arc<dyn crate::binding::Bindings> =
        Arc::new(NodeBindings::new(OvsBinding::new(Ovsdb::new(&ovsdb_target))));
    let bridge = config
        .neutron_defaults
        .ovs_bridge
        .clone()
        .filter(|b| !b.is_empty());
    let registry = Arc::new(Registry::default());
    let metrics = Arc::new(Metrics::default());
    let health = Arc::new(Health::new(
        config.cni_daemon.cni_failures_count,
        registry.clone(),
        bindings.clone(),
        bridge.clone(),
        client.clone(),
    ));
    let settings = Settings {
        vif_timeout: config.cni_daemon.vif_annotation_timeout,
        default_bridge: bridge,
        network_device_mtu: config.neutron_defaults.network_device_mtu,
        netns_proc_dir: config
            .cni_daemon
            .netns_proc_dir
            .clone()
            .filter(|_| config.cni_daemon.docker_mode),
    };
    let daemon = Arc::new(
        Daemon::new(settings, registry.clone(), state, bindings, metrics.clone()).with_health(health.clone()),
    );

    let api_addr = args
        .bind_address
        .clone()
        .unwrap_or_else(|| config.cni_daemon.bind_address.clone());
    let api = bind_api(&api_addr).await?;
    let health_l = http::bind(
        "health server",
        args.serve.health_bind,
        config.cni_health_server.port,
    )
    .await?;
    let metrics_l = http::bind(
        "metrics server",
        args.serve.metrics_bind,
        config.prometheus_exporter.cni_exporter_port,
    )
    .await?;
    info!(node = %node, api = %api_addr, health = ?health_l.local_addr().ok(), metrics = ?metrics_l.local_addr().ok(),
        ovsdb = %ovsdb_target, state_dir = %state_dir.display(), "serving");
    let mut tasks = vec![
        serve(api, server::router(daemon)),
        serve(Listener::Tcp(health_l), health::router(health.clone())),
        serve(Listener::Tcp(metrics_l), metrics::router(metrics)),
    ];
    tasks.push(tokio::spawn(watcher::watch_ports(
        client.clone(),
        node.clone(),
        registry.clone(),
        health.clone(),
    )));
    tasks.push(tokio::spawn(watcher::watch_pods(client, node, registry, health)));
    let result = tokio::select! {
        _ = futures::future::select_all(tasks.iter_mut()) => Err(Error::Stopped("a server or watcher")),
        _ = shutdown_signal() => Ok(()),
    };
    for t in tasks {
        t.abort();
    }
    if let Some(path) = api_addr.strip_prefix("unix:") {
        let _ = std::fs::remove_file(path.trim_start_matches("//"));
    }
    result
}
