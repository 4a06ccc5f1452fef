//! The emulated Kubernetes API server: HTTP(S) front, in-memory store with watch fan-out, and the
//! semantics clients rely on (resourceVersion, selectors, patches, finalizers, GC, CRDs).
//!
//! Pure building blocks (selectors, patches, CRD schemas, tables, ClusterIPs, certificates) live in
//! `kube-sandbox-machinery`; this crate owns the store, the HTTP front and the lifecycle rules.

pub mod admission;
pub mod app;
pub mod auth;
pub mod crd;
pub mod defaults;
pub mod discovery;
pub mod error;
pub mod events;
pub mod handlers;
pub mod lifecycle;
pub mod meta;
pub mod metrics;
pub mod openapi;
pub mod owners;
pub mod persist;
pub mod protobuf;
pub mod rbac;
pub mod registry;
pub mod serve;
pub mod store;
pub mod topics;
pub mod watch;

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use serde_json::{Value, json};
use tokio::{sync::watch as signal, task::JoinHandle};
use tracing::info;

pub use error::Error;

use crate::{app::App, handlers::Req, store::Store};

/// Command-line arguments of `kube-sandbox apiserver`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Address to listen on (loopback only is the intended use).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Serve HTTPS with a generated CA (written next to the kubeconfig).
    #[arg(long)]
    pub tls: bool,
    /// Require this bearer token on every request (kubeconfig carries it).
    #[arg(long)]
    pub token: Option<String>,
    /// Service ClusterIP range. Kuryr uses a Service's ClusterIP as its Octavia VIP, so this must
    /// lie inside the Neutron service subnet but outside Neutron's allocation pool: the default is
    /// the sandbox's `SERVICE_CLUSTER_IP_RANGE` (lower half of its 10.96.0.0/16 service subnet).
    #[arg(long, default_value = "10.96.0.0/17")]
    pub service_cidr: ipnet::IpNet,
    /// Where to write the kubeconfig for clients.
    #[arg(long, default_value = "/var/lib/kube-sandbox/kubeconfig")]
    pub kubeconfig: PathBuf,
    /// Watch events kept for watches that resume from a resourceVersion.
    #[arg(long, default_value_t = 10_000)]
    pub watch_history: usize,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 30)]
    pub bookmark_interval: u64,
    /// Keep the objects, the resourceVersion counter, the TLS material and the minted tokens in
    /// this directory, so that the server can be restarted (or killed) without losing them, as
    /// with etcd ([`persist`]). Without it everything lives in memory only.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// Server configuration (the library form of [`Args`]).
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Serve HTTPS with a generated CA.
    pub tls: bool,
    /// Required bearer token.
    pub token: Option<String>,
    /// Service ClusterIP range.
    pub service_cidr: ipnet::IpNet,
    /// Where the kubeconfig is written.
    pub kubeconfig: PathBuf,
    /// Watch history size (events).
    pub watch_history: usize,
    /// Interval of watch bookmarks.
    pub bookmark_interval: Duration,
    /// Where the state is kept across restarts (none: memory only).
    pub data_dir: Option<PathBuf>,
}

impl Config {
    /// Defaults for tests: loopback port 0, plain HTTP, kubeconfig at `kubeconfig`.
    pub fn local(kubeconfig: PathBuf) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            token: None,
            service_cidr: "10.96.0.0/17".parse().expect("valid literal CIDR"),
            kubeconfig,
            watch_history: 10_000,
            bookmark_interval: Duration::from_secs(30),
            data_dir: None,
        }
    }
}

impl From<Args> for Config {
    fn from(a: Args) -> Self {
        Self {
            listen: a.listen,
            tls: a.tls,
            token: a.token,
            service_cidr: a.service_cidr,
            kubeconfig: a.kubeconfig,
            watch_history: a.watch_history,
            bookmark_interval: Duration::from_secs(a.bookmark_interval.max(1)),
            data_dir: a.data_dir,
        }
    }
}

/// A started server.
#[derive(Debug)]
pub struct RunningServer {
    /// The bound address.
    pub addr: SocketAddr,
    /// `http://…` or `https://…`.
    pub url: String,
    /// The kubeconfig written for clients.
    pub kubeconfig: PathBuf,
    /// The CA certificate (HTTPS mode).
    pub ca_pem: Option<String>,
    shutdown: signal::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// Stops accepting, drops connections and background tasks.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Binds, writes the kubeconfig, seeds the built-in objects and serves in the background.
pub async fn start(config: Config) -> Result<RunningServer, Error> {
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| Error::Bind {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| Error::Bind {
        addr: config.listen,
        source,
    })?;
    let host_ip = if addr.ip().is_unspecified() {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        addr.ip()
    };
    let server_address = SocketAddr::new(host_ip, addr.port());
    let (acceptor, ca_pem) = if config.tls {
        let m = tls_material(config.data_dir.as_deref(), host_ip)?;
        (Some(serve::tls_acceptor(&m)?), Some(m.ca_pem))
    } else {
        (None, None)
    };
    let scheme = if config.tls { "https" } else { "http" };
    let url = format!("{scheme}://{server_address}");
    // write_kubeconfig creates the directory itself.
    kube_sandbox_machinery::tls::write_kubeconfig(
        &config.kubeconfig,
        &url,
        ca_pem.as_deref(),
        config.token.as_deref(),
    )
    .map_err(Error::Kubeconfig)?;
    let tokens = match &config.data_dir {
        Some(dir) => auth::Tokens::persisted(dir.join("tokens.json")).map_err(Error::DataDir)?,
        None => Default::default(),
    };
    let app = Arc::new(App {
        store: Store::new(config.watch_history, defaults::Allocs::new(config.service_cidr)),
        registry: registry::Registry::new(),
        token: config.token.clone(),
        tokens,
        ca_pem: ca_pem.clone(),
        lifecycle: tokio::sync::Notify::new(),
        bookmark_interval: config.bookmark_interval,
        server_address: server_address.to_string(),
        requests: Default::default(),
    });
    let restored = match &config.data_dir {
        Some(dir) => restore(&app, dir)?,
        None => false,
    };
    if !restored {
        bootstrap(&app, server_address, config.service_cidr);
    }
    if let Some(dir) = &config.data_dir {
        app.store.persist_to(dir).map_err(Error::DataDir)?;
    }
    let router = axum::Router::new()
        .fallback(handlers::handle)
        .with_state(app.clone());
    let (tx, rx) = signal::channel(false);
    let tasks = vec![
        tokio::spawn(serve::accept_loop(listener, router, acceptor, rx.clone())),
        tokio::spawn(lifecycle::run(app, rx)),
    ];
    info!(%url, kubeconfig = %config.kubeconfig.display(), "apiserver listening");
    Ok(RunningServer {
        addr,
        url,
        kubeconfig: config.kubeconfig,
        ca_pem,
        shutdown: tx,
        tasks,
    })
}

/// The TLS material: the data dir's, so that clients keep trusting the CA across restarts, or
/// new (and kept there when there is a data dir).
fn tls_material(
    data_dir: Option<&std::path::Path>,
    host_ip: std::net::IpAddr,
) -> Result<kube_sandbox_machinery::tls::TlsMaterial, Error> {
    let file = data_dir.map(|d| d.join("tls.json"));
    if let Some(f) = &file {
        std::fs::create_dir_all(data_dir.unwrap_or(f)).map_err(|source| {
            Error::DataDir(persist::PersistError::Io {
                what: "creating",
                path: f.clone(),
                source,
            })
        })?;
        if let Some(m) = persist::read_json(f).map_err(Error::DataDir)? {
            return Ok(m);
        }
    }
    let hosts = vec![host_ip.to_string(), "127.0.0.1".into(), "localhost".into()];
    let m = kube_sandbox_machinery::tls::generate(&hosts).map_err(Error::Tls)?;
    if let Some(f) = &file {
        persist::write_json(f, &m).map_err(Error::DataDir)?;
    }
    Ok(m)
}

/// Loads the data dir into the empty store: objects, counter, the CRDs served again and the
/// Services' ClusterIPs and NodePorts held again. Returns whether anything was there.
fn restore(app: &App, dir: &std::path::Path) -> Result<bool, Error> {
    let loaded = persist::load(dir).map_err(Error::DataDir)?;
    if loaded.is_empty() {
        return Ok(false);
    }
    let (objects, rv) = (loaded.objects.len(), loaded.rv);
    for (key, obj) in &loaded.objects {
        match (key.0.as_str(), key.1.as_str()) {
            ("apiextensions.k8s.io", "customresourcedefinitions") if !meta::is_deleting(obj) => {
                if let Some(info) = crd::info_from(obj) {
                    app.registry.register(info);
                }
            }
            ("", "services") => app.store.write(|tx| defaults::hold_service(obj, &mut tx.allocs)),
            _ => {}
        }
    }
    app.store.restore(loaded);
    info!(dir = %dir.display(), objects, rv, "state restored from the data dir");
    Ok(true)
}

/// Creates an object as the system (no HTTP request), logging failures.
fn system_create(app: &App, group: &str, plural: &str, ns: Option<&str>, obj: Value) {
    let Some(info) = app.registry.lookup(group, "v1", plural) else {
        return;
    };
    let req = Req {
        method: http::Method::POST,
        info,
        version: "v1".into(),
        namespace: ns.map(String::from),
        name: None,
        sub: None,
        watch_path: false,
        query: Default::default(),
        headers: Default::default(),
        body: Default::default(),
    };
    if let Err(e) = app
        .store
        .write(|tx| handlers::write::create_in_tx(app, tx, &req, obj))
    {
        tracing::warn!(resource = plural, error = %e.message, "bootstrap object not created");
    }
}

fn bootstrap(app: &App, addr: SocketAddr, cidr: ipnet::IpNet) {
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        system_create(app, "", "namespaces", None, json!({"metadata": {"name": ns}}));
    }
    let first_ip = match cidr {
        ipnet::IpNet::V4(n) => {
            std::net::IpAddr::V4(std::net::Ipv4Addr::from(u32::from(n.network()).wrapping_add(1)))
        }
        ipnet::IpNet::V6(n) => {
            std::net::IpAddr::V6(std::net::Ipv6Addr::from(u128::from(n.network()).wrapping_add(1)))
        }
    };
    let labels = json!({"component": "apiserver", "provider": "kubernetes"});
    system_create(
        app,
        "",
        "services",
        Some("default"),
        json!({"metadata": {"name": "kubernetes", "labels": labels},
               "spec": {"clusterIP": first_ip.to_string(), "type": "ClusterIP",
                        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": addr.port()}]}}),
    );
    system_create(
        app,
        "",
        "endpoints",
        Some("default"),
        json!({"metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
               "subsets": [{"addresses": [{"ip": addr.ip().to_string()}],
                            "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}]}]}),
    );
    system_create(
        app,
        "discovery.k8s.io",
        "endpointslices",
        Some("default"),
        json!({"metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
               "addressType": "IPv4",
               "endpoints": [{"addresses": [addr.ip().to_string()], "conditions": {"ready": true}}],
               "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}]}),
    );
}

/// Runs the API server until interrupted (ctrl-c or SIGTERM).
pub async fn run(args: Args) -> anyhow::Result<()> {
    let server = start(Config::from(args)).await?;
    let mut term =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).map_err(Error::Signal)?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map_err(Error::Signal)?,
        _ = term.recv() => {}
    }
    info!("shutting down");
    server.shutdown().await;
    Ok(())
}
