//! Telling an uninstall from a restart when SIGTERM comes: the workload that runs this process
//! (the controller's Deployment, the daemon's DaemonSet) is looked up once more. Gone, being
//! deleted, or our own ServiceAccount or its rights gone with it (`helm uninstall` and
//! `kubectl delete -f` remove those in the same breath): kuryr-rs is being removed, and the
//! process releases what it holds for itself (the controller its pools' ports, the daemon the
//! CNI files its init container installed). Still there: a restart, a rolling upgrade, a drain —
//! everything is kept for the next pod.
//!
//! A wrong "uninstalling" costs little on purpose: the pools refill and the next daemon pod's
//! init container writes the CNI files again. A wrong "staying" leaves what `kuryrctl ports
//! --orphans` lists and the janitors remove.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

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

/// Decides from one lookup (pure).
pub fn verdict(lookup: Lookup) -> Verdict {
    match lookup {
        Ok(None) => Verdict::Uninstalling("the workload is gone"),
        Ok(Some(true)) => Verdict::Uninstalling("the workload is being deleted"),
        Ok(Some(false)) => Verdict::Staying,
        Err(kube::Error::Api(s)) if s.code == 401 => {
            Verdict::Uninstalling("our ServiceAccount is gone (401)")
        }
        Err(kube::Error::Api(s)) if s.code == 403 => {
            Verdict::Uninstalling("our right to read the workload is gone (403)")
        }
        Err(e) => Verdict::Unknown(crate::error_chain(&e)),
    }
}

/// Looks the workload up (within `timeout`) and decides.
pub async fn check(client: &Client, workload: &Workload, timeout: Duration) -> Verdict {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &workload.namespace, &workload.api_resource());
    let lookup = match tokio::time::timeout(timeout, api.get_opt(&workload.name)).await {
        Ok(r) => r.map(|o| o.map(|o| o.metadata.deletion_timestamp.is_some())),
        Err(_) => return Verdict::Unknown(format!("no answer within {timeout:?}")),
    };
    let v = verdict(lookup);
    tracing::info!(workload = %workload, verdict = ?v, "uninstall check at shutdown");
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
        assert_eq!(verdict(Ok(Some(false))), Verdict::Staying);
        assert!(matches!(verdict(Ok(Some(true))), Verdict::Uninstalling(_)));
        assert!(matches!(verdict(Ok(None)), Verdict::Uninstalling(_)));
        assert!(matches!(verdict(Err(api_error(401))), Verdict::Uninstalling(_)));
        assert!(matches!(verdict(Err(api_error(403))), Verdict::Uninstalling(_)));
        assert!(matches!(verdict(Err(api_error(500))), Verdict::Unknown(_)));
        assert!(matches!(verdict(Err(api_error(429))), Verdict::Unknown(_)));
    }
}
