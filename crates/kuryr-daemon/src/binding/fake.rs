//! A recording [`Bindings`] for unit tests of the CNI verbs: no namespaces, netlink or OVS.
//! Every call is recorded; failures and CHECK problems can be injected.

use std::{
    path::Path,
    sync::{Arc, Mutex},
};

use kuryr_types::VifKind;

use super::{Binder, BindingError, Bindings, BoxFuture, CheckReport, WireSpec};
use crate::activation::OvnInstalledWatch;

/// One recorded call: `(operation, interface in the pod, host device)`.
pub type Call = (&'static str, String, String);

/// The fake driver set (one driver for `VIFOpenVSwitch`).
#[derive(Default)]
pub struct FakeBindings {
    calls: Mutex<Vec<Call>>,
    fail_connect: Mutex<Option<String>>,
    problems: Mutex<Vec<String>>,
    not_ready: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeBindings {
    /// A fake with nothing recorded.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The calls so far.
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.calls).clone()
    }

    /// The next connects fail with `why`.
    pub fn fail_connect(&self, why: &str) {
        *lock(&self.fail_connect) = Some(why.to_owned());
    }

    /// CHECK reports these problems.
    pub fn set_problems(&self, p: &[&str]) {
        *lock(&self.problems) = p.iter().map(|s| s.to_string()).collect();
    }

    /// STATUS reports the datapath not ready for `why`.
    pub fn set_not_ready(&self, why: Option<&str>) {
        *lock(&self.not_ready) = why.map(str::to_owned);
    }

    fn record(&self, op: &'static str, spec: &WireSpec) {
        lock(&self.calls).push((op, spec.ifname.clone(), spec.host_dev.clone()));
    }
}

impl Binder for FakeBindings {
    fn connect<'a>(
        &'a self,
        spec: &'a WireSpec,
        _netns: &'a Path,
    ) -> BoxFuture<'a, Result<(), BindingError>> {
        Box::pin(async move {
            self.record("connect", spec);
            match lock(&self.fail_connect).clone() {
                Some(why) => Err(BindingError::Injected(why)),
                None => Ok(()),
            }
        })
    }

    fn disconnect<'a>(
        &'a self,
        spec: &'a WireSpec,
        _netns: &'a Path,
    ) -> BoxFuture<'a, Result<(), BindingError>> {
        Box::pin(async move {
            self.record("disconnect", spec);
            Ok(())
        })
    }

    fn check<'a>(
        &'a self,
        spec: &'a WireSpec,
        _netns: &'a Path,
    ) -> BoxFuture<'a, Result<CheckReport, BindingError>> {
        Box::pin(async move {
            self.record("check", spec);
            Ok(lock(&self.problems).clone())
        })
    }
}

impl Bindings for FakeBindings {
    fn for_kind(&self, kind: &VifKind) -> Result<&dyn Binder, BindingError> {
        match kind {
            VifKind::OpenVSwitch => Ok(self),
            other => Err(BindingError::Unsupported(other.as_str().to_owned())),
        }
    }

    fn datapath_ready<'a>(&'a self, _bridge: Option<&'a str>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            match lock(&self.not_ready).clone() {
                Some(why) => Err(why),
                None => Ok(()),
            }
        })
    }

    fn ovn_installed(&self) -> Option<Arc<OvnInstalledWatch>> {
        None
    }
}
