//! The controller process: command line ([`Args`]), configuration loading, and the wiring of
//! client, handlers, health and metrics servers ([`run`], [`spawn_handlers`], [`serve`]).

use std::{
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    path::PathBuf,
    sync::Arc,
};

use axum::Router;
use kuryr_config::{Config, ConfigErrors, ConfigSources, Role};
use tokio::{net::TcpListener, task::JoinHandle};
use tracing::{error, info, warn};

use crate::{Context, OpenStack, drivers, handlers, health, kubeclient, metrics, pool};

/// Command line of `kuryr-controller` (oslo.config style options).
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "kuryr-controller", version, about = "Kuryr-Kubernetes controller")]
pub struct Args {
    /// A kuryr.conf file; repeatable, later files override earlier ones.
    #[arg(long = "config-file")]
    pub config_file: Vec<PathBuf>,
    /// A directory of `*.conf` files read after the config files; repeatable.
    #[arg(long = "config-dir")]
    pub config_dir: Vec<PathBuf>,
    /// A kubeconfig; without it `[kubernetes] api_root` and its TLS/token options are used,
    /// else `KUBECONFIG`/in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Listen address of the health server (default `[::]:<[health_server] port>`).
    #[arg(long)]
    pub health_bind: Option<SocketAddr>,
    /// Listen address of the metrics server (default
    /// `[::]:<[prometheus_exporter] controller_exporter_port>`).
    #[arg(long)]
    pub metrics_bind: Option<SocketAddr>,
    /// Namespace of the leader-election Lease (with `[kubernetes] controller_ha = true`).
    #[arg(long, env = "KURYR_HA_LEASE_NAMESPACE", default_value = "kube-system")]
    pub ha_lease_namespace: String,
    /// Identity of this replica in the Lease (default: `$POD_NAME`, else `<host name>_<pid>`).
    #[arg(long, env = "POD_NAME")]
    pub ha_identity: Option<String>,
    /// Lease duration in seconds: how long a dead leader is waited for.
    #[arg(long, default_value_t = 15)]
    pub ha_lease_duration: u64,
}

/// Why the controller stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration has errors (all of them are listed).
    #[error("{0}")]
    Config(#[source] ConfigErrors),
    /// No Kubernetes client.
    #[error("connecting to Kubernetes")]
    Client(#[source] kubeclient::Error),
    /// The pool options are invalid (`[kubernetes] vif_pool_driver`, `[vif_pool]`, tags).
    #[error("port pool configuration")]
    PoolSettings(#[source] pool::SettingsError),
    /// The drivers cannot be built from the configuration.
    #[error("driver configuration")]
    Drivers(#[source] drivers::DriverError),
    /// No OpenStack credentials could be determined.
    #[error("OpenStack credentials")]
    CloudAuth(#[source] Box<kuryr_config::ConfigError>),
    /// Connecting to Neutron failed.
    #[error("connecting to Neutron")]
    Neutron(#[source] kuryr_openstack::Error),
    /// The pool manager socket could not be served.
    #[error("serving the pool manager on {path}")]
    PoolManager {
        /// `[pool_manager] sock_file`.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A listening socket could not be bound.
    #[error("binding {what} on {addr}")]
    Bind {
        /// Which server.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Leader election could not run.
    #[error("leader election")]
    Leader(#[source] crate::leader::Error),
    /// This replica lost the Lease; it exits so that it restarts as a candidate.
    #[error("leadership lost")]
    LeadershipLost,
    /// Every handler loop has ended.
    #[error("all handlers have stopped")]
    HandlersStopped,
}

impl Error {
    /// Process exit code: 2 for configuration errors (nothing was touched), 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) | Error::PoolSettings(_) | Error::Drivers(_) | Error::CloudAuth(_) => 2,
            _ => 1,
        }
    }
}

/// Handlers that need Neutron (and so the pools and drivers).
const OPENSTACK_HANDLERS: &[&str] = &[
    "kuryrport",
    "kuryrnetwork",
    "kuryrnetwork_population",
    "namespace",
];

/// Whether `config` enables a handler that needs Neutron.
pub fn needs_openstack(config: &Config) -> bool {
    config
        .kubernetes
        .enabled_handlers
        .iter()
        .any(|h| OPENSTACK_HANDLERS.contains(&h.as_str()))
}

/// Connects to Neutron (requests reported to `metrics`) and builds the drivers and the pool
/// executor from `config`.
pub async fn connect_openstack(
    config: &Config,
    client: kube::Client,
    metrics: Arc<metrics::Metrics>,
    settings: pool::PoolSettings,
) -> Result<OpenStack, Error> {
    let auth = kuryr_config::resolve_cloud_auth(config, &|k| std::env::var(k).ok())
        .map_err(|e| Error::CloudAuth(Box::new(e)))?;
    let opts = kuryr_openstack::ConnectOptions::from_env(config.neutron.timeout);
    let neutron: Arc<dyn kuryr_openstack::Neutron> = Arc::new(
        kuryr_openstack::OpenStackNeutron::connect(&auth, &opts, metrics.clone())
            .await
            .map_err(Error::Neutron)?,
    );
    let drivers = drivers::Drivers::from_config(config, client, neutron.clone()).map_err(Error::Drivers)?;
    let pool = pool::VifPool::new(settings, neutron.clone(), metrics);
    Ok(OpenStack {
        neutron,
        drivers: Arc::new(drivers),
        pool,
    })
}

/// Serves the pool manager API on `[pool_manager] sock_file` when `[kubernetes]
/// enable_manager` is set and the pools exist.
pub fn start_pool_manager(ctx: &Context) -> Result<Option<JoinHandle<()>>, Error> {
    let (true, Some(os)) = (ctx.config.kubernetes.enable_manager, ctx.openstack.as_ref()) else {
        return Ok(None);
    };
    let path = PathBuf::from(&ctx.config.pool_manager.sock_file);
    pool::manager::serve(os.pool.clone(), &path)
        .map(Some)
        .map_err(|source| Error::PoolManager { path, source })
}

/// Loads the configuration for the controller role; warnings are logged with file and line.
pub fn load_config(args: &Args) -> Result<Config, Error> {
    let sources = ConfigSources {
        config_files: args.config_file.clone(),
        config_dirs: args.config_dir.clone(),
    };
    let (config, warnings) = kuryr_config::load_for(&sources, Role::Controller, &|k| std::env::var(k).ok())
        .map_err(Error::Config)?;
    for w in &warnings {
        w.log();
    }
    Ok(config)
}

/// Starts every implemented handler listed in `[kubernetes] enabled_handlers`.
pub fn spawn_handlers(ctx: &Arc<Context>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for name in &ctx.config.kubernetes.enabled_handlers {
        match name.as_str() {
            handlers::pod::HANDLER => tasks.push(tokio::spawn(handlers::pod::run(ctx.clone()))),
            handlers::kuryrport::HANDLER => tasks.push(tokio::spawn(handlers::kuryrport::run(ctx.clone()))),
            handlers::namespace::HANDLER => tasks.push(tokio::spawn(handlers::namespace::start(ctx.clone()))),
            handlers::kuryrnetwork::HANDLER => {
                tasks.push(tokio::spawn(handlers::kuryrnetwork::start(ctx.clone())))
            }
            handlers::kuryrnetwork_population::HANDLER => tasks.push(tokio::spawn(
                handlers::kuryrnetwork_population::start(ctx.clone()),
            )),
            other => warn!(handler = other, "handler not implemented yet, skipped"),
        }
    }
    tasks
}

/// How many watchers [`spawn_handlers`] will start for `config` (for readiness).
pub fn watcher_count(config: &Config) -> usize {
    config
        .kubernetes
        .enabled_handlers
        .iter()
        .filter(|h| {
            [
                handlers::pod::HANDLER,
                handlers::kuryrport::HANDLER,
                handlers::namespace::HANDLER,
                handlers::kuryrnetwork::HANDLER,
                handlers::kuryrnetwork_population::HANDLER,
            ]
            .contains(&h.as_str())
        })
        .count()
}

/// Serves `router` on `listener` in the background.
pub fn serve(listener: TcpListener, router: Router) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            error!(error = %e, "HTTP server failed");
        }
    })
}

/// Binds `addr`, or when it is `None` `[::]:port` (upstream's address), falling back to
/// `0.0.0.0:port` on hosts without IPv6.
pub async fn bind(what: &'static str, addr: Option<SocketAddr>, port: u16) -> Result<TcpListener, Error> {
    let bind_err = |addr, source| Error::Bind { what, addr, source };
    match addr {
        Some(a) => TcpListener::bind(a).await.map_err(|e| bind_err(a, e)),
        None => {
            let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
            match TcpListener::bind(v6).await {
                Ok(l) => Ok(l),
                Err(_) => {
                    let v4 = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
                    TcpListener::bind(v4).await.map_err(|e| bind_err(v4, e))
                }
            }
        }
    }
}

/// Runs the controller with an already loaded `config` until SIGINT/SIGTERM or until every
/// handler loop has ended.
pub async fn run(args: &Args, config: Config) -> Result<(), Error> {
    // Every configuration check first: nothing is touched when one fails.
    let settings = pool::PoolSettings::from_config(&config).map_err(Error::PoolSettings)?;
    let client = kubeclient::client(args.kubeconfig.as_deref(), &config.kubernetes)
        .await
        .map_err(Error::Client)?;
    let watchers = watcher_count(&config);
    let metrics = Arc::new(metrics::Metrics::default());
    let openstack = if needs_openstack(&config) {
        Some(connect_openstack(&config, client.clone(), metrics.clone(), settings).await?)
    } else {
        None
    };
    let mut ctx = Context::new(client, Arc::new(config), watchers).with_metrics(metrics);
    if let Some(os) = openstack {
        ctx = ctx.with_openstack(os);
    }
    let ctx = Arc::new(ctx);
    let health_l = bind("health server", args.health_bind, ctx.config.health_server.port).await?;
    let metrics_port = ctx.config.prometheus_exporter.controller_exporter_port;
    let metrics_l = bind("metrics server", args.metrics_bind, metrics_port).await?;
    info!(health = ?health_l.local_addr().ok(), metrics = ?metrics_l.local_addr().ok(), "serving");
    let servers = [
        serve(health_l, health::router(ctx.health.clone())),
        serve(metrics_l, metrics::router(ctx.metrics.clone())),
    ];
    // A standby serves health and metrics (not ready) and waits for the Lease.
    let mut leadership = if ctx.config.kubernetes.controller_ha {
        let settings = crate::leader::LeaderSettings::new(
            args.ha_lease_namespace.clone(),
            args.ha_identity.clone(),
            std::time::Duration::from_secs(args.ha_lease_duration),
        );
        tokio::select! {
            l = crate::leader::acquire(ctx.client.clone(), &settings) => Some(l.map_err(Error::Leader)?),
            _ = shutdown_signal() => {
                servers.iter().for_each(|s| s.abort());
                return Ok(());
            }
        }
    } else {
        None
    };
    let tasks = spawn_handlers(&ctx);
    let manager = start_pool_manager(&ctx)?;
    let handlers_done = async {
        if tasks.is_empty() {
            // Nothing enabled that is implemented: keep serving health and metrics.
            std::future::pending::<()>().await;
        }
        futures::future::join_all(tasks).await;
    };
    let result = {
        let lost = async {
            match leadership.as_mut() {
                Some(l) => l.lost().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = handlers_done => Err(Error::HandlersStopped),
            _ = lost => Err(Error::LeadershipLost),
            _ = shutdown_signal() => Ok(()),
        }
    };
    if let Some(l) = leadership {
        l.release().await;
    }
    for s in servers.iter().chain(manager.iter()) {
        s.abort();
    }
    result
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    info!("shutdown requested");
}
