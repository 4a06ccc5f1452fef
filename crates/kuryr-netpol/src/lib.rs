//! NetworkPolicy for kuryr-rs, as pure functions: Kubernetes NetworkPolicies, pods, namespaces
//! and Services in; Neutron security groups, their rules and each pod's groups out.
//!
//! * [`policy`] — a `networking.k8s.io/v1` NetworkPolicy validated into [`Policy`] (errors name
//!   the field);
//! * [`translate`] — one policy → [`SgRule`]s (`remote_ip_prefix` rules, as upstream);
//! * [`assign`] — every pod's groups ([`Plan`]), so that Neutron's "any group admits" equals
//!   Kubernetes' "no isolating policy, or one that allows";
//! * [`semantics`] — the specification evaluated directly, the reference the property tests hold
//!   the translation to;
//! * [`selector`], [`cidr`] — label selectors and `ipBlock` arithmetic.
//!
//! Upstream Kuryr quirks fixed here (each where it is fixed): a namespace+pod selector kept only
//! the last namespace's pods; several `except`s were not intersected; `endPort` was ignored;
//! named ingress ports resolved on one pod opened that number on every selected pod; an
//! ingress-only policy opened egress for pods another policy isolated; `pod-template-hash` was
//! dropped from selectors.

pub mod assign;
pub mod cidr;
mod error;
pub mod model;
pub mod policy;
pub mod rule;
pub mod selector;
pub mod semantics;
pub mod translate;

pub use assign::{Group, Plan, PodGroups, Variant, plan};

/// Neutron name of the cluster's group that admits all ingress ([`Group::OpenIngress`]: pods
/// whose policies isolate only egress).
pub const OPEN_INGRESS_GROUP: &str = "kuryr-rs/open-ingress";
/// Neutron name of the cluster's group that admits all egress ([`Group::OpenEgress`]).
pub const OPEN_EGRESS_GROUP: &str = "kuryr-rs/open-egress";
pub use error::PolicyError;
pub use model::{
    Cluster, ContainerPort, Labels, Namespace, Pod, PodKey, Proto, Service, ServicePort, TargetPort,
};
pub use policy::Policy;
pub use rule::{Direction, Ethertype, SgRule};
pub use translate::{Entry, Translation, translate};

#[cfg(test)]
mod tests;
