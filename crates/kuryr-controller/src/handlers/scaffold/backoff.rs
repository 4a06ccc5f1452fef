//! The one error policy of every handler: per-object exponential back-off with a cap, the kind
//! of the error choosing the first delay, reset by the object's next success.

use std::{collections::HashMap, hash::Hash, sync::Mutex, time::Duration};

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

/// Per-object failure counts: the n-th consecutive failure of an object waits
/// `first_delay(kind) · 2^(n-1)`, at most [`MAX_DELAY`] (a capacity hint is never shortened).
#[derive(Debug)]
pub struct Backoff<K> {
    failures: Mutex<HashMap<K, u32>>,
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

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<K, u32>> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a failure of `key` of `kind`; returns when to retry.
    pub fn failed(&self, key: &K, kind: ErrorKind) -> Duration {
        let mut m = self.map();
        let n = m.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        let exp = (*n - 1).min(16);
        let first = kind.first_delay();
        let delay = first.saturating_mul(1 << exp).min(self.max);
        // A capacity hint (e.g. a pool's next population attempt) is never shortened by the cap.
        match kind {
            ErrorKind::Capacity(_) => delay.max(first),
            _ => delay,
        }
    }

    /// Forgets the failures of `key`.
    pub fn succeeded(&self, key: &K) {
        self.map().remove(key);
    }

    /// Consecutive failures of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.map().get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_chooses_the_first_delay_and_failures_double_it_up_to_the_cap() {
        let b = Backoff::new(Duration::from_secs(5));
        let d: Vec<u128> = (0..5)
            .map(|_| b.failed(&"a", ErrorKind::Transient).as_millis())
            .collect();
        assert_eq!(d, [1000, 2000, 4000, 5000, 5000]);
        assert_eq!(b.failed(&"b", ErrorKind::Conflict).as_millis(), 200);
        assert_eq!(b.failed(&"b", ErrorKind::Conflict).as_millis(), 400);
        assert_eq!(b.failed(&"c", ErrorKind::Invalid).as_secs(), 5, "capped");
        assert_eq!(b.failures(&"a"), 5);
        b.succeeded(&"a");
        assert_eq!(b.failures(&"a"), 0);
        assert_eq!(b.failed(&"a", ErrorKind::Transient).as_millis(), 1000);
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
