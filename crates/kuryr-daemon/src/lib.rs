//! kuryr-daemon: the per-node CNI daemon. It watches this node's KuryrPorts and pods
//! ([`watcher`] → [`registry`]), serves the `kuryr-cni` plugin ([`server`], [`request`]) and
//! wires pods ([`daemon`] → [`binding`], over [`netlink`], [`ovsdb`], [`ethtool`] on threads
//! bound to the pod's namespace by [`netns`]), waits for them to be active ([`activation`]) and
//! remembers what it wired ([`state`]). Health and metrics: [`health`], [`metrics`]. Process
//! wiring: [`cli`].

pub mod activation;
pub mod binding;
pub mod cli;
pub mod daemon;
pub mod ethtool;
pub mod health;
pub mod kubeclient;
pub mod metrics;
pub mod netlink;
pub mod netns;
pub mod ovsdb;
pub mod registry;
pub mod request;
pub mod server;
pub mod state;
pub mod watcher;
