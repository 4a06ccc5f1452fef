//! [`Error`]: the failed steps of the pool executor.

use std::time::Duration;

/// A failed step of the pool executor. Neutron causes keep their typed
/// [`kuryr_openstack::Error`] (see [`Error::is_retryable`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating a port (noop pool) or a bulk of pool ports failed.
    #[error("creating ports for pool {pool}")]
    CreatePort {
        /// The pool (`host/project/network`).
        pool: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Neutron answered a create with no port.
    #[error("creating ports for pool {pool}: Neutron returned no port")]
    EmptyCreate {
        /// The pool.
        pool: String,
    },
    /// The pool's last population failed; no new attempt before the back-off ends.
    #[error("populating pool {pool} failed ({cause}); next attempt in {:.0} s", retry_in.as_secs_f64().ceil())]
    PopulationBackoff {
        /// The pool.
        pool: String,
        /// Until the next attempt.
        retry_in: Duration,
        /// The failure, as text (it belongs to another request).
        cause: String,
    },
    /// Reading a port failed.
    #[error("reading port {port_id}")]
    GetPort {
        /// The port.
        port_id: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Updating a port failed.
    #[error("updating port {port_id} ({what})")]
    UpdatePort {
        /// The port.
        port_id: String,
        /// What was updated.
        what: &'static str,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Deleting a port failed.
    #[error("deleting port {port_id}")]
    DeletePort {
        /// The port.
        port_id: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Listing ports failed.
    #[error("listing ports ({what})")]
    ListPorts {
        /// Which list.
        what: &'static str,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Reading a network or its subnets failed.
    #[error("reading network {network_id} and its subnets")]
    Network {
        /// The network.
        network_id: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// The port cannot be described as a VIF.
    #[error("building the VIF of port {port_id}")]
    Vif {
        /// The port.
        port_id: String,
        /// Cause.
        #[source]
        source: kuryr_types::from_neutron::FromNeutronError,
    },
    /// The port is bound with a binding kuryr-rs does not wire (`ovs_hybrid_plug`: ML2/OVS with
    /// the iptables hybrid firewall needs os-vif's VIFBridge — a `qbr` Linux bridge between the
    /// pod and br-int). Refused here, with an Event on the pod, instead of handing the daemon a
    /// VIF that fails every CNI ADD.
    #[error(
        "port {port_id} is bound as {binding} ({why}); kuryr-rs wires only VIFOpenVSwitch ports: use ML2/OVN, \
         or the openvswitch firewall driver of ML2/OVS"
    )]
    UnsupportedBinding {
        /// The port.
        port_id: String,
        /// The VIF class it would need.
        binding: &'static str,
        /// What in the binding asks for it.
        why: &'static str,
    },
    /// The network's pools were freed: no new port on it.
    #[error("network {network_id} is being deleted: no new port is handed out on it")]
    NetworkClosed {
        /// The network.
        network_id: String,
    },
    /// Nested mode cannot place the node's pods (no trunk, no free VLAN ID, …).
    #[error("nested mode: node {host}")]
    Nested {
        /// The node.
        host: String,
        /// Cause.
        #[source]
        source: kuryr_core::nested::NestedError,
    },
    /// Reading Kubernetes failed (nested mode reads Nodes).
    #[error("{what}")]
    Kube {
        /// What was read.
        what: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The Node has no InternalIP: its trunk cannot be found.
    #[error("node {node} has no InternalIP address in its status: nested mode finds a node's trunk by it")]
    NodeAddress {
        /// The node.
        node: String,
    },
    /// A trunk call failed.
    #[error("nested-vlan: cannot {op} trunk {trunk_id}")]
    Trunk {
        /// What was done.
        op: &'static str,
        /// The trunk.
        trunk_id: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// The allowed address pairs of a node VM's port could not be changed (nested-macvlan).
    #[error("nested-macvlan: allowed_address_pairs of node VM port {vm_port}: {why}")]
    AddressPairs {
        /// The VM's port.
        vm_port: String,
        /// What failed (shared by every pod whose change was in the failed update).
        why: String,
        /// Whether trying again may help (Neutron unreachable, revision races).
        retryable: bool,
    },
    /// A pooled port is not a subport of any trunk (nested mode).
    #[error("port {port_id} is not a subport of a node's trunk: no VLAN ID for its VIF")]
    NotASubport {
        /// The port.
        port_id: String,
    },
    /// The multi pool has no pools for the node's driver.
    #[error(
        "node {node} asks for pod VIF driver {driver} (its pod_vif label): [vif_pool] vif_pool_mapping maps pools only for {mapped}"
    )]
    NoPoolForDriver {
        /// The node.
        node: String,
        /// Its driver.
        driver: String,
        /// The mapped drivers.
        mapped: String,
    },
    /// The node's pools were closed: its Node object is gone (deleted, or missing from the
    /// listing of Nodes when the pools were recovered).
    #[error(
        "node {host} is not a Node of the cluster (deleted, or never created): no port is handed out for it"
    )]
    HostClosed {
        /// The node (binding host).
        host: String,
    },
}

impl Error {
    /// The Neutron error behind this one, if any.
    pub fn neutron(&self) -> Option<&kuryr_openstack::Error> {
        match self {
            Error::CreatePort { source, .. }
            | Error::GetPort { source, .. }
            | Error::UpdatePort { source, .. }
            | Error::DeletePort { source, .. }
            | Error::ListPorts { source, .. }
            | Error::Network { source, .. }
            | Error::Trunk { source, .. } => Some(source),
            Error::EmptyCreate { .. }
            | Error::PopulationBackoff { .. }
            | Error::Vif { .. }
            | Error::UnsupportedBinding { .. }
            | Error::NetworkClosed { .. }
            | Error::HostClosed { .. }
            | Error::Nested { .. }
            | Error::Kube { .. }
            | Error::NodeAddress { .. }
            | Error::NotASubport { .. }
            | Error::AddressPairs { .. }
            | Error::NoPoolForDriver { .. } => None,
        }
    }

    /// Retrying later can succeed (Neutron conflicts, quota, 5xx, timeouts; back-offs; a
    /// closed network, once the pod is gone or gets another network).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::PopulationBackoff { .. }
            | Error::NetworkClosed { .. }
            | Error::HostClosed { .. }
            | Error::EmptyCreate { .. }
            | Error::Kube { .. }
            | Error::NodeAddress { .. }
            | Error::NotASubport { .. } => true,
            Error::AddressPairs { retryable, .. } => *retryable,
            // No trunk (yet), or a full one: an operator's fix, retried slowly.
            Error::Vif { .. }
            | Error::UnsupportedBinding { .. }
            | Error::Nested { .. }
            | Error::NoPoolForDriver { .. } => false,
            _ => self.neutron().is_some_and(kuryr_openstack::Error::is_retryable),
        }
    }

    /// When to try again.
    pub fn retry_after(&self) -> Duration {
        match self {
            Error::PopulationBackoff { retry_in, .. } => (*retry_in).max(Duration::from_millis(200)),
            _ if self.is_retryable() => Duration::from_secs(2),
            _ => Duration::from_secs(30),
        }
    }

    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::CreatePort { .. } | Error::EmptyCreate { .. } => "create_port",
            Error::PopulationBackoff { .. } => "population_backoff",
            Error::GetPort { .. } => "get_port",
            Error::UpdatePort { .. } => "update_port",
            Error::DeletePort { .. } => "delete_port",
            Error::ListPorts { .. } => "list_ports",
            Error::Network { .. } => "get_network",
            Error::Vif { .. } => "build_vif",
            Error::UnsupportedBinding { .. } => "unsupported_binding",
            Error::NetworkClosed { .. } => "network_closed",
            Error::HostClosed { .. } => "host_closed",
            Error::Nested { .. } => "nested",
            Error::Kube { .. } => "kubernetes",
            Error::NodeAddress { .. } => "node_address",
            Error::Trunk { .. } => "trunk",
            Error::NotASubport { .. } => "not_a_subport",
            Error::AddressPairs { .. } => "address_pairs",
            Error::NoPoolForDriver { .. } => "no_pool_for_driver",
        }
    }
}
