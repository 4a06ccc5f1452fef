//! `KuryrPort` (`kuryrports`, short `kp`): one per pod, named like the pod, carrying the pod's
//! VIFs in `status.vifs`.

use crate::schema::preserve_object;
use crate::vif::VifEntry;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Spec of a KuryrPort.
// Three printer columns of `type_ = "string"` look like duplicated attributes to clippy.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrPort",
    plural = "kuryrports",
    singular = "kuryrport",
    shortname = "kp",
    namespaced,
    status = "KuryrPortStatus",
    derive = "PartialEq",
    doc = "The Neutron ports (VIFs) of one pod.",
    printcolumn(
        name = "PodUID",
        type_ = "string",
        description = "Pod UID",
        json_path = ".spec.podUid"
    ),
    printcolumn(
        name = "Nodename",
        type_ = "string",
        description = "Name of the node corresponding pod lives in",
        json_path = ".spec.podNodeName"
    ),
    printcolumn(
        name = "labels",
        type_ = "string",
        description = "Labels for the CRD",
        json_path = ".metadata.labels"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct KuryrPortSpec {
    /// UID of the pod.
    pub pod_uid: String,
    /// Node the pod is scheduled on.
    pub pod_node_name: String,
    /// The pod is a static (mirror) pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_static: Option<bool>,
}

/// Status of a KuryrPort: the VIFs by interface name (`eth0` is the default one).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct KuryrPortStatus {
    /// VIFs by interface name: `{default: bool, vif: <os-vif versioned object primitive>}`.
    #[schemars(schema_with = "preserve_object")]
    pub vifs: BTreeMap<String, VifEntry>,
}

impl KuryrPortStatus {
    /// The pod's default VIF (the entry with `default: true`, normally `eth0`) and its
    /// interface name.
    pub fn default_vif(&self) -> Option<(&str, &crate::vif::Vif)> {
        self.vifs
            .iter()
            .find(|(_, e)| e.default)
            .map(|(name, e)| (name.as_str(), &e.vif))
    }
}
