//! What ends ADD's wait for activation: the KuryrPort's VIFs marked active by the controller
//! (Neutron reports the port ACTIVE), or — sooner — every OVS interface of the pod carrying
//! `external_ids:ovn-installed="true"`, which the node's ovn-controller sets once the port's
//! flows are installed in the local datapath ([`decide`]). [`OvnInstalledWatch`] polls the
//! local OVSDB for that flag, one small query for all waiting ADDs, only while some wait.
//!
//! Why not only Neutron's ACTIVE, as upstream: on ML2/OVN, ACTIVE is derived from the very same
//! event (ovn-controller marks the port binding up), but reaches the daemon only after OVN
//! northd, Neutron's OVN event handler and database, the controller's batched activation poll
//! and a KuryrPort patch — measured at 10-18 s under a 50-pod burst on the sandbox, against
//! milliseconds for the local flag. With ML2/OVS (no ovn-controller) the flag never appears and
//! the Neutron signal alone ends the wait, as upstream.

use std::{
    collections::HashSet,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use tokio::sync::{Notify, watch};
use tracing::debug;

use crate::ovsdb::Ovsdb;

/// The OVS `external_ids` key ovn-controller sets on an interface whose flows are installed.
pub const OVN_INSTALLED: &str = "ovn-installed";
/// Period of the OVSDB poll while ADDs wait.
pub const POLL_PERIOD: Duration = Duration::from_millis(20);

/// What ended the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The KuryrPort's VIFs are active (Neutron saw the ports ACTIVE).
    Neutron,
    /// ovn-controller installed every OVS interface of the pod.
    OvnInstalled,
}

impl Signal {
    /// Label of `kuryr_cni_active_wait_seconds{signal}`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Neutron => "neutron",
            Self::OvnInstalled => "ovn_installed",
        }
    }
}

/// The decision: `registry_active` — every VIF of the KuryrPort is active; `ovs_devs` — the
/// host devices of the pod's OVS-plugged VIFs; `installed` — OVS interfaces flagged
/// `ovn-installed`. The local flag counts only when every VIF of the pod is OVS-plugged (a VIF
/// of another kind can only be confirmed by Neutron) and there is at least one.
pub fn decide(
    registry_active: bool,
    all_vifs_ovs: bool,
    ovs_devs: &[String],
    installed: &HashSet<String>,
) -> Option<Signal> {
    if registry_active {
        return Some(Signal::Neutron);
    }
    if flags_can_decide(all_vifs_ovs, ovs_devs) && ovs_devs.iter().all(|d| installed.contains(d)) {
        return Some(Signal::OvnInstalled);
    }
    None
}

/// Whether OVN's flags can end a pod's wait at all: only when every VIF is OVS-plugged and
/// there is one. A pod whose flags cannot count (VLAN and macvlan VIFs of VM nodes, which have
/// no local OVS) does not wake the poller: it would query an OVSDB for nothing every
/// [`POLL_PERIOD`] while the pod waits for Neutron.
pub fn flags_can_decide(all_vifs_ovs: bool, ovs_devs: &[String]) -> bool {
    all_vifs_ovs && !ovs_devs.is_empty()
}

/// Shared poller of the `ovn-installed` flags.
#[derive(Debug)]
pub struct OvnInstalledWatch {
    ovsdb: Ovsdb,
    started: AtomicBool,
    waiters: AtomicUsize,
    wake: Notify,
    installed: watch::Sender<Arc<HashSet<String>>>,
}

/// A waiter's registration: the poller runs while one is alive.
pub struct Waiting<'a> {
    watch: &'a OvnInstalledWatch,
    /// Updated after every poll.
    pub rx: watch::Receiver<Arc<HashSet<String>>>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.watch.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl OvnInstalledWatch {
    /// A watch of the database at `ovsdb`; its poller starts with the first waiter.
    pub fn new(ovsdb: Ovsdb) -> Arc<Self> {
        let (installed, _) = watch::channel(Arc::new(HashSet::new()));
        Arc::new(Self {
            ovsdb,
            started: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            wake: Notify::new(),
            installed,
        })
    }

    /// Registers a waiter and wakes the poller (started on the current runtime the first time).
    pub fn wait(self: &Arc<Self>) -> Waiting<'_> {
        if !self.started.swap(true, Ordering::SeqCst) {
            tokio::spawn(self.clone().run());
        }
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_one();
        Waiting {
            watch: self,
            rx: self.installed.subscribe(),
        }
    }

    /// Polls every [`POLL_PERIOD`] while someone waits; sleeps otherwise. Never returns. A
    /// failing query is logged at debug and retried: the Neutron signal still ends the waits.
    async fn run(self: Arc<Self>) {
        loop {
            if self.waiters.load(Ordering::SeqCst) == 0 {
                // `notify_one` stores a permit: a waiter registered just now is not missed.
                self.wake.notified().await;
                continue;
            }
            match self
                .ovsdb
                .interfaces_with_external_id(OVN_INSTALLED, "true")
                .await
            {
                Ok(names) => {
                    self.installed.send_if_modified(|cur| {
                        if **cur == names {
                            return false;
                        }
                        *cur = Arc::new(names);
                        true
                    });
                }
                Err(e) => debug!(error = %e, "reading ovn-installed flags failed"),
            }
            tokio::time::sleep(POLL_PERIOD).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn neutron_or_every_ovs_interface_installed() {
        let devs = vec!["tapa".to_string(), "tapb".to_string()];
        assert_eq!(decide(true, true, &devs, &set(&[])), Some(Signal::Neutron));
        assert_eq!(decide(false, true, &devs, &set(&["tapa"])), None);
        assert_eq!(
            decide(false, true, &devs, &set(&["tapa", "tapb", "other"])),
            Some(Signal::OvnInstalled)
        );
        // A VIF that is not OVS-plugged can only be confirmed by Neutron.
        assert_eq!(decide(false, false, &devs, &set(&["tapa", "tapb"])), None);
        // No OVS interface: nothing to look at.
        assert_eq!(decide(false, true, &[], &set(&["tapa"])), None);
        assert_eq!(Signal::OvnInstalled.label(), "ovn_installed");
    }

    #[test]
    fn only_pods_of_ovs_vifs_wake_the_poller() {
        let devs = vec!["tapa".to_string()];
        assert!(flags_can_decide(true, &devs));
        // A VM node's VLAN or macvlan pod, and a pod without devices, wait for Neutron alone.
        assert!(!flags_can_decide(false, &devs));
        assert!(!flags_can_decide(true, &[]));
    }

    #[tokio::test]
    async fn waiters_are_counted_and_released() {
        let w = OvnInstalledWatch::new(Ovsdb::new("unix:/nonexistent/db.sock"));
        {
            let _a = w.wait();
            let _b = w.wait();
            assert_eq!(w.waiters.load(Ordering::SeqCst), 2);
        }
        assert_eq!(w.waiters.load(Ordering::SeqCst), 0);
        // The poller (started by the first waiter) survives an unreachable database and keeps
        // the last (empty) view.
        assert!(w.started.load(Ordering::SeqCst));
        let g = w.wait();
        tokio::time::sleep(POLL_PERIOD * 3).await;
        assert!(g.rx.borrow().is_empty());
    }
}
