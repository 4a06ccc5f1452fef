//! `KuryrNetwork` (`kuryrnetworks`, short `kns`): the Neutron network, subnet and router
//! attachment of one namespace (namespace subnet driver).

use crate::schema::preserve_object;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Spec of a KuryrNetwork.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrNetwork",
    plural = "kuryrnetworks",
    singular = "kuryrnetwork",
    shortname = "kns",
    namespaced,
    status = "KuryrNetworkStatus",
    derive = "PartialEq",
    doc = "The Neutron network of one namespace.",
    printcolumn(
        name = "SUBNET-CIDR",
        type_ = "string",
        description = "The subnet CIDR allocated to the namespace",
        json_path = ".status.subnetCIDR"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkSpec {
    /// Namespace name.
    pub ns_name: String,
    /// OpenStack project ID.
    pub project_id: String,
    /// Labels of the namespace.
    #[schemars(schema_with = "preserve_object")]
    pub ns_labels: BTreeMap<String, String>,
}

/// Status of a KuryrNetwork.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct KuryrNetworkStatus {
    /// Neutron network ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_id: Option<String>,
    /// The ports pool of the subnet has been populated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub populated: Option<bool>,
    /// Router the subnet is attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_id: Option<String>,
    /// CIDR of the subnet.
    #[serde(rename = "subnetCIDR", default, skip_serializing_if = "Option::is_none")]
    pub subnet_cidr: Option<String>,
    /// Neutron subnet ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_id: Option<String>,
    /// Namespace labels the network was last reconciled with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_object")]
    pub ns_labels: Option<BTreeMap<String, String>>,
}
