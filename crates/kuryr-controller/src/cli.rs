//! The controller process: command line ([`Args`]), configuration loading, and the wiring of
//! client, handlers, health and metrics servers ([`run`], [`spawn_handlers`], [`serve`]).

use std::{path::PathBuf, sync::Arc};

use kuryr_config::{Config, ConfigErrors};
use kuryr_runtime::{
    ConfigArgs, KubeArgs, ServeArgs, WorkloadArgs,
    http::{self, BindError},
    identity, kubeclient, shutdown_signal,
    uninstall::{self, Verdict, Workload, WorkloadError},
};
use tokio::task::{AbortHandle, JoinHandle};
use tracing::{info, warn};

use crate::{Context, OpenStack, drivers, handlers, health, metrics, pool};

/// Command line of `kuryr-controller` (oslo.config style options).
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "kuryr-controller", version, about = "Kuryr-Kubernetes controller")]
pub struct Args {
    /// kuryr.conf files and directories.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How to reach Kubernetes.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Health (`[health_server] port`) and metrics (`[prometheus_exporter]
    /// controller_exporter_port`) listen addresses.
    #[command(flatten)]
    pub serve: ServeArgs,
    /// Namespace of the leader-election Lease (with `[kubernetes] controller_ha = true`).
    #[arg(long, env = "KURYR_HA_LEASE_NAMESPACE", default_value = "kube-system")]
    pub ha_lease_namespace: String,
    /// Identity of this replica in the Lease (default: `$POD_NAME`, else `<host name>_<pid>`).
    #[arg(long, env = "POD_NAME")]
    pub ha_identity: Option<String>,
    /// Lease duration in seconds: how long a dead leader is waited for.
    #[arg(long, default_value_t = 15)]
    pub ha_lease_duration: u64,
    /// The Deployment this controller runs as: when it is gone at shutdown, kuryr-rs is being
    /// uninstalled and the active controller deletes the ports its pools hold.
    #[command(flatten)]
    pub workload: WorkloadArgs,
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
    /// No identity: nothing could be proven ours.
    #[error(transparent)]
    Identity(identity::Error),
    /// The pool options are invalid (`[kubernetes] vif_pool_driver`, `[vif_pool]`, tags).
    #[error("port pool configuration")]
    PoolSettings(#[source] pool::SettingsError),
    /// The drivers cannot be built from the configuration.
    #[error("driver configuration")]
    Drivers(#[source] drivers::DriverError),
    /// No OpenStack credentials could be determined.
    #[error("OpenStack credentials")]
    CloudAuth(#[source] Box<kuryr_config::ConfigError>),
    /// Connecting to Octavia failed.
    #[error("connecting to Octavia (a Service handler is enabled)")]
    Octavia(#[source] kuryr_openstack::Error),
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
    #[error(transparent)]
    Bind(#[from] BindError),
    /// `--workload` is malformed.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
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
            Error::Config(_)
            | Error::PoolSettings(_)
            | Error::Drivers(_)
            | Error::CloudAuth(_)
            | Error::Identity(_) => 2,
            _ => 1,
        }
    }
}

/// Whether `config` enables a handler that needs Neutron.
pub fn needs_openstack(config: &Config) -> bool {
    config
        .kubernetes
        .enabled_handlers
        .iter()
        .filter_map(|h| handlers::find(h))
        .any(|h| h.needs_openstack)
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
    let mut opts = kuryr_openstack::ConnectOptions::from_env(config.neutron.timeout);
    opts.network_endpoint = config.neutron.endpoint_override.clone();
    let real = kuryr_openstack::OpenStackNeutron::connect(&auth, &opts, metrics.clone())
        .await
        .map_err(Error::Neutron)?;
    let octavia: Option<Arc<dyn kuryr_openstack::Octavia>> = if handlers::needs_octavia(config) {
        let o = kuryr_openstack::OpenStackOctavia::from_session(
            real.session().clone(),
            opts.request_timeout,
            metrics.clone(),
        )
        .await
        .map_err(Error::Octavia)?;
        Some(Arc::new(o))
    } else {
        None
    };
    openstack_over(config, client, metrics, settings, Arc::new(real), octavia)
}

/// The drivers and the pool executor over `neutron` and `octavia` as given: the real clients
/// ([`connect_openstack`]) or, for in-process scale tests, the fakes.
pub fn openstack_over(
    config: &Config,
    client: kube::Client,
    metrics: Arc<metrics::Metrics>,
    settings: pool::PoolSettings,
    neutron: Arc<dyn kuryr_openstack::Neutron>,
    octavia: Option<Arc<dyn kuryr_openstack::Octavia>>,
) -> Result<OpenStack, Error> {
    let drivers =
        drivers::Drivers::from_config(config, client.clone(), neutron.clone()).map_err(Error::Drivers)?;
    let pool = pool_source(settings, &neutron, metrics, &client);
    Ok(OpenStack {
        neutron,
        drivers: Arc::new(drivers),
        pool,
        octavia,
    })
}

/// Where pods' ports come from, as `settings` say: one pool driver, or the multi pool routing
/// each node to its driver's pools.
fn pool_source(
    settings: pool::PoolSettings,
    neutron: &Arc<dyn kuryr_openstack::Neutron>,
    metrics: Arc<crate::metrics::Metrics>,
    client: &kube::Client,
) -> Arc<dyn pool::PortSource> {
    use pool::attach::{
        macvlan::AddressPairs,
        nested::{KubeNodes, TrunkSubports},
    };
    let nodes = || Arc::new(KubeNodes(kube::Api::all(client.clone())));
    let one = |settings: pool::PoolSettings, vif: &str| -> Arc<dyn pool::PortSource> {
        let workers = settings.nested.clone().unwrap_or_default();
        match (settings.mode, vif) {
            (pool::PoolMode::Noop, "nested-macvlan") => {
                let attach =
                    AddressPairs::new(neutron.clone(), nodes(), workers, settings.pair_update_attempts);
                pool::direct::Direct::with_attachment(settings, neutron.clone(), attach)
            }
            (pool::PoolMode::Noop, _) => pool::direct::Direct::new(settings, neutron.clone()),
            (pool::PoolMode::Neutron, "nested-vlan") => {
                let attach = TrunkSubports::new(neutron.clone(), nodes(), workers);
                Arc::new(pool::source::Pooled(pool::VifPool::with_attachment(
                    settings,
                    neutron.clone(),
                    metrics.clone(),
                    attach,
                )))
            }
            (pool::PoolMode::Neutron, "nested-macvlan") => {
                let attach =
                    AddressPairs::new(neutron.clone(), nodes(), workers, settings.pair_update_attempts);
                Arc::new(pool::source::Pooled(pool::VifPool::with_attachment(
                    settings,
                    neutron.clone(),
                    metrics.clone(),
                    attach,
                )))
            }
            (pool::PoolMode::Neutron, _) => Arc::new(pool::source::Pooled(pool::VifPool::new(
                settings,
                neutron.clone(),
                metrics.clone(),
            ))),
        }
    };
    let Some(multi) = settings.multi.clone() else {
        let vif = settings.vif_driver.clone();
        return one(settings, &vif);
    };
    let sources = multi
        .mapping
        .iter()
        .map(|(vif, pool_driver)| {
            let mode = if pool_driver == "noop" {
                pool::PoolMode::Noop
            } else {
                pool::PoolMode::Neutron
            };
            let s = pool::PoolSettings {
                mode,
                ..settings.clone()
            };
            (vif.clone(), one(s, vif))
        })
        .collect();
    pool::multi::Multi::with_client(&multi.default_driver, sources, client.clone(), multi.cache_time)
}

/// Serves the pool manager API on `[pool_manager] sock_file` when `[kubernetes]
/// enable_manager` is set and the pools exist.
pub fn start_pool_manager(ctx: &Context) -> Result<Option<JoinHandle<()>>, Error> {
    let (true, Some(os)) = (ctx.config.kubernetes.enable_manager, ctx.openstack.as_ref()) else {
        return Ok(None);
    };
    let pools = os.pool.pools();
    if pools.is_empty() {
        warn!("[kubernetes] enable_manager is set but vif_pool_driver = noop has no pools: no pool manager");
        return Ok(None);
    }
    let path = PathBuf::from(&ctx.config.pool_manager.sock_file);
    let manager = pool::manager::Manager {
        pools,
        source: os.pool.clone(),
        drivers: Some(os.drivers.clone()),
        client: Some(ctx.client.clone()),
    };
    pool::manager::serve(manager, &path)
        .map(Some)
        .map_err(|source| Error::PoolManager { path, source })
}

/// Starts every implemented handler listed in `[kubernetes] enabled_handlers` (the others
/// were refused, or warned about, when the configuration was loaded).
pub fn spawn_handlers(ctx: &Arc<Context>) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for name in &ctx.config.kubernetes.enabled_handlers {
        match handlers::find(name) {
            Some(h) => tasks.push(tokio::spawn((h.start)(ctx.clone()))),
            None => warn!(handler = %name, "handler not implemented yet, skipped"),
        }
    }
    tasks
}

/// How many handlers [`spawn_handlers`] will start for `config` (each reports its sync once).
pub fn watcher_count(config: &Config) -> usize {
    config
        .kubernetes
        .enabled_handlers
        .iter()
        .filter(|h| handlers::find(h).is_some())
        .count()
}

/// Runs the controller with an already loaded `config` until SIGINT/SIGTERM or until every
/// handler loop has ended.
pub async fn run(args: &Args, mut config: Config) -> Result<(), Error> {
    // Every configuration check first: nothing is touched when one fails.
    pool::PoolSettings::from_config(&config).map_err(Error::PoolSettings)?;
    let workload = args.workload.resolve()?;
    let client = kubeclient::client(args.kube.kubeconfig.as_deref(), &config.kubernetes)
        .await
        .map_err(Error::Client)?;
    // The identity before anything touches OpenStack: what is ours is proven by it.
    let identity = identity::resolve(&client, &mut config)
        .await
        .map_err(Error::Identity)?;
    info!(tags = ?identity.tags(), source = identity.source(), "cluster identity");
    // Watched from now on: at SIGTERM it tells an uninstall even when our token is gone.
    let watched = workload.as_ref().map(|w| uninstall::watch(&client, w));
    let settings = pool::PoolSettings::from_config(&config).map_err(Error::PoolSettings)?;
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
    let health_l = http::bind(
        "health server",
        args.serve.health_bind,
        ctx.config.health_server.port,
    )
    .await?;
    let metrics_port = ctx.config.prometheus_exporter.controller_exporter_port;
    let metrics_l = http::bind("metrics server", args.serve.metrics_bind, metrics_port).await?;
    info!(health = ?health_l.local_addr().ok(), metrics = ?metrics_l.local_addr().ok(), "serving");
    let servers = [
        http::serve("health server", health_l, health::router(ctx.health.clone())),
        http::serve("metrics server", metrics_l, metrics::router(ctx.metrics.clone())),
    ];
    // A standby serves health and metrics (not ready) and waits for the Lease.
    let mut leadership = if ctx.config.kubernetes.controller_ha {
        let settings = crate::leader::LeaderSettings::new(
            args.ha_lease_namespace.clone(),
            args.ha_identity.clone(),
            std::time::Duration::from_secs(args.ha_lease_duration),
        );
        ctx.health.set_standby(true);
        let acquired = tokio::select! {
            l = crate::leader::acquire(ctx.client.clone(), &settings) => Some(l.map_err(Error::Leader)?),
            _ = shutdown_signal() => {
                servers.iter().for_each(|s| s.abort());
                return Ok(());
            }
        };
        ctx.health.set_standby(false);
        acquired
    } else {
        None
    };
    let tasks = spawn_handlers(&ctx);
    let handler_aborts: Vec<AbortHandle> = tasks.iter().map(JoinHandle::abort_handle).collect();
    // Background work that never ends by itself (aborted with the servers).
    let mut background = Vec::new();
    if let (Some(os), Some(project)) = (&ctx.openstack, ctx.config.neutron_defaults.project.clone()) {
        background.push(tokio::spawn(crate::quota::run(
            os.neutron.clone(),
            ctx.client.clone(),
            ctx.metrics.clone(),
            project,
            ctx.config.neutron_defaults.pod_subnet.clone(),
        )));
    }
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
    // The shutdown's budget runs from here (the kubelet's grace period started with SIGTERM).
    let stopping = std::time::Instant::now();
    if result.is_ok() {
        // Hand over cleanly: the bulk creations Neutron is working on end before the Lease is
        // released, so the next leader lists their ports.
        let pools = ctx
            .openstack
            .as_ref()
            .map(|os| os.pool.pools())
            .unwrap_or_default();
        futures::future::join_all(pools.iter().map(|p| p.quiesce(QUIESCE_LIMIT))).await;
        if let Some(w) = &workload {
            let seen = watched.as_ref().map(|(s, _)| s);
            release_on_uninstall(&ctx, (w, seen), &handler_aborts, stopping + SHUTDOWN_BUDGET).await;
        }
    }
    if let Some(l) = leadership {
        l.release().await;
    }
    for s in servers.iter().chain(manager.iter()).chain(background.iter()) {
        s.abort();
    }
    if let Some((_, t)) = watched {
        t.abort();
    }
    result
}

/// How long a clean shutdown waits for bulk port creations in flight (a bulk of 10 ports takes
/// 5-16 s on the busy sandbox; the chart's grace period is 60 s). A creation still in flight
/// after it is settled by the next leader's recovery.
const QUIESCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// How long a clean shutdown may take in all: inside the chart's 60 s grace period, with room
/// for the Lease release. The uninstall's port deletions get what the quiesce left of it. They
/// had a fixed 30 s before: in a CI run of the app test (2026-11-28) the leader exited 35 s
/// after SIGTERM and 20 pool ports of one node were left, most likely that limit reached
/// while Neutron deleted the pools' ports.
const SHUTDOWN_BUDGET: std::time::Duration = std::time::Duration::from_secs(55);

/// The least the uninstall's deletions get, however long the quiesce took.
const RELEASE_MIN: std::time::Duration = std::time::Duration::from_secs(10);

/// At a clean shutdown of the active controller: when kuryr-rs is being uninstalled
/// ([`uninstall`]), stops the handlers (no pool refill may follow) and deletes the ports the
/// pools hold and tagged ports nothing owns ([`pool::VifPool::release_for_uninstall`]); ports
/// of pods belong to their KuryrPorts and stay. On a restart nothing happens.
async fn release_on_uninstall(
    ctx: &Context,
    (workload, seen): (&Workload, Option<&uninstall::SeenCell>),
    handlers: &[AbortHandle],
    deadline: std::time::Instant,
) {
    let Verdict::Uninstalling(reason) =
        uninstall::check(&ctx.client, workload, std::time::Duration::from_secs(3), seen).await
    else {
        return;
    };
    handlers.iter().for_each(AbortHandle::abort);
    let pools = ctx
        .openstack
        .as_ref()
        .map(|os| os.pool.pools())
        .unwrap_or_default();
    if pools.is_empty() {
        info!(reason, "uninstall: no port pools to release");
        return;
    }
    let release = async {
        let mut n = 0;
        for p in &pools {
            n += p.release_for_uninstall().await?;
        }
        Ok::<_, pool::Error>(n)
    };
    let budget = deadline
        .saturating_duration_since(std::time::Instant::now())
        .max(RELEASE_MIN);
    match tokio::time::timeout(budget, release).await {
        Ok(Ok(n)) => info!(deleted = n, reason, "uninstall: the pools' ports are deleted"),
        Ok(Err(e)) => warn!(
            error = %kuryr_runtime::error_chain(&e),
            "uninstall: deleting the pools' ports failed; `kuryrctl ports --orphans` lists what is left"
        ),
        Err(_) => warn!(
            budget_s = budget.as_secs(),
            "uninstall: deleting the pools' ports took longer than the shutdown's budget; `kuryrctl ports --orphans` lists what is left"
        ),
    }
}
