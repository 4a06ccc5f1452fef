//! A NetworkPolicy read and validated once: selectors compiled, ports and blocks parsed,
//! `policyTypes` defaulted the way the API server defaults it. Every field the translator cannot
//! accept is a [`PolicyError`] naming it; nothing here panics on what a user wrote.

use ipnet::IpNet;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::error::PolicyError;
use crate::model::Proto;
use crate::selector::Selector;

/// A validated NetworkPolicy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Namespace of the policy (and of the pods it selects).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Which pods of the namespace it selects.
    pub pod_selector: Selector,
    /// `None`: the policy does not isolate ingress. `Some(rules)`: selected pods admit only
    /// what some rule (of this or another policy) allows; `Some([])` admits nothing.
    pub ingress: Option<Vec<Rule>>,
    /// The same for egress.
    pub egress: Option<Vec<Rule>>,
}

/// One ingress or egress rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// `from` / `to`; `None` (absent or empty): every address.
    pub peers: Option<Vec<Peer>>,
    /// `ports`; `None` (absent or empty): every port of every protocol.
    pub ports: Option<Vec<PortSpec>>,
}

/// Which namespaces a pod peer looks in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// The policy's own namespace (no `namespaceSelector`).
    Own,
    /// Namespaces whose labels match.
    Matching(Selector),
}

/// One element of `from` / `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Pods matching `pods` in `namespaces` (a `namespaceSelector` alone: every pod there).
    Pods {
        /// Namespaces.
        namespaces: Namespaces,
        /// Pod selector; the empty selector when absent.
        pods: Selector,
    },
    /// `ipBlock`.
    Block {
        /// `cidr`.
        cidr: IpNet,
        /// `except`.
        except: Vec<IpNet>,
    },
}

/// Which ports of a protocol a rule admits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ports {
    /// Every port (`port` absent).
    All,
    /// `port` … `endPort` (one port when `endPort` is absent).
    Range(u16, u16),
    /// A container port name, resolved on the destination pod.
    Named(String),
}

/// One element of `ports`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSpec {
    /// `protocol` (TCP when absent).
    pub proto: Proto,
    /// `port` / `endPort`.
    pub ports: Ports,
}

impl Policy {
    /// Reads a NetworkPolicy.
    pub fn from_k8s(np: &NetworkPolicy) -> Result<Self, PolicyError> {
        let namespace = np
            .metadata
            .namespace
            .clone()
            .ok_or_else(|| PolicyError::new("metadata.namespace", "missing"))?;
        let name = np
            .metadata
            .name
            .clone()
            .ok_or_else(|| PolicyError::new("metadata.name", "missing"))?;
        let spec = np.spec.clone().unwrap_or_default();
        let pod_selector = match &spec.pod_selector {
            Some(s) => Selector::compile(s, "spec.podSelector")?,
            None => Selector::everything(),
        };
        let egress_given = spec.egress.as_ref().is_some_and(|e| !e.is_empty());
        let (mut isolates_ingress, mut isolates_egress) = (true, egress_given);
        if let Some(types) = &spec.policy_types {
            (isolates_ingress, isolates_egress) = (false, false);
            for (i, t) in types.iter().enumerate() {
                match t.as_str() {
                    "Ingress" => isolates_ingress = true,
                    "Egress" => isolates_egress = true,
                    other => {
                        return Err(PolicyError::new(
                            format!("spec.policyTypes[{i}]"),
                            format!("unknown policy type {other:?} (Ingress, Egress)"),
                        ));
                    }
                }
            }
        }
        let ingress_rules = spec
            .ingress
            .iter()
            .flatten()
            .map(|r| (r.from.as_deref(), r.ports.as_deref()));
        let ingress = isolates_ingress
            .then(|| rules(ingress_rules, "spec.ingress", "from"))
            .transpose()?;
        let egress_rules = spec
            .egress
            .iter()
            .flatten()
            .map(|r| (r.to.as_deref(), r.ports.as_deref()));
        let egress = isolates_egress
            .then(|| rules(egress_rules, "spec.egress", "to"))
            .transpose()?;
        Ok(Self {
            namespace,
            name,
            pod_selector,
            ingress,
            egress,
        })
    }

    /// Whether the policy applies to a pod of `namespace` with `labels`.
    pub fn selects(&self, namespace: &str, labels: &crate::model::Labels) -> bool {
        self.namespace == namespace && self.pod_selector.matches(labels)
    }
}

/// `spec.ingress` / `spec.egress` as (peers, ports) pairs; `peers_field` is `from` or `to`.
fn rules<'a>(
    list: impl Iterator<Item = (Option<&'a [NetworkPolicyPeer]>, Option<&'a [NetworkPolicyPort]>)>,
    at: &str,
    peers_field: &str,
) -> Result<Vec<Rule>, PolicyError> {
    list.enumerate()
        .map(|(i, (p, ports_list))| {
            Ok(Rule {
                peers: peers(p, &format!("{at}[{i}].{peers_field}"))?,
                ports: ports(ports_list, &format!("{at}[{i}].ports"))?,
            })
        })
        .collect()
}

fn peers(list: Option<&[NetworkPolicyPeer]>, at: &str) -> Result<Option<Vec<Peer>>, PolicyError> {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let peer = match (&p.ip_block, &p.namespace_selector, &p.pod_selector) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(PolicyError::new(at, "ipBlock cannot be combined with a selector"));
            }
            (Some(b), None, None) => {
                let cidr = parse_cidr(&b.cidr, &format!("{at}.ipBlock.cidr"))?;
                let mut except = Vec::new();
                for (j, e) in b.except.iter().flatten().enumerate() {
                    let path = format!("{at}.ipBlock.except[{j}]");
                    let e = parse_cidr(e, &path)?;
                    if !cidr.contains(&e) {
                        return Err(PolicyError::new(
                            path,
                            format!("{e} is not inside the block's cidr {cidr}"),
                        ));
                    }
                    except.push(e);
                }
                Peer::Block { cidr, except }
            }
            (None, None, None) => {
                return Err(PolicyError::new(
                    at,
                    "a peer needs podSelector, namespaceSelector or ipBlock",
                ));
            }
            (None, ns, pods) => Peer::Pods {
                namespaces: match ns {
                    Some(s) => {
                        Namespaces::Matching(Selector::compile(s, &format!("{at}.namespaceSelector"))?)
                    }
                    None => Namespaces::Own,
                },
                pods: match pods {
                    Some(s) => Selector::compile(s, &format!("{at}.podSelector"))?,
                    None => Selector::everything(),
                },
            },
        };
        out.push(peer);
    }
    Ok(Some(out))
}

fn parse_cidr(s: &str, at: &str) -> Result<IpNet, PolicyError> {
    s.parse::<IpNet>()
        .map_err(|_| PolicyError::new(at, format!("{s:?} is not a CIDR (10.0.0.0/8, fd00::/64)")))
}

fn ports(list: Option<&[NetworkPolicyPort]>, at: &str) -> Result<Option<Vec<PortSpec>>, PolicyError> {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, p) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let proto = match p.protocol.as_deref() {
            None => Proto::Tcp,
            Some(s) => Proto::from_k8s(s).ok_or_else(|| {
                PolicyError::new(
                    format!("{at}.protocol"),
                    format!("unknown protocol {s:?} (TCP, UDP, SCTP)"),
                )
            })?,
        };
        let ports = match (&p.port, p.end_port) {
            (None, None) => Ports::All,
            (None, Some(_)) => {
                return Err(PolicyError::new(
                    format!("{at}.endPort"),
                    "endPort needs a numeric port",
                ));
            }
            (Some(IntOrString::Int(n)), end) => {
                let first = port_number(*n, &format!("{at}.port"))?;
                let last = match end {
                    None => first,
                    Some(e) => {
                        let last = port_number(e, &format!("{at}.endPort"))?;
                        if last < first {
                            return Err(PolicyError::new(
                                format!("{at}.endPort"),
                                format!("{last} is below port {first}"),
                            ));
                        }
                        last
                    }
                };
                Ports::Range(first, last)
            }
            (Some(IntOrString::String(name)), end) => {
                if end.is_some() {
                    return Err(PolicyError::new(
                        format!("{at}.endPort"),
                        "endPort needs a numeric port, not a name",
                    ));
                }
                match name.parse::<i32>() {
                    // "80" written as a string is the number 80, as the API server reads it.
                    Ok(n) => {
                        let n = port_number(n, &format!("{at}.port"))?;
                        Ports::Range(n, n)
                    }
                    Err(_) if name.is_empty() => {
                        return Err(PolicyError::new(format!("{at}.port"), "empty port name"));
                    }
                    Err(_) => Ports::Named(name.clone()),
                }
            }
        };
        out.push(PortSpec { proto, ports });
    }
    Ok(Some(out))
}

fn port_number(n: i32, at: &str) -> Result<u16, PolicyError> {
    u16::try_from(n)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| PolicyError::new(at, format!("{n} is not a port number (1-65535)")))
}
