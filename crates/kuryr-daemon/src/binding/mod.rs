//! Binding drivers: how a VIF is plugged into the pod's namespace and the node's datapath.
//!
//! [`Binder`] is one driver (connect, disconnect, check one VIF); [`Bindings`] is the node's
//! set of drivers, chosen by VIF class, plus what STATUS and ADD ask of the datapath as a whole.
//! [`NodeBindings`] is the real set — the Open vSwitch veth binding ([`ovs`]) for
//! `VIFOpenVSwitch`, on a VM node the nested bindings ([`vlan`]) for `VIFVlanNested` and
//! `VIFMacvlanNested` —, and [`record::RecordingBindings`], which wires nothing and records
//! what it was asked: hollow nodes run on it, and the CNI verbs are unit-tested with it without
//! namespaces, netlink or OVS.
//!
//! The traits return boxed futures so that they stay dyn-compatible: the daemon holds an
//! `Arc<dyn Bindings>`; one allocation per call is nothing next to netlink and OVSDB.

pub mod ovs;
mod pod_end;
pub mod record;
pub mod spec;
pub mod vlan;

use std::{future::Future, path::Path, pin::Pin, sync::Arc};

use kuryr_types::VifKind;

pub use spec::{SpecError, WireSpec};

use crate::activation::OvnInstalledWatch;

/// A boxed `Send` future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A failed binding operation.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// The VIF class has no driver.
    #[error("no binding driver for VIF class {0}")]
    Unsupported(String),
    /// Open vSwitch binding failure.
    #[error(transparent)]
    Ovs(#[from] ovs::OvsBindingError),
    /// Nested (VLAN or macvlan) binding failure.
    #[error(transparent)]
    Vlan(#[from] vlan::VlanBindingError),
    /// A failure injected by a test double.
    #[error("{0}")]
    Injected(String),
}

/// What CHECK found wrong, empty when the wiring is intact.
pub type CheckReport = Vec<String>;

/// One binding driver.
pub trait Binder: Send + Sync {
    /// Wires `spec` into the namespace at `netns`.
    fn connect<'a>(&'a self, spec: &'a WireSpec, netns: &'a Path) -> BoxFuture<'a, Result<(), BindingError>>;
    /// Removes the wiring of `spec` (idempotent); `netns` may be gone already.
    fn disconnect<'a>(
        &'a self,
        spec: &'a WireSpec,
        netns: &'a Path,
    ) -> BoxFuture<'a, Result<(), BindingError>>;
    /// Verifies the wiring of `spec`.
    fn check<'a>(
        &'a self,
        spec: &'a WireSpec,
        netns: &'a Path,
    ) -> BoxFuture<'a, Result<CheckReport, BindingError>>;
}

/// The node's binding drivers and datapath.
pub trait Bindings: Send + Sync {
    /// The driver for VIFs of class `kind`.
    fn for_kind(&self, kind: &VifKind) -> Result<&dyn Binder, BindingError>;
    /// STATUS: the datapath answers and, when given, `bridge` exists (the reason when not).
    fn datapath_ready<'a>(&'a self, bridge: Option<&'a str>) -> BoxFuture<'a, Result<(), String>>;
    /// OVN's local `ovn-installed` flags, when the datapath has them (ends ADD's activation
    /// wait before Neutron does).
    fn ovn_installed(&self) -> Option<Arc<OvnInstalledWatch>>;
}

/// The real drivers of a node.
pub struct NodeBindings {
    ovs: ovs::OvsBinding,
    ovn: Arc<OvnInstalledWatch>,
    /// The nested VLAN driver, on a VM node (`[binding] link_iface`).
    vlan: Option<vlan::VlanBinding>,
    /// The nested macvlan driver, on a VM node.
    macvlan: Option<vlan::MacvlanBinding>,
}

impl NodeBindings {
    /// The node's drivers over the OVS database of `ovs`.
    pub fn new(ovs: ovs::OvsBinding) -> Self {
        let ovn = OvnInstalledWatch::new(ovs.ovsdb().clone());
        NodeBindings {
            ovs,
            ovn,
            vlan: None,
            macvlan: None,
        }
    }

    /// Adds the nested drivers (a VM node: VLANs and macvlans of `link_iface`).
    pub fn with_vlan(mut self, link_iface: impl Into<String>) -> Self {
        let link_iface = link_iface.into();
        self.macvlan = Some(vlan::MacvlanBinding::new(link_iface.clone()));
        self.vlan = Some(vlan::VlanBinding::new(link_iface));
        self
    }

    /// The Open vSwitch driver.
    pub fn ovs(&self) -> &ovs::OvsBinding {
        &self.ovs
    }
}

/// [`Binder`] for a driver type with inherent `connect`/`disconnect`/`check` methods of the
/// same signatures (their own error types, converted into [`BindingError`]).
macro_rules! binder_of {
    ($ty:ty) => {
        impl Binder for $ty {
            fn connect<'a>(
                &'a self,
                spec: &'a WireSpec,
                netns: &'a Path,
            ) -> BoxFuture<'a, Result<(), BindingError>> {
                Box::pin(async move { <$ty>::connect(self, spec, netns).await.map_err(Into::into) })
            }

            fn disconnect<'a>(
                &'a self,
                spec: &'a WireSpec,
                netns: &'a Path,
            ) -> BoxFuture<'a, Result<(), BindingError>> {
                Box::pin(async move {
                    <$ty>::disconnect(self, spec, netns)
                        .await
                        .map_err(Into::into)
                })
            }

            fn check<'a>(
                &'a self,
                spec: &'a WireSpec,
                netns: &'a Path,
            ) -> BoxFuture<'a, Result<CheckReport, BindingError>> {
                Box::pin(async move { <$ty>::check(self, spec, netns).await.map_err(Into::into) })
            }
        }
    };
}

binder_of!(ovs::OvsBinding);
binder_of!(vlan::VlanBinding);
binder_of!(vlan::MacvlanBinding);

impl Bindings for NodeBindings {
    fn for_kind(&self, kind: &VifKind) -> Result<&dyn Binder, BindingError> {
        match kind {
            VifKind::OpenVSwitch => Ok(&self.ovs),
            VifKind::VlanNested => match &self.vlan {
                Some(v) => Ok(v),
                None => Err(BindingError::Unsupported(
                    "VIFVlanNested (this node has no [binding] link_iface: not a VM node)".into(),
                )),
            },
            VifKind::MacvlanNested => match &self.macvlan {
                Some(v) => Ok(v),
                None => Err(BindingError::Unsupported(
                    "VIFMacvlanNested (this node has no [binding] link_iface: not a VM node)".into(),
                )),
            },
            other => Err(BindingError::Unsupported(other.as_str().to_owned())),
        }
    }

    fn datapath_ready<'a>(&'a self, bridge: Option<&'a str>) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Some(b) = bridge else { return Ok(()) };
            match self.ovs.ovsdb().bridge(b).await {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err(format!("OVS bridge {b} does not exist")),
                Err(e) => Err(format!(
                    "OVS is not reachable: {}",
                    crate::daemon::error_chain(&e)
                )),
            }
        })
    }

    fn ovn_installed(&self) -> Option<Arc<OvnInstalledWatch>> {
        Some(self.ovn.clone())
    }
}
