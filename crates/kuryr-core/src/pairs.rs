//! `nested-macvlan`'s pure decisions: the `allowed_address_pairs` of a node VM's port. A pod on
//! a VM node is a macvlan of the VM's interface that sends with its own Neutron port's MAC and
//! IPs; the VM port's port security lets that through only once the pod port's `(IP, MAC)`
//! pairs are in the VM port's `allowed_address_pairs`. That list is one field of one port that
//! every pod of the VM changes: the controller queues the changes of one VM port and applies
//! them together ([`apply`]) on the port as last read, with Neutron's revision check.
//!
//! A pod's pair is written with its address as a host prefix (`10.0.0.5/32`), and the pod's port
//! is created without port security. Over ML2/OVN both are needed for the pod's traffic to
//! arrive (measured on the sandbox; upstream wrote the bare address and kept port security):
//! * ML2/OVN turns an unbound port whose address is, verbatim, in another port's pairs into an
//!   OVN `virtual` port; once the VM "claims" it, OVN's routers resolve the address to the VM
//!   port's first MAC (not the pod's), and frames for the pod's MAC go to the virtual port,
//!   which has no datapath port: dropped. The prefix form is the same address to port
//!   security but no verbatim match, so the pod's port stays an ordinary one.
//! * An ordinary port with port security has its MAC and address in its OVN logical port:
//!   OVN answers ARP for the pod with it and delivers the pod's frames to that (unbound)
//!   logical port, not to the VM. Without port security ML2/OVN gives it no address at all,
//!   so the pod's MAC is known only as the VM port's (from its pairs).
//!
//! The pod's port filters nothing in either design (it is never bound: the VM port's groups
//! filter the pod's traffic), so nothing is lost by turning its port security off.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::neutron::Port;

/// One entry of a port's `allowed_address_pairs`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AddressPair {
    /// An IP address or CIDR.
    pub ip_address: String,
    /// The MAC allowed with it (Neutron fills in the port's own when a request leaves it out).
    #[serde(default)]
    pub mac_address: String,
}

impl AddressPair {
    /// The pair `(ip, mac)`, the MAC in Neutron's lower-case form.
    pub fn new(ip: impl Into<String>, mac: &str) -> Self {
        AddressPair {
            ip_address: ip.into(),
            mac_address: mac.to_ascii_lowercase(),
        }
    }

    /// The pair of one pod address: the address as a host prefix (see the module docs).
    pub fn host(ip: &str, mac: &str) -> Self {
        let prefix = if ip.contains(':') { "/128" } else { "/32" };
        Self::new(format!("{}{prefix}", host_ip(ip)), mac)
    }

    /// `(address without a host prefix, lower-case MAC)`: equal for the same pair written
    /// either way.
    pub fn key(&self) -> (String, String) {
        (
            host_ip(&self.ip_address).to_string(),
            self.mac_address.to_ascii_lowercase(),
        )
    }

    fn same_ip(&self, other: &AddressPair) -> bool {
        host_ip(&self.ip_address) == host_ip(&other.ip_address)
    }

    fn same(&self, other: &AddressPair) -> bool {
        self.same_ip(other) && self.mac_address.eq_ignore_ascii_case(&other.mac_address)
    }
}

/// `ip` without a host prefix (`10.0.0.5/32` and `10.0.0.5` are one address; other prefixes
/// are networks and stay as they are).
fn host_ip(ip: &str) -> &str {
    ip.strip_suffix("/32")
        .filter(|a| !a.contains(':'))
        .or_else(|| ip.strip_suffix("/128").filter(|a| a.contains(':')))
        .unwrap_or(ip)
}

/// Why a port's pairs cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("allowed_address_pairs of port {port}: {why}")]
pub struct PairsError {
    /// The port.
    pub port: String,
    /// What is wrong.
    pub why: String,
}

/// The `allowed_address_pairs` of `port` (none when the field is absent or null).
pub fn pairs_of(port: &Port) -> Result<Vec<AddressPair>, PairsError> {
    match port.extra.get("allowed_address_pairs") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| PairsError {
            port: port.id.clone(),
            why: e.to_string(),
        }),
    }
}

/// `revision_number` of `port` (for `If-Match`), when Neutron shows it.
pub fn revision_of(port: &Port) -> Option<u64> {
    port.extra.get("revision_number").and_then(Value::as_u64)
}

/// The pairs a pod port needs on its VM's port: each of its fixed IPs with its MAC.
pub fn pod_pairs(pod_port: &Port) -> Vec<AddressPair> {
    pod_port
        .fixed_ips
        .iter()
        .filter(|ip| !ip.ip_address.is_empty())
        .map(|ip| AddressPair::host(&ip.ip_address, &pod_port.mac_address))
        .collect()
}

/// One queued change of a VM port's pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairChange {
    /// A pod port's pairs to allow.
    Add(Vec<AddressPair>),
    /// A pod port's pairs to take away.
    Remove(Vec<AddressPair>),
}

/// The VM port's new `allowed_address_pairs` after `changes` (applied in order) on `current`;
/// `None` when nothing changes (no write needed).
///
/// * An added pair already there (its address bare or as a host prefix) is not added twice.
/// * An added pair whose IP is there with another MAC replaces it: an IP belongs to one port of
///   the subnet at a time, so the other entry is a leftover of a deleted pod port whose removal
///   was lost (a controller killed between deleting the port and updating the VM's).
/// * A removal takes away only the pair of that address and MAC, bare or as a host prefix (so
///   also upstream's); a pair of the same IP re-added since with another MAC stays; pairs
///   nobody queued (the operator's own) are never touched.
pub fn apply(current: &[AddressPair], changes: &[PairChange]) -> Option<Vec<AddressPair>> {
    let mut out: Vec<AddressPair> = current.to_vec();
    for c in changes {
        match c {
            PairChange::Add(pairs) => {
                for p in pairs {
                    if out.iter().any(|q| q.same(p)) {
                        continue;
                    }
                    out.retain(|q| !q.same_ip(p));
                    out.push(p.clone());
                }
            }
            PairChange::Remove(pairs) => out.retain(|q| !pairs.iter().any(|p| p.same(q))),
        }
    }
    (out != current).then_some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::neutron::FixedIp;

    fn p(ip: &str, mac: &str) -> AddressPair {
        AddressPair::new(ip, mac)
    }

    #[test]
    fn adds_are_idempotent_and_replace_a_stale_mac() {
        let cur = vec![
            p("10.0.0.5", "fa:16:3e:00:00:01"),
            p("10.0.0.9/32", "fa:16:3e:00:00:09"),
        ];
        assert_eq!(
            apply(&cur, &[PairChange::Add(vec![p("10.0.0.5", "FA:16:3E:00:00:01")])]),
            None
        );
        let got = apply(&cur, &[PairChange::Add(vec![p("10.0.0.5", "fa:16:3e:00:00:02")])]).unwrap();
        assert_eq!(
            got,
            vec![
                p("10.0.0.9/32", "fa:16:3e:00:00:09"),
                p("10.0.0.5", "fa:16:3e:00:00:02")
            ]
        );
    }

    #[test]
    fn removals_take_only_the_exact_pair_and_leave_the_operators() {
        let cur = vec![
            p("10.0.0.5", "fa:16:3e:00:00:02"),
            p("192.168.1.0/24", "fa:16:3e:aa:aa:aa"),
        ];
        assert_eq!(
            apply(
                &cur,
                &[PairChange::Remove(vec![p("10.0.0.5", "fa:16:3e:00:00:01")])]
            ),
            None
        );
        let got = apply(
            &cur,
            &[PairChange::Remove(vec![p("10.0.0.5", "fa:16:3e:00:00:02")])],
        )
        .unwrap();
        assert_eq!(got, vec![p("192.168.1.0/24", "fa:16:3e:aa:aa:aa")]);
    }

    #[test]
    fn a_bare_address_and_its_host_prefix_are_one_pair() {
        // Upstream's pair (bare) is found by ours (prefix), for adding and for removing.
        let cur = vec![
            p("10.0.0.5", "fa:16:3e:00:00:05"),
            p("10.0.0.0/24", "fa:16:3e:00:00:05"),
        ];
        let ours = AddressPair::host("10.0.0.5", "fa:16:3e:00:00:05");
        assert_eq!(apply(&cur, &[PairChange::Add(vec![ours.clone()])]), None);
        let got = apply(&cur, &[PairChange::Remove(vec![ours])]).unwrap();
        assert_eq!(
            got,
            vec![p("10.0.0.0/24", "fa:16:3e:00:00:05")],
            "a network is not a host"
        );
    }

    #[test]
    fn queued_changes_apply_in_order() {
        let a = vec![p("10.0.0.5", "fa:16:3e:00:00:05")];
        let b = vec![p("10.0.0.6", "fa:16:3e:00:00:06")];
        let got = apply(
            &[],
            &[
                PairChange::Add(a.clone()),
                PairChange::Add(b.clone()),
                PairChange::Remove(a.clone()),
            ],
        )
        .unwrap();
        assert_eq!(got, b);
        // Added then removed in one batch: nothing to write.
        assert_eq!(
            apply(&[], &[PairChange::Add(a.clone()), PairChange::Remove(a)]),
            None
        );
    }

    #[test]
    fn pairs_and_revision_are_read_from_the_port() {
        let mut vm = Port {
            id: "vm".into(),
            ..Default::default()
        };
        assert_eq!(pairs_of(&vm), Ok(vec![]));
        vm.extra.insert(
            "allowed_address_pairs".into(),
            json!([{"ip_address": "10.0.0.5", "mac_address": "fa:16:3e:00:00:05"}]),
        );
        vm.extra.insert("revision_number".into(), json!(7));
        assert_eq!(pairs_of(&vm).unwrap(), vec![p("10.0.0.5", "fa:16:3e:00:00:05")]);
        assert_eq!(revision_of(&vm), Some(7));
        vm.extra.insert("allowed_address_pairs".into(), json!("garbage"));
        let e = pairs_of(&vm).unwrap_err();
        assert!(e.to_string().contains("allowed_address_pairs of port vm"), "{e}");
        let pod = Port {
            mac_address: "FA:16:3E:00:00:07".into(),
            fixed_ips: vec![
                FixedIp {
                    subnet_id: "s".into(),
                    ip_address: "10.0.0.7".into(),
                },
                FixedIp::default(),
            ],
            ..Default::default()
        };
        assert_eq!(pod_pairs(&pod), vec![p("10.0.0.7/32", "fa:16:3e:00:00:07")]);
        assert_eq!(
            AddressPair::host("fd00::7", "AA:00:00:00:00:01").ip_address,
            "fd00::7/128"
        );
    }
}
