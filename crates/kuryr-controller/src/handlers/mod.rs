//! The controller's handlers, one module per watched kind (upstream's `enabled_handlers`).

pub mod kuryrnetwork;
pub mod kuryrnetwork_population;
pub mod kuryrport;
pub mod namespace;
pub mod pod;

use std::time::Duration;

use kube::{Resource, runtime::reflector::Store};
use tracing::warn;

/// Waits until `store` has listed everything once (never returns if its watcher stops first).
///
/// kube-runtime's readiness future keeps only the last poller's waker and a controller polls it
/// too, so it is polled with a timeout instead of relying on a wake-up.
pub(crate) async fn wait_ready<K>(store: &Store<K>, handler: &'static str)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    loop {
        match tokio::time::timeout(Duration::from_millis(200), store.wait_until_ready()).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => {
                warn!(handler, error = %e, "watcher stopped before syncing");
                std::future::pending::<()>().await;
            }
            Err(_elapsed) => {}
        }
    }
}
