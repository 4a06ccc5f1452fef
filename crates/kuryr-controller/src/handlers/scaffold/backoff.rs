//! The one error policy of every handler: per-object exponential back-off with a cap, the kind
//! of the error choosing the first delay, reset by the object's next success.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Mutex,
    time::{Duration, Instant},
};

/// What kind of failure a handler error is; it chooses the first retry delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A write lost a race (409, or 422 from a JSON-patch `test`): the object in hand was
    /// stale; retry almost at once with a fresh one.
    Conflict,
    /// A dependency is briefly unavailable (API server, Neutron 5xx, a timeout).
    Transient,
    /// Waiting for capacity that comes back by itself (quota, a pool's population back-off):
    /// the error knows when to look again.
    Capacity(Duration),
    /// The object or the configuration is wrong (Neutron refuses the request, an option names
    /// something that does not exist): retrying soon changes nothing, retrying now and then
    /// picks up a fix without a restart.
    Invalid,
    /// An invariant broke (a bug): retried rarely, logged loudly.
    Internal,
}

impl ErrorKind {
    /// The first retry delay of this kind.
    pub fn first_delay(self) -> Duration {
        match self {
            ErrorKind::Conflict => Duration::from_millis(200),
            ErrorKind::Transient => Duration::from_secs(1),
            ErrorKind::Capacity(d) => d.max(Duration::from_millis(200)),
            ErrorKind::Invalid => Duration::from_secs(10),
            ErrorKind::Internal => Duration::from_secs(300),
        }
    }
}

/// The longest delay between two attempts on one object.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// The longest delay after a transient failure: a dependency that was down for long is tried
/// again at least this often, so that convergence after it returns takes seconds, not minutes.
pub const MAX_TRANSIENT_DELAY: Duration = Duration::from_secs(30);

/// One object's failures.
#[derive(Debug, Clone, Copy)]
struct Failures {
    /// Consecutive failed retries.
    n: u32,
    /// When the scheduled retry is due.
    due: Instant,
}

/// Per-object failure counts: the n-th consecutive failure of an object waits
/// `first_delay(kind) · 2^(n-1)`, at most [`MAX_DELAY`] ([`MAX_TRANSIENT_DELAY`] for transient
/// failures; a capacity hint is never shortened). Only a failure of the scheduled retry (or a
/// later one) counts: attempts that changes of the object trigger before it is due and that
/// fail too keep the scheduled retry instead of pushing it further out. Without that, the
/// events of an outage (every failure writes an Event, every change of a related object
/// triggers an attempt) drove the delay to its cap within seconds, and objects waited minutes
/// after the dependency came back (found by the chaos suite: a Service deleted while Octavia
/// was down kept its load balancer for over four minutes after Octavia returned).
#[derive(Debug)]
pub struct Backoff<K> {
    failures: Mutex<HashMap<K, Failures>>,
    max: Duration,
}

impl<K: Eq + Hash + Clone> Default for Backoff<K> {
    fn default() -> Self {
        Self::new(MAX_DELAY)
    }
}

impl<K: Eq + Hash + Clone> Backoff<K> {
    /// Delays capped at `max`.
    pub fn new(max: Duration) -> Self {
        Backoff {
            failures: Mutex::new(HashMap::new()),
            max,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<K, Failures>> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a failure of `key` of `kind`; returns when to retry.
    pub fn failed(&self, key: &K, kind: ErrorKind) -> Duration {
        self.failed_at(key, kind, Instant::now())
    }

    /// [`Backoff::failed`] at `now`.
    pub fn failed_at(&self, key: &K, kind: ErrorKind, now: Instant) -> Duration {
        let mut m = self.map();
        if let Some(f) = m.get(key)
            && now < f.due
            && !matches!(kind, ErrorKind::Conflict)
        {
            // An early attempt failed: the scheduled retry stands.
            return f.due - now;
        }
        let f = m.entry(key.clone()).or_insert(Failures { n: 0, due: now });
        f.n = f.n.saturating_add(1);
        let exp = (f.n - 1).min(16);
        let first = kind.first_delay();
        let cap = match kind {
            ErrorKind::Transient => self.max.min(MAX_TRANSIENT_DELAY),
            _ => self.max,
        };
        let delay = first.saturating_mul(1 << exp).min(cap);
        // A capacity hint (e.g. a pool's next population attempt) is never shortened by the cap.
        let delay = match kind {
            ErrorKind::Capacity(_) => delay.max(first),
            _ => delay,
        };
        f.due = now + delay;
        delay
    }

    /// Forgets the failures of `key`.
    pub fn succeeded(&self, key: &K) {
        self.map().remove(key);
    }

    /// Consecutive failures of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.map().get(key).map_or(0, |f| f.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Failures at their scheduled retries, one after the other.
    fn in_turn(b: &Backoff<&'static str>, key: &'static str, kind: ErrorKind, n: usize) -> Vec<u128> {
        let mut t = Instant::now();
        (0..n)
            .map(|_| {
                let d = b.failed_at(&key, kind, t);
                t += d;
                d.as_millis()
            })
            .collect()
    }

    #[test]
    fn the_kind_chooses_the_first_delay_and_failures_double_it_up_to_the_cap() {
        let b = Backoff::new(Duration::from_secs(5));
        assert_eq!(
            in_turn(&b, "a", ErrorKind::Transient, 5),
            [1000, 2000, 4000, 5000, 5000]
        );
        assert_eq!(in_turn(&b, "b", ErrorKind::Conflict, 2), [200, 400]);
        assert_eq!(b.failed(&"c", ErrorKind::Invalid).as_secs(), 5, "capped");
        assert_eq!(b.failures(&"a"), 5);
        b.succeeded(&"a");
        assert_eq!(b.failures(&"a"), 0);
        assert_eq!(b.failed(&"a", ErrorKind::Transient).as_millis(), 1000);
    }

    #[test]
    fn transient_failures_are_retried_at_least_every_30_s() {
        let b = Backoff::<&str>::default();
        let d = in_turn(&b, "a", ErrorKind::Transient, 8);
        assert_eq!(d, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
        let d = in_turn(&b, "i", ErrorKind::Invalid, 7);
        assert_eq!(d, [10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000]);
    }

    #[test]
    fn early_attempts_that_fail_keep_the_scheduled_retry() {
        let b = Backoff::<&str>::default();
        let t0 = Instant::now();
        assert_eq!(b.failed_at(&"a", ErrorKind::Transient, t0).as_millis(), 1000);
        // Ten events within the second, each attempt failing: the retry stays at t0 + 1 s.
        for i in 1..=10 {
            let t = t0 + Duration::from_millis(90 * i);
            assert_eq!(
                b.failed_at(&"a", ErrorKind::Transient, t),
                t0 + Duration::from_secs(1) - t
            );
        }
        assert_eq!(b.failures(&"a"), 1);
        // The scheduled retry fails: now it doubles.
        assert_eq!(
            b.failed_at(&"a", ErrorKind::Transient, t0 + Duration::from_secs(1))
                .as_millis(),
            2000
        );
        // A lost write race is retried at once, whatever is scheduled.
        assert_eq!(
            b.failed_at(&"a", ErrorKind::Conflict, t0 + Duration::from_millis(1100))
                .as_millis(),
            800
        );
    }

    #[test]
    fn a_capacity_hint_is_kept_even_above_the_cap() {
        let b = Backoff::new(Duration::from_secs(5));
        assert_eq!(
            b.failed(&"p", ErrorKind::Capacity(Duration::from_secs(12)))
                .as_secs(),
            12
        );
        assert_eq!(
            b.failed(&"q", ErrorKind::Capacity(Duration::from_millis(1)))
                .as_millis(),
            200
        );
    }
}
