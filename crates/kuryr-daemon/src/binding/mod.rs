//! Binding drivers: how a VIF is plugged into the pod's namespace and the node's datapath.
//! [`Binding`] dispatches on the VIF class; today the Open vSwitch veth binding ([`ovs`]) is
//! the only one. Nested VLAN / macvlan bindings become new variants with their own module.

pub mod ovs;
pub mod spec;

use std::path::Path;

use kuryr_types::VifKind;

pub use spec::{SpecError, WireSpec};

/// A failed binding operation.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// The VIF class has no driver.
    #[error("no binding driver for VIF class {0}")]
    Unsupported(String),
    /// Open vSwitch binding failure.
    #[error(transparent)]
    Ovs(#[from] ovs::OvsBindingError),
}

/// The binding driver of a VIF class.
#[derive(Debug, Clone)]
pub enum Binding {
    /// `VIFOpenVSwitch`: veth pair, host end on the integration bridge.
    Ovs(ovs::OvsBinding),
}

/// What CHECK found wrong, empty when the wiring is intact.
pub type CheckReport = Vec<String>;

impl Binding {
    /// The driver for `kind`, if one exists.
    pub fn for_kind(kind: &VifKind, ovs: &ovs::OvsBinding) -> Result<Self, BindingError> {
        match kind {
            VifKind::OpenVSwitch => Ok(Self::Ovs(ovs.clone())),
            other => Err(BindingError::Unsupported(other.as_str().to_owned())),
        }
    }

    /// Wires `spec` into the namespace at `netns`.
    pub async fn connect(&self, spec: &WireSpec, netns: &Path) -> Result<(), BindingError> {
        match self {
            Self::Ovs(b) => b.connect(spec, netns).await.map_err(Into::into),
        }
    }

    /// Removes the wiring of `spec` (idempotent); `netns` may be gone already.
    pub async fn disconnect(&self, spec: &WireSpec, netns: &Path) -> Result<(), BindingError> {
        match self {
            Self::Ovs(b) => b.disconnect(spec, netns).await.map_err(Into::into),
        }
    }

    /// Verifies the wiring of `spec`.
    pub async fn check(&self, spec: &WireSpec, netns: &Path) -> Result<CheckReport, BindingError> {
        match self {
            Self::Ovs(b) => b.check(spec, netns).await.map_err(Into::into),
        }
    }
}
