//! [`Error`]: the failed steps of the KuryrPort handler, their kinds (which choose the retry
//! delay), metric labels and Event reasons.

use crate::{
    drivers::DriverError,
    handlers::scaffold::{ErrorKind, HandlerError, kube_kind},
    pool,
};

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

impl HandlerError for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::MissingNamespace(_) => ErrorKind::Internal,
            Error::Drivers { source, .. } if source.is_transient() => ErrorKind::Transient,
            Error::Drivers { .. } => ErrorKind::Invalid,
            Error::RequestPort { source, .. } | Error::ReleasePort { source, .. } => match source {
                pool::Error::PopulationBackoff { retry_in, .. } => ErrorKind::Capacity(*retry_in),
                e if e.is_retryable() => ErrorKind::Transient,
                _ => ErrorKind::Invalid,
            },
            Error::GetPod { source, .. }
            | Error::PatchStatus { source, .. }
            | Error::RemoveFinalizer { source, .. }
            | Error::DeleteKuryrPort { source, .. } => kube_kind(source),
        }
    }

    fn metric_label(&self) -> &'static str {
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

    /// Recorded on the pod (upstream's names where it had one).
    fn event_reason(&self) -> Option<&'static str> {
        if self.kind() == ErrorKind::Conflict {
            return None;
        }
        Some(match self {
            Error::MissingNamespace(_) | Error::GetPod { .. } => "MissingPod",
            Error::Drivers { .. } => "NoPodSubnetFound",
            Error::RequestPort { source, .. } => match source {
                pool::Error::PopulationBackoff { .. } | pool::Error::CreatePort { .. } => {
                    "FailToPopulateVIFPool"
                }
                pool::Error::UnsupportedBinding { .. } => "UnsupportedVIFBinding",
                _ => "FailedToRequestVIF",
            },
            Error::PatchStatus { .. } => "ExceptionOnKPUpdate",
            Error::ReleasePort { .. } => "FailedToReleaseVIF",
            Error::RemoveFinalizer { .. } => "FailedToRemoveKuryrPortFinalizer",
            Error::DeleteKuryrPort { .. } => "FailedToDeleteKuryrPortCRD",
        })
    }
}
