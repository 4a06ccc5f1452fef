//! Pure decisions of kuryrctl (no I/O): a pod's VIF row, port classification, pool grouping
//! and the status checks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kuryr_openstack::Port;
use kuryr_types::{
    KuryrPort,
    constants::{ANNOTATION_VIF, DEVICE_OWNER, KURYR_PORT_NAME},
};
use serde::Serialize;

use crate::output::{Row, dash};

/// One pod and its default VIF.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VifRow {
    /// Namespace.
    pub namespace: String,
    /// Pod.
    pub pod: String,
    /// Node.
    pub node: String,
    /// Interface name in the pod (`eth0`).
    pub ifname: Option<String>,
    /// Neutron port ID.
    pub port_id: Option<String>,
    /// IP with prefix length (`10.10.1.5/24`).
    pub ip: Option<String>,
    /// MAC.
    pub mac: Option<String>,
    /// VLAN ID (nested).
    pub vlan: Option<i64>,
    /// Active (port ACTIVE in Neutron).
    pub active: Option<bool>,
    /// `vifs` written, `pending` (KuryrPort without VIF) or `no-kuryrport`.
    pub state: &'static str,
}

impl Row for VifRow {
    fn headers() -> &'static [&'static str] {
        &[
            "NAMESPACE",
            "POD",
            "NODE",
            "IFNAME",
            "PORT ID",
            "IP",
            "MAC",
            "VLAN",
            "ACTIVE",
            "STATE",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.namespace.clone(),
            self.pod.clone(),
            dash(Some(&self.node)),
            dash(self.ifname.as_deref()),
            dash(self.port_id.as_deref()),
            dash(self.ip.as_deref()),
            dash(self.mac.as_deref()),
            self.vlan.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
            self.active.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
            self.state.into(),
        ]
    }
}

/// The VIF row of `pod` (`None` for host-network pods, which have no VIF).
pub fn vif_row(pod: &Pod, kp: Option<&KuryrPort>) -> Option<VifRow> {
    let spec = pod.spec.as_ref();
    if spec.and_then(|s| s.host_network).unwrap_or(false) {
        return None;
    }
    let mut row = VifRow {
        namespace: pod.namespace().unwrap_or_default(),
        pod: pod.name_any(),
        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        ifname: None,
        port_id: None,
        ip: None,
        mac: None,
        vlan: None,
        active: None,
        state: "no-kuryrport",
    };
    let Some(kp) = kp else { return Some(row) };
    row.state = "pending";
    let Some((ifname, vif)) = kp.status.as_ref().and_then(|s| s.default_vif()) else {
        return Some(row);
    };
    row.state = "vifs";
    row.ifname = Some(ifname.to_owned());
    row.port_id = vif.id.clone();
    row.mac = vif.address.clone();
    row.vlan = vif.vlan_id;
    row.active = vif.active;
    row.ip = vif.network.as_ref().and_then(|n| {
        n.subnets.iter().find_map(|s| {
            let addr = s.ips.iter().find_map(|ip| ip.address.clone())?;
            let prefix = s.cidr.as_deref().and_then(|c| c.split_once('/')).map(|(_, p)| p);
            Some(match prefix {
                Some(p) => format!("{addr}/{p}"),
                None => addr,
            })
        })
    });
    Some(row)
}

/// What a tagged Neutron port is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "class", rename_all = "lowercase")]
pub enum PortClass {
    /// Referenced by a KuryrPort's VIF.
    InUse {
        /// `namespace/name` of the KuryrPort.
        owner: String,
    },
    /// A pool port: kuryr's device owner, bound to a host, named `kuryr-pool-port`, unreferenced.
    Pooled,
    /// Neither: leaked.
    Orphan,
}

/// Port IDs referenced by the VIFs of `kps` → `namespace/name`.
pub fn referenced_ports(kps: &[KuryrPort]) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for kp in kps {
        let owner = format!("{}/{}", kp.namespace().unwrap_or_default(), kp.name_any());
        for e in kp.status.iter().flat_map(|s| s.vifs.values()) {
            if let Some(id) = &e.vif.id {
                m.insert(id.clone(), owner.clone());
            }
        }
    }
    m
}

/// Classifies `port` given the referenced ports.
pub fn classify_port(port: &Port, referenced: &HashMap<String, String>) -> PortClass {
    if let Some(owner) = referenced.get(&port.id) {
        return PortClass::InUse { owner: owner.clone() };
    }
    if port.name == KURYR_PORT_NAME && port.device_owner == DEVICE_OWNER && !port.binding_host_id.is_empty() {
        PortClass::Pooled
    } else {
        PortClass::Orphan
    }
}

/// One classified port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortRow {
    /// Port ID.
    pub id: String,
    /// Classification.
    #[serde(flatten)]
    pub class: PortClass,
    /// Binding host.
    pub host: String,
    /// Network.
    pub network_id: String,
    /// First fixed IP.
    pub ip: Option<String>,
    /// Neutron status.
    pub status: String,
    /// Name.
    pub name: String,
}

impl PortRow {
    /// The row of `port` classified as `class`.
    pub fn new(port: &Port, class: PortClass) -> Self {
        Self {
            id: port.id.clone(),
            class,
            host: port.binding_host_id.clone(),
            network_id: port.network_id.clone(),
            ip: port.fixed_ips.first().map(|f| f.ip_address.clone()),
            status: port.status.clone(),
            name: port.name.clone(),
        }
    }
}

impl Row for PortRow {
    fn headers() -> &'static [&'static str] {
        &["PORT ID", "CLASS", "OWNER", "HOST", "NETWORK", "IP", "STATUS"]
    }
    fn cells(&self) -> Vec<String> {
        let (class, owner) = match &self.class {
            PortClass::InUse { owner } => ("in-use", owner.as_str()),
            PortClass::Pooled => ("pooled", ""),
            PortClass::Orphan => ("orphan", ""),
        };
        vec![
            self.id.clone(),
            class.into(),
            dash(Some(owner)),
            dash(Some(&self.host)),
            dash(Some(&self.network_id)),
            dash(self.ip.as_deref()),
            dash(Some(&self.status)),
        ]
    }
}

/// One pool: (host, project, network) with its free ports, by security groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolRow {
    /// Binding host.
    pub host: String,
    /// Project.
    pub project_id: String,
    /// Network.
    pub network_id: String,
    /// Security groups (sorted) of this group of ports.
    pub security_groups: Vec<String>,
    /// Free ports.
    pub ports: usize,
}

impl Row for PoolRow {
    fn headers() -> &'static [&'static str] {
        &["HOST", "PROJECT", "NETWORK", "SECURITY GROUPS", "PORTS"]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.host.clone(),
            self.project_id.clone(),
            self.network_id.clone(),
            dash(Some(&self.security_groups.join(","))),
            self.ports.to_string(),
        ]
    }
}

/// Groups the pooled ports among `ports` by pool key and security groups.
pub fn pools(ports: &[Port], referenced: &HashMap<String, String>) -> Vec<PoolRow> {
    let mut m: BTreeMap<(String, String, String, Vec<String>), usize> = BTreeMap::new();
    for p in ports {
        if classify_port(p, referenced) != PortClass::Pooled {
            continue;
        }
        let sgs: BTreeSet<String> = p.security_groups.iter().cloned().collect();
        let key = (
            p.binding_host_id.clone(),
            p.project_id.clone(),
            p.network_id.clone(),
            sgs.into_iter().collect(),
        );
        *m.entry(key).or_default() += 1;
    }
    m.into_iter()
        .map(
            |((host, project_id, network_id, security_groups), ports)| PoolRow {
                host,
                project_id,
                network_id,
                security_groups,
                ports,
            },
        )
        .collect()
}

/// One pool as the controller's pool manager reports it (`GET /listPools`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ManagedPoolRow {
    /// Binding host.
    #[serde(default)]
    pub host: String,
    /// Project.
    #[serde(default)]
    pub project_id: String,
    /// Network.
    #[serde(default)]
    pub network_id: String,
    /// Ports ready.
    #[serde(default)]
    pub available: u32,
    /// Ports assigned to pods.
    #[serde(default)]
    pub in_use: u32,
    /// Released ports cooling down.
    #[serde(default)]
    pub cooling: u32,
    /// Ports being created.
    #[serde(default)]
    pub creating: u32,
    /// Pods waiting for a port.
    #[serde(default)]
    pub waiting: u32,
}

impl Row for ManagedPoolRow {
    fn headers() -> &'static [&'static str] {
        &[
            "HOST",
            "PROJECT",
            "NETWORK",
            "AVAILABLE",
            "IN USE",
            "COOLING",
            "CREATING",
            "WAITING",
        ]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.host.clone(),
            self.project_id.clone(),
            self.network_id.clone(),
            self.available.to_string(),
            self.in_use.to_string(),
            self.cooling.to_string(),
            self.creating.to_string(),
            self.waiting.to_string(),
        ]
    }
}

/// Result of one status check (upstream's upgrade-check codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// 0.
    Success,
    /// 1.
    Warning,
    /// 2.
    Failure,
}

impl Outcome {
    /// Exit code.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Success => 0,
            Outcome::Warning => 1,
            Outcome::Failure => 2,
        }
    }
}

/// One status check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Name.
    pub check: &'static str,
    /// Result.
    pub result: Outcome,
    /// Details.
    pub details: String,
}

impl Row for Check {
    fn headers() -> &'static [&'static str] {
        &["CHECK", "RESULT", "DETAILS"]
    }
    fn cells(&self) -> Vec<String> {
        let r = match self.result {
            Outcome::Success => "Success",
            Outcome::Warning => "Warning",
            Outcome::Failure => "Failure",
        };
        vec![self.check.into(), r.into(), self.details.clone()]
    }
}

/// The four CRDs must be served.
pub fn check_crds(expected: &[String], present: &BTreeSet<String>) -> Check {
    let missing: Vec<&String> = expected.iter().filter(|c| !present.contains(*c)).collect();
    if missing.is_empty() {
        Check {
            check: "CRDs",
            result: Outcome::Success,
            details: format!("all {} kuryr CRDs are installed", expected.len()),
        }
    } else {
        Check {
            check: "CRDs",
            result: Outcome::Failure,
            details: format!(
                "missing: {}",
                missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// Pods still carrying the legacy `openstack.org/kuryr-vif` annotation (pre-KuryrPort
/// format): a failure, as upstream's old-format result.
pub fn check_legacy_annotations(pods: &[Pod]) -> Check {
    let legacy: Vec<String> = pods
        .iter()
        .filter(|p| p.annotations().contains_key(ANNOTATION_VIF))
        .map(|p| format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any()))
        .collect();
    if legacy.is_empty() {
        Check {
            check: "Pod annotations",
            result: Outcome::Success,
            details: "no pod uses the legacy openstack.org/kuryr-vif annotation".into(),
        }
    } else {
        let shown: Vec<&str> = legacy.iter().take(5).map(String::as_str).collect();
        Check {
            check: "Pod annotations",
            result: Outcome::Failure,
            details: format!(
                "{} pod(s) still carry openstack.org/kuryr-vif (e.g. {}): recreate them",
                legacy.len(),
                shown.join(", ")
            ),
        }
    }
}

/// KuryrPorts whose pod is gone (or another pod took the name): a warning, the controller
/// deletes them when it runs.
pub fn check_stale_kuryrports(pods: &[Pod], kps: &[KuryrPort]) -> Check {
    let uids: HashMap<(String, String), String> = pods
        .iter()
        .map(|p| {
            (
                (p.namespace().unwrap_or_default(), p.name_any()),
                p.uid().unwrap_or_default(),
            )
        })
        .collect();
    let stale: Vec<String> = kps
        .iter()
        .filter(|kp| {
            let key = (kp.namespace().unwrap_or_default(), kp.name_any());
            uids.get(&key) != Some(&kp.spec.pod_uid)
        })
        .map(|kp| format!("{}/{}", kp.namespace().unwrap_or_default(), kp.name_any()))
        .collect();
    if stale.is_empty() {
        Check {
            check: "KuryrPorts",
            result: Outcome::Success,
            details: format!("{} KuryrPort(s), all of existing pods", kps.len()),
        }
    } else {
        Check {
            check: "KuryrPorts",
            result: Outcome::Warning,
            details: format!(
                "{} KuryrPort(s) without their pod: {}",
                stale.len(),
                stale.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// An object carrying finalizers: `(kind, namespace/name, finalizers)`.
pub type Finalized = (&'static str, String, Vec<String>);

/// The handler that removes each kind's kuryr finalizer.
pub const FINALIZER_HANDLERS: &[(&str, &str)] = &[
    ("Service", "kuryrloadbalancer"),
    ("KuryrLoadBalancer", "kuryrloadbalancer"),
    ("NetworkPolicy", "kuryrnetworkpolicy"),
    ("KuryrNetworkPolicy", "kuryrnetworkpolicy"),
];

/// Objects carrying a kuryr finalizer whose handler is not in `enabled_handlers` (the
/// configuration's `[kubernetes] enabled_handlers`; `None` when no kuryr.conf was given): left
/// by upstream Kuryr, deleting them (or their namespace) hangs until that handler runs or the
/// finalizer is removed by hand.
pub fn check_unhandled_finalizers(objects: &[Finalized], enabled_handlers: Option<&[String]>) -> Check {
    let handler_of = |kind: &str| {
        FINALIZER_HANDLERS
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, h)| *h)
    };
    let Some(enabled) = enabled_handlers else {
        return Check {
            check: "Upstream finalizers",
            result: Outcome::Success,
            details: "not checked: give --config-file to compare kuryr finalizers with the enabled handlers"
                .into(),
        };
    };
    let stuck: Vec<&Finalized> = objects
        .iter()
        .filter(|(kind, _, _)| handler_of(kind).is_some_and(|h| !enabled.iter().any(|e| e == h)))
        .filter(|(_, _, fs)| {
            fs.iter()
                .any(|f| f.starts_with(KURYR_FINALIZER_PREFIX) || f.contains(".kuryr.openstack.org"))
        })
        .collect();
    if stuck.is_empty() {
        return Check {
            check: "Upstream finalizers",
            result: Outcome::Success,
            details: "every kuryr finalizer belongs to an enabled handler".into(),
        };
    }
    let mut per_kind: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (kind, _, _) in &stuck {
        *per_kind.entry(kind).or_default() += 1;
    }
    let counts: Vec<String> = per_kind.iter().map(|(k, n)| format!("{n} {k}(s)")).collect();
    let mut missing: Vec<&str> = per_kind.keys().filter_map(|k| handler_of(k)).collect();
    missing.dedup();
    let examples: Vec<String> = stuck.iter().take(5).map(|(k, n, _)| format!("{k} {n}")).collect();
    Check {
        check: "Upstream finalizers",
        result: Outcome::Warning,
        details: format!(
            "{} carry kuryr finalizers whose handler is not enabled ({}): deleting them or their namespace \
             waits until it runs or the finalizer is removed by hand (e.g. {})",
            counts.join(", "),
            missing.join(", "),
            examples.join(", ")
        ),
    }
}

/// Prefix of upstream's finalizers (`kuryr.openstack.org/...`).
const KURYR_FINALIZER_PREFIX: &str = "kuryr.openstack.org/";

#[cfg(test)]
mod tests;
