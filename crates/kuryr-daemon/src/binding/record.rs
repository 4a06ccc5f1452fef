//! A [`Bindings`] that wires nothing and records what it would have done: the binding of
//! hollow nodes (scale tests run the daemon's real watches, registry and verbs for hundreds of
//! nodes in one process, without namespaces, netlink or Open vSwitch) and of the CNI verbs'
//! unit tests. Every VIF class is accepted; counters and the last calls are kept (bounded), an
//! optional delay stands for the wiring's own time, and tests inject a failed wiring, CHECK
//! problems or a datapath that is not ready.

use std::{
    collections::VecDeque,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use kuryr_types::VifKind;

use super::{Binder, BindingError, Bindings, BoxFuture, CheckReport, WireSpec};
use crate::activation::OvnInstalledWatch;

/// How many recent calls are kept.
pub const KEPT: usize = 64;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// `connect`, `disconnect` or `check`.
    pub op: &'static str,
    /// The Neutron port.
    pub port_id: String,
    /// The host-side device it would have made or removed.
    pub host_dev: String,
    /// The interface in the pod.
    pub ifname: String,
}

/// Counters of what a [`RecordingBindings`] was asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Wirings.
    pub connects: u64,
    /// Unwirings.
    pub disconnects: u64,
    /// Checks.
    pub checks: u64,
}

/// Told the port ID of every wiring: what the datapath tells the cloud when it claims a port
/// (OVN's chassis binding sets a Neutron port ACTIVE); a model cloud activates it.
pub type OnPlug = Arc<dyn Fn(&str) + Send + Sync>;

/// The recording binding.
#[derive(Default)]
pub struct RecordingBindings {
    connects: AtomicU64,
    disconnects: AtomicU64,
    checks: AtomicU64,
    recent: Mutex<VecDeque<Recorded>>,
    delay: Duration,
    on_plug: Option<OnPlug>,
    fail_connect: Mutex<Option<String>>,
    problems: Mutex<Vec<String>>,
    not_ready: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RecordingBindings {
    /// A binding whose every operation takes `delay` (zero: at once); `on_plug` is told each
    /// port wired.
    pub fn new(delay: Duration, on_plug: Option<OnPlug>) -> Arc<Self> {
        Arc::new(Self {
            delay,
            on_plug,
            ..Self::default()
        })
    }

    /// What it was asked so far.
    pub fn counts(&self) -> Counts {
        Counts {
            connects: self.connects.load(Ordering::Relaxed),
            disconnects: self.disconnects.load(Ordering::Relaxed),
            checks: self.checks.load(Ordering::Relaxed),
        }
    }

    /// The last calls (at most [`KEPT`]), oldest first.
    pub fn recent(&self) -> Vec<Recorded> {
        lock(&self.recent).iter().cloned().collect()
    }

    /// The next wirings fail with `why`.
    pub fn fail_connect(&self, why: &str) {
        *lock(&self.fail_connect) = Some(why.to_owned());
    }

    /// CHECK reports these problems.
    pub fn set_problems(&self, p: &[&str]) {
        *lock(&self.problems) = p.iter().map(|s| s.to_string()).collect();
    }

    /// STATUS reports the datapath not ready for `why` (`None`: ready).
    pub fn set_not_ready(&self, why: Option<&str>) {
        *lock(&self.not_ready) = why.map(str::to_owned);
    }

    async fn record(&self, op: &'static str, counter: &AtomicU64, spec: &WireSpec) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        counter.fetch_add(1, Ordering::Relaxed);
        let mut r = lock(&self.recent);
        if r.len() == KEPT {
            r.pop_front();
        }
        r.push_back(Recorded {
            op,
            port_id: spec.port_id.clone(),
            host_dev: spec.host_dev.clone(),
            ifname: spec.ifname.clone(),
        });
    }
}

impl Binder for RecordingBindings {
    fn connect<'a>(
        &'a self,
        spec: &'a WireSpec,
        _netns: &'a Path,
    ) -> BoxFuture<'a, Result<(), BindingError>> {
        Box::pin(async move {
            self.record("connect", &self.connects, spec).await;
            if let Some(why) = lock(&self.fail_connect).clone() {
                return Err(BindingError::Injected(why));
            }
            if let Some(f) = &self.on_plug {
                f(&spec.port_id);
            }
            Ok(())
        })
    }

    fn disconnect<'a>(
        &'a self,
        spec: &'a WireSpec,
        _netns: &'a Path,
    ) -> BoxFuture<'a, Result<(), BindingError>> {
        Box::pin(async move {
            self.record("disconnect", &self.disconnects, spec).await;
            Ok(())
        })
    }

    fn check<'a>(
        &'a self,
        spec: &'a WireSpec,
        _netns: &'a Path,
    ) -> BoxFuture<'a, Result<CheckReport, BindingError>> {
        Box::pin(async move {
            self.record("check", &self.checks, spec).await;
            Ok(lock(&self.problems).clone())
        })
    }
}

impl Bindings for RecordingBindings {
    fn for_kind(&self, _kind: &VifKind) -> Result<&dyn Binder, BindingError> {
        Ok(self)
    }

    fn datapath_ready<'a>(&'a self, _bridge: Option<&'a str>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            match lock(&self.not_ready).clone() {
                Some(why) => Err(why),
                None => Ok(()),
            }
        })
    }

    /// No OVN here: ADD's activation wait ends on the KuryrPort's active VIF.
    fn ovn_installed(&self) -> Option<Arc<OvnInstalledWatch>> {
        None
    }
}
