//! Helpers shared by the namespace, KuryrNetwork and population handlers: per-object
//! exponential retry delays, Event recording, and waiting for a watch to sync.

use std::{collections::HashMap, sync::Mutex, time::Duration};

use kube::{
    Resource,
    runtime::events::{Event, EventType},
};
use tracing::{debug, warn};

use crate::Context;

/// Per-object retry delays: `base · 2^(failures-1)`, capped at `max`; reset on success.
#[derive(Debug)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
    base: Duration,
    max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_secs(1), Duration::from_secs(60))
    }
}

impl Backoff {
    /// Delays from `base` doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Mutex::new(HashMap::new()),
            base,
            max,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        // A panic while holding this lock cannot leave the map inconsistent.
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a failure of `key`; returns when to retry.
    pub fn failed(&self, key: &str) -> Duration {
        let mut m = self.map();
        let n = m.entry(key.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        let exp = (*n - 1).min(16);
        self.base.saturating_mul(1 << exp).min(self.max)
    }

    /// Forgets the failures of `key`.
    pub fn succeeded(&self, key: &str) {
        self.map().remove(key);
    }
}

/// Records an Event on `obj` (when `[kubernetes] use_events`); failures are only logged.
pub async fn record<K>(ctx: &Context, obj: &K, warning: bool, reason: &str, note: String)
where
    K: Resource<DynamicType = ()>,
{
    if !ctx.config.kubernetes.use_events {
        return;
    }
    let event = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &obj.object_ref(&())).await {
        debug!(error = %e, reason, "recording event failed");
    }
}

pub(crate) use crate::handlers::wait_ready;

/// Logs an error of a kube-runtime controller loop. A reconcile scheduled for an object that
/// has just been deleted is routine (debug); reconciler failures were logged with their cause
/// already (debug); anything else is a warning.
pub fn log_controller_error<E, Q>(handler: &'static str, e: &kube::runtime::controller::Error<E, Q>)
where
    E: std::error::Error + 'static,
    Q: std::error::Error + 'static,
{
    use kube::runtime::controller::Error as C;
    match e {
        C::ObjectNotFound(_) | C::ReconcilerFailed(..) => debug!(handler, error = %e, "controller"),
        _ => warn!(handler, error = %e, "controller error"),
    }
}

/// HTTP status of a Kubernetes API error.
pub fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_resets() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let d: Vec<u64> = (0..5).map(|_| b.failed("a").as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 5, 5]);
        assert_eq!(b.failed("b").as_secs(), 1);
        b.succeeded("a");
        assert_eq!(b.failed("a").as_secs(), 1);
    }
}
