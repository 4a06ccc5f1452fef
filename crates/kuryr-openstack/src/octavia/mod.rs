//! Octavia, beside Neutron: the [`Octavia`] trait (the controller's seam, dyn-compatible like
//! [`Neutron`](crate::Neutron)), its openstack_sdk implementation [`OpenStackOctavia`] sharing
//! Neutron's session, and [`FakeOctavia`](fake::FakeOctavia) for unit tests. Every write locks
//! the load balancer (`PENDING_*`) — callers never wait inside these calls; they read the
//! provisioning status again later, so one slow load balancer never holds up another.

mod client;
#[cfg(any(test, feature = "fake"))]
pub mod fake;
pub mod model;

pub use client::OpenStackOctavia;
pub use model::{
    ApiVersion, FullListener, HealthMonitorCreate, HealthMonitorSettings, LbCreate, LbFilter, Listener,
    ListenerCreate, LoadBalancer, MemberSpec, Pool, PoolCreate, SessionPersistence, StatusTree,
    TreeHealthMonitor, TreeListener, TreeMember, TreePool, status,
};

use crate::api::BoxFuture;
use crate::error::Result;

/// What the controller does with Octavia. Every call is one HTTP request, reported to the
/// client's [`RequestObserver`](crate::RequestObserver), failing with a typed
/// [`Error`](crate::Error) (a 409 is a locked load balancer: retry later).
pub trait Octavia: Send + Sync {
    /// The API version read at connection time.
    fn version(&self) -> ApiVersion;

    /// Load balancers matching `filter`.
    fn list_load_balancers<'a>(&'a self, filter: &'a LbFilter) -> BoxFuture<'a, Result<Vec<LoadBalancer>>>;

    /// One load balancer.
    fn get_load_balancer<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LoadBalancer>>;

    /// Creates a load balancer (answers at once, `PENDING_CREATE`; the VIP port exists).
    fn create_load_balancer<'a>(&'a self, lb: &'a LbCreate) -> BoxFuture<'a, Result<LoadBalancer>>;

    /// Deletes a load balancer with everything under it (`cascade`); already gone is success.
    fn delete_load_balancer<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// The load balancer's whole tree (listeners, pools, members and their statuses).
    fn status_tree<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StatusTree>>;

    /// The listeners of a load balancer.
    fn list_listeners<'a>(&'a self, lb_id: &'a str) -> BoxFuture<'a, Result<Vec<Listener>>>;

    /// Creates a listener; returns its ID.
    fn create_listener<'a>(&'a self, l: &'a ListenerCreate) -> BoxFuture<'a, Result<String>>;

    /// Deletes a listener; already gone is success.
    fn delete_listener<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Sets (`Some`) or clears (`None`) a listener's `allowed_cidrs` (API 2.12+).
    fn update_listener_allowed_cidrs<'a>(
        &'a self,
        id: &'a str,
        cidrs: Option<&'a [String]>,
    ) -> BoxFuture<'a, Result<()>>;

    /// The pools of a load balancer.
    fn list_pools<'a>(&'a self, lb_id: &'a str) -> BoxFuture<'a, Result<Vec<Pool>>>;

    /// Turns a pool's `SOURCE_IP` session persistence on or off.
    fn update_pool_persistence<'a>(&'a self, id: &'a str, source_ip: bool) -> BoxFuture<'a, Result<()>>;

    /// Creates a pool as a listener's default pool; returns its ID.
    fn create_pool<'a>(&'a self, p: &'a PoolCreate) -> BoxFuture<'a, Result<String>>;

    /// Deletes a pool; already gone is success.
    fn delete_pool<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Creates a health monitor on a pool; returns its ID.
    fn create_health_monitor<'a>(&'a self, hm: &'a HealthMonitorCreate) -> BoxFuture<'a, Result<String>>;

    /// A health monitor's settings.
    fn get_health_monitor<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<HealthMonitorSettings>>;

    /// Deletes a health monitor; already gone is success.
    fn delete_health_monitor<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>>;

    /// Makes the pool's members exactly `members` in ONE call (Octavia's batch update matches
    /// by address and port: creates, updates and deletes as needed).
    fn replace_members<'a>(
        &'a self,
        pool_id: &'a str,
        members: &'a [MemberSpec],
    ) -> BoxFuture<'a, Result<()>>;
}
