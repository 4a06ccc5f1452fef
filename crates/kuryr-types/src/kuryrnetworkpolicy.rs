//! `KuryrNetworkPolicy` (`kuryrnetworkpolicies`, short `knp`): a NetworkPolicy translated to
//! Neutron security group rules (spec) and the security group that implements it (status).
//! Rule fields are Neutron's, hence snake_case inside `sgRule`.

use crate::schema::preserve_object;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Spec of a KuryrNetworkPolicy.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrNetworkPolicy",
    plural = "kuryrnetworkpolicies",
    singular = "kuryrnetworkpolicy",
    shortname = "knp",
    namespaced,
    status = "KuryrNetworkPolicyStatus",
    derive = "PartialEq",
    doc = "A NetworkPolicy as Neutron security group rules.",
    printcolumn(
        name = "SG-ID",
        type_ = "string",
        description = "The ID of the SG associated to the policy",
        json_path = ".status.securityGroupId"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkPolicySpec {
    /// Egress rules.
    pub egress_sg_rules: Vec<SgRuleSpec>,
    /// Ingress rules.
    pub ingress_sg_rules: Vec<SgRuleSpec>,
    /// The NetworkPolicy's pod selector.
    #[schemars(schema_with = "preserve_object")]
    pub pod_selector: LabelSelector,
    /// `Ingress`, `Egress`.
    pub policy_types: Vec<String>,
}

/// One rule of the spec, with the pods it was computed from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SgRuleSpec {
    /// Pods (by IP) the rule was derived for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affected_pods: Option<Vec<AffectedPod>>,
    /// Namespace the rule was derived for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Neutron rule.
    pub sg_rule: SgRule,
}

/// A pod a rule was derived for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AffectedPod {
    /// Pod IP.
    #[serde(rename = "podIP")]
    pub pod_ip: String,
    /// Pod namespace.
    pub pod_namespace: String,
}

/// A Neutron security group rule (request fields).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct SgRule {
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `ingress` or `egress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// `IPv4` or `IPv6`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethertype: Option<String>,
    /// Last port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range_max: Option<i32>,
    /// First port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range_min: Option<i32>,
    /// `tcp`, `udp`, `sctp`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Remote CIDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_ip_prefix: Option<String>,
}

/// Status of a KuryrNetworkPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkPolicyStatus {
    /// The Neutron security group implementing the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_id: Option<String>,
    /// Rules created in it.
    pub security_group_rules: Vec<SecurityGroupRule>,
    /// Pod selector the rules were last applied for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_object")]
    pub pod_selector: Option<LabelSelector>,
    /// kuryr-rs: the extra groups of pods whose named ingress ports resolve differently from
    /// the other selected pods' (one per resolution; such a pod carries the policy's group and
    /// its resolution's). Upstream had none: it opened every resolution on every pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub port_variant_groups: Vec<PortVariantGroup>,
}

/// A group holding the rules of one resolution of a policy's named ingress ports.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PortVariantGroup {
    /// The resolution's key (a digest of its rules; the pods whose `affectedPods` rules have
    /// that digest carry this group).
    pub key: String,
    /// The Neutron security group.
    pub security_group_id: String,
}

/// A created Neutron security group rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct SecurityGroupRule {
    /// Rule ID.
    pub id: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `ingress` or `egress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// `IPv4` or `IPv6`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ethertype: Option<String>,
    /// Last port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range_max: Option<i32>,
    /// First port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_range_min: Option<i32>,
    /// Protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Remote CIDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_ip_prefix: Option<String>,
    /// Security group the rule belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group_id: Option<String>,
}
