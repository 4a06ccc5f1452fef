//! The [`Neutron`] trait: the seam between the controller and Neutron.
//!
//! Methods return boxed futures rather than `async fn` so that the trait stays dyn-compatible:
//! the controller holds an `Arc<dyn Neutron>` and swaps the real client for
//! [`FakeNeutron`](crate::fake::FakeNeutron) in its unit tests without making every handler
//! generic. One allocation per call is nothing next to an HTTP round trip.

use crate::error::Result;
use crate::floating_ip::{FloatingIp, FloatingIpCreate, FloatingIpFilter};
use crate::model::{NetworkCreate, PortCreate, PortFilter, PortUpdate, ResourceFilter, SubnetCreate};
use crate::security_group::{
    SecurityGroup, SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRule, SecurityGroupRuleCreate,
    SecurityGroupRuleFilter,
};
use crate::trunk::{SubPort, Trunk, TrunkCreate};
use kuryr_core::neutron::{Network, Port, QuotaUsage, Subnet, SubnetPool, TagMode};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

/// A boxed `Send` future, the return type of the [`Neutron`] methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the controller does with Neutron. Every call is one HTTP request unless stated
/// otherwise, is reported to the client's [`RequestObserver`](crate::RequestObserver), and
/// fails with a typed [`Error`](crate::Error).
pub trait Neutron: Send + Sync {
    /// How tags reach created ports on this Neutron: from its extensions at connection time, then
    /// confirmed (or corrected, once) by the first bulk create that carries tags.
    fn tag_mode(&self) -> TagMode;

    /// Extension aliases of this Neutron.
    fn extensions(&self) -> BoxFuture<'_, Result<Vec<String>>>;

    /// Ports matching `filter`, in ONE request — per
    /// [`MAX_IDS_PER_REQUEST`](crate::client::MAX_IDS_PER_REQUEST) IDs when `filter.ids` is longer
    /// (URL length).
    fn list_ports<'a>(&'a self, filter: &'a PortFilter) -> BoxFuture<'a, Result<Vec<Port>>>;

    /// One port.
    fn get_port<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Port>>;

    /// Creates all `ports` in ONE `POST /v2.0/ports` (all or nothing in Neutron). With
    /// [`TagMode::AfterCreate`] each tagged port then gets one `PUT .../tags`; if tagging fails
    /// the created ports are deleted (an untagged port would escape leak detection).
    fn create_ports_bulk<'a>(&'a self, ports: &'a [PortCreate]) -> BoxFuture<'a, Result<Vec<Port>>>;

    /// Updates the set fields of a port.
    fn update_port<'a>(&'a self, id: &'a str, update: &'a PortUpdate) -> BoxFuture<'a, Result<Port>>;

    /// Deletes a port; an already deleted port is success.
    fn delete_port<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Replaces all tags of a port.
    fn set_port_tags<'a>(&'a self, id: &'a str, tags: &'a [String]) -> BoxFuture<'a, Result<()>>;

    /// One network.
    fn get_network<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Network>>;

    /// Networks matching `filter`.
    fn list_networks<'a>(&'a self, filter: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Network>>>;

    /// Creates a network (tags in the body or right after, per [`Neutron::tag_mode`]).
    fn create_network<'a>(&'a self, network: &'a NetworkCreate) -> BoxFuture<'a, Result<Network>>;

    /// Deletes a network; an already deleted network is success.
    fn delete_network<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// One subnet.
    fn get_subnet<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Subnet>>;

    /// The project's quota use per resource (`port`, `subnet`, `network`, `security_group`,
    /// `security_group_rule`, …).
    fn quota_details<'a>(
        &'a self,
        project_id: &'a str,
    ) -> BoxFuture<'a, Result<BTreeMap<String, QuotaUsage>>>;

    /// One subnet pool (its IP version decides the version of the subnets taken from it).
    fn get_subnet_pool<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<SubnetPool>>;

    /// Subnets matching `filter`.
    fn list_subnets<'a>(&'a self, filter: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Subnet>>>;

    /// Creates a subnet (from a subnet pool or a CIDR).
    fn create_subnet<'a>(&'a self, subnet: &'a SubnetCreate) -> BoxFuture<'a, Result<Subnet>>;

    /// Deletes a subnet; an already deleted subnet is success.
    fn delete_subnet<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Attaches a subnet to a router; returns the router's port ID on that subnet.
    fn add_router_interface<'a>(
        &'a self,
        router_id: &'a str,
        subnet_id: &'a str,
    ) -> BoxFuture<'a, Result<String>>;

    /// Detaches a subnet from a router; an interface that is already gone is success.
    fn remove_router_interface<'a>(
        &'a self,
        router_id: &'a str,
        subnet_id: &'a str,
    ) -> BoxFuture<'a, Result<()>>;

    /// Floating IPs matching `filter`.
    fn list_floating_ips<'a>(
        &'a self,
        filter: &'a FloatingIpFilter,
    ) -> BoxFuture<'a, Result<Vec<FloatingIp>>>;

    /// Creates a floating IP (tags in the body or right after, per [`Neutron::tag_mode`]; an
    /// address whose tagging fails is deleted again, as it would escape the janitor).
    fn create_floating_ip<'a>(&'a self, fip: &'a FloatingIpCreate) -> BoxFuture<'a, Result<FloatingIp>>;

    /// Associates a floating IP with a port, or frees it (`None`).
    fn set_floating_ip_port<'a>(
        &'a self,
        id: &'a str,
        port_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<FloatingIp>>;

    /// Deletes a floating IP; an already deleted one is success.
    fn delete_floating_ip<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Security groups matching `filter`.
    fn list_security_groups<'a>(
        &'a self,
        filter: &'a SecurityGroupFilter,
    ) -> BoxFuture<'a, Result<Vec<SecurityGroup>>>;

    /// Creates a security group that admits nothing: the allow-all egress rules Neutron puts in
    /// every new group are deleted before it is returned (tags as for networks; a group whose
    /// tagging or clean-up fails is deleted again).
    fn create_security_group<'a>(
        &'a self,
        sg: &'a SecurityGroupCreate,
    ) -> BoxFuture<'a, Result<SecurityGroup>>;

    /// Deletes a security group; an already deleted one is success, one still on a port a
    /// [`Conflict`](crate::Error::Conflict).
    fn delete_security_group<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// The rules of the groups in `filter`, per
    /// [`MAX_IDS_PER_REQUEST`](crate::client::MAX_IDS_PER_REQUEST) groups a request.
    fn list_security_group_rules<'a>(
        &'a self,
        filter: &'a SecurityGroupRuleFilter,
    ) -> BoxFuture<'a, Result<Vec<SecurityGroupRule>>>;

    /// Creates `rules` with Neutron's bulk create: ONE request per
    /// [`MAX_RULES_PER_REQUEST`](crate::client::MAX_RULES_PER_REQUEST) rules, all or nothing
    /// within a request (a rule that already exists fails its request with a Conflict).
    fn create_security_group_rules<'a>(
        &'a self,
        rules: &'a [SecurityGroupRuleCreate],
    ) -> BoxFuture<'a, Result<Vec<SecurityGroupRule>>>;

    /// Deletes a rule (Neutron has no bulk delete); an already deleted one is success.
    fn delete_security_group_rule<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Creates a trunk on a parent port (tags as for networks).
    fn create_trunk<'a>(&'a self, trunk: &'a TrunkCreate) -> BoxFuture<'a, Result<Trunk>>;

    /// A trunk.
    fn get_trunk<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Trunk>>;

    /// Trunks matching `filter` (IDs, name, project, tags).
    fn list_trunks<'a>(&'a self, filter: &'a ResourceFilter) -> BoxFuture<'a, Result<Vec<Trunk>>>;

    /// Adds `subports` to a trunk in ONE request (all or nothing: a VLAN ID or port already on
    /// the trunk is a [`Conflict`](crate::Error::Conflict)); returns the trunk.
    fn add_subports<'a>(&'a self, trunk_id: &'a str, subports: &'a [SubPort])
    -> BoxFuture<'a, Result<Trunk>>;

    /// Removes the subports of these ports from a trunk in one request; returns the trunk.
    fn remove_subports<'a>(
        &'a self,
        trunk_id: &'a str,
        port_ids: &'a [String],
    ) -> BoxFuture<'a, Result<Trunk>>;

    /// Deletes a trunk (its parent and subport ports stay); an already deleted one is success.
    fn delete_trunk<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;
}
