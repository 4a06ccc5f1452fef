//! Batching of "is the port ACTIVE yet" checks: instead of one `GET /v2.0/ports/{id}` per pod
//! per poll (upstream `activate_vif`), pending ports are checked together with one filtered
//! list per batch (`GET /v2.0/ports?id=a&id=b&fields=id&fields=status`), polled at an
//! interval that backs off while nothing changes and snaps back when a port is added or
//! becomes active. Ports pending longer than the timeout are reported once (upstream emits
//! `ActivatePortFailed` after 90 s) and stay pending.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use crate::neutron::{Port, STATUS_ACTIVE};

/// Status Neutron gives a port it failed to wire.
const STATUS_ERROR: &str = "ERROR";

/// One batched check: list the ports with these IDs (the executor sends
/// `GET /v2.0/ports?id=a&id=b&fields=id&fields=status`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationQuery {
    /// Port IDs.
    pub ids: Vec<String>,
}

/// Tuning of the tracker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivationConfig {
    /// Port IDs per list request (URL length: ~37 bytes per ID; default 100).
    pub batch: usize,
    /// First poll delay after a port is added, and the interval after progress (default 0.5 s).
    pub min_interval: Duration,
    /// Longest interval while nothing changes (default 5 s).
    pub max_interval: Duration,
    /// Pending longer than this is reported as timed out (upstream `ACTIVE_TIMEOUT`, 90 s).
    pub timeout: Duration,
}

impl Default for ActivationConfig {
    fn default() -> Self {
        ActivationConfig {
            batch: 100,
            min_interval: Duration::from_millis(500),
            max_interval: Duration::from_secs(5),
            timeout: Duration::from_secs(90),
        }
    }
}

#[derive(Debug, Clone)]
struct Pending {
    since: Instant,
    timeout_reported: bool,
}

/// What one list response told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActivationReport {
    /// Ports that became ACTIVE (no longer tracked).
    pub active: Vec<String>,
    /// Ports in status ERROR (still tracked).
    pub failed: Vec<String>,
    /// Ports queried but not listed: deleted (no longer tracked).
    pub missing: Vec<String>,
    /// Ports pending longer than the timeout, reported once (still tracked).
    pub timed_out: Vec<String>,
}

/// The set of ports waiting to become ACTIVE, and when to look next.
#[derive(Debug, Clone)]
pub struct ActivationTracker {
    cfg: ActivationConfig,
    pending: BTreeMap<String, Pending>,
    interval: Duration,
    next_poll: Option<Instant>,
    /// A port was added since the last [`ActivationTracker::next_queries`]: its early poll is kept.
    added_since_poll: bool,
}

impl ActivationTracker {
    /// An empty tracker.
    pub fn new(cfg: ActivationConfig) -> Self {
        let interval = cfg.min_interval;
        ActivationTracker {
            cfg,
            pending: BTreeMap::new(),
            interval,
            next_poll: None,
            added_since_poll: false,
        }
    }

    /// Starts tracking a port (idempotent: the first-seen time is kept). A new port brings the
    /// next poll forward to `now + min_interval`, which also coalesces ports added together.
    pub fn add(&mut self, port_id: &str, now: Instant) -> bool {
        if self.pending.contains_key(port_id) {
            return false;
        }
        self.pending.insert(
            port_id.to_string(),
            Pending {
                since: now,
                timeout_reported: false,
            },
        );
        self.interval = self.cfg.min_interval;
        self.added_since_poll = true;
        let soon = now + self.cfg.min_interval;
        self.next_poll = Some(self.next_poll.map_or(soon, |t| t.min(soon)));
        true
    }

    /// Stops tracking a port (its pod went away, or it was seen ACTIVE elsewhere).
    pub fn remove(&mut self, port_id: &str) -> bool {
        let had = self.pending.remove(port_id).is_some();
        if self.pending.is_empty() {
            self.next_poll = None;
        }
        had
    }

    /// Ports tracked.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Nothing tracked.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// When the executor should call [`ActivationTracker::next_queries`] again (`None`:
    /// nothing pending).
    pub fn next_poll_at(&self) -> Option<Instant> {
        self.next_poll
    }

    /// The list requests to make now, one per `batch` pending ports, oldest first; empty if
    /// nothing is due. Schedules the following poll at the current interval, so a failed
    /// request is simply retried then.
    pub fn next_queries(&mut self, now: Instant) -> Vec<ActivationQuery> {
        match self.next_poll {
            Some(t) if t <= now => {}
            _ => return Vec::new(),
        }
        let mut ids: Vec<(&Instant, &String)> = self.pending.iter().map(|(id, p)| (&p.since, id)).collect();
        ids.sort();
        let queries = ids
            .chunks(self.cfg.batch.max(1))
            .map(|c| ActivationQuery {
                ids: c.iter().map(|(_, id)| (*id).clone()).collect(),
            })
            .collect();
        self.next_poll = Some(now + self.interval);
        self.added_since_poll = false;
        queries
    }

    /// The response to `query` (ports with at least `id` and `status`). Progress resets the
    /// interval; no progress doubles it up to `max_interval`.
    pub fn observe(&mut self, query: &ActivationQuery, ports: &[Port], now: Instant) -> ActivationReport {
        let mut report = ActivationReport::default();
        for id in &query.ids {
            if !self.pending.contains_key(id) {
                continue;
            }
            match ports.iter().find(|p| &p.id == id) {
                None => {
                    self.pending.remove(id);
                    report.missing.push(id.clone());
                }
                Some(p) if p.status == STATUS_ACTIVE => {
                    self.pending.remove(id);
                    report.active.push(id.clone());
                }
                Some(p) => {
                    if p.status == STATUS_ERROR {
                        report.failed.push(id.clone());
                    }
                    if let Some(pending) = self.pending.get_mut(id)
                        && !pending.timeout_reported
                        && now.duration_since(pending.since) >= self.cfg.timeout
                    {
                        pending.timeout_reported = true;
                        report.timed_out.push(id.clone());
                    }
                }
            }
        }
        if report.active.is_empty() && report.missing.is_empty() {
            self.interval = (self.interval * 2).min(self.cfg.max_interval);
        } else {
            self.interval = self.cfg.min_interval;
        }
        if self.pending.is_empty() {
            self.next_poll = None;
        } else {
            let next = now + self.interval;
            self.next_poll = Some(match self.next_poll {
                Some(t) if self.added_since_poll => t.min(next),
                _ => next,
            });
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(id: &str, status: &str) -> Port {
        Port {
            id: id.into(),
            status: status.into(),
            ..Port::default()
        }
    }

    #[test]
    fn batches_many_pending_ports_into_few_queries() {
        let t0 = Instant::now();
        let mut tr = ActivationTracker::new(ActivationConfig {
            batch: 100,
            ..ActivationConfig::default()
        });
        for i in 0..250 {
            assert!(tr.add(&format!("p{i:03}"), t0));
        }
        assert!(!tr.add("p000", t0));
        assert!(tr.next_queries(t0).is_empty(), "not due before min_interval");
        let at = tr.next_poll_at().unwrap();
        assert_eq!(at, t0 + Duration::from_millis(500));
        let qs = tr.next_queries(at);
        assert_eq!(
            qs.iter().map(|q| q.ids.len()).collect::<Vec<_>>(),
            vec![100, 100, 50]
        );
        assert_eq!(qs[0].ids[..2], ["p000".to_string(), "p001".into()]);
        assert!(tr.next_queries(at).is_empty(), "rescheduled");
    }

    #[test]
    fn observe_reports_active_missing_failed_and_timeouts_once() {
        let t0 = Instant::now();
        let mut tr = ActivationTracker::new(ActivationConfig::default());
        for id in ["a", "b", "c", "d"] {
            tr.add(id, t0);
        }
        let t1 = t0 + Duration::from_secs(91);
        let q = tr.next_queries(t1).pop().unwrap();
        let rep = tr.observe(&q, &[st("a", "ACTIVE"), st("b", "DOWN"), st("d", "ERROR")], t1);
        assert_eq!(rep.active, vec!["a"]);
        assert_eq!(rep.missing, vec!["c"]);
        assert_eq!(rep.failed, vec!["d"]);
        assert_eq!(rep.timed_out, vec!["b", "d"]);
        assert_eq!(tr.len(), 2);
        let q = ActivationQuery {
            ids: vec!["b".into(), "d".into()],
        };
        let rep = tr.observe(&q, &[st("b", "DOWN"), st("d", "DOWN")], t1);
        assert!(rep.timed_out.is_empty(), "reported once");
        let rep = tr.observe(&q, &[st("b", "ACTIVE"), st("d", "ACTIVE")], t1);
        assert_eq!(rep.active, vec!["b", "d"]);
        assert!(tr.is_empty() && tr.next_poll_at().is_none());
    }

    #[test]
    fn interval_backs_off_without_progress_and_resets_on_progress() {
        let t0 = Instant::now();
        let cfg = ActivationConfig {
            min_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(4),
            ..ActivationConfig::default()
        };
        let mut tr = ActivationTracker::new(cfg);
        tr.add("a", t0);
        tr.add("b", t0);
        let mut now = t0;
        let mut gaps = Vec::new();
        for _ in 0..4 {
            now = tr.next_poll_at().unwrap();
            let q = tr.next_queries(now).pop().unwrap();
            tr.observe(&q, &[st("a", "DOWN"), st("b", "DOWN")], now);
            gaps.push(tr.next_poll_at().unwrap() - now);
        }
        assert_eq!(gaps, [2, 4, 4, 4].map(Duration::from_secs));
        // A new port brings the poll forward.
        tr.add("c", now);
        assert_eq!(tr.next_poll_at(), Some(now + Duration::from_secs(1)));
        now += Duration::from_secs(1);
        let q = tr.next_queries(now).pop().unwrap();
        tr.observe(&q, &[st("a", "ACTIVE"), st("b", "DOWN"), st("c", "DOWN")], now);
        assert_eq!(
            tr.next_poll_at(),
            Some(now + Duration::from_secs(1)),
            "progress resets"
        );
        assert!(tr.remove("b") && tr.remove("c"));
        assert_eq!(tr.next_poll_at(), None);
    }
}
