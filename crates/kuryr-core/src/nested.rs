//! Nested mode's pure decisions (pods inside VMs whose port is the parent of a Neutron trunk;
//! `pod_vif_driver = nested-vlan`): which port is a node's trunk parent, what a trunk already
//! carries (`trunk_details` of the parent port), and VLAN segmentation IDs for new subports,
//! allocated without collisions under concurrency and recovered from the trunks after a restart.
//!
//! Upstream picked a random free ID and retried on Neutron's 409; here IDs are reserved in
//! memory before the `add_subports` call that uses them, so concurrent requests of one controller
//! never pick the same ID, and a 409 (another writer) is answered by re-reading the trunk
//! ([`VlanIds::observe`]) before the next allocation.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::neutron::Port;

/// Lowest usable 802.1Q VLAN ID.
pub const VLAN_MIN: u16 = 1;
/// Highest usable 802.1Q VLAN ID (4095 is reserved).
pub const VLAN_MAX: u16 = 4094;

/// Why a nested decision cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NestedError {
    /// `[pod_vif_nested] worker_nodes_subnets` is empty.
    #[error("[pod_vif_nested] worker_nodes_subnets is empty: nested mode needs the subnets of the node VMs")]
    NoWorkerSubnets,
    /// No port has the node's IP on a worker subnet.
    #[error(
        "no Neutron port has the node's IP {ip} on a worker nodes' subnet ([pod_vif_nested] worker_nodes_subnets = {subnets})"
    )]
    NoParentPort {
        /// The node's IP.
        ip: String,
        /// The configured subnets.
        subnets: String,
    },
    /// Several ports have it.
    #[error(
        "ports {ports} all have the node's IP {ip} on a worker nodes' subnet: which one is the node's is ambiguous"
    )]
    AmbiguousParentPort {
        /// The node's IP.
        ip: String,
        /// The candidates.
        ports: String,
    },
    /// The node's port is not a trunk's parent.
    #[error(
        "port {port} of the node's IP {ip} is not the parent of a trunk (no trunk_details): create a trunk on it"
    )]
    NotATrunk {
        /// The port.
        port: String,
        /// The node's IP.
        ip: String,
    },
    /// `trunk_details` is there but unreadable.
    #[error("trunk_details of port {port}: {why}")]
    BadTrunkDetails {
        /// The port.
        port: String,
        /// What is wrong.
        why: String,
    },
    /// Every VLAN ID of the trunk is used or reserved.
    #[error("trunk {trunk} has no free VLAN ID left ({VLAN_MIN}-{VLAN_MAX} all used or reserved)")]
    NoFreeVlan {
        /// The trunk.
        trunk: String,
    },
}

/// A subport of a trunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subport {
    /// Its Neutron port.
    pub port_id: String,
    /// Its VLAN ID.
    pub segmentation_id: u16,
}

/// A trunk as its parent port shows it (`trunk_details`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrunkView {
    /// The trunk.
    pub trunk_id: String,
    /// The parent port.
    pub parent_port_id: String,
    /// Its subports (VLAN ones; other segmentation types are ignored).
    pub subports: Vec<Subport>,
}

/// The trunk whose parent is `port`, from its `trunk_details` (`None`: not a trunk parent).
pub fn trunk_of(port: &Port) -> Result<Option<TrunkView>, NestedError> {
    let Some(details) = port.extra.get("trunk_details").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let bad = |why: &str| NestedError::BadTrunkDetails {
        port: port.id.clone(),
        why: why.to_string(),
    };
    let trunk_id = details
        .get("trunk_id")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no trunk_id"))?;
    let mut subports = Vec::new();
    for s in details
        .get("sub_ports")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        if s.get("segmentation_type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "vlan")
        {
            continue;
        }
        let port_id = s
            .get("port_id")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("a subport without port_id"))?;
        let seg = s
            .get("segmentation_id")
            .and_then(Value::as_u64)
            .and_then(|v| u16::try_from(v).ok())
            .filter(|v| (VLAN_MIN..=VLAN_MAX).contains(v))
            .ok_or_else(|| bad(&format!("subport {port_id}: segmentation_id is not a VLAN ID")))?;
        subports.push(Subport {
            port_id: port_id.to_string(),
            segmentation_id: seg,
        });
    }
    Ok(Some(TrunkView {
        trunk_id: trunk_id.to_string(),
        parent_port_id: port.id.clone(),
        subports,
    }))
}

/// The trunk of the node whose IP is `node_ip`: the one port with that fixed IP on one of
/// `worker_subnets`, which must be a trunk's parent (upstream: `K8sNodeTrunkPortFailure`).
pub fn node_trunk(
    ports: &[Port],
    node_ip: &str,
    worker_subnets: &[String],
) -> Result<TrunkView, NestedError> {
    let p = node_port(ports, node_ip, worker_subnets)?;
    trunk_of(p)?.ok_or_else(|| NestedError::NotATrunk {
        port: p.id.clone(),
        ip: node_ip.to_string(),
    })
}

/// The node VM's own port among `ports`: the one with `node_ip` on a worker subnet (the
/// macvlan driver's parent, trunk or not).
pub fn node_port<'a>(
    ports: &'a [Port],
    node_ip: &str,
    worker_subnets: &[String],
) -> Result<&'a Port, NestedError> {
    if worker_subnets.is_empty() {
        return Err(NestedError::NoWorkerSubnets);
    }
    let candidates: Vec<&Port> = ports
        .iter()
        .filter(|p| {
            p.fixed_ips
                .iter()
                .any(|ip| ip.ip_address == node_ip && worker_subnets.contains(&ip.subnet_id))
        })
        .collect();
    match candidates.as_slice() {
        [] => Err(NestedError::NoParentPort {
            ip: node_ip.to_string(),
            subnets: worker_subnets.join(","),
        }),
        [p] => Ok(p),
        many => Err(NestedError::AmbiguousParentPort {
            ip: node_ip.to_string(),
            ports: many.iter().map(|p| p.id.as_str()).collect::<Vec<_>>().join(","),
        }),
    }
}

/// VLAN IDs per trunk: those Neutron shows in use, and those reserved for subports being added.
#[derive(Debug, Default, Clone)]
pub struct VlanIds {
    used: BTreeMap<String, BTreeSet<u16>>,
    reserved: BTreeMap<String, BTreeSet<u16>>,
}

impl VlanIds {
    /// Records what Neutron shows on `trunk` (after a listing, a restart, or a 409): the IDs in
    /// use are replaced; reservations that Neutron now shows in use are kept as used.
    pub fn observe(&mut self, trunk: &TrunkView) {
        let used: BTreeSet<u16> = trunk.subports.iter().map(|s| s.segmentation_id).collect();
        if let Some(r) = self.reserved.get_mut(&trunk.trunk_id) {
            r.retain(|id| !used.contains(id));
        }
        self.used.insert(trunk.trunk_id.clone(), used);
    }

    /// Reserves `n` free IDs on `trunk`, lowest first. All or nothing.
    pub fn reserve(&mut self, trunk: &str, n: usize) -> Result<Vec<u16>, NestedError> {
        let used = self.used.get(trunk);
        let reserved = self.reserved.get(trunk);
        let free: Vec<u16> = (VLAN_MIN..=VLAN_MAX)
            .filter(|id| !used.is_some_and(|u| u.contains(id)) && !reserved.is_some_and(|r| r.contains(id)))
            .take(n)
            .collect();
        if free.len() < n {
            return Err(NestedError::NoFreeVlan {
                trunk: trunk.to_string(),
            });
        }
        self.reserved.entry(trunk.to_string()).or_default().extend(&free);
        Ok(free)
    }

    /// The subports with these IDs were added: they are in use now.
    pub fn confirm(&mut self, trunk: &str, ids: &[u16]) {
        if let Some(r) = self.reserved.get_mut(trunk) {
            for id in ids {
                r.remove(id);
            }
        }
        self.used.entry(trunk.to_string()).or_default().extend(ids);
    }

    /// Adding them failed, or the subports were removed: the IDs are free again.
    pub fn release(&mut self, trunk: &str, ids: &[u16]) {
        for map in [&mut self.reserved, &mut self.used] {
            if let Some(s) = map.get_mut(trunk) {
                for id in ids {
                    s.remove(id);
                }
            }
        }
    }

    /// IDs neither used nor reserved on `trunk`.
    pub fn free_count(&self, trunk: &str) -> usize {
        let taken =
            self.used.get(trunk).map_or(0, BTreeSet::len) + self.reserved.get(trunk).map_or(0, BTreeSet::len);
        usize::from(VLAN_MAX - VLAN_MIN + 1).saturating_sub(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::neutron::FixedIp;
    use serde_json::json;

    fn port(id: &str, ips: &[(&str, &str)], trunk: Option<Value>) -> Port {
        let mut p = Port {
            id: id.into(),
            fixed_ips: ips
                .iter()
                .map(|(s, ip)| FixedIp {
                    subnet_id: (*s).into(),
                    ip_address: (*ip).into(),
                })
                .collect(),
            ..Port::default()
        };
        if let Some(t) = trunk {
            p.extra.insert("trunk_details".into(), t);
        }
        p
    }

    fn details(trunk: &str, subs: &[(&str, u64)]) -> Value {
        json!({"trunk_id": trunk, "sub_ports": subs.iter().map(|(p, s)|
            json!({"port_id": p, "segmentation_id": s, "segmentation_type": "vlan", "mac_address": "fa:16:3e:00:00:01"})).collect::<Vec<_>>()})
    }

    #[test]
    fn the_node_trunk_is_the_one_port_with_its_ip_on_a_worker_subnet() {
        let workers = vec!["w".to_string()];
        let ports = [
            port("vm1", &[("w", "10.0.0.5")], Some(details("t1", &[("s1", 7)]))),
            port("other-net", &[("x", "10.0.0.5")], None),
            port("vm2", &[("w", "10.0.0.6")], None),
        ];
        let t = node_trunk(&ports, "10.0.0.5", &workers).unwrap();
        assert_eq!(
            t,
            TrunkView {
                trunk_id: "t1".into(),
                parent_port_id: "vm1".into(),
                subports: vec![Subport {
                    port_id: "s1".into(),
                    segmentation_id: 7
                }],
            }
        );
        assert_eq!(
            node_trunk(&ports, "10.0.0.6", &workers),
            Err(NestedError::NotATrunk {
                port: "vm2".into(),
                ip: "10.0.0.6".into()
            })
        );
        assert!(matches!(
            node_trunk(&ports, "10.0.0.9", &workers),
            Err(NestedError::NoParentPort { .. })
        ));
        assert_eq!(
            node_trunk(&ports, "10.0.0.5", &[]),
            Err(NestedError::NoWorkerSubnets)
        );
        let twice = [
            port("a", &[("w", "10.0.0.5")], None),
            port("b", &[("w", "10.0.0.5")], None),
        ];
        let e = node_trunk(&twice, "10.0.0.5", &workers).unwrap_err();
        assert!(e.to_string().contains("a,b"), "{e}");
    }

    #[test]
    fn unreadable_trunk_details_are_told() {
        let p = port("vm", &[], Some(json!({"sub_ports": []})));
        assert!(trunk_of(&p).unwrap_err().to_string().contains("no trunk_id"));
        let p = port("vm", &[], Some(details("t", &[("s", 4095)])));
        assert!(trunk_of(&p).unwrap_err().to_string().contains("subport s"));
        let p = port("vm", &[], Some(json!(null)));
        assert_eq!(trunk_of(&p).unwrap(), None);
        let inherit =
            json!({"trunk_id": "t", "sub_ports": [{"port_id": "x", "segmentation_type": "inherit"}]});
        assert!(
            trunk_of(&port("vm", &[], Some(inherit)))
                .unwrap()
                .unwrap()
                .subports
                .is_empty()
        );
    }

    #[test]
    fn vlan_ids_never_collide_and_come_back() {
        let mut v = VlanIds::default();
        let t = trunk_of(&port("vm", &[], Some(details("t", &[("s1", 1), ("s2", 3)]))))
            .unwrap()
            .unwrap();
        v.observe(&t);
        let a = v.reserve("t", 2).unwrap();
        let b = v.reserve("t", 2).unwrap();
        assert_eq!(
            (a.clone(), b.clone()),
            (vec![2, 4], vec![5, 6]),
            "in use and reserved are skipped"
        );
        v.release("t", &a);
        v.confirm("t", &b);
        assert_eq!(v.reserve("t", 1).unwrap(), vec![2], "released IDs come back");
        // Another writer took 7 (a 409): observing the trunk again avoids it.
        let t = trunk_of(&port(
            "vm",
            &[],
            Some(details(
                "t",
                &[("s1", 1), ("s2", 3), ("x", 5), ("y", 6), ("z", 7)],
            )),
        ))
        .unwrap()
        .unwrap();
        v.observe(&t);
        assert_eq!(v.reserve("t", 1).unwrap(), vec![4]);
        assert_eq!(v.reserve("t", 1).unwrap(), vec![8]);
        assert_eq!(v.free_count("t"), 4094 - 8);
        // Other trunks are independent; all or nothing at the end of the range.
        assert_eq!(v.reserve("u", 1).unwrap(), vec![1]);
        assert!(matches!(
            v.reserve("u", 4094),
            Err(NestedError::NoFreeVlan { .. })
        ));
        assert_eq!(v.reserve("u", 4093).unwrap().len(), 4093);
        assert_eq!(v.free_count("u"), 0);
    }
}
