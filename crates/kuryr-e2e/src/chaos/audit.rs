//! The chaos suite's audit: what the cluster and the cloud hold, checked against each other from
//! the outside (Kubernetes through the API, Neutron and Octavia through openstacksdk), by the
//! cluster tag. A finding is a leak (a tagged resource nothing owns), a duplicate (one resource
//! owned twice, or one owner holding two), or something stuck (a pod not Ready, a deletion that
//! does not end, a load balancer not ACTIVE). The nodes' switches are read too ([`wiring`]): a
//! switch port left for a pod whose device is gone is a leak. [`classify`] is pure, so its rules
//! are unit-tested.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::{Api, Client, ResourceExt, api::ListParams};
use kuryr_types::{KuryrLoadBalancer, KuryrPort};
use serde::Deserialize;

use super::wiring::{self, OvsIface};
use crate::{
    cluster::NodeInfo,
    error::{Error, Result},
    neutron::{NeutronPort, ports_tagged, sdk_query},
    services::{OctaviaLb, lbs_tagged},
};

/// kuryr-rs's device owner of pod ports (upstream's).
pub const DEVICE_OWNER: &str = "compute:kuryr";
/// The name of pool ports.
pub const POOL_PORT_NAME: &str = "kuryr-pool-port";

/// What one audit found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    /// Tagged ports, load balancers and floating IPs nothing owns, `kind id (why)`.
    pub leaked: Vec<String>,
    /// Resources owned twice, or owners holding two.
    pub duplicates: Vec<String>,
    /// Pods, KuryrPorts, Services or load balancers that are not where they should be by now.
    pub stuck: Vec<String>,
    /// Pool ports per node over `[vif_pool] ports_pool_max`.
    pub pools_over_max: Vec<String>,
    /// Pool ports per node, for the report.
    pub pooled: BTreeMap<String, usize>,
}

impl Findings {
    /// Nothing found.
    pub fn clean(&self) -> bool {
        self.leaked.is_empty()
            && self.duplicates.is_empty()
            && self.stuck.is_empty()
            && self.pools_over_max.is_empty()
    }

    /// The first finding with its kind (`stuck: …`) and how many there are in all: what
    /// holds convergence back, for the iteration's line.
    pub fn first(&self) -> Option<String> {
        let kinds = [
            ("leaked", &self.leaked),
            ("duplicate", &self.duplicates),
            ("stuck", &self.stuck),
            ("pool over max", &self.pools_over_max),
        ];
        let total: usize = kinds.iter().map(|(_, v)| v.len()).sum();
        let (kind, first) = kinds.iter().find_map(|(k, v)| v.first().map(|f| (k, f)))?;
        Some(if total > 1 {
            format!("{kind}: {first} (and {} more)", total - 1)
        } else {
            format!("{kind}: {first}")
        })
    }
}

/// A floating IP as the audit needs it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct FloatingIp {
    /// ID.
    pub id: String,
    /// Address.
    pub address: String,
}

const FIP_SCRIPT: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
print(json.dumps([{"id": f.id, "address": f.floating_ip_address or ""} for f in conn.network.ips(tags=sys.argv[1])]))
"#;

/// Everything the audit reads, at one moment.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Pods: `ns/name` → (node, ready, deleting for how long, age).
    pub pods: BTreeMap<String, PodState>,
    /// KuryrPorts: `ns/name` → port IDs of their VIFs (empty: no VIFs yet).
    pub kuryrports: BTreeMap<String, Vec<String>>,
    /// Services with a ClusterIP: `ns/name`.
    pub services: BTreeSet<String>,
    /// KuryrLoadBalancers: `ns/name` → (load balancer ID, floating IP ID).
    pub klbs: BTreeMap<String, (Option<String>, Option<String>)>,
    /// Objects being deleted (a Service or KuryrLoadBalancer held by its finalizer, a
    /// KuryrPort, a namespace): `kind ns/name` → for how long.
    pub deleting: BTreeMap<String, Duration>,
    /// Node names.
    pub nodes: BTreeSet<String>,
    /// Tagged Neutron ports.
    pub ports: Vec<NeutronPort>,
    /// Tagged Octavia load balancers.
    pub lbs: Vec<OctaviaLb>,
    /// Tagged floating IPs.
    pub fips: Vec<FloatingIp>,
    /// The plugged interfaces of the nodes' switches.
    pub ovs: Vec<OvsIface>,
}

/// One pod's state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodState {
    /// Its node.
    pub node: String,
    /// Ready.
    pub ready: bool,
    /// How long it has been terminating (None: not deleting).
    pub deleting_for: Option<Duration>,
    /// Its age.
    pub age: Duration,
    /// Host network (no port expected).
    pub host_network: bool,
}

/// How long things may take before they count as stuck.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A pod not Ready after this long.
    pub ready: Duration,
    /// A pod still terminating after this long.
    pub terminating: Duration,
    /// `[vif_pool] ports_pool_max` (0: no maximum).
    pub pool_max: usize,
}

fn kube_err(what: &str) -> impl FnOnce(kube::Error) -> Error + '_ {
    move |source| Error::Kube {
        what: what.to_string(),
        source,
    }
}

/// Reads everything (blocking calls run on the blocking pool).
pub async fn observe(client: &Client, tag: &str, switches: &[NodeInfo]) -> Result<Observed> {
    let lp = ListParams::default();
    let now = jiff::Timestamp::now();
    let since = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.and_then(|t| Duration::try_from(now.duration_since(t.0)).ok())
    };
    let pods = Api::<Pod>::all(client.clone())
        .list(&lp)
        .await
        .map_err(kube_err("list pods"))?;
    let kps = Api::<KuryrPort>::all(client.clone())
        .list(&lp)
        .await
        .map_err(kube_err("list kuryrports"))?;
    let svcs = Api::<Service>::all(client.clone())
        .list(&lp)
        .await
        .map_err(kube_err("list services"))?;
    let klbs = Api::<KuryrLoadBalancer>::all(client.clone())
        .list(&lp)
        .await
        .map_err(kube_err("list kuryrloadbalancers"))?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&lp)
        .await
        .map_err(kube_err("list nodes"))?;
    let key = |o: &dyn ResourceLike| format!("{}/{}", o.ns(), o.name());
    let mut o = Observed::default();
    for p in &pods.items {
        let spec = p.spec.as_ref();
        o.pods.insert(
            key(p),
            PodState {
                node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
                ready: crate::pods::is_ready(p),
                deleting_for: p
                    .metadata
                    .deletion_timestamp
                    .as_ref()
                    .map(|t| since(Some(t)).unwrap_or_default()),
                age: since(p.metadata.creation_timestamp.as_ref()).unwrap_or_default(),
                host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
            },
        );
    }
    for kp in &kps.items {
        let ids = kp
            .status
            .iter()
            .flat_map(|s| s.vifs.values())
            .filter_map(|e| e.vif.id.clone())
            .collect();
        o.kuryrports.insert(key(kp), ids);
    }
    let mut deleting =
        |kind: &str, name: String, t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            if let Some(t) = t {
                o.deleting
                    .insert(format!("{kind} {name}"), since(Some(t)).unwrap_or_default());
            }
        };
    for x in &svcs.items {
        deleting("Service", key(x), x.metadata.deletion_timestamp.as_ref());
    }
    for x in &klbs.items {
        deleting(
            "KuryrLoadBalancer",
            key(x),
            x.metadata.deletion_timestamp.as_ref(),
        );
    }
    for x in &kps.items {
        deleting("KuryrPort", key(x), x.metadata.deletion_timestamp.as_ref());
    }
    for s in &svcs.items {
        let spec = s.spec.as_ref();
        let headless = spec
            .and_then(|s| s.cluster_ip.as_deref())
            .is_none_or(|ip| ip == "None" || ip.is_empty());
        let external = spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName");
        let system = s.namespace().as_deref() == Some("default") && s.name_any() == "kubernetes";
        // A Service being deleted is judged by how long that takes (`deleting` above), not by
        // its load balancer, which goes first.
        let leaving = s.metadata.deletion_timestamp.is_some();
        if !headless && !external && !system && !leaving {
            o.services.insert(key(s));
        }
    }
    for k in &klbs.items {
        let st = k.status.as_ref();
        o.klbs.insert(
            key(k),
            (
                st.and_then(|s| s.loadbalancer.as_ref())
                    .map(|l| l.id.clone())
                    .filter(|i| !i.is_empty()),
                st.and_then(|s| s.service_pub_ip_info.as_ref())
                    .map(|f| f.ip_id.clone())
                    .filter(|i| !i.is_empty()),
            ),
        );
    }
    o.nodes = nodes.items.iter().map(ResourceExt::name_any).collect();
    let tag = tag.to_string();
    let switches = switches.to_vec();
    // Each cloud query is an openstacksdk process (2–3 s of Python start-up on this machine's
    // cores): run side by side, one audit takes about the longest of them, not their sum, so
    // the convergence time is not stretched by the audit's own length.
    let (ports, lbs, fips, ovs) = tokio::task::spawn_blocking(move || {
        std::thread::scope(|sc| {
            let ports = sc.spawn(|| ports_tagged(&tag));
            let lbs = sc.spawn(|| lbs_tagged(&tag));
            let fips = sc.spawn(|| sdk_query::<FloatingIp>("floating IP query", FIP_SCRIPT, &[&tag]));
            let mut ovs = Vec::new();
            for n in &switches {
                ovs.extend(wiring::read_node(n)?);
            }
            let joined = |what: &str| Error::Parse {
                what: what.into(),
                detail: "the query's thread panicked".into(),
            };
            Ok::<_, Error>((
                ports.join().map_err(|_| joined("the port query"))??,
                lbs.join().map_err(|_| joined("the load balancer query"))??,
                fips.join().map_err(|_| joined("the floating IP query"))??,
                ovs,
            ))
        })
    })
    .await
    .map_err(|e| Error::Parse {
        what: "the OpenStack queries".into(),
        detail: e.to_string(),
    })??;
    o.ports = ports;
    o.lbs = lbs;
    o.fips = fips;
    o.ovs = ovs;
    Ok(o)
}

/// The object's namespace and name, for one spelling of keys.
trait ResourceLike {
    fn ns(&self) -> String;
    fn name(&self) -> String;
}

impl<K: ResourceExt> ResourceLike for K {
    fn ns(&self) -> String {
        self.namespace().unwrap_or_default()
    }
    fn name(&self) -> String {
        self.name_any()
    }
}

/// Judges what was observed (pure).
pub fn classify(o: &Observed, limits: Limits) -> Findings {
    let mut f = Findings::default();
    // Ports: who references each.
    let mut owners: HashMap<&str, Vec<&str>> = HashMap::new();
    for (kp, ids) in &o.kuryrports {
        for id in ids {
            owners.entry(id.as_str()).or_default().push(kp.as_str());
        }
    }
    for (id, kps) in &owners {
        if kps.len() > 1 {
            f.duplicates
                .push(format!("port {id} is the VIF of {}", kps.join(" and ")));
        }
    }
    let tagged: HashMap<&str, &NeutronPort> = o.ports.iter().map(|p| (p.id.as_str(), p)).collect();
    for p in o.ports.iter().filter(|p| p.device_owner.starts_with("compute:")) {
        if owners.contains_key(p.id.as_str()) {
            continue;
        }
        let pooled = p.name == POOL_PORT_NAME && p.device_owner == DEVICE_OWNER && !p.host.is_empty();
        if !pooled {
            f.leaked.push(format!(
                "port {} (host {:?}, name {:?}: no KuryrPort, not a pool port)",
                p.id, p.host, p.name
            ));
        } else if !o.nodes.contains(&p.host) {
            f.leaked.push(format!(
                "port {} (pooled for {}, a node that no longer exists)",
                p.id, p.host
            ));
        } else {
            *f.pooled.entry(p.host.clone()).or_default() += 1;
        }
    }
    if limits.pool_max > 0 {
        for (host, n) in &f.pooled {
            if *n > limits.pool_max {
                f.pools_over_max
                    .push(format!("{host}: {n} pool ports (max {})", limits.pool_max));
            }
        }
    }
    // KuryrPorts and their pods.
    for (kp, ids) in &o.kuryrports {
        if !o.pods.contains_key(kp) {
            f.stuck.push(format!("KuryrPort {kp}: its pod is gone"));
        }
        for id in ids {
            if !tagged.contains_key(id.as_str()) {
                f.stuck.push(format!(
                    "KuryrPort {kp}: its port {id} is not in Neutron (with the cluster tag)"
                ));
            }
        }
    }
    for (name, p) in &o.pods {
        if let Some(d) = p.deleting_for {
            if d > limits.terminating {
                f.stuck
                    .push(format!("pod {name}: terminating for {} s", d.as_secs()));
            }
            continue;
        }
        if p.host_network || p.age < limits.ready {
            continue;
        }
        if !p.ready {
            f.stuck.push(format!(
                "pod {name} on {}: not Ready after {} s",
                p.node,
                p.age.as_secs()
            ));
        }
        if o.kuryrports.get(name).is_none_or(Vec::is_empty) {
            f.stuck.push(format!("pod {name}: no KuryrPort with a VIF"));
        }
    }
    for (what, d) in &o.deleting {
        if *d > limits.terminating {
            f.stuck
                .push(format!("{what}: being deleted for {} s", d.as_secs()));
        }
    }
    // Services and load balancers.
    let lb_ids: BTreeSet<&str> = o.klbs.values().filter_map(|(lb, _)| lb.as_deref()).collect();
    for s in &o.services {
        match o.klbs.get(s) {
            None => f.stuck.push(format!("Service {s}: no KuryrLoadBalancer")),
            Some((None, _)) => f
                .stuck
                .push(format!("Service {s}: no load balancer in its KuryrLoadBalancer")),
            Some((Some(id), _)) => match o.lbs.iter().find(|l| &l.id == id) {
                None => f
                    .stuck
                    .push(format!("Service {s}: its load balancer {id} is not in Octavia")),
                Some(l) if l.status != "ACTIVE" => {
                    f.stuck
                        .push(format!("Service {s}: load balancer {id} is {}", l.status));
                }
                Some(_) => {}
            },
        }
    }
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in &o.lbs {
        by_name.entry(l.name.as_str()).or_default().push(l.id.as_str());
        if !lb_ids.contains(l.id.as_str()) && l.status != "PENDING_DELETE" {
            f.leaked.push(format!(
                "load balancer {} ({}, {}): no KuryrLoadBalancer records it",
                l.id, l.name, l.status
            ));
        }
    }
    for (name, ids) in by_name {
        if ids.len() > 1 {
            f.duplicates.push(format!(
                "{} load balancers named {name}: {}",
                ids.len(),
                ids.join(", ")
            ));
        }
    }
    // Switch ports of pods that are gone (their device went with the pod's namespace).
    for i in o.ovs.iter().filter(|i| i.device_gone) {
        f.leaked.push(format!(
            "switch port {} on {} (Neutron port {}): its device is gone, the port was never unplugged",
            i.name, i.node, i.iface_id
        ));
    }
    let fip_ids: BTreeSet<&str> = o.klbs.values().filter_map(|(_, f)| f.as_deref()).collect();
    for ip in &o.fips {
        if !fip_ids.contains(ip.id.as_str()) {
            f.leaked.push(format!(
                "floating IP {} ({}): no KuryrLoadBalancer records it",
                ip.id, ip.address
            ));
        }
    }
    f
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn port(id: &str, host: &str, name: &str) -> NeutronPort {
        NeutronPort {
            id: id.into(),
            status: "ACTIVE".into(),
            mac: String::new(),
            ips: vec![],
            host: host.into(),
            device_owner: DEVICE_OWNER.into(),
            device_id: String::new(),
            network_id: "n".into(),
            project_id: "p".into(),
            security_groups: vec![],
            tags: vec![],
            name: name.into(),
        }
    }

    fn limits() -> Limits {
        Limits {
            ready: Duration::from_secs(60),
            terminating: Duration::from_secs(60),
            pool_max: 2,
        }
    }

    fn ready_pod(node: &str) -> PodState {
        PodState {
            node: node.into(),
            ready: true,
            age: Duration::from_secs(100),
            ..Default::default()
        }
    }

    #[test]
    fn a_healthy_cluster_is_clean() {
        let mut o = Observed::default();
        o.nodes.insert("node-1".into());
        o.pods.insert("a/p".into(), ready_pod("node-1"));
        o.kuryrports.insert("a/p".into(), vec!["p1".into()]);
        o.ports = vec![port("p1", "node-1", ""), port("p2", "node-1", POOL_PORT_NAME)];
        let f = classify(&o, limits());
        assert!(f.clean(), "{f:?}");
        assert_eq!(f.pooled["node-1"], 1);
    }

    #[test]
    fn a_switch_port_whose_device_is_gone_is_a_leak() {
        let mut o = Observed::default();
        o.nodes.insert("node-1".into());
        o.pods.insert("a/p".into(), ready_pod("node-1"));
        o.kuryrports.insert("a/p".into(), vec!["p1".into()]);
        o.ports = vec![port("p1", "node-1", "")];
        let iface = |name: &str, id: &str, gone: bool| OvsIface {
            node: "node-1".into(),
            name: name.into(),
            iface_id: id.into(),
            device_gone: gone,
        };
        o.ovs = vec![iface("tapp1", "p1", false)];
        assert!(classify(&o, limits()).clean());
        o.ovs.push(iface("tapold", "p9", true));
        let f = classify(&o, limits());
        assert_eq!(f.leaked.len(), 1, "{f:?}");
        assert!(
            f.leaked[0].contains("tapold on node-1 (Neutron port p9)"),
            "{f:?}"
        );
    }

    #[test]
    fn leaks_duplicates_and_stuck_things_are_named() {
        let mut o = Observed::default();
        o.nodes.insert("node-1".into());
        o.pods.insert("a/p".into(), ready_pod("node-1"));
        o.pods.insert("a/q".into(), ready_pod("node-1"));
        o.pods.insert(
            "a/slow".into(),
            PodState {
                ready: false,
                ..ready_pod("node-1")
            },
        );
        o.pods.insert(
            "a/dying".into(),
            PodState {
                deleting_for: Some(Duration::from_secs(300)),
                ..ready_pod("node-1")
            },
        );
        o.kuryrports.insert("a/p".into(), vec!["p1".into()]);
        o.kuryrports.insert("a/q".into(), vec!["p1".into()]);
        o.kuryrports.insert("a/gone".into(), vec![]);
        o.ports = vec![
            port("p1", "node-1", ""),
            port("stray", "node-1", "something"),
            port("lost", "node-9", POOL_PORT_NAME),
            port("x1", "node-1", POOL_PORT_NAME),
            port("x2", "node-1", POOL_PORT_NAME),
            port("x3", "node-1", POOL_PORT_NAME),
        ];
        o.services.insert("a/web".into());
        o.lbs = vec![
            OctaviaLb {
                id: "l1".into(),
                name: "a/old".into(),
                vip: String::new(),
                status: "ACTIVE".into(),
            },
            OctaviaLb {
                id: "l2".into(),
                name: "a/old".into(),
                vip: String::new(),
                status: "PENDING_DELETE".into(),
            },
        ];
        o.deleting
            .insert("Service a/old".into(), Duration::from_secs(400));
        o.fips = vec![FloatingIp {
            id: "f1".into(),
            address: "172.24.4.9".into(),
        }];
        let f = classify(&o, limits());
        let all = format!("{f:#?}");
        assert!(f.duplicates.iter().any(|d| d.contains("port p1")), "{all}");
        assert!(
            f.duplicates
                .iter()
                .any(|d| d.contains("2 load balancers named a/old")),
            "{all}"
        );
        assert!(f.leaked.iter().any(|l| l.contains("port stray")), "{all}");
        assert!(
            f.leaked
                .iter()
                .any(|l| l.contains("port lost") && l.contains("node-9")),
            "{all}"
        );
        assert!(f.leaked.iter().any(|l| l.contains("load balancer l1")), "{all}");
        assert!(
            !f.leaked.iter().any(|l| l.contains("load balancer l2")),
            "being deleted: {all}"
        );
        assert!(f.leaked.iter().any(|l| l.contains("floating IP f1")), "{all}");
        assert!(
            f.stuck
                .iter()
                .any(|s| s.contains("a/slow") && s.contains("not Ready")),
            "{all}"
        );
        assert!(
            f.stuck
                .iter()
                .any(|s| s.contains("a/dying") && s.contains("terminating")),
            "{all}"
        );
        assert!(f.stuck.iter().any(|s| s.contains("KuryrPort a/gone")), "{all}");
        assert!(f.stuck.iter().any(|s| s.contains("Service a/web")), "{all}");
        assert!(
            f.stuck
                .iter()
                .any(|s| s.contains("Service a/old: being deleted for 400 s")),
            "{all}"
        );
        assert_eq!(f.pools_over_max, vec!["node-1: 3 pool ports (max 2)".to_string()]);
    }

    #[test]
    fn the_first_finding_names_its_kind_and_how_many_others() {
        assert_eq!(Findings::default().first(), None);
        let f = Findings {
            stuck: vec!["svc a/s without ACTIVE lb".into(), "pod a/p not Ready".into()],
            pools_over_max: vec!["node-1: 3 pool ports (max 2)".into()],
            ..Default::default()
        };
        assert_eq!(
            f.first().as_deref(),
            Some("stuck: svc a/s without ACTIVE lb (and 2 more)")
        );
        let f = Findings {
            leaked: vec!["port x".into()],
            ..Default::default()
        };
        assert_eq!(f.first().as_deref(), Some("leaked: port x"));
    }
}
