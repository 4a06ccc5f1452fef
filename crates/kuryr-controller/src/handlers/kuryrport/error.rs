//! [`Error`]: the failed steps of the KuryrPort handler, their metric labels, Event reasons and
//! requeue delays.

use std::time::Duration;

use crate::{drivers::DriverError, pool};

/// A failed step of the KuryrPort handler.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The KuryrPort has no namespace (the watch only yields namespaced objects: an invariant).
    #[error("KuryrPort {0} has no namespace")]
    MissingNamespace(String),
    /// Reading the pod failed.
    #[error("getting pod {ns}/{name}")]
    GetPod {
        /// Namespace.
        ns: String,
        /// Name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The drivers could not say where the port goes.
    #[error("choosing project, subnets and security groups for pod {ns}/{name}")]
    Drivers {
        /// Namespace.
        ns: String,
        /// Name.
        name: String,
        /// Cause.
        #[source]
        source: DriverError,
    },
    /// No port could be had for the pod.
    #[error("requesting a port for pod {ns}/{name}")]
    RequestPort {
        /// Namespace.
        ns: String,
        /// Name.
        name: String,
        /// Cause.
        #[source]
        source: pool::Error,
    },
    /// Writing `status.vifs` failed (the port stays assigned to the pod and is retried).
    #[error("writing status.vifs of KuryrPort {ns}/{name}")]
    PatchStatus {
        /// Namespace.
        ns: String,
        /// Name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Releasing the pod's port failed.
    #[error("releasing the port of pod {ns}/{name}")]
    ReleasePort {
        /// Namespace.
        ns: String,
        /// Name.
        name: String,
        /// Cause.
        #[source]
        source: pool::Error,
    },
    /// Removing the KuryrPort finalizer failed.
    #[error("removing the finalizer of KuryrPort {ns}/{name}")]
    RemoveFinalizer {
        /// Namespace.
        ns: String,
        /// Name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// Deleting a KuryrPort whose pod is gone failed.
    #[error("deleting KuryrPort {ns}/{name} of a missing pod")]
    DeleteKuryrPort {
        /// Namespace.
        ns: String,
        /// Name.
        name: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// Label of the `outcome` of `kuryr_reconcile_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::MissingNamespace(_) => "missing_namespace",
            Error::GetPod { .. } => "get_pod",
            Error::Drivers { .. } => "drivers",
            Error::RequestPort { source, .. } => source.metric_label(),
            Error::PatchStatus { .. } => "patch_status",
            Error::ReleasePort { .. } => "release_port",
            Error::RemoveFinalizer { .. } => "remove_finalizer",
            Error::DeleteKuryrPort { .. } => "delete_kuryrport",
        }
    }

    /// Reason of the Warning Event recorded on the pod (upstream's names where it had one).
    pub fn event_reason(&self) -> &'static str {
        match self {
            Error::MissingNamespace(_) | Error::GetPod { .. } => "MissingPod",
            Error::Drivers { .. } => "NoPodSubnetFound",
            Error::RequestPort { source, .. } => match source {
                pool::Error::PopulationBackoff { .. } | pool::Error::CreatePort { .. } => {
                    "FailToPopulateVIFPool"
                }
                _ => "FailedToRequestVIF",
            },
            Error::PatchStatus { .. } => "ExceptionOnKPUpdate",
            Error::ReleasePort { .. } => "FailedToReleaseVIF",
            Error::RemoveFinalizer { .. } => "FailedToRemoveKuryrPortFinalizer",
            Error::DeleteKuryrPort { .. } => "FailedToDeleteKuryrPortCRD",
        }
    }

    /// When to retry.
    pub fn requeue_after(&self) -> Duration {
        match self {
            Error::MissingNamespace(_) => Duration::from_secs(300),
            Error::Drivers { source, .. } if !source.is_transient() => Duration::from_secs(60),
            Error::RequestPort { source, .. } | Error::ReleasePort { source, .. } => source.retry_after(),
            Error::RemoveFinalizer { source, .. } if crate::finalizer::is_conflict(source) => {
                Duration::from_millis(200)
            }
            Error::GetPod { source, .. }
            | Error::PatchStatus { source, .. }
            | Error::RemoveFinalizer { source, .. }
            | Error::DeleteKuryrPort { source, .. } => match source {
                kube::Error::Api(s) if s.code == 409 => Duration::from_millis(200),
                _ => Duration::from_secs(2),
            },
            Error::Drivers { .. } => Duration::from_secs(2),
        }
    }
}
