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
    // Read leniently: see `lenient_labels`.
    #[schemars(schema_with = "preserve_object")]
    #[serde(deserialize_with = "lenient_labels")]
    pub ns_labels: BTreeMap<String, String>,
}

/// Labels from whatever the schema let in (`nsLabels` preserves unknown fields, as upstream's
/// CRD): strings are kept, numbers and booleans become their text, anything else is dropped,
/// and a value that is not an object reads as no labels. Read strictly, one KuryrNetwork with
/// `{"tier": 1}` made every list of KuryrNetworks fail, and their handlers never start.
pub fn lenient_labels<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(labels_of(v))
}

fn labels_of(v: Option<serde_json::Value>) -> BTreeMap<String, String> {
    let Some(serde_json::Value::Object(m)) = v else {
        return BTreeMap::new();
    };
    m.into_iter()
        .filter_map(|(k, v)| match v {
            serde_json::Value::String(s) => Some((k, s)),
            serde_json::Value::Number(n) => Some((k, n.to_string())),
            serde_json::Value::Bool(b) => Some((k, b.to_string())),
            _ => None,
        })
        .collect()
}

fn lenient_labels_opt<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.filter(|v| !v.is_null()).map(|v| labels_of(Some(v))))
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
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_labels_opt"
    )]
    #[schemars(schema_with = "preserve_object")]
    pub ns_labels: Option<BTreeMap<String, String>>,
}
