//! The cluster as the translator sees it: namespaces, pods (labels, IP, named container ports)
//! and Services (ClusterIP, selector, ports). Built by the controller from its watch caches;
//! nothing here talks to the API.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

/// Labels of an object.
pub type Labels = BTreeMap<String, String>;

/// A pod by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl PodKey {
    /// A key from its two parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A transport protocol NetworkPolicy ports name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Proto {
    /// The Kubernetes spelling (`TCP`, `UDP`, `SCTP`); `None` for anything else.
    pub fn from_k8s(s: &str) -> Option<Self> {
        match s {
            "TCP" => Some(Self::Tcp),
            "UDP" => Some(Self::Udp),
            "SCTP" => Some(Self::Sctp),
            _ => None,
        }
    }

    /// Neutron's spelling of the protocol (`tcp`, `udp`, `sctp`).
    pub fn neutron(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        }
    }
}

/// A named container port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerPort {
    /// `name` (IANA_SVC_NAME); unnamed ports cannot be referred to by name and are not listed.
    pub name: String,
    /// `containerPort`.
    pub port: u16,
    /// `protocol`.
    pub proto: Proto,
}

/// A namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace {
    /// Name.
    pub name: String,
    /// Labels (the API server adds `kubernetes.io/metadata.name`; the caller passes them as read).
    pub labels: Labels,
}

/// A pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    /// Namespace and name.
    pub key: PodKey,
    /// Labels.
    pub labels: Labels,
    /// The pod's address (`status.podIP`); a pod without one yet is selected but cannot be a peer.
    pub ip: Option<IpAddr>,
    /// Named container ports of all its containers.
    pub ports: Vec<ContainerPort>,
}

impl Pod {
    /// The number a named port stands for on this pod, for that protocol.
    pub fn resolve(&self, name: &str, proto: Proto) -> Option<u16> {
        self.ports
            .iter()
            .find(|p| p.name == name && p.proto == proto)
            .map(|p| p.port)
    }
}

/// A Service's target port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetPort {
    /// A number.
    Number(u16),
    /// A container port name, resolved on each backend.
    Name(String),
}

/// One port of a Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServicePort {
    /// Protocol.
    pub proto: Proto,
    /// The port on the ClusterIP.
    pub port: u16,
    /// Where it goes on the backends.
    pub target: TargetPort,
}

impl ServicePort {
    /// The port this Service port reaches on `backend` (`None`: a name the pod does not have).
    pub fn target_on(&self, backend: &Pod) -> Option<u16> {
        match &self.target {
            TargetPort::Number(n) => Some(*n),
            TargetPort::Name(name) => backend.resolve(name, self.proto),
        }
    }
}

/// A Service with a ClusterIP (headless Services and ExternalNames have none and are left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The ClusterIP (an Octavia VIP).
    pub cluster_ip: IpAddr,
    /// Selector; `None` for a selectorless Service (its backends are not pods we can name).
    pub selector: Option<Labels>,
    /// Ports.
    pub ports: Vec<ServicePort>,
}

/// Everything the translation of a policy depends on besides the policy itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cluster {
    /// Namespaces.
    pub namespaces: Vec<Namespace>,
    /// Pods that have (or will have) a Neutron port: host-network pods are left out.
    pub pods: Vec<Pod>,
    /// Services with a ClusterIP.
    pub services: Vec<Service>,
    /// Sources every isolated pod still admits: the nodes' subnets (kubelet probes reach pods
    /// from the node, and Kubernetes never lets a policy block them).
    pub always_allowed_sources: Vec<IpNet>,
}

impl Cluster {
    /// The labels of a namespace (`None`: unknown namespace).
    pub fn namespace_labels(&self, name: &str) -> Option<&Labels> {
        self.namespaces.iter().find(|n| n.name == name).map(|n| &n.labels)
    }

    /// A pod by key.
    pub fn pod(&self, key: &PodKey) -> Option<&Pod> {
        self.pods.iter().find(|p| &p.key == key)
    }

    /// The pods a Service with a selector sends to.
    pub fn backends<'a>(&'a self, svc: &'a Service) -> impl Iterator<Item = &'a Pod> + 'a {
        self.pods.iter().filter(move |p| {
            p.key.namespace == svc.namespace
                && svc
                    .selector
                    .as_ref()
                    .is_some_and(|sel| !sel.is_empty() && sel.iter().all(|(k, v)| p.labels.get(k) == Some(v)))
        })
    }
}
