//! [`OpError`]: why a CNI operation failed, its metric label, whether it is the daemon's own
//! failure (counted towards `[cni_daemon] cni_failures_count`), and the CNI error body and HTTP
//! status upstream's plugin expects.

use std::{path::PathBuf, time::Duration};

use kuryr_cni_api::{CniError, ErrorCode};

use crate::{binding::BindingError, binding::spec, registry::WaitReason, state::StateError};

/// How long DEL may take (upstream: 5 s).
pub const DEL_TIMEOUT: Duration = Duration::from_secs(5);

pub use kuryr_runtime::error_chain;

/// A failed CNI operation; [`OpError::to_cni`] gives the error body and HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The request is invalid.
    #[error("{0}")]
    Invalid(CniError),
    /// `CNI_NETNS` does not exist.
    #[error("network namespace {0} does not exist")]
    NoNetns(PathBuf),
    /// The pod is being deleted.
    #[error("pod {0} is gone")]
    PodGone(String),
    /// The KuryrPort belongs to another incarnation of the pod.
    #[error("pod {key}: KuryrPort is for pod UID {kp}, the pod's UID is {pod}")]
    UidMismatch {
        /// Pod key.
        key: String,
        /// `spec.podUid`.
        kp: String,
        /// The pod's UID.
        pod: String,
    },
    /// No usable KuryrPort in time.
    #[error("timed out after {timeout:?} waiting for the VIFs of pod {key} ({reason:?})")]
    KuryrPortTimeout {
        /// Pod key.
        key: String,
        /// The bound.
        timeout: Duration,
        /// What was still missing.
        reason: WaitReason,
    },
    /// The VIFs did not become active in time.
    #[error("timed out after {timeout:?} waiting for the VIFs of pod {key} to become active")]
    ActivationTimeout {
        /// Pod key.
        key: String,
        /// The bound.
        timeout: Duration,
    },
    /// A VIF cannot be turned into wiring.
    #[error("VIF {ifname} of pod {key}")]
    Spec {
        /// Pod key.
        key: String,
        /// Its interface.
        ifname: String,
        /// Cause.
        #[source]
        source: spec::SpecError,
    },
    /// Wiring or unwiring failed.
    #[error("binding {ifname} of container {container_id}")]
    Binding {
        /// Container.
        container_id: String,
        /// Interface.
        ifname: String,
        /// Cause.
        #[source]
        source: BindingError,
    },
    /// The state files cannot be updated.
    #[error("recording the attachment")]
    State(#[source] StateError),
    /// DEL took longer than [`DEL_TIMEOUT`].
    #[error("DEL of container {0} did not finish within {DEL_TIMEOUT:?}")]
    DelTimeout(String),
    /// ADD: the container was deleted (DEL) while ADD waited for its KuryrPort.
    #[error("container {0} was deleted while ADD was waiting")]
    DeletedMeanwhile(String),
    /// CHECK: this daemon did not wire the container.
    #[error("container {0} is not wired by this daemon")]
    NotWired(String),
    /// CHECK: the wiring is damaged.
    #[error("wiring of container {container_id} is damaged")]
    CheckFailed {
        /// Container.
        container_id: String,
        /// What is wrong.
        problems: Vec<String>,
    },
}

impl OpError {
    /// The `map_err` of a binding call for `ifname` of container `container_id`.
    pub fn binding(container_id: &str, ifname: &str) -> impl Fn(BindingError) -> OpError {
        let (container_id, ifname) = (container_id.to_owned(), ifname.to_owned());
        move |source| OpError::Binding {
            container_id: container_id.clone(),
            ifname: ifname.clone(),
            source,
        }
    }

    /// A binding failure that is the KuryrPort's, not the daemon's: it asks for a VIF class
    /// this node has no driver for (a macvlan VIF on a node that is not a VM).
    fn unsupported_vif(&self) -> bool {
        matches!(
            self,
            Self::Binding {
                source: BindingError::Unsupported(_),
                ..
            }
        )
    }

    /// The metric label of this error.
    pub fn kind(&self) -> &'static str {
        if self.unsupported_vif() {
            return "bad_vif";
        }
        match self {
            Self::Invalid(_) | Self::NoNetns(_) => "invalid",
            Self::PodGone(_) => "pod_gone",
            Self::UidMismatch { .. } => "uid_mismatch",
            Self::KuryrPortTimeout { .. } => "kuryrport_timeout",
            Self::ActivationTimeout { .. } => "activation_timeout",
            Self::Spec { .. } => "bad_vif",
            Self::Binding { .. } => "binding",
            Self::State(_) => "state",
            Self::DelTimeout(_) => "del_timeout",
            Self::NotWired(_) => "not_wired",
            Self::DeletedMeanwhile(_) => "deleted_meanwhile",
            Self::CheckFailed { .. } => "check_failed",
        }
    }

    /// Whether this is a failure of the daemon itself (counts towards `cni_failures_count`).
    /// A VIF that cannot be wired ([`Error::Spec`]) is bad input in a KuryrPort, not a sick
    /// daemon: counting it made the liveness probe restart the daemon again and again, and
    /// every pod of the node with it, over one bad object.
    pub fn is_internal(&self) -> bool {
        matches!(self, Self::Binding { .. } | Self::State(_)) && !self.unsupported_vif()
    }

    /// The CNI error body (upstream codes: 4 bad parameters, 3 pod gone, 11 timeout, 999 other).
    pub fn to_cni(&self) -> CniError {
        if self.unsupported_vif() {
            // As a VIF that cannot be read: the controller's to fix, the runtime asks again.
            return CniError::new(ErrorCode::TryAgainLater, self.to_string()).with_details(error_chain(self));
        }
        match self {
            Self::Invalid(e) => e.clone(),
            Self::NoNetns(_) => CniError::new(ErrorCode::InvalidEnvironment, self.to_string()),
            Self::PodGone(_) | Self::UidMismatch { .. } | Self::NotWired(_) | Self::DeletedMeanwhile(_) => {
                CniError::new(ErrorCode::UnknownContainer, self.to_string())
            }
            Self::KuryrPortTimeout { .. } | Self::ActivationTimeout { .. } | Self::DelTimeout(_) => {
                CniError::new(ErrorCode::TryAgainLater, self.to_string())
            }
            // The controller replaces what it cannot read: the runtime should ask again.
            Self::Spec { .. } => {
                CniError::new(ErrorCode::TryAgainLater, self.to_string()).with_details(error_chain(self))
            }
            Self::CheckFailed { problems, .. } => {
                CniError::new(ErrorCode::Generic, self.to_string()).with_details(problems.join("; "))
            }
            Self::Binding { .. } | Self::State(_) => {
                CniError::new(ErrorCode::DaemonInternal, self.to_string()).with_details(error_chain(self))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_upstream_codes() {
        let e = OpError::PodGone("ns/p".into()).to_cni();
        assert_eq!(e.code, ErrorCode::UnknownContainer);
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.code), 410);
        let e = OpError::KuryrPortTimeout {
            key: "ns/p".into(),
            timeout: Duration::from_secs(1),
            reason: WaitReason::NoKuryrPort,
        };
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.to_cni().code), 504);
        assert!(!e.is_internal());
        let e = OpError::State(StateError::Encode(serde_json::from_str::<u8>("x").unwrap_err()));
        assert!(e.is_internal());
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.to_cni().code), 500);
        assert!(e.to_cni().details.contains("encoding state"));
        let e = OpError::NoNetns("/x".into()).to_cni();
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.code), 400);
        assert!(e.msg.contains("/x"));
    }

    /// A VIF that cannot be wired is bad input in a KuryrPort: the runtime tries again (the
    /// controller rewrites what it cannot read), and it does not count towards the daemon's
    /// failure limit (the liveness probe would restart the daemon over one bad object).
    #[test]
    fn a_vif_class_without_a_driver_here_is_the_kuryrports_fault() {
        let e = OpError::Binding {
            container_id: "c".into(),
            ifname: "eth0".into(),
            source: BindingError::Unsupported("VIFMacvlanNested (not a VM node)".into()),
        };
        assert!(!e.is_internal());
        assert_eq!(e.kind(), "bad_vif");
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.to_cni().code), 504);
        let e = OpError::Binding {
            container_id: "c".into(),
            ifname: "eth0".into(),
            source: BindingError::Injected("netlink".into()),
        };
        assert!(e.is_internal(), "a failed wiring is the daemon's");
    }

    #[test]
    fn a_bad_vif_is_retried_and_not_a_daemon_failure() {
        let e = OpError::Spec {
            key: "ns/p".into(),
            ifname: "eth0".into(),
            source: crate::binding::spec::SpecError::MissingPortId,
        };
        assert!(!e.is_internal());
        let c = e.to_cni();
        assert_eq!(c.code, ErrorCode::TryAgainLater);
        assert!(c.details.contains("no port id"), "{c:?}");
    }
}
