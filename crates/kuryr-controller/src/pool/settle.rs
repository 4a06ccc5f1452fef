//! After a restart: settling the bulk creation the previous controller left in flight.
//! Neutron finishes a bulk request whose sender died, so ports of ours can appear after
//! recovery listed them; without a second look they would wait for the janitor's minimum age
//! (ten minutes by default), over `ports_pool_max` and unused. When the previous controller
//! was busy (a port of ours changed in the last [`WATCH`], or recovery deferred ports), for a
//! while after recovery (and as long as any pool holds deferred ports) the cluster's ports are
//! listed every few seconds and
//! [`PoolState::settle_look`](kuryr_core::pool::PoolState::settle_look) settles each pool once
//! its unknown ports stopped changing. A controller starting on a quiet cluster makes no such
//! call.

use std::{
    sync::{Arc, atomic::Ordering},
    time::{Duration, Instant},
};

use tracing::{info, warn};

use super::{VifPool, lock};

/// How long after recovery new ports of ours are looked for: longer than a bulk creation takes
/// on a loaded Neutron. Later ones are the janitor's.
const WATCH: Duration = Duration::from_secs(120);
/// Between two looks (a pool settles on the second look that sees the same ports).
const LOOK_EVERY: Duration = Duration::from_secs(3);

/// Whether a port of `ports` was created or changed within [`WATCH`] of `wall_now`: the
/// previous controller was at work and may have left a bulk creation in flight (a time ahead
/// of ours, clocks being skewed, counts as recent).
pub(super) fn recently_active(ports: &[kuryr_openstack::Port], wall_now: jiff::Timestamp) -> bool {
    ports.iter().any(|p| {
        p.updated()
            .or_else(|| p.created())
            .map(|t| Duration::try_from(wall_now.duration_since(t)).unwrap_or(Duration::ZERO))
            .is_some_and(|age| age < WATCH)
    })
}

impl VifPool {
    /// Runs the looks (spawned by recovery); returns when the watch is over and nothing is
    /// deferred any more.
    pub(super) async fn settle_after_restart(self: Arc<Self>) {
        if self.settings.tags.is_empty() {
            // Without tags ownership cannot be proven; recovery deferred nothing either.
            return;
        }
        let started = Instant::now();
        let mut failures = 0u32;
        loop {
            tokio::time::sleep(LOOK_EVERY).await;
            if started.elapsed() >= WATCH && !self.state().has_deferred() {
                return;
            }
            // The pool is shutting down, or nothing but this loop holds it any more (its
            // controller stopped): the looks end with it.
            if self.closing.load(Ordering::SeqCst) || Arc::strong_count(&self) == 1 {
                return;
            }
            let ports = match self.fresh_cluster_ports("settle").await {
                Ok(p) => p,
                Err(e) => {
                    failures += 1;
                    if failures == 1 || failures % 20 == 0 {
                        warn!(error = %crate::error_chain(&e), failures, "settling the previous controller's ports: listing failed");
                    }
                    continue;
                }
            };
            let (delete, adopted) = self.state().settle_look(
                &ports,
                self.settings.ownership(),
                self.settings.janitor_min_age,
                (Instant::now(), jiff::Timestamp::now()),
            );
            self.absorb(
                &ports,
                &delete,
                &adopted,
                "ports of the previous controller's bulk creation",
            )
            .await;
        }
    }

    /// Takes in what a settle look decided: adopted ports go in the port cache and the
    /// gauges, `delete` is deleted (a failure is the janitor's to retry).
    async fn absorb(
        &self,
        ports: &[kuryr_openstack::Port],
        delete: &[String],
        adopted: &[String],
        what: &str,
    ) {
        self.take_in_adopted(ports, adopted, what);
        if !delete.is_empty() {
            info!(ports = ?delete, what, "deleting unusable ports nothing owns");
            if let Err(e) = self.delete_many(delete).await {
                warn!(error = %crate::error_chain(&e), what, "deleting unusable ports failed (the janitor retries)");
            }
        }
    }

    /// Adopted ports (by a settle look or the janitor) go in the port cache, from `ports`, the
    /// listing they came from, and the gauges; waiting requests are woken.
    pub(super) fn take_in_adopted(&self, ports: &[kuryr_openstack::Port], adopted: &[String], what: &str) {
        if adopted.is_empty() {
            return;
        }
        let mut cache = lock(&self.ports);
        for p in ports.iter().filter(|p| adopted.contains(&p.id)) {
            cache.insert(p.id.clone(), p.clone());
        }
        drop(cache);
        info!(ports = ?adopted, what, "ports nothing owned are back in their pools");
        self.publish_stats();
        self.changed.send_modify(|v| *v += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(updated: &str) -> kuryr_openstack::Port {
        serde_json::from_value(serde_json::json!({
            "id": "p", "network_id": "n", "created_at": "2026-11-22T05:00:00Z", "updated_at": updated,
        }))
        .expect("port")
    }

    #[test]
    fn only_a_recent_change_means_the_previous_controller_was_busy() {
        let now: jiff::Timestamp = "2026-11-22T06:00:00Z".parse().expect("time");
        assert!(recently_active(&[port("2026-11-22T05:59:00Z")], now));
        assert!(!recently_active(&[port("2026-11-22T05:50:00Z")], now));
        assert!(!recently_active(&[port("")], now), "created an hour ago");
        assert!(!recently_active(&[], now));
    }
}
