//! The CNI verbs, one module each, as methods of [`crate::daemon::Daemon`]: [`add`], [`del`],
//! [`check`], [`gc`], [`status`]. They reach the datapath only through the daemon's
//! [`Bindings`](crate::binding::Bindings), so [`tests`] drive each verb through the recording
//! fake binding, without namespaces, netlink or OVS.

pub mod add;
pub mod check;
pub mod del;
pub mod gc;
pub mod status;

#[cfg(test)]
mod tests;
