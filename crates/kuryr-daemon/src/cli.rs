//! The daemon process: command line ([`Args`]), configuration ([`load_config`]) and the wiring
//! of registry, watchers, CNI server, health and metrics servers ([`run`]).

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::Router;
use kuryr_config::{Config, ConfigErrors};
use kuryr_runtime::{
    ConfigArgs, KubeArgs, ServeArgs, WorkloadArgs,
    http::{self, BindError},
    kubeclient, shutdown_signal,
    uninstall::{self, Verdict, WorkloadError},
};
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::{
    api_listener,
    binding::{NodeBindings, ovs::OvsBinding},
    health,
    instance::NodeDaemon,
    metrics,
    ovsdb::Ovsdb,
    server,
    state::{StateError, StateStore},
    uninstall::CniFiles,
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
    /// The DaemonSet this daemon runs as: when it is gone at shutdown, kuryr-rs is being
    /// uninstalled and the daemon removes the CNI files below from its host.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// The host's CNI bin dir, as mounted here, where `kuryr-cni install` put the plugin.
    #[arg(long, requires = "workload")]
    pub cni_bin_dir: Option<PathBuf>,
    /// The host's CNI conf dir, as mounted here, where `kuryr-cni install` wrote the conflist.
    #[arg(long, requires = "workload")]
    pub cni_conf_dir: Option<PathBuf>,
    /// The conflist's file name (as `kuryr-cni install --conflist-name`).
    #[arg(long, default_value = "10-kuryr.conflist")]
    pub cni_conflist_name: String,
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
    /// The CNI API's unix socket could not be made.
    #[error("serving the CNI API on {addr}")]
    Socket {
        /// The address.
        addr: String,
        /// Cause.
        #[source]
        source: crate::api_listener::SocketError,
    },
    /// `--workload` is malformed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
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
    Unix(api_listener::PeerChecked),
}

/// The CNI API's listener: a unix socket served to root only
/// ([`api_listener`]), or upstream's TCP address with a warning naming the risk.
async fn bind_api(addr: &str) -> Result<Listener, Error> {
    if let Some(path) = api_listener::socket_path(addr) {
        return api_listener::bind(path)
            .map(Listener::Unix)
            .map_err(|source| Error::Socket {
                addr: addr.to_owned(),
                source,
            });
    }
    warn!("{}", api_listener::tcp_warning(addr));
    let hostport = addr.strip_prefix("http://").unwrap_or(addr);
    tokio::net::TcpListener::bind(hostport)
        .await
        .map(Listener::Tcp)
        .map_err(|source| Error::Bind {
            what: "CNI API",
            addr: addr.to_owned(),
            source,
        })
}

fn serve(l: Listener, router: Router) -> JoinHandle<()> {
    serve_until(l, router, std::future::pending())
}

/// Serves until `stop` completes; then the listener is closed at once (new connections are
/// refused, which the plugin waits out) and the requests in flight are answered before the
/// task ends.
fn serve_until(
    l: Listener,
    router: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let r = match l {
            Listener::Tcp(l) => axum::serve(l, router).with_graceful_shutdown(stop).await,
            Listener::Unix(l) => axum::serve(l, router).with_graceful_shutdown(stop).await,
        };
        if let Err(e) = r {
            error!(error = %e, "HTTP server failed");
        }
    })
}

/// How long a daemon told to stop lets the CNI requests in flight finish (an ADD waiting for
/// its pod's VIF, a DEL unwiring): within the DaemonSet's 30 s grace period, with room for the
/// uninstall check. A request still running then is cut off and its runtime retries it.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(20);

/// Runs the daemon with an already loaded `config` until SIGINT/SIGTERM.
pub async fn run(args: &Args, config: Config) -> Result<(), Error> {
    let node = node_name(args)?;
    let workload = args.workload.resolve()?;
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("/var/lib/kuryr-daemon").join(&node));
    let state = StateStore::open(&state_dir).map_err(Error::State)?;
    let client = kubeclient::client(args.kube.kubeconfig.as_deref(), &config.kubernetes)
        .await
        .map_err(Error::Client)?;
    // Watched from now on: at SIGTERM it tells an uninstall even when our token is gone.
    let watched = workload.as_ref().map(|w| uninstall::watch(&client, w));
    let ovsdb_target = args
        .ovsdb
        .clone()
        .unwrap_or_else(|| Ovsdb::default_target(std::env::var("OVS_RUNDIR").ok().as_deref()));
    let mut node_bindings = NodeBindings::new(OvsBinding::new(Ovsdb::new(&ovsdb_target)));
    // A VM node wires nested VLAN VIFs on its trunk interface.
    if !config.binding.link_iface.is_empty() {
        node_bindings = node_bindings.with_vlan(config.binding.link_iface.clone());
    }
    let bindings: Arc<dyn crate::binding::Bindings> = Arc::new(node_bindings);
    let mut node_daemon = NodeDaemon::start(client.clone(), &node, &config, state, bindings);
    let (daemon, health, metrics) = (
        node_daemon.daemon.clone(),
        node_daemon.health.clone(),
        node_daemon.metrics.clone(),
    );
    let watchers = std::mem::take(&mut node_daemon.watchers);

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
    // The CNI API stops on its own signal, before the rest: on SIGTERM (a rolling upgrade, a
    // drain) it takes no new request and answers those in flight, while the watchers that
    // an ADD waits on keep running.
    let (stop_api, api_stopped) = tokio::sync::watch::channel(false);
    let mut api_task = serve_until(api, server::router(daemon), async move {
        let mut rx = api_stopped;
        let _ = rx.wait_for(|stop| *stop).await;
    });
    let mut tasks = vec![
        serve(Listener::Tcp(health_l), health::router(health)),
        serve(Listener::Tcp(metrics_l), metrics::router(metrics)),
    ];
    tasks.extend(watchers);
    let result = tokio::select! {
        _ = &mut api_task => Err(Error::Stopped("the CNI API server")),
        _ = futures::future::select_all(tasks.iter_mut()) => Err(Error::Stopped("a server or watcher")),
        _ = shutdown_signal() => Ok(()),
    };
    let _ = stop_api.send(true);
    // The socket goes at once: a plugin connecting now finds none and waits for the next daemon.
    if let Some(path) = api_listener::socket_path(&api_addr) {
        let _ = std::fs::remove_file(path);
    }
    if result.is_ok() {
        let started = Instant::now();
        match tokio::time::timeout(DRAIN_LIMIT, &mut api_task).await {
            Ok(_) => info!(
                waited_ms = started.elapsed().as_millis() as u64,
                "stopping: the CNI requests in flight are answered"
            ),
            Err(_) => warn!(
                limit_s = DRAIN_LIMIT.as_secs(),
                "stopping: CNI requests still in flight are cut off (their runtime retries them)"
            ),
        }
    }
    api_task.abort();
    for t in tasks {
        t.abort();
    }
    if let (Ok(()), Some(w), Some(bin_dir), Some(conf_dir)) =
        (&result, &workload, &args.cni_bin_dir, &args.cni_conf_dir)
    {
        let seen = watched.as_ref().map(|(s, _)| s);
        if let Verdict::Uninstalling(reason) =
            uninstall::check(&client, w, Duration::from_secs(3), seen).await
        {
            let files = CniFiles {
                bin_dir: bin_dir.clone(),
                conf_dir: conf_dir.clone(),
                conflist_name: args.cni_conflist_name.clone(),
            };
            match tokio::task::spawn_blocking(move || crate::uninstall::remove_cni_files(&files)).await {
                Ok(removed) => {
                    info!(reason, removed = ?removed, "uninstall: the CNI files are removed from this host")
                }
                Err(e) => error!(error = %e, "uninstall: removing the CNI files failed"),
            }
        }
    }
    if let Some((_, t)) = watched {
        t.abort();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// The plugin sends a request's body only after `100 Continue` (so it can tell a request
    /// no handler took from one acted on): the API server says it as its handler reads the body.
    #[tokio::test]
    async fn the_api_answers_expect_100_continue_before_it_reads_the_body() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let router = Router::new().route(
            "/addNetwork",
            axum::routing::post(|b: axum::body::Bytes| async move { b }),
        );
        let task = serve(Listener::Tcp(l), router);
        let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
        conn.write_all(
            b"POST /addNetwork HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n",
        )
        .await
        .expect("write");
        let mut interim = [0u8; 25];
        tokio::time::timeout(Duration::from_secs(5), conn.read_exact(&mut interim))
            .await
            .expect("100 Continue in time")
            .expect("read");
        assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
        conn.write_all(b"ping").await.expect("body");
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.expect("read");
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("ping"),
            "{answer}"
        );
        task.abort();
    }

    /// A stopping daemon answers the request in flight and refuses new connections at once.
    #[tokio::test]
    async fn a_stopping_api_answers_requests_in_flight_and_takes_no_new_ones() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let router = Router::new().route(
            "/addNetwork",
            axum::routing::post(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "wired"
            }),
        );
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = serve_until(Listener::Tcp(l), router, async move {
            let mut rx = stopped;
            let _ = rx.wait_for(|s| *s).await;
        });
        let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
        conn.write_all(
            b"POST /addNetwork HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )
        .await
        .expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.send(true).expect("stop");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let refused = tokio::net::TcpStream::connect(addr).await;
        assert!(refused.is_err(), "a new connection while stopping was accepted");
        let mut answer = String::new();
        conn.read_to_string(&mut answer).await.expect("read");
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("wired"),
            "{answer}"
        );
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .expect("the server ends once the request is answered")
            .expect("join");
    }
}
