//! Control-plane loops that a real cluster runs beside the API server: the scheduler (binds pods
//! to Ready nodes) and the endpoints controller (Endpoints + EndpointSlices from Ready pods).

pub mod endpoints;
pub mod scheduler;

use std::{fmt::Debug, sync::Arc};

use futures::StreamExt;
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

/// Runs the scheduler and the endpoints controller until interrupted.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let (client, _) = crate::node::client_from_kubeconfig(&args.kubeconfig)
        .await
        .map_err(Error::Client)?;
    run_with_client(client, crate::node::shutdown_signal()).await?;
    Ok(())
}

/// Runs the scheduler and the endpoints controller with `client` until `shutdown` resolves
/// (for running them inside the API server process).
pub async fn run_with_client(
    client: Client,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    crate::node::install_crypto_provider();
    let mut sched = tokio::spawn(scheduler::run(client.clone()));
    let mut eps = tokio::spawn(endpoints::run(client));
    let result = tokio::select! {
        _ = shutdown => Ok(()),
        r = &mut sched => r.unwrap_or(Err(Error::Stopped("scheduler"))),
        r = &mut eps => r.unwrap_or(Err(Error::Stopped("endpoints"))),
    };
    // Dropping a JoinHandle does not stop its task: stop both loops (and their watches).
    sched.abort();
    eps.abort();
    result
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
    let stream = reflector(writer, watcher(api, cfg).default_backoff());
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

/// Aborts the tasks when dropped.
pub(crate) struct AbortOnDrop(pub Vec<JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}
