//! Control-plane loops that a real cluster runs beside the API server: the scheduler (binds pods
//! to Ready nodes), the endpoints controller (Endpoints + EndpointSlices from Ready pods), the
//! workload controllers ([`replicaset`], [`deployment`], [`daemonset`]) and the pod garbage
//! collector ([`podgc`]). Each loop reads reflector caches (every pod and every node in one
//! cache shared by all loops, [`Caches`]; the others its own), wakes on their changes (and on its
//! own timers), and recomputes everything it owns.

pub mod daemonset;
pub mod deployment;
pub mod endpoints;
pub mod interpod;
pub mod podgc;
pub mod predicates;
pub mod replicaset;
pub mod scheduler;
pub mod workload;

use std::{fmt::Debug, sync::Arc, time::Duration};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, Resource,
    runtime::{WatchStreamExt, reflector, reflector::Store, watcher},
};
use serde::de::DeserializeOwned;
use tokio::{sync::Notify, task::JoinHandle};

/// Errors of the controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The client could not be created.
    #[error("cannot create API client")]
    Client(#[source] crate::node::Error),
    /// A cache never became ready.
    #[error("cache of {0} did not sync")]
    CacheSync(&'static str),
    /// A loop ended unexpectedly.
    #[error("controller {0} stopped")]
    Stopped(&'static str),
}

/// Command-line arguments of `kube-sandbox controllers`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Kubeconfig of the API server.
    #[arg(long, env = "KUBECONFIG", default_value = "/var/lib/kube-sandbox/kubeconfig")]
    pub kubeconfig: std::path::PathBuf,
}

/// Runs every control-plane loop until interrupted.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let (client, _) = crate::node::client_from_kubeconfig(&args.kubeconfig)
        .await
        .map_err(Error::Client)?;
    run_with_client(client, crate::node::shutdown_signal()).await?;
    Ok(())
}

/// Runs the scheduler, the endpoints controller, the workload controllers and the pod garbage
/// collector with `client` until `shutdown` resolves (for running them inside the API server
/// process).
pub async fn run_with_client(
    client: Client,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    crate::node::install_crypto_provider();
    let (caches, _caches_guard) = Caches::start(&client).await?;
    let c = || caches.clone();
    let loops: Vec<(&'static str, JoinHandle<Result<(), Error>>)> = vec![
        ("scheduler", tokio::spawn(scheduler::run(client.clone(), c()))),
        ("endpoints", tokio::spawn(endpoints::run(client.clone(), c()))),
        ("replicaset", tokio::spawn(replicaset::run(client.clone(), c()))),
        ("deployment", tokio::spawn(deployment::run(client.clone(), c()))),
        ("daemonset", tokio::spawn(daemonset::run(client.clone(), c()))),
        ("podgc", tokio::spawn(podgc::run(client, c()))),
    ];
    let (names, handles): (Vec<_>, Vec<_>) = loops.into_iter().unzip();
    let aborts: Vec<_> = handles.iter().map(JoinHandle::abort_handle).collect();
    let first_end = futures::future::select_all(handles);
    let result = tokio::select! {
        _ = shutdown => Ok(()),
        (r, i, _) = first_end => {
            let name = names.get(i).copied().unwrap_or("controller");
            r.unwrap_or(Err(Error::Stopped(name))).and(Err(Error::Stopped(name)))
        }
    };
    // Dropping a JoinHandle does not stop its task: stop every loop (and its watches).
    for a in aborts {
        a.abort();
    }
    result
}

/// What a pass of a controller loop asks of the next wait.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Outcome {
    /// Something failed: try again soon even if nothing changes.
    pub retry: bool,
    /// Something changes by itself at this time (e.g. a pod becomes available).
    pub wake_at: Option<jiff::Timestamp>,
}

impl Outcome {
    /// Asks for a wake-up at `t` too.
    pub fn wake(&mut self, t: Option<jiff::Timestamp>) {
        if let Some(t) = t {
            self.wake_at = Some(self.wake_at.map_or(t, |w| w.min(t)));
        }
    }
}

/// Full recomputation at least this often, as informers resync.
const RESYNC: Duration = Duration::from_secs(30);

/// Waits for a cache change, the outcome's timer or the periodic resync, then lets a burst of
/// changes settle.
/// How long a loop lets changes gather after a full pass that took `took`: at least 10 ms, and
/// four times the pass. These controllers re-derive everything from their caches on any change
/// (the real ones are incremental, with a work queue per object); paced so, a loop spends at
/// most a fifth of a core whatever the cluster's size, and a burst of N pod events costs
/// passes in proportion to the burst's duration, not to N (each pass O(objects)).
pub(crate) fn settle(took: Duration) -> Duration {
    (took * 4).max(Duration::from_millis(10))
}

/// Waits for a change (or `outcome`'s retry/wake-up time), then lets changes gather
/// ([`settle`] after a pass that took `took`).
pub(crate) async fn wait(notify: &Notify, outcome: Outcome, took: Duration) {
    let mut timeout = if outcome.retry {
        Duration::from_secs(1)
    } else {
        RESYNC
    };
    if let Some(at) = outcome.wake_at {
        let until = at.duration_since(jiff::Timestamp::now());
        let until = Duration::try_from(until).unwrap_or_default() + Duration::from_millis(50);
        timeout = timeout.min(until);
    }
    tokio::select! {
        _ = notify.notified() => {}
        _ = tokio::time::sleep(timeout) => {}
    }
    tokio::time::sleep(settle(took)).await;
}

/// A reflector feeding a store; every change pings `notify`.
pub(crate) fn spawn_reflector<K>(
    api: Api<K>,
    cfg: watcher::Config,
    notify: Arc<Notify>,
) -> (Store<K>, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    // No loop reads managedFields, and they are most of a cached object's memory (a pod's
    // status manager alone is a tree of a hundred maps): every cache drops them, as
    // controllers built on kube-rs do.
    let lean = watcher(api, cfg)
        .default_backoff()
        .modify(|o| o.meta_mut().managed_fields = None);
    let stream = reflector(writer, lean);
    let handle = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => notify.notify_one(),
                Err(e) => tracing::warn!(error = %e, "watch failed; retrying"),
            }
        }
    });
    (reader, handle)
}

/// One cache of a kind shared by every loop that reads it: one watch and one copy of each object
/// for all of them (every loop used to keep its own: six copies of every pod), each change
/// pinging every subscriber's `Notify`.
#[derive(Clone)]
pub(crate) struct Shared<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    subscribers: Arc<std::sync::Mutex<Vec<Arc<Notify>>>>,
}

impl<K> Shared<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn spawn(api: Api<K>) -> (Self, JoinHandle<()>) {
        let hub = Arc::new(Notify::new());
        let (store, watch) = spawn_reflector(api, watcher::Config::default(), hub.clone());
        let subscribers: Arc<std::sync::Mutex<Vec<Arc<Notify>>>> = Arc::default();
        let subs = subscribers.clone();
        // Fans the watch's pings out (a Notify keeps one permit: a burst is one wake-up each).
        let fan = tokio::spawn(async move {
            let _watch = AbortOnDrop(vec![watch]);
            loop {
                hub.notified().await;
                let list = subs.lock().map(|l| l.clone()).unwrap_or_default();
                for n in list {
                    n.notify_one();
                }
            }
        });
        (Shared { store, subscribers }, fan)
    }

    /// The cache, its changes pinging `notify` from now on.
    pub(crate) fn subscribe(&self, notify: &Arc<Notify>) -> Store<K> {
        if let Ok(mut l) = self.subscribers.lock() {
            l.push(notify.clone());
        }
        self.store.clone()
    }
}

/// The caches several loops share: every pod and every node.
#[derive(Clone)]
pub(crate) struct Caches {
    /// Every pod (managedFields dropped).
    pub pods: Shared<Pod>,
    /// Every node.
    pub nodes: Shared<Node>,
}

impl Caches {
    /// Starts both watches and waits until both caches are synced; the guard stops them.
    async fn start(client: &Client) -> Result<(Caches, AbortOnDrop), Error> {
        let (pods, h1) = Shared::spawn(Api::<Pod>::all(client.clone()));
        let (nodes, h2) = Shared::spawn(Api::<Node>::all(client.clone()));
        let guard = AbortOnDrop(vec![h1, h2]);
        pods.store
            .wait_until_ready()
            .await
            .map_err(|_| Error::CacheSync("pods"))?;
        nodes
            .store
            .wait_until_ready()
            .await
            .map_err(|_| Error::CacheSync("nodes"))?;
        Ok((Caches { pods, nodes }, guard))
    }

    /// Pods and nodes, and the `Notify` their changes ping (what the scheduler and the pod
    /// garbage collector start from).
    pub(crate) fn pods_and_nodes(&self) -> (Store<Pod>, Store<Node>, Arc<Notify>) {
        let notify = Arc::new(Notify::new());
        (
            self.pods.subscribe(&notify),
            self.nodes.subscribe(&notify),
            notify,
        )
    }
}

/// Aborts the tasks when dropped.
pub(crate) struct AbortOnDrop(pub Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}
