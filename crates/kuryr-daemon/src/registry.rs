//! The registry: what the watchers know about this node's KuryrPorts and pods, and the pure
//! decisions CNI ADD takes from it ([`decide_add`], [`all_active`]). ADD never asks the API
//! server: it waits on [`Registry::changed_for`] its pod's key, woken only by updates of that
//! key (and by re-lists), so a burst of N concurrent ADDs costs O(N) wake-ups, not O(N²).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Mutex,
};

use kuryr_types::{KuryrPort, VifEntry};
use tokio::sync::watch;

/// `<namespace>/<name>`.
pub fn pod_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What the registry holds of a KuryrPort.
#[derive(Debug, Clone, PartialEq)]
pub struct PortRecord {
    /// UID of the KuryrPort object.
    pub kp_uid: String,
    /// `spec.podUid`.
    pub pod_uid: String,
    /// `spec.podStatic`.
    pub pod_static: bool,
    /// `status.vifs`.
    pub vifs: BTreeMap<String, VifEntry>,
}

impl PortRecord {
    /// The record of `kp`.
    pub fn from_kp(kp: &KuryrPort) -> Self {
        Self {
            kp_uid: kp.metadata.uid.clone().unwrap_or_default(),
            pod_uid: kp.spec.pod_uid.clone(),
            pod_static: kp.spec.pod_static.unwrap_or(false),
            vifs: kp.status.as_ref().map(|s| s.vifs.clone()).unwrap_or_default(),
        }
    }
}

/// What the registry holds of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRecord {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
}

/// Why ADD has to keep waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitReason {
    /// The pod's UID is not known yet (no `K8S_POD_UID`, pod not seen yet).
    PodUnknown,
    /// No KuryrPort for the pod yet.
    NoKuryrPort,
    /// The KuryrPort has no VIFs yet.
    NoVifs,
    /// The KuryrPort belongs to another incarnation of the pod (`spec.podUid` differs).
    UidMismatch {
        /// `spec.podUid`.
        kp: String,
        /// The pod's UID.
        pod: String,
    },
}

/// What ADD does with the registry's current knowledge.
#[derive(Debug, Clone, PartialEq)]
pub enum AddDecision {
    /// Wire these VIFs for pod UID `pod_uid`.
    Ready {
        /// The pod's UID.
        pod_uid: String,
        /// The KuryrPort's VIFs.
        vifs: BTreeMap<String, VifEntry>,
    },
    /// Wait for an update.
    Wait(WaitReason),
    /// The pod is being deleted: fail with "pod gone".
    Gone,
}

/// The ADD decision (upstream `k8s_cni_registry.add`, without its API GET): the pod UID comes
/// from `CNI_ARGS` or else from the pod watcher; a KuryrPort whose `spec.podUid` differs is
/// waited on, because the controller is replacing it for a re-created pod.
pub fn decide_add(args_uid: Option<&str>, pod: Option<&PodRecord>, port: Option<&PortRecord>) -> AddDecision {
    let uid = match (args_uid.filter(|u| !u.is_empty()), pod) {
        (Some(u), _) => u.to_owned(),
        (None, Some(p)) => p.uid.clone(),
        (None, None) => return AddDecision::Wait(WaitReason::PodUnknown),
    };
    if pod.is_some_and(|p| p.uid == uid && p.terminating) {
        return AddDecision::Gone;
    }
    let Some(port) = port else {
        return AddDecision::Wait(WaitReason::NoKuryrPort);
    };
    if port.pod_uid != uid {
        return AddDecision::Wait(WaitReason::UidMismatch {
            kp: port.pod_uid.clone(),
            pod: uid,
        });
    }
    if port.vifs.is_empty() {
        return AddDecision::Wait(WaitReason::NoVifs);
    }
    AddDecision::Ready {
        pod_uid: uid,
        vifs: port.vifs.clone(),
    }
}

/// Whether every VIF is active (upstream waits for this before answering ADD).
pub fn all_active(vifs: &BTreeMap<String, VifEntry>) -> bool {
    vifs.values().all(|e| e.vif.is_active())
}

#[derive(Debug, Default)]
struct Inner {
    ports: HashMap<String, PortRecord>,
    pods: HashMap<String, PodRecord>,
    ports_synced: bool,
    pods_synced: bool,
    /// Keys seen since the last re-list started (per watcher), to drop vanished objects.
    ports_relist: Option<HashSet<String>>,
    pods_relist: Option<HashSet<String>>,
    /// The waiters' channels per key (created by [`Registry::changed_for`], dropped once no
    /// receiver is left).
    waiters: HashMap<String, watch::Sender<u64>>,
}

impl Inner {
    /// Wakes the waiters of `key`.
    fn notify(&mut self, key: &str) {
        if let Some(tx) = self.waiters.get(key) {
            if tx.receiver_count() == 0 {
                self.waiters.remove(key);
            } else {
                tx.send_modify(|v| *v += 1);
            }
        }
    }

    /// Wakes every waiter (a re-list may have dropped any key).
    fn notify_all(&mut self) {
        self.waiters.retain(|_, tx| tx.receiver_count() > 0);
        for tx in self.waiters.values() {
            tx.send_modify(|v| *v += 1);
        }
    }
}

/// Which watcher an update comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// KuryrPorts.
    Ports,
    /// Pods.
    Pods,
}

/// The shared registry.
#[derive(Debug, Default)]
pub struct Registry {
    inner: Mutex<Inner>,
}

impl Registry {
    fn update<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    fn read<T>(&self, f: impl FnOnce(&Inner) -> T) -> T {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        f(&g)
    }

    /// A receiver that sees every later update of `key`'s KuryrPort or pod, and every re-list.
    pub fn changed_for(&self, key: &str) -> watch::Receiver<u64> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = g.waiters.get(key) {
            return tx.subscribe();
        }
        // Keys whose waiters left without another update of theirs.
        g.waiters.retain(|_, tx| tx.receiver_count() > 0);
        let tx = watch::Sender::new(0);
        let rx = tx.subscribe();
        g.waiters.insert(key.to_owned(), tx);
        rx
    }

    /// Stores (or replaces) a KuryrPort.
    pub fn put_port(&self, key: String, rec: PortRecord) {
        self.update(|i| {
            if let Some(seen) = i.ports_relist.as_mut() {
                seen.insert(key.clone());
            }
            i.notify(&key);
            i.ports.insert(key, rec);
        });
    }

    /// Forgets a KuryrPort.
    pub fn delete_port(&self, key: &str) {
        self.update(|i| {
            i.ports.remove(key);
            i.notify(key);
        });
    }

    /// Stores (or replaces) a pod.
    pub fn put_pod(&self, key: String, rec: PodRecord) {
        self.update(|i| {
            if let Some(seen) = i.pods_relist.as_mut() {
                seen.insert(key.clone());
            }
            i.notify(&key);
            i.pods.insert(key, rec);
        });
    }

    /// Forgets a pod.
    pub fn delete_pod(&self, key: &str) {
        self.update(|i| {
            i.pods.remove(key);
            i.notify(key);
        });
    }

    /// A watcher (re-)lists: objects not seen again before [`Registry::relist_done`] are dropped.
    pub fn relist_start(&self, src: Source) {
        self.update(|i| match src {
            Source::Ports => i.ports_relist = Some(HashSet::new()),
            Source::Pods => i.pods_relist = Some(HashSet::new()),
        });
    }

    /// The (re-)list is complete.
    pub fn relist_done(&self, src: Source) {
        self.update(|i| match src {
            Source::Ports => {
                if let Some(seen) = i.ports_relist.take() {
                    i.ports.retain(|k, _| seen.contains(k));
                }
                i.ports_synced = true;
                i.notify_all();
            }
            Source::Pods => {
                if let Some(seen) = i.pods_relist.take() {
                    i.pods.retain(|k, _| seen.contains(k));
                }
                i.pods_synced = true;
                i.notify_all();
            }
        });
    }

    /// Both watchers have listed once.
    pub fn synced(&self) -> bool {
        self.read(|i| i.ports_synced && i.pods_synced)
    }

    /// The ADD decision for `key` now.
    pub fn decide(&self, key: &str, args_uid: Option<&str>) -> AddDecision {
        self.read(|i| decide_add(args_uid, i.pods.get(key), i.ports.get(key)))
    }

    /// Whether the pod `pod_uid` of `key` is terminating (ADD's [`AddDecision::Gone`]), read
    /// without copying any VIF.
    pub fn pod_gone(&self, key: &str, pod_uid: &str) -> bool {
        self.read(|i| i.pods.get(key).is_some_and(|p| p.uid == pod_uid && p.terminating))
    }

    /// Whether every VIF of `key` is active, if its KuryrPort still belongs to `pod_uid`
    /// (read in place: ADD's activation wait asks on each update of its pod).
    pub fn vifs_active(&self, key: &str, pod_uid: &str) -> Option<bool> {
        self.read(|i| {
            i.ports
                .get(key)
                .filter(|p| p.pod_uid == pod_uid)
                .map(|p| all_active(&p.vifs))
        })
    }

    /// The current VIFs of `key` if its KuryrPort still belongs to `pod_uid`.
    pub fn vifs(&self, key: &str, pod_uid: &str) -> Option<BTreeMap<String, VifEntry>> {
        self.read(|i| {
            i.ports
                .get(key)
                .filter(|p| p.pod_uid == pod_uid)
                .map(|p| p.vifs.clone())
        })
    }

    /// Keys with a waiters' channel (tests).
    #[cfg(test)]
    fn waiter_keys(&self) -> usize {
        self.read(|i| i.waiters.len())
    }

    /// Number of KuryrPorts known.
    pub fn port_count(&self) -> usize {
        self.read(|i| i.ports.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::{Vif, VifKind};

    fn port(uid: &str, active: Option<bool>) -> PortRecord {
        let mut vif = Vif::new(VifKind::OpenVSwitch, "p1");
        vif.active = active;
        PortRecord {
            kp_uid: "kp".into(),
            pod_uid: uid.into(),
            pod_static: false,
            vifs: BTreeMap::from([("eth0".to_owned(), VifEntry { default: true, vif })]),
        }
    }

    #[test]
    fn add_decisions() {
        let p = port("u1", Some(false));
        assert_eq!(
            decide_add(None, None, Some(&p)),
            AddDecision::Wait(WaitReason::PodUnknown)
        );
        assert!(matches!(
            decide_add(Some("u1"), None, Some(&p)),
            AddDecision::Ready { .. }
        ));
        let pod = PodRecord {
            uid: "u1".into(),
            terminating: false,
        };
        assert!(matches!(
            decide_add(None, Some(&pod), Some(&p)),
            AddDecision::Ready { .. }
        ));
        assert_eq!(
            decide_add(Some("u1"), None, None),
            AddDecision::Wait(WaitReason::NoKuryrPort)
        );
        assert_eq!(
            decide_add(Some("u2"), None, Some(&p)),
            AddDecision::Wait(WaitReason::UidMismatch {
                kp: "u1".into(),
                pod: "u2".into()
            })
        );
        let empty = PortRecord {
            vifs: BTreeMap::new(),
            ..p.clone()
        };
        assert_eq!(
            decide_add(Some("u1"), None, Some(&empty)),
            AddDecision::Wait(WaitReason::NoVifs)
        );
        let dying = PodRecord {
            uid: "u1".into(),
            terminating: true,
        };
        assert_eq!(decide_add(Some("u1"), Some(&dying), Some(&p)), AddDecision::Gone);
        // A terminating *older* incarnation does not fail the ADD of the new one.
        let old = PodRecord {
            uid: "u0".into(),
            terminating: true,
        };
        assert!(matches!(
            decide_add(Some("u1"), Some(&old), Some(&p)),
            AddDecision::Ready { .. }
        ));
    }

    #[test]
    fn activity() {
        assert!(!all_active(&port("u", Some(false)).vifs));
        assert!(all_active(&port("u", Some(true)).vifs));
        assert!(all_active(&port("u", None).vifs));
    }

    #[test]
    fn relist_drops_vanished_and_wakes_waiters() {
        let r = Registry::default();
        let mut rx_a = r.changed_for("ns/a");
        let rx_c = r.changed_for("ns/c");
        r.put_port("ns/a".into(), port("u", None));
        r.put_port("ns/b".into(), port("u", None));
        assert!(rx_a.has_changed().unwrap());
        assert!(
            !rx_c.has_changed().unwrap(),
            "updates of other keys wake nobody else"
        );
        rx_a.borrow_and_update();
        r.put_pod(
            "ns/a".into(),
            PodRecord {
                uid: "u".into(),
                terminating: false,
            },
        );
        assert!(
            rx_a.has_changed().unwrap(),
            "a pod update wakes its key's waiters"
        );
        rx_a.borrow_and_update();
        assert!(!r.synced());
        r.relist_start(Source::Ports);
        r.put_port("ns/a".into(), port("u", None));
        r.relist_done(Source::Ports);
        assert_eq!(r.port_count(), 1);
        assert!(rx_c.has_changed().unwrap(), "a re-list wakes every waiter");
        assert_eq!(r.vifs_active("ns/a", "u"), Some(true));
        assert_eq!(r.vifs_active("ns/a", "other"), None);
        assert!(!r.pod_gone("ns/a", "u"));
        r.put_pod(
            "ns/a".into(),
            PodRecord {
                uid: "u".into(),
                terminating: true,
            },
        );
        assert!(r.pod_gone("ns/a", "u"));
        assert!(!r.pod_gone("ns/a", "older"));
        drop(rx_c);
        let _rx_e = r.changed_for("ns/e");
        assert_eq!(
            r.waiter_keys(),
            2,
            "the channel of ns/c, without receivers, was dropped"
        );
        drop(rx_a);
        r.put_port("ns/a".into(), port("u", None));
        assert_eq!(
            r.waiter_keys(),
            1,
            "an update of a key nobody waits for drops its channel"
        );
        assert!(!r.synced());
        r.relist_start(Source::Pods);
        r.relist_done(Source::Pods);
        assert!(r.synced());
        assert!(r.vifs("ns/a", "u").is_some());
        assert!(r.vifs("ns/a", "other").is_none());
        r.delete_port("ns/a");
        assert_eq!(
            r.decide("ns/a", Some("u")),
            AddDecision::Wait(WaitReason::NoKuryrPort)
        );
    }
}
