//! `KuryrLoadBalancer` (`kuryrloadbalancers`, short `klb`): a Service as an Octavia load
//! balancer — what is wanted (spec: IPs, ports, endpoint slices) and what exists (status:
//! load balancer, listeners, pools, members, floating IP). Field names are upstream's, mostly
//! snake_case (`lb_ip`, `project_id`, `security_groups_ids`, …) with camelCase where upstream
//! copied Kubernetes objects (`endpointSlices`, `targetPort`, `targetRef`).

use crate::schema::plain_object;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Spec of a KuryrLoadBalancer.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrLoadBalancer",
    plural = "kuryrloadbalancers",
    singular = "kuryrloadbalancer",
    shortname = "klb",
    namespaced,
    status = "KuryrLoadBalancerStatus",
    derive = "PartialEq",
    doc = "A Service as an Octavia load balancer.",
    printcolumn(
        name = "PROJECT-ID",
        type_ = "string",
        description = "The ID of the PROJECT associated to the loadbalancer",
        json_path = ".spec.project_id"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
pub struct KuryrLoadBalancerSpec {
    /// The Service's endpoint slices (members).
    #[serde(rename = "endpointSlices", default, skip_serializing_if = "Option::is_none")]
    pub endpoint_slices: Option<Vec<EndpointSlice>>,
    /// ClusterIP of the Service (the VIP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// `loadBalancerIP` requested for a LoadBalancer Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb_ip: Option<String>,
    /// Service ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<LbPort>>,
    /// OpenStack project ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    /// Security groups of the VIP port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_groups_ids: Option<Vec<String>>,
    /// Subnet of the VIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Service type (`ClusterIP`, `LoadBalancer`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Octavia provider (`amphora`, `ovn`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Listener client inactivity timeout (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_client_data: Option<i64>,
    /// Listener member inactivity timeout (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_member_data: Option<i64>,
    /// kuryr-rs (not upstream): a LoadBalancer Service's `loadBalancerSourceRanges`, the
    /// listeners' `allowed_cidrs` where the provider has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_ranges: Option<Vec<String>>,
    /// kuryr-rs (not upstream): the Service's `sessionAffinity` when `ClientIP` (pools get
    /// `SOURCE_IP` persistence where the provider has it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    /// kuryr-rs (not upstream): a health monitor per pool, from cloud-provider-openstack's
    /// `loadbalancer.openstack.org/*health-monitor*` annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_monitor: Option<KlbHealthMonitor>,
}

/// A KuryrLoadBalancer's health monitor settings (kuryr-rs extension).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema, Default)]
pub struct KlbHealthMonitor {
    /// Seconds between probes.
    pub delay: i64,
    /// Seconds a probe may take.
    pub timeout: i64,
    /// Successes before a member is ONLINE.
    pub max_retries: i64,
    /// Failures before a member is ERROR.
    pub max_retries_down: i64,
}

/// An endpoint slice as upstream copies it from `discovery.k8s.io/v1`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct EndpointSlice {
    /// Endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Vec<Endpoint>>,
    /// Ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<EndpointPort>>,
}

/// One endpoint of a slice.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct Endpoint {
    /// Addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<EndpointConditions>,
    /// Hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The pod behind the endpoint.
    #[serde(rename = "targetRef", default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Topology (upstream declares a bare object, so the API server keeps it empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "plain_object")]
    pub topology: Option<BTreeMap<String, String>>,
}

/// Endpoint conditions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct EndpointConditions {
    /// Ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
}

/// Reference to the object behind an endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct TargetRef {
    /// Kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Resource version.
    #[serde(rename = "resourceVersion", default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// A port of an endpoint slice.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct EndpointPort {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Protocol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// A Service port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct LbPort {
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Port.
    pub port: i32,
    /// Protocol.
    pub protocol: String,
    /// Target port, as a string (number or name).
    #[serde(rename = "targetPort")]
    pub target_port: String,
}

/// Status of a KuryrLoadBalancer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct KuryrLoadBalancerStatus {
    /// Listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listeners: Option<Vec<Listener>>,
    /// The load balancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadbalancer: Option<LoadBalancer>,
    /// Members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Vec<Member>>,
    /// Pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<Vec<Pool>>,
    /// Floating IP of a LoadBalancer Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_pub_ip_info: Option<ServicePubIpInfo>,
}

/// An Octavia listener.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct Listener {
    /// ID.
    pub id: String,
    /// Load balancer ID.
    pub loadbalancer_id: String,
    /// Name.
    pub name: String,
    /// Port.
    pub port: i32,
    /// Project ID.
    pub project_id: String,
    /// Protocol.
    pub protocol: String,
    /// Client inactivity timeout (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_client_data: Option<i64>,
    /// Member inactivity timeout (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_member_data: Option<i64>,
}

/// An Octavia load balancer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct LoadBalancer {
    /// ID.
    pub id: String,
    /// VIP.
    pub ip: String,
    /// Name.
    pub name: String,
    /// VIP port ID.
    pub port_id: String,
    /// Project ID.
    pub project_id: String,
    /// Provider.
    pub provider: String,
    /// Security groups.
    pub security_groups: Vec<String>,
    /// VIP subnet ID.
    pub subnet_id: String,
}

/// An Octavia member.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct Member {
    /// ID.
    pub id: String,
    /// Address.
    pub ip: String,
    /// Name.
    pub name: String,
    /// Pool ID.
    pub pool_id: String,
    /// Port.
    pub port: i32,
    /// Project ID.
    pub project_id: String,
    /// Subnet ID.
    pub subnet_id: String,
}

/// An Octavia pool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct Pool {
    /// ID.
    pub id: String,
    /// Listener ID.
    pub listener_id: String,
    /// Load balancer ID.
    pub loadbalancer_id: String,
    /// Name.
    pub name: String,
    /// Project ID.
    pub project_id: String,
    /// Protocol.
    pub protocol: String,
}

/// The floating IP of a LoadBalancer Service.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct ServicePubIpInfo {
    /// Floating IP ID.
    pub ip_id: String,
    /// Floating IP address.
    pub ip_addr: String,
    /// `user` (loadBalancerIP given) or `pool` (allocated).
    pub alloc_method: String,
}
