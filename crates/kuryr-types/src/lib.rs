//! The shared vocabulary of kuryr-rs with upstream Kuryr-Kubernetes: the four `openstack.org/v1`
//! custom resources ([`KuryrPort`], [`KuryrNetwork`], [`KuryrNetworkPolicy`],
//! [`KuryrLoadBalancer`]) with upstream's field names and shapes, the os-vif VIF model stored
//! in `KuryrPort.status.vifs` ([`vif`], byte-for-byte compatible with upstream's
//! oslo.versionedobjects primitives), upstream's finalizer/label/annotation names
//! ([`constants`]) and the generated CRD manifests ([`crds`]). Types only: no client, no I/O.

pub mod constants;
pub mod crds;
pub mod from_neutron;
pub mod kuryrloadbalancer;
pub mod kuryrnetwork;
pub mod kuryrnetworkpolicy;
pub mod kuryrport;
pub mod ovo;
pub mod schema;
pub mod vif;

pub use kuryrloadbalancer::{
    Endpoint, EndpointConditions, EndpointPort, EndpointSlice, KuryrLoadBalancer, KuryrLoadBalancerSpec,
    KuryrLoadBalancerStatus, LbPort, Listener, LoadBalancer, Member, Pool, ServicePubIpInfo, TargetRef,
};
pub use kuryrnetwork::{KuryrNetwork, KuryrNetworkSpec, KuryrNetworkStatus};
pub use kuryrnetworkpolicy::{
    AffectedPod, KuryrNetworkPolicy, KuryrNetworkPolicySpec, KuryrNetworkPolicyStatus, PortVariantGroup,
    SecurityGroupRule, SgRule, SgRuleSpec,
};
pub use kuryrport::{KuryrPort, KuryrPortSpec, KuryrPortStatus};
pub use vif::{FixedIp, Network, PortProfile, Route, Subnet, Vif, VifEntry, VifKind};
