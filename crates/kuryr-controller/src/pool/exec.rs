//! Execution of what the pool state decides: populations (one bulk `POST /v2.0/ports` per
//! ticket), deletions, the periodic tick, and the pool gauges.

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use futures::StreamExt;
use kuryr_core::{config::POOL_PORT_NAME, pool::PopulateRequest};
use tracing::{debug, info, warn};

use super::{Error, VifPool, lock};
use crate::metrics::{OutcomeLabels, PoolLabels, PoolPortLabels};

/// Deletions run at once (upstream deletes a network's pool ports 5 at a time).
const DELETE_CONCURRENCY: usize = 5;
/// Wait after a timed-out bulk creation before looking for the ports it made anyway.
const ADOPT_DELAY: Duration = Duration::from_secs(30);
/// While another population of the pool is in flight, the look is retried this often ...
const ADOPT_RETRY: Duration = Duration::from_secs(10);
/// ... this many times, then left to the janitor.
const ADOPT_TRIES: u32 = 12;

/// Counts one bulk creation as in flight while it lives (also when its task is cancelled).
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        Self(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl VifPool {
    /// Executes `req` in the background (not once the pool is closing).
    pub(super) fn spawn_population(self: &Arc<Self>, req: PopulateRequest) {
        if self.closing.load(Ordering::SeqCst) {
            debug!(pool = %req.key, "closing: population not started");
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let _ = me.execute_population(req).await;
        });
    }

    /// Before the controller hands over or exits: starts no more populations and waits (up
    /// to `limit`) for the bulk creations Neutron is still working on. A creation cut off by
    /// the exit would still complete in Neutron, after the next leader listed the ports —
    /// ports nobody knew until the janitor found them. Returns how many were still in flight
    /// at the end (0: none lost).
    pub async fn quiesce(&self, limit: Duration) -> usize {
        self.closing.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + limit;
        let started = Instant::now();
        let mut waited = false;
        loop {
            let n = self.in_flight.load(Ordering::SeqCst);
            if n == 0 {
                if waited {
                    info!(
                        waited_ms = started.elapsed().as_millis() as u64,
                        "pool populations in flight finished"
                    );
                }
                return 0;
            }
            if Instant::now() >= deadline {
                warn!(
                    in_flight = n,
                    "pool populations still in flight at shutdown: the janitor will find their ports"
                );
                return n;
            }
            waited = true;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// One bulk creation of `req.count` ports; reports to the state, warms the network cache,
    /// wakes waiting pods. Returns how many ports the pool gained.
    pub(super) async fn execute_population(self: &Arc<Self>, req: PopulateRequest) -> Result<u32, Error> {
        let _in_flight = InFlight::new(&self.in_flight);
        // Pool ports are always named like upstream's `port_debug` pool ports: harmless, and
        // an operator sees at once what a port is.
        if let Err(e) = self.attach.prepare(&req.key.host).await {
            return self.population_failed(req, e);
        }
        let one = self.port_create(&req.key, req.sgs.as_slice(), Some(POOL_PORT_NAME.into()), None);
        let body = vec![one; req.count as usize];
        let queued = Instant::now();
        // Sent even when the controller began closing while it was queued: its pods wait for
        // it, and `quiesce` waits for it like for any population in flight.
        let turn = self.gates.turn(&req.key.network_id).await;
        let started = Instant::now();
        let mut result = self.neutron.create_ports_bulk(&body).await;
        drop(turn);
        if let Ok(ports) = &mut result
            && let Err(e) = self.attach.attach(&req.key.host, ports).await
        {
            // Not usable: nothing is left behind.
            let ids: Vec<String> = ports.iter().map(|p| p.id.clone()).collect();
            warn!(pool = %req.key, ports = ids.len(), error = %crate::error_chain(&e), "attaching new pool ports failed: deleting them");
            if let Err(d) = self.delete_many(&ids).await {
                warn!(pool = %req.key, error = %crate::error_chain(&d), "deleting unattached pool ports failed (the janitor retries)");
            }
            return self.population_failed(req, e);
        }
        let out = match result {
            Ok(ports) => {
                // Warm the network cache before pods are woken, so their VIFs need no request.
                if let Err(e) = self.nets.get(&req.key.network_id).await {
                    debug!(error = %e, "network not cached yet");
                }
                {
                    let mut cache = lock(&self.ports);
                    for p in &ports {
                        cache.insert(p.id.clone(), p.clone());
                    }
                }
                let ids: Vec<String> = ports.iter().map(|p| p.id.clone()).collect();
                let outcome = self.state().complete_population(req.ticket, ids);
                lock(&self.last_error).remove(&req.key);
                self.metrics
                    .populations
                    .get_or_create(&OutcomeLabels { outcome: "ok".into() })
                    .inc();
                info!(pool = %req.key, ports = ports.len(), elapsed_ms = started.elapsed().as_millis() as u64,
                    queued_ms = started.duration_since(queued).as_millis() as u64, "pool populated");
                match outcome {
                    Ok(o) => {
                        if !o.delete.is_empty() {
                            info!(pool = %req.key, ports = o.delete.len(), "pool deleted meanwhile: deleting new ports");
                            let me = self.clone();
                            tokio::spawn(async move {
                                let _ = me.delete_many(&o.delete).await;
                            });
                        }
                        Ok(o.added.len() as u32)
                    }
                    Err(e) => {
                        warn!(pool = %req.key, error = %e, "population ticket unknown");
                        Ok(0)
                    }
                }
            }
            Err(source) => {
                if source.answer_may_be_lost() {
                    // The answer was lost, not necessarily the ports: look for them later. (A
                    // proxy's 502 counts: the chaos suite's node-lost scenario leaked a bulk
                    // that Neutron finished after the proxy had answered 502, CI 2026-12-07.)
                    let me = self.clone();
                    let key = req.key.clone();
                    tokio::spawn(async move { me.adopt_lost_ports(&key).await });
                }
                let pool = req.key.to_string();
                return self.population_failed(req, Error::CreatePort { pool, source });
            }
        };
        self.changed.send_modify(|v| *v += 1);
        // Another pool may be waiting for a free bulk slot.
        self.tick_now();
        out
    }

    /// A population failed with `err`: the state backs the pool off, waiting pods hear why.
    fn population_failed(self: &Arc<Self>, req: PopulateRequest, err: Error) -> Result<u32, Error> {
        let chain = crate::error_chain(&err);
        warn!(pool = %req.key, count = req.count, error = %chain, "pool population failed");
        // The cause first: a pod that sees the back-off tells it (never "unknown").
        lock(&self.last_error).insert(req.key.clone(), chain);
        if let Err(e) = self.state().fail_population(req.ticket, Instant::now()) {
            warn!(error = %e, "population ticket unknown");
        }
        self.metrics
            .populations
            .get_or_create(&OutcomeLabels {
                outcome: "failed".into(),
            })
            .inc();
        self.changed.send_modify(|v| *v += 1);
        self.tick_now();
        Err(err)
    }

    /// After a bulk creation timed out: waits for Neutron to finish it, then settles this
    /// cluster's ports of the pool that the state does not know, as the janitor would but
    /// without waiting for its minimum age: bound ones back in the pool, the others — ports
    /// whose binding never completed (Neutron stopped in the middle of the bulk), or any port
    /// of a pool closed meanwhile (its node gone, its network deleted) — deleted at once.
    ///
    /// Found by the chaos suite: a bulk cut by `cloud-api-down` left ports unbound; they
    /// were neither adopted nor deleted, nor freed when their node was deleted two minutes
    /// later (the state never knew them), and stayed until the janitor, which skips its pass
    /// while any population is in flight (often, under churn).
    ///
    /// While another population of the same pool is in flight its ports, listed but not yet
    /// known, cannot be told from lost ones: the look is retried after it.
    async fn adopt_lost_ports(self: &Arc<Self>, key: &kuryr_core::pool::PoolKey) {
        tokio::time::sleep(ADOPT_DELAY).await;
        if self.settings.tags.is_empty() {
            // Without tags another system's ports cannot be told apart: leave them.
            return;
        }
        for _ in 0..ADOPT_TRIES {
            match self.settle_lost_ports(key).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    warn!(pool = %key, error = %crate::error_chain(&e), "looking for ports of a timed-out bulk creation failed (the janitor settles them)");
                    return;
                }
            }
            tokio::time::sleep(ADOPT_RETRY).await;
        }
        info!(pool = %key, "a population of the pool is still in flight: the janitor settles the ports of the timed-out one");
    }

    /// One look of [`VifPool::adopt_lost_ports`]: `false` when a population of the pool was
    /// in flight (nothing done).
    async fn settle_lost_ports(self: &Arc<Self>, key: &kuryr_core::pool::PoolKey) -> Result<bool, Error> {
        if self.state().pool_stats(key).populating > 0 {
            return Ok(false);
        }
        let ports: Vec<kuryr_openstack::Port> = self
            .fresh_cluster_ports("ports of a timed-out bulk creation")
            .await?
            .into_iter()
            .filter(|p| {
                kuryr_core::pool::PoolKey::new(&p.binding_host_id, p.project(), &p.network_id) == *key
            })
            .collect();
        let (delete, adopted) = {
            let mut st = self.state();
            if st.pool_stats(key).populating > 0 {
                return Ok(false);
            }
            // A port the state knows (handed out, pooled, being deleted) is not lost.
            let lost: Vec<&kuryr_openstack::Port> =
                ports.iter().filter(|p| st.port(&p.id).is_none()).collect();
            st.adopt_orphans(&lost, Instant::now(), jiff::Timestamp::now())
        };
        self.take_in_adopted(&ports, &adopted, "a timed-out bulk creation");
        if !delete.is_empty() {
            info!(pool = %key, ports = ?delete, "ports of a timed-out bulk creation that are unbound or of a closed pool: deleting them");
            if let Err(e) = self.delete_many(&delete).await {
                warn!(pool = %key, error = %crate::error_chain(&e), "deleting them failed (the janitor retries)");
            }
        }
        Ok(true)
    }

    /// One pass of [`kuryr_core::pool::PoolState::tick`], executed.
    pub fn tick_now(self: &Arc<Self>) {
        let out = self.state().tick(Instant::now());
        for req in out.populate {
            self.spawn_population(req);
        }
        if !out.delete.is_empty() {
            let me = self.clone();
            tokio::spawn(async move {
                let _ = me.delete_many(&out.delete).await;
            });
        }
        if !out.ready.is_empty() {
            debug!(
                ports = out.ready.len(),
                "ports back in their pools after the cool-down"
            );
            self.changed.send_modify(|v| *v += 1);
        }
        self.publish_stats();
    }

    /// Ticks every `ports_pool_update_frequency`, when a cool-down ends, and when woken. Never
    /// returns.
    pub async fn run_maintenance(self: Arc<Self>) {
        let period = self.settings.pool.update_frequency.max(Duration::from_secs(1));
        loop {
            let next = self.state().next_cooldown_end();
            let wake = next.map_or(Instant::now() + period, |t| t.min(Instant::now() + period));
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()) => {}
                _ = self.maintenance.notified() => {}
            }
            self.tick_now();
        }
    }

    /// Deletes ports, [`DELETE_CONCURRENCY`] at a time; returns how many were deleted, or the
    /// first error after trying all.
    pub(super) async fn delete_many(&self, ids: &[String]) -> Result<usize, Error> {
        // Off their trunks in one call per trunk (nested); what fails is retried per port.
        if let Err(e) = self.attach.detach(ids).await {
            warn!(error = %crate::error_chain(&e), "taking ports off their trunks failed");
        }
        let results: Vec<Result<(), Error>> = futures::stream::iter(ids.to_vec())
            .map(|id| async move { self.delete_port(&id).await })
            .buffer_unordered(DELETE_CONCURRENCY)
            .collect()
            .await;
        let mut deleted = 0;
        let mut first = None;
        for r in results {
            match r {
                Ok(()) => deleted += 1,
                Err(e) => {
                    warn!(error = %crate::error_chain(&e), "port deletion failed");
                    first.get_or_insert(e);
                }
            }
        }
        self.publish_stats();
        match first {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }

    /// Sets `kuryr_pool_ports` and `kuryr_pool_waiting_pods` from the state.
    pub fn publish_stats(&self) {
        let stats = self.state().stats();
        let mut published = lock(&self.published);
        let current: HashSet<_> = stats.keys().cloned().collect();
        let gone: Vec<_> = published.difference(&current).cloned().collect();
        let zero = kuryr_core::pool::PoolStats::default();
        for (key, s) in stats.iter().chain(gone.iter().map(|k| (k, &zero))) {
            for (state, v) in [
                ("available", s.available),
                ("in_use", s.in_use),
                ("cooling", s.cooling),
                ("creating", s.populating),
            ] {
                self.metrics
                    .pool_ports
                    .get_or_create(&PoolPortLabels {
                        host: key.host.clone(),
                        project: key.project_id.clone(),
                        network: key.network_id.clone(),
                        state: state.into(),
                    })
                    .set(i64::from(v));
            }
            self.metrics
                .pool_waiting
                .get_or_create(&PoolLabels {
                    host: key.host.clone(),
                    project: key.project_id.clone(),
                    network: key.network_id.clone(),
                })
                .set(i64::from(s.waiting));
        }
        *published = current;
    }
}
