//! Neutron and Octavia client layer of the kuryr-rs controller.
//!
//! ```text
//!  controller ──Arc<dyn Neutron>──┬── OpenStackNeutron (openstack_sdk, real HTTP)
//!                                 └── FakeNeutron      (in memory, feature `fake`)
//!        every request ──► observe::observed ──► RequestObserver (metrics) + debug log
//!        every failure ──► Error { NotFound | Conflict | OverQuota | … } (is_retryable, metric_label)
//! ```
//!
//! * [`api`] — the [`Neutron`] trait (dyn-compatible: boxed futures);
//! * [`model`] — filters and create/update bodies; response models are `kuryr_core::neutron`'s;
//! * [`client`] — [`OpenStackNeutron`]: one `RestEndpoint` request type for every call, bulk port
//!   creation in one `POST /v2.0/ports`, tags in the create body when Neutron allows it;
//! * [`floating_ip`] — floating IP model, create body and filter (LoadBalancer Services);
//! * [`trunk`] — trunk model and bodies (nested mode: pods as VLAN subports of a VM's trunk);
//! * [`connect`] — session from [`kuryr_config::CloudAuth`] with timeout and endpoint discovery;
//! * [`error`] — [`Error`];
//! * [`observe`] — [`RequestObserver`], [`CountingObserver`], operation names;
//! * [`fake`] — [`FakeNeutron`](fake::FakeNeutron) (feature `fake` or tests);
//! * [`octavia`] — the [`Octavia`] trait beside it: [`OpenStackOctavia`] on the same session,
//!   `FakeOctavia`, models gated on Octavia's API version.

pub mod api;
pub mod client;
pub mod connect;
pub mod error;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod floating_ip;
pub mod model;
pub mod observe;
pub mod octavia;
pub mod security_group;
pub mod trunk;

pub use api::{BoxFuture, Neutron};
pub use client::OpenStackNeutron;
pub use connect::{ConnectOptions, install_crypto_provider};
pub use error::{Error, NeutronFault, Result};
pub use floating_ip::{FloatingIp, FloatingIpCreate, FloatingIpFilter};
pub use kuryr_core::neutron::{Network, Port, QuotaUsage, Subnet, SubnetPool, TagMode};
pub use model::{NetworkCreate, PortCreate, PortFilter, PortUpdate, ResourceFilter, SubnetCreate};
pub use observe::{CountingObserver, NoopObserver, RequestObserver, ops};
pub use octavia::{Octavia, OpenStackOctavia};
pub use security_group::{
    SecurityGroup, SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRule, SecurityGroupRuleCreate,
    SecurityGroupRuleFilter,
};
pub use trunk::{SubPort, Trunk, TrunkCreate};
