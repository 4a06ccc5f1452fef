//! kuryr-daemon: the per-node CNI daemon. It watches this node's KuryrPorts and pods
//! ([`watcher`] → [`registry`]), serves the `kuryr-cni` plugin ([`server`], [`request`]; on a root-only socket,
//! [`api_listener`]) and
//! runs the CNI verbs ([`verbs`]: one module each, on the shared [`daemon`] state, failing with
//! [`error`]), which wire pods through the binding drivers ([`binding`], over [`netlink`],
//! [`ovsdb`], [`ethtool`] on threads bound to the pod's namespace by [`netns`]), wait for them
//! to be active ([`activation`]) and remember what they wired ([`state`]). Health and metrics: [`health`], [`metrics`]. Process
//! wiring: [`cli`].

pub mod activation;
pub mod api_listener;
pub mod binding;
pub mod cli;
pub mod daemon;
pub mod error;
pub mod ethtool;
pub mod health;
pub mod instance;
pub mod metrics;
pub mod netlink;
pub mod netns;
pub mod ovsdb;
pub mod registry;
pub mod request;
pub mod server;
pub mod state;
pub mod uninstall;
pub mod verbs;
pub mod watcher;
