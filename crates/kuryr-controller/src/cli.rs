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

use crate::{Context, handlers, health, kubeclient, metrics};

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
    /// Every handler loop has ended.
    #[error("all handlers have stopped")]
    HandlersStopped,
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
        .filter(|h| h.as_str() == handlers::pod::HANDLER)
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
    let client = kubeclient::client(args.kubeconfig.as_deref(), &config.kubernetes)
        .await
        .map_err(Error::Client)?;
    let watchers = watcher_count(&config);
    let ctx = Arc::new(Context::new(client, Arc::new(config), watchers));
    let health_l = bind("health server", args.health_bind, ctx.config.health_server.port).await?;
    let metrics_port = ctx.config.prometheus_exporter.controller_exporter_port;
    let metrics_l = bind("metrics server", args.metrics_bind, metrics_port).await?;
    info!(health = ?health_l.local_addr().ok(), metrics = ?metrics_l.local_addr().ok(), "serving");
    let servers = [
        serve(health_l, health::router(ctx.health.clone())),
        serve(metrics_l, metrics::router(ctx.metrics.clone())),
    ];
    let tasks = spawn_handlers(&ctx);
    let handlers_done = async {
        if tasks.is_empty() {
            // Nothing enabled that is implemented: keep serving health and metrics.
            std::future::pending::<()>().await;
        }
        futures::future::join_all(tasks).await;
    };
    let result = tokio::select! {
        _ = handlers_done => Err(Error::HandlersStopped),
        _ = shutdown_signal() => Ok(()),
    };
    for s in servers {
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
