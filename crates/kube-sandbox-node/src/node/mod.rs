//! One emulated node: registers and heartbeats its Node, runs pods bound to it by creating network
//! namespaces and calling the CNI plugin exactly as a CRI runtime does, serves the pods' ports.
//!
//! Deliberate differences from a real kubelet (documented for test authors):
//! - sandbox-creation backoff is `--sandbox-backoff-base` (1 s) doubling up to 30 s (kubelet:
//!   10 s .. 5 min), so tests do not wait minutes;
//! - a CNI DEL that keeps failing is retried with backoff until the pod's deletion deadline, then
//!   the pod object is removed anyway and the sandbox stays recorded: background garbage
//!   collection keeps retrying DEL + netns removal (kubelet would hold the pod);
//! - host-network pods get no sandbox and no responders; the node stays Ready even without a
//!   CNI config (pods then wait with `NetworkNotReady` events, re-checked every backoff base,
//!   reported every 30 s), so host-network pods (the CNI daemon) can be scheduled before the CNI
//!   config exists (there is no DaemonSet controller adding not-ready tolerations here);
//! - `CHECK` is never run (kubelet/containerd do not run it periodically either), no container
//!   lifecycle events (`Pulled`/`Created`/`Started`) are recorded;
//! - capability args offered to plugins (`runtimeConfig`): `portMappings` (from `hostPort`s) and
//!   `io.kubernetes.cri.pod-annotations`; no `bandwidth`/`dns`/`cgroupPath`.
//!
//! Tests find a pod's netns in its sandbox's record, `<state-dir>/sandboxes/<sandbox id>.json`
//! (`{podUid,namespace,name,netns,started}`), and the cached CNI results under
//! `<state-dir>/results/<network>-<sandbox id>-eth0`.

mod exec;
mod forward;
mod kubelet;
mod logs;
mod pods;
pub mod register;
pub mod sandbox;
pub mod status;

use std::{
    collections::{BTreeMap, HashSet},
    net::{IpAddr, SocketAddr, ToSocketAddrs},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use kube::Client;
use tracing::{info, warn};

use crate::{
    cni::{self, PluginRunner, Plugins},
    events::Recorder,
    netns,
    state::{self, SandboxRecord, State},
};

/// Errors of the node.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line value is invalid.
    #[error("invalid argument: {0}")]
    BadArgument(String),
    /// The kubeconfig could not be loaded.
    #[error("cannot load kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// The client could not be built.
    #[error("cannot create API client")]
    Client(#[source] kube::Error),
    /// An API call failed.
    #[error("API call failed: {step}")]
    Api {
        /// What was being done.
        step: &'static str,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The state dir could not be read.
    #[error("cannot load node state")]
    LoadState {
        /// Cause.
        #[source]
        source: state::Error,
    },
    /// The state dir could not be written.
    #[error("cannot save node state")]
    SaveState {
        /// Cause.
        #[source]
        source: state::Error,
    },
    /// A namespace operation failed.
    #[error("netns: {step}")]
    Netns {
        /// What was being done.
        step: &'static str,
        /// Cause.
        #[source]
        source: netns::Error,
    },
    /// CNI teardown failed.
    #[error("failed to destroy network for sandbox \"{sandbox_id}\": {source}")]
    Cni {
        /// Sandbox id.
        sandbox_id: String,
        /// Cause.
        #[source]
        source: cni::Error,
    },
    /// The API forwarder failed.
    #[error("api forwarder")]
    Forward {
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The kubelet endpoint (exec) could not be bound.
    #[error("kubelet endpoint")]
    Kubelet {
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Parses `500ms`, `1s`, `2m` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, mul) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (e.g. 500ms, 1s, 2m)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * mul))
}

/// Command-line arguments of `kube-sandbox node`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Node name (also the OVN chassis hostname / Neutron binding host).
    #[arg(long)]
    pub name: String,
    /// Kubeconfig of the API server.
    #[arg(long, env = "KUBECONFIG", default_value = "/var/lib/kube-sandbox/kubeconfig")]
    pub kubeconfig: PathBuf,
    /// The node's InternalIP (also the IP of host-network pods).
    #[arg(long, default_value = "127.0.0.1")]
    pub node_ip: IpAddr,
    /// Extra node label `key=value` (repeatable; overrides defaults).
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// Node annotation `key=value` (repeatable).
    #[arg(long = "annotation")]
    pub annotations: Vec<String>,
    /// CNI network config dir.
    #[arg(long, default_value = "/etc/cni/net.d")]
    pub cni_conf_dir: PathBuf,
    /// CNI plugin dirs (`:`-separated or repeated); also `CNI_PATH`.
    #[arg(long, default_value = "/opt/cni/bin", value_delimiter = ':')]
    pub cni_bin_dir: Vec<PathBuf>,
    /// State dir (default `/var/lib/kube-sandbox/nodes/<name>`).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// First retry delay after a failed sandbox creation (doubles up to --sandbox-backoff-cap).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub sandbox_backoff_base: Duration,
    /// Longest retry delay after failed sandbox creations.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub sandbox_backoff_cap: Duration,
    /// Timeout of one CNI plugin invocation.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub cni_timeout: Duration,
    /// Named netns that is this node's host network: plugins run there and the API server is
    /// forwarded to `127.0.0.1:<its port>` inside it.
    #[arg(long)]
    pub host_netns: Option<String>,
    /// Port of the kubelet endpoint (exec) on 127.0.0.1; 0 picks a free one. Published in the
    /// Node's `status.daemonEndpoints.kubeletEndpoint.Port`.
    #[arg(long, default_value_t = 0)]
    pub kubelet_port: u16,
    /// Image table entry `IMAGE=DIR` (repeatable): host-network pods whose images are all in
    /// the table run their containers as processes from DIR (see `containers`).
    #[arg(long = "image", value_parser = crate::containers::images::parse_entry)]
    pub images: Vec<crate::containers::images::Entry>,
    /// HostPath map `FROM=TO` (repeatable): a hostPath volume under FROM uses TO instead (each
    /// emulated node its own `/etc/cni/net.d`, OVS run dir, state dirs on one machine).
    #[arg(long = "host-path", value_parser = crate::containers::volumes::parse_host_path)]
    pub host_paths: Vec<(PathBuf, PathBuf)>,
    /// Extra TCP port of the machine's loopback to forward into the host netns (repeatable): the
    /// cloud's API endpoints, which host-network pods reach at 127.0.0.1 like the API server.
    #[arg(long = "forward-port")]
    pub forward_ports: Vec<u16>,
    /// The `kube-sandbox` executable that launches containers (default: this one).
    #[arg(long)]
    pub launcher: Option<PathBuf>,
    /// Dir of the pods' named network namespaces, passed to plugins in `CNI_NETNS` (CRI-O's
    /// `namespaces_dir`). `/run/netns` is the same dir where /var/run links to /run, reached
    /// without reading the link: the sandbox's VM nodes, whose root is a 9p share, use it.
    #[arg(long, default_value = netns::NETNS_DIR, value_parser = netns::parse_dir)]
    pub netns_dir: PathBuf,
}

/// Everything a running node needs (built from [`Args`] or by tests).
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Node name.
    pub name: String,
    /// InternalIP.
    pub node_ip: IpAddr,
    /// Labels (defaults merged with overrides).
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// CNI conf dir.
    pub cni_conf_dir: PathBuf,
    /// CNI bin dirs.
    pub cni_bin_dirs: Vec<PathBuf>,
    /// State dir.
    pub state_dir: PathBuf,
    /// Sandbox retry backoff base.
    pub sandbox_backoff_base: Duration,
    /// Sandbox retry backoff cap.
    pub sandbox_backoff_cap: Duration,
    /// CNI plugin timeout.
    pub cni_timeout: Duration,
    /// Host netns name.
    pub host_netns: Option<String>,
    /// API server address to forward into the host netns (needs `host_netns`).
    pub apiserver_forward: Option<SocketAddr>,
    /// Lease renewal period.
    pub lease_interval: Duration,
    /// Node status update period.
    pub status_interval: Duration,
    /// Garbage collection period for orphaned sandboxes.
    pub gc_interval: Duration,
    /// Kubelet endpoint port on 127.0.0.1 (0: any free port).
    pub kubelet_port: u16,
    /// Image table for host-network pods run as processes.
    pub images: Vec<crate::containers::images::Entry>,
    /// HostPath map.
    pub host_paths: Vec<(PathBuf, PathBuf)>,
    /// Extra loopback ports forwarded into the host netns.
    pub forward_ports: Vec<u16>,
    /// The `kube-sandbox` executable that runs `run-container`.
    pub launcher: PathBuf,
}

impl NodeConfig {
    /// Defaults for a node named `name` (paths as in [`Args`]).
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            node_ip: IpAddr::from([127, 0, 0, 1]),
            labels: register::default_labels(name),
            annotations: BTreeMap::new(),
            cni_conf_dir: "/etc/cni/net.d".into(),
            cni_bin_dirs: vec!["/opt/cni/bin".into()],
            state_dir: PathBuf::from("/var/lib/kube-sandbox/nodes").join(name),
            sandbox_backoff_base: Duration::from_secs(1),
            sandbox_backoff_cap: Duration::from_secs(30),
            cni_timeout: Duration::from_secs(120),
            host_netns: None,
            apiserver_forward: None,
            lease_interval: Duration::from_secs(10),
            status_interval: Duration::from_secs(60),
            gc_interval: Duration::from_secs(10),
            kubelet_port: 0,
            images: Vec::new(),
            host_paths: Vec::new(),
            forward_ports: Vec::new(),
            launcher: std::env::current_exe().unwrap_or_else(|_| "kube-sandbox".into()),
        }
    }
}

/// Shared context of the node's tasks.
pub(crate) struct Ctx {
    pub client: Client,
    pub cfg: NodeConfig,
    pub store: state::Store,
    pub state: Mutex<State>,
    pub runner: Arc<dyn Plugins>,
    /// A hollow node's directory of placeholder namespace files (`None`: real namespaces).
    pub hollow_netns: Option<PathBuf>,
    /// The CNI conf dir's network config, read again only when the dir changes.
    pub cni_conf: crate::cni::cache::ConfCache,
    pub recorder: Recorder,
    pub gc_busy: Mutex<HashSet<String>>,
}

impl Ctx {
    /// The path of network namespace `name` (a placeholder file on a hollow node).
    pub fn netns_path(&self, name: &str) -> PathBuf {
        match &self.hollow_netns {
            Some(dir) => dir.join(name),
            None => netns::path(name),
        }
    }

    /// Whether namespace `name` exists.
    pub fn netns_exists(&self, name: &str) -> bool {
        self.netns_path(name).exists()
    }

    /// Creates namespace `name` (a hollow node makes its placeholder file).
    pub async fn create_netns(&self, name: &str) -> Result<(), netns::Error> {
        let Some(dir) = &self.hollow_netns else {
            return netns::create(name).await;
        };
        let path = dir.join(name);
        let made = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, b""));
        made.map_err(|source| netns::Error::Create {
            path,
            step: "placeholder file",
            source,
        })
    }

    /// Deletes namespace `name` (idempotent).
    pub async fn delete_netns(&self, name: &str) -> Result<(), netns::Error> {
        let Some(dir) = &self.hollow_netns else {
            return netns::delete(name).await;
        };
        let path = dir.join(name);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(netns::Error::Delete {
                path,
                step: "placeholder file",
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Whether pods get responders (not on a hollow node: nothing listens there).
    pub fn responders(&self) -> bool {
        self.hollow_netns.is_none()
    }

    /// Records a sandbox (new or changed) and persists its record.
    pub fn put_record(&self, rec: &SandboxRecord) -> Result<(), Error> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.sandboxes.insert(rec.sandbox_id.clone(), rec.clone());
        self.store
            .save_sandbox(rec)
            .map_err(|source| Error::SaveState { source })
    }
    /// Forgets a sandbox and removes its record.
    pub fn forget_record(&self, sandbox_id: &str) -> Result<(), Error> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.sandboxes.remove(sandbox_id);
        self.store
            .remove_sandbox(sandbox_id)
            .map_err(|source| Error::SaveState { source })
    }
    pub fn record(&self, sandbox_id: &str) -> Option<SandboxRecord> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.sandboxes.get(sandbox_id).cloned()
    }
    pub fn records_of(&self, pod_uid: &str) -> Vec<SandboxRecord> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.sandboxes
            .values()
            .filter(|r| r.pod_uid == pod_uid)
            .cloned()
            .collect()
    }
    pub fn all_records(&self) -> Vec<SandboxRecord> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.sandboxes.values().cloned().collect()
    }
    pub fn gc_busy_insert(&self, id: &str) -> bool {
        self.gc_busy
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string())
    }
    pub fn gc_busy_remove(&self, id: &str) {
        self.gc_busy.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

/// Installs the process-wide rustls crypto provider (idempotent).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Builds a client from a kubeconfig file; also returns the API server's socket address.
pub async fn client_from_kubeconfig(path: &std::path::Path) -> Result<(Client, Option<SocketAddr>), Error> {
    install_crypto_provider();
    let kc = kube::config::Kubeconfig::read_from(path).map_err(Error::Kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(Error::Kubeconfig)?;
    let uri = config.cluster_url.clone();
    let addr = uri.host().and_then(|h| {
        let port = uri.port_u16().unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
        let host = h.trim_start_matches('[').trim_end_matches(']');
        (host, port)
            .to_socket_addrs()
            .ok()?
            .find(|a| a.is_ipv4())
            .or_else(|| (host, port).to_socket_addrs().ok()?.next())
    });
    let client = Client::try_from(config).map_err(Error::Client)?;
    Ok((client, addr))
}

/// Runs the node until interrupted (SIGTERM or ctrl-c).
pub async fn run(args: Args) -> anyhow::Result<()> {
    if let Err(other) = netns::set_dir(args.netns_dir.clone()) {
        return Err(Error::BadArgument(format!(
            "--netns-dir {}: this process already uses {}",
            args.netns_dir.display(),
            other.display()
        ))
        .into());
    }
    let (client, addr) = client_from_kubeconfig(&args.kubeconfig).await?;
    let mut cfg = NodeConfig::new(&args.name);
    cfg.node_ip = args.node_ip;
    cfg.labels.extend(register::parse_pairs(&args.labels)?);
    cfg.annotations = register::parse_pairs(&args.annotations)?;
    cfg.cni_conf_dir = args.cni_conf_dir;
    cfg.cni_bin_dirs = args.cni_bin_dir;
    if let Some(d) = args.state_dir {
        cfg.state_dir = d;
    }
    cfg.sandbox_backoff_base = args.sandbox_backoff_base;
    cfg.sandbox_backoff_cap = args.sandbox_backoff_cap.max(args.sandbox_backoff_base);
    cfg.cni_timeout = args.cni_timeout;
    cfg.host_netns = args.host_netns;
    cfg.kubelet_port = args.kubelet_port;
    cfg.images = args.images;
    cfg.host_paths = args.host_paths;
    cfg.forward_ports = args.forward_ports;
    if let Some(l) = args.launcher {
        cfg.launcher = l;
    }
    cfg.apiserver_forward = addr;
    run_node(client, cfg, shutdown_signal()).await?;
    Ok(())
}

/// Resolves on SIGTERM or ctrl-c.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term => {}
    }
}

/// Runs a node with an existing client until `shutdown` resolves. Sandboxes are left in place
/// (and in the state dir) on shutdown, to be adopted by the next run.
pub async fn run_node(
    client: Client,
    cfg: NodeConfig,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    run_node_with(client, cfg, None, shutdown).await
}

/// What a hollow node runs instead of its machine (kubemark's hollow kubelet): its pods'
/// network namespaces are placeholder files, its CNI plugins run in-process, nothing listens
/// in a pod. Everything else — registration, leases, the pod watch, sandboxes and their records,
/// CNI config, chaining and result caching, pod status, deletion — is the node's own code.
#[derive(Clone)]
pub struct Hollow {
    /// Runs the plugins of the network's chain.
    pub plugins: Arc<dyn Plugins>,
    /// Where the placeholder namespace files are made.
    pub netns_dir: PathBuf,
}

/// [`run_node`], hollow when `hollow` says so.
pub async fn run_node_with(
    client: Client,
    cfg: NodeConfig,
    hollow: Option<Hollow>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let store = state::Store::new(&cfg.state_dir);
    let st = store.load().map_err(|source| Error::LoadState { source })?;
    let (kubelet_listener, kubelet_port) = kubelet::bind(cfg.kubelet_port).await?;
    let id = register::Identity {
        kubelet_port,
        name: cfg.name.clone(),
        ip: cfg.node_ip,
        labels: cfg.labels.clone(),
        annotations: cfg.annotations.clone(),
    };
    let since = jiff::Timestamp::now();
    let node_uid = register::register(&client, &id, since).await?;
    // Take the lease now: the heartbeat's first tick would otherwise find it missing and
    // register the Node a second time.
    if let Err(e) = register::renew_lease(&client, &id, &node_uid).await {
        warn!(error = %e, "initial lease renewal failed");
    }
    info!(node = %cfg.name, ip = %cfg.node_ip, "node registered");
    let mut forwarders = Vec::new();
    if let (Some(ns), Some(addr)) = (&cfg.host_netns, cfg.apiserver_forward) {
        forwarders.push(forward::start(ns, addr).await?);
        for port in &cfg.forward_ports {
            let target = SocketAddr::new(IpAddr::from([127, 0, 0, 1]), *port);
            forwarders.push(forward::start(ns, target).await?);
        }
    }
    let runner: Arc<dyn Plugins> = match &hollow {
        Some(h) => h.plugins.clone(),
        None => Arc::new(PluginRunner {
            bin_dirs: cfg.cni_bin_dirs.clone(),
            host_netns: cfg.host_netns.as_deref().map(netns::path),
            timeout: cfg.cni_timeout,
            host_view: (!cfg.host_paths.is_empty()).then(|| cni::HostView {
                launcher: cfg.launcher.clone(),
                host_paths: cfg.host_paths.clone(),
                spec_dir: cfg.state_dir.join("cni-specs"),
            }),
        }),
    };
    let ctx = Arc::new(Ctx {
        runner,
        hollow_netns: hollow.map(|h| h.netns_dir),
        cni_conf: Default::default(),
        recorder: Recorder::new(client.clone(), "kubelet", Some(&cfg.name)),
        client: client.clone(),
        store,
        state: Mutex::new(st),
        gc_busy: Mutex::new(HashSet::new()),
        cfg,
    });
    let kubelet = kubelet::serve(kubelet_listener, ctx.clone());
    let heartbeat = {
        let ctx = ctx.clone();
        let mut node_uid = node_uid;
        tokio::spawn(async move {
            let mut lease = tokio::time::interval(ctx.cfg.lease_interval);
            let mut status = tokio::time::interval(ctx.cfg.status_interval);
            lease.tick().await;
            status.tick().await;
            loop {
                tokio::select! {
                    _ = lease.tick() => {
                        match register::renew_lease(&ctx.client, &id, &node_uid).await {
                            Ok(false) => {}
                            Ok(true) => {
                                // The lease was gone (the API server lost its state, or someone
                                // deleted it): make sure the Node is there too.
                                match register::register(&ctx.client, &id, since).await {
                                    Ok(uid) => node_uid = uid,
                                    Err(e) => warn!(error = %e, "node registration failed"),
                                }
                            }
                            Err(e) => warn!(error = %e, "lease renewal failed"),
                        }
                    }
                    _ = status.tick() => {
                        match register::update_status(&ctx.client, &id, since).await {
                            Ok(_) => {}
                            Err(Error::Api { source: kube::Error::Api(s), .. }) if s.code == 404 => {
                                // Someone deleted our Node: register again, like kubelet.
                                warn!(node = %id.name, "node object gone; registering again");
                                match register::register(&ctx.client, &id, since).await {
                                    Ok(uid) => node_uid = uid,
                                    Err(e) => warn!(error = %e, "node registration failed"),
                                }
                            }
                            Err(e) => warn!(error = %e, "node status update failed"),
                        }
                    }
                }
            }
        })
    };
    let result = pods::run(ctx.clone(), shutdown).await;
    heartbeat.abort();
    kubelet.abort();
    for f in forwarders {
        f.abort();
    }
    info!(node = %ctx.cfg.name, "node stopped");
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
