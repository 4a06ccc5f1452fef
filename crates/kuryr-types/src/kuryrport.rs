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
//
// Read leniently: the CRD's schema lets anything into `vifs` (upstream's does too), and one
// unreadable KuryrPort must not make every list of KuryrPorts fail (a watch that cannot decode
// its initial list never starts, which stalled every handler of the controller and every ADD of
// the node). Entries that do not read as a VIF are kept aside in `invalid`, with the reason, and
// are never written back. (A plain comment: the doc line above is the CRD's description.)
#[derive(Serialize, Clone, Debug, PartialEq, JsonSchema, Default)]
pub struct KuryrPortStatus {
    /// VIFs by interface name: `{default: bool, vif: <os-vif versioned object primitive>}`.
    #[schemars(schema_with = "preserve_object")]
    pub vifs: BTreeMap<String, VifEntry>,
    /// Entries of `vifs` that could not be read: interface name → (the entry, why).
    #[serde(skip)]
    #[schemars(skip)]
    pub invalid: BTreeMap<String, InvalidVif>,
}

/// An entry of `status.vifs` that is not a VIF.
#[derive(Clone, Debug, PartialEq)]
pub struct InvalidVif {
    /// The entry as written.
    pub raw: serde_json::Value,
    /// Why it could not be read.
    pub error: String,
}

impl InvalidVif {
    /// The Neutron port ID the entry names, when it names one where a VIF would
    /// (`vif.versioned_object.data.id`): the port can then still be released.
    pub fn port_id(&self) -> Option<&str> {
        self.raw
            .get("vif")?
            .get("versioned_object.data")?
            .get("id")?
            .as_str()
            .filter(|s| !s.is_empty())
    }
}

impl<'de> Deserialize<'de> for KuryrPortStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default)]
            vifs: Option<serde_json::Value>,
        }
        let raw = Raw::deserialize(d)?;
        let mut out = KuryrPortStatus::default();
        match raw.vifs {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Object(m)) => {
                for (name, entry) in m {
                    // Read from the parsed entry by reference: the entry is kept only when
                    // it is invalid, so it is not copied for the common case.
                    match VifEntry::deserialize(&entry) {
                        Ok(e) => {
                            out.vifs.insert(name, e);
                        }
                        Err(e) => {
                            out.invalid.insert(
                                name,
                                InvalidVif {
                                    raw: entry,
                                    error: e.to_string(),
                                },
                            );
                        }
                    }
                }
            }
            Some(other) => {
                out.invalid.insert(
                    String::new(),
                    InvalidVif {
                        error: format!("status.vifs is not an object: {other}"),
                        raw: other,
                    },
                );
            }
        }
        Ok(out)
    }
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
