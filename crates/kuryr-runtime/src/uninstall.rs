//! Telling an uninstall from a restart when SIGTERM comes: the workload that runs this process
//! (the controller's Deployment, the daemon's DaemonSet) is looked up once more. Gone or being
//! deleted: kuryr-rs is being removed, and the process releases what it holds for itself (the
//! controller its pools' ports, the daemon the CNI files its init container installed). Still
//! there: a restart, a rolling upgrade, a drain — everything is kept for the next pod.
//!
//! `kubectl delete -f` and `helm uninstall` remove the ServiceAccount and its rights in the same
//! breath, so the lookup at SIGTERM often fails with 401 or 403. That is not taken as an
//! uninstall (an authentication outage or an RBAC edit also answers so): a watch of the
//! workload running since start-up ([`watch`]) keeps streaming after the token or rights are
//! gone and tells whether the workload's deletion was seen; without that, nothing is released.
//!
//! A wrong "uninstalling" costs little on purpose: the pools refill and the next daemon pod's
//! init container writes the CNI files again. A wrong "staying" leaves what `kuryrctl ports
//! --orphans` lists and the janitors remove.

use std::{
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;

/// The kinds of workload kuryr-rs runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment (the controller).
    Deployment,
    /// `apps/v1` DaemonSet (the daemon).
    DaemonSet,
}

/// The workload object that runs this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// Its kind.
    pub kind: WorkloadKind,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// A `--workload` argument that is not `deployment/NAME` or `daemonset/NAME`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("bad workload {0:?}: expected deployment/NAME or daemonset/NAME")]
pub struct WorkloadError(pub String);

impl Workload {
    /// Parses `deployment/NAME` or `daemonset/NAME` (kubectl's spelling, `deploy`/`ds` too).
    pub fn parse(spec: &str, namespace: &str) -> Result<Self, WorkloadError> {
        let bad = || WorkloadError(spec.to_owned());
        let (kind, name) = spec.split_once('/').ok_or_else(bad)?;
        let kind = match kind.to_ascii_lowercase().as_str() {
            "deployment" | "deployments" | "deploy" => WorkloadKind::Deployment,
            "daemonset" | "daemonsets" | "ds" => WorkloadKind::DaemonSet,
            _ => return Err(bad()),
        };
        let valid = |s: &str| {
            !s.is_empty()
                && s.len() <= 253
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        };
        if !valid(name) || !valid(namespace) {
            return Err(bad());
        }
        Ok(Self {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }

    fn api_resource(&self) -> ApiResource {
        let kind = match self.kind {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::DaemonSet => "DaemonSet",
        };
        ApiResource::from_gvk(&GroupVersionKind::gvk("apps", "v1", kind))
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            WorkloadKind::Deployment => "deployment",
            WorkloadKind::DaemonSet => "daemonset",
        };
        write!(f, "{kind}/{} in {}", self.name, self.namespace)
    }
}

/// What the last look at the workload says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// kuryr-rs is being removed; the reason, for the log.
    Uninstalling(&'static str),
    /// The workload stays: a restart or an upgrade.
    Staying,
    /// The API could not tell (unreachable, timed out, other errors): keep everything.
    Unknown(String),
}

/// The outcome of the lookup: the object (`Some(deleting)`) or its absence, or the error.
pub type Lookup = Result<Option<bool>, kube::Error>;

/// What the watch of the workload has seen last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Nothing yet (the watch has not listed, or cannot).
    Nothing,
    /// The workload, not being deleted.
    Present,
    /// The workload with a deletion timestamp.
    Deleting,
    /// Its deletion.
    Gone,
}

/// The watch's last word, shared with the task that keeps it up to date.
#[derive(Debug, Clone)]
pub struct SeenCell(Arc<AtomicU8>);

impl Default for SeenCell {
    fn default() -> Self {
        SeenCell(Arc::new(AtomicU8::new(0)))
    }
}

impl SeenCell {
    /// The last state seen.
    pub fn get(&self) -> Seen {
        match self.0.load(Ordering::SeqCst) {
            1 => Seen::Present,
            2 => Seen::Deleting,
            3 => Seen::Gone,
            _ => Seen::Nothing,
        }
    }

    /// Records `s`.
    pub fn set(&self, s: Seen) {
        let v = match s {
            Seen::Nothing => 0,
            Seen::Present => 1,
            Seen::Deleting => 2,
            Seen::Gone => 3,
        };
        self.0.store(v, Ordering::SeqCst);
    }
}

/// Watches `workload` (one object, by a `metadata.name` field selector) for as long as the
/// process runs, recording what it sees in the returned cell. Needs `list` and `watch` on it.
pub fn watch(client: &Client, workload: &Workload) -> (SeenCell, tokio::task::JoinHandle<()>) {
    let cell = SeenCell::default();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &workload.namespace, &workload.api_resource());
    let cfg = watcher::Config::default().fields(&format!("metadata.name={}", workload.name));
    let (me, name) = (cell.clone(), workload.name.clone());
    let task = tokio::spawn(async move {
        let mut stream = watcher::watcher(api, cfg).boxed();
        // In a (re)list: whether the workload showed up in it.
        let mut listed = false;
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Init) => listed = false,
                Ok(watcher::Event::InitApply(o) | watcher::Event::Apply(o))
                    if o.metadata.name.as_deref() == Some(&name) =>
                {
                    listed = true;
                    me.set(if o.metadata.deletion_timestamp.is_some() {
                        Seen::Deleting
                    } else {
                        Seen::Present
                    });
                }
                Ok(watcher::Event::InitDone) if !listed => me.set(Seen::Gone),
                Ok(watcher::Event::Delete(o)) if o.metadata.name.as_deref() == Some(&name) => {
                    me.set(Seen::Gone)
                }
                Ok(_) => {}
                // The watcher retries by itself (with back-off); what was seen stays.
                Err(e) => tracing::debug!(error = %e, "watching our workload"),
            }
        }
    });
    (cell, task)
}

/// Decides from one lookup and what the watch saw (pure). A failed lookup (401 and 403
/// included) is an uninstall only when the watch saw the workload's deletion.
pub fn verdict(lookup: Lookup, seen: Seen) -> Verdict {
    match lookup {
        Ok(None) => Verdict::Uninstalling("the workload is gone"),
        Ok(Some(true)) => Verdict::Uninstalling("the workload is being deleted"),
        Ok(Some(false)) => Verdict::Staying,
        Err(_) if seen == Seen::Gone => {
            Verdict::Uninstalling("the workload's deletion was watched (the lookup failed)")
        }
        Err(_) if seen == Seen::Deleting => {
            Verdict::Uninstalling("the workload was watched being deleted (the lookup failed)")
        }
        Err(e) => Verdict::Unknown(crate::error_chain(&e)),
    }
}

/// Looks the workload up (within `timeout`) and decides with what `seen` (the [`watch`]) saw;
/// when the lookup fails, the watch is given until `timeout` to deliver the deletion that
/// SIGTERM may have been sent for.
pub async fn check(
    client: &Client,
    workload: &Workload,
    timeout: Duration,
    seen: Option<&SeenCell>,
) -> Verdict {
    let started = std::time::Instant::now();
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &workload.namespace, &workload.api_resource());
    let lookup = match tokio::time::timeout(timeout, api.get_opt(&workload.name)).await {
        Ok(r) => r.map(|o| o.map(|o| o.metadata.deletion_timestamp.is_some())),
        Err(_) => Err(kube::Error::Service(
            format!("no answer within {timeout:?}").into(),
        )),
    };
    let mut last = seen.map_or(Seen::Nothing, SeenCell::get);
    if lookup.is_err() {
        while !matches!(last, Seen::Gone | Seen::Deleting) && started.elapsed() < timeout {
            tokio::time::sleep(Duration::from_millis(50)).await;
            last = seen.map_or(Seen::Nothing, SeenCell::get);
        }
    }
    let v = verdict(lookup, last);
    tracing::info!(workload = %workload, verdict = ?v, watched = ?last, "uninstall check at shutdown");
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    }

    #[test]
    fn parses_kubectl_spellings() {
        let w = Workload::parse("daemonset/kuryr-daemon", "kube-system").unwrap();
        assert_eq!(w.kind, WorkloadKind::DaemonSet);
        assert_eq!(w.to_string(), "daemonset/kuryr-daemon in kube-system");
        assert_eq!(
            Workload::parse("deploy/kuryr-controller", "ns").unwrap().kind,
            WorkloadKind::Deployment
        );
        for bad in ["kuryr-daemon", "pod/x", "daemonset/", "ds/Upper", "ds/a b"] {
            assert_eq!(
                Workload::parse(bad, "ns"),
                Err(WorkloadError(bad.into())),
                "{bad}"
            );
        }
        assert!(Workload::parse("ds/x", "").is_err());
    }

    #[test]
    fn verdicts() {
        for seen in [Seen::Nothing, Seen::Present, Seen::Deleting, Seen::Gone] {
            assert_eq!(verdict(Ok(Some(false)), seen), Verdict::Staying);
            assert!(matches!(verdict(Ok(Some(true)), seen), Verdict::Uninstalling(_)));
            assert!(matches!(verdict(Ok(None), seen), Verdict::Uninstalling(_)));
        }
        // A refusal is not an uninstall (an auth outage, an RBAC edit), unless the watch saw
        // the workload go.
        for code in [401, 403, 500, 429] {
            assert!(
                matches!(verdict(Err(api_error(code)), Seen::Present), Verdict::Unknown(_)),
                "{code}"
            );
            assert!(
                matches!(verdict(Err(api_error(code)), Seen::Nothing), Verdict::Unknown(_)),
                "{code}"
            );
            assert!(
                matches!(
                    verdict(Err(api_error(code)), Seen::Gone),
                    Verdict::Uninstalling(_)
                ),
                "{code}"
            );
            assert!(
                matches!(
                    verdict(Err(api_error(code)), Seen::Deleting),
                    Verdict::Uninstalling(_)
                ),
                "{code}"
            );
        }
    }
}
