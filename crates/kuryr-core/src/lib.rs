//! The pure domain core of kuryr-rs: decisions without I/O.
//!
//! * [`neutron`] — serde models of the Neutron objects the controller reads (request bodies and
//!   filters belong to `kuryr-openstack`);
//! * [`config`] — the pool configuration ([`PoolConfig`]) and tag policy ([`TagPolicy`]);
//! * [`pool`] — port-pool accounting as a state machine ([`pool::PoolState`]), the sizing policy
//!   as a pure function of a stats snapshot ([`pool::plan`]), recovery after a restart and the
//!   janitor's orphan detection;
//! * [`activation`] — batching of "is the port ACTIVE yet" checks into one filtered list;
//! * [`nested`] — nested mode: a node VM's trunk, what it carries, VLAN IDs for subports.
//! * [`pairs`] — nested-macvlan: the allowed address pairs of a node VM's port.
//! * [`ownership`] — the one rule that proves a Neutron resource is this cluster's before it is
//!   deleted, pooled or adopted.
//!
//! Nothing here reads a clock, a file or the network: time comes in as `Instant`/`Duration`
//! arguments (wall-clock `jiff::Timestamp` only where Neutron's own timestamps are compared),
//! and every decision that needs I/O comes back as a value the caller executes.
//!
//! # Life cycle of a pooled port
//!
//! ```text
//!      request() (pool empty) / tick() (below ports_pool_min): PopulateRequest ticket
//!      = one bulk POST /v2.0/ports; one per pool, <= max_concurrent_bulk in flight;
//!      fail_population() -> pool backs off
//!                                |
//!                                | complete_population(ticket, port ids)
//!                                v
//!  recover(): bound, idle  +-----------+  request(): Take -- exact SG group first, else the
//!  ----------------------->| available |  least recently updated group + SetSecurityGroups
//!                          +-----------+-------------------------------------+
//!                            ^       |                                       v
//!       tick(): cool-down    |       | tick(): trim above        +--------+  recover():
//!       over, pool has room  |       | ports_pool_max            | in_use |<-------------
//!                            |       v                           +--------+  KuryrPort
//!  recover(): updated  +---------+  +----------+  release(): pool     |  |   references it
//!  < cooldown ago, or  | cooling |  | deleting |<-- at max, or net ---+  |
//!  still ACTIVE ------>+---------+  +----------+    deleted              |
//!                        ^    |        ^    |                            |
//!                        |    +--------+    | confirm_deleted():         |
//!                        |   tick(): over   | forgotten                  |
//!                        |   max / net gone v                            |
//!                        +------------------------- release(): ToCooldown +
//!
//!  recover(): unbound / binding_failed -> deleting.   Janitor (orphans()): tagged ports
//!  neither a KuryrPort nor the pool owns (deleting included), older than a grace period.
//! ```
//!
//! Every port the state knows is in exactly one of `available`, `in_use`, `cooling`,
//! `deleting` ([`pool::PoolState::check_invariants`]).

pub mod activation;
pub mod config;
pub mod nested;
pub mod neutron;
pub mod ownership;
pub mod pairs;
pub mod pool;

pub use config::{ConfigError, PoolConfig, TagPolicy};
