//! The KuryrPort handler's decisions, without I/O: given a KuryrPort and its pod (when the
//! decision needs it), which steps keep them as upstream's `KuryrPortHandler` does.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kuryr_types::{KuryrPort, constants::KURYRPORT_FINALIZER};

use crate::handlers::{
    pod::plan::is_completed,
    scaffold::{self, Then},
};

/// One step of the KuryrPort handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Make sure the activation loop watches every inactive VIF of the KuryrPort (after a
    /// restart or a missed event).
    TrackInactive,
    /// Ask the drivers where the port goes, take one from the pool and write `status.vifs`.
    AssignPort,
    /// The pod is gone (or another pod has the name): delete this KuryrPort.
    DeleteKuryrPort,
    /// The KuryrPort was deleted while its pod runs: keep the port, say so on the pod
    /// (upstream's `NoKuryrPort`).
    WarnPortKept,
    /// Give these ports back to their pools (or delete them).
    ReleasePorts(Vec<String>),
    /// Entries of `status.vifs` are not VIFs (written by hand or by another version): say which
    /// and why on the pod (`InvalidVIF`); a default one is replaced.
    WarnInvalidVifs(Vec<String>),
    /// Remove [`KURYRPORT_FINALIZER`].
    RemoveFinalizer,
}

/// The handler's plan.
pub type Plan = scaffold::Plan<Step>;

/// How soon a KuryrPort kept for a running pod is looked at again.
pub const KEPT_RECHECK: Duration = Duration::from_secs(60);

/// What the decision needs to know about the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Not read (the decision does not need it).
    NotRead,
    /// No pod of this name, or one with another UID (a later pod of the same name).
    Missing,
    /// The KuryrPort's pod, being deleted or completed: its port is released.
    Going,
    /// The KuryrPort's pod, running.
    Running,
}

impl PodState {
    /// The state of `pod` for `kp` (`None`: no pod of that name).
    pub fn of(kp: &KuryrPort, pod: Option<&Pod>) -> Self {
        match pod {
            Some(p) if p.uid().as_deref() == Some(kp.spec.pod_uid.as_str()) => {
                if p.metadata.deletion_timestamp.is_some() || is_completed(p) {
                    PodState::Going
                } else {
                    PodState::Running
                }
            }
            _ => PodState::Missing,
        }
    }
}

/// Whether the decision for `kp` needs its pod (so that observing it is not wasted).
pub fn needs_pod(kp: &KuryrPort) -> bool {
    if kp.metadata.deletion_timestamp.is_some() {
        return has_finalizer(kp);
    }
    !has_vifs(kp)
}

fn has_finalizer(kp: &KuryrPort) -> bool {
    kp.finalizers().iter().any(|f| f == KURYRPORT_FINALIZER)
}

fn has_vifs(kp: &KuryrPort) -> bool {
    kp.status.as_ref().is_some_and(|s| !s.vifs.is_empty())
}

/// The Neutron port IDs in `kp`'s `status.vifs` (unreadable entries included, when they
/// name a port where a VIF would).
pub fn port_ids(kp: &KuryrPort) -> Vec<String> {
    let mut ids: Vec<String> = kp
        .status
        .iter()
        .flat_map(|s| s.vifs.values())
        .filter_map(|e| e.vif.id.clone())
        .collect();
    ids.extend(invalid_port_ids(kp));
    ids
}

/// Port IDs named by unreadable entries of `status.vifs`.
pub fn invalid_port_ids(kp: &KuryrPort) -> Vec<String> {
    kp.status
        .iter()
        .flat_map(|s| s.invalid.values())
        .filter_map(|e| e.port_id().map(String::from))
        .collect()
}

/// The unreadable entries of `status.vifs`, as `name: why`.
fn invalid_vifs(kp: &KuryrPort) -> Vec<String> {
    kp.status
        .iter()
        .flat_map(|s| s.invalid.iter())
        .map(|(name, e)| format!("status.vifs[{name:?}]: {}", e.error))
        .collect()
}

/// Decides what to do for `kp` given its pod's state.
///
/// * Deleted KuryrPort with our finalizer: if its pod still runs, the port is kept (a
///   KuryrPort deleted by hand must not cut a running pod off) and checked again later;
///   otherwise its ports are released, then the finalizer is removed (the pod handler then
///   drops the pod finalizer).
/// * KuryrPort with VIFs: only activation tracking (the port is the pod's).
/// * KuryrPort without VIFs: its pod gone → the KuryrPort is deleted; the pod going → nothing
///   (the pod handler deletes the KuryrPort); the pod running → a port is assigned.
pub fn plan(kp: &KuryrPort, pod: PodState) -> Plan {
    if kp.metadata.deletion_timestamp.is_some() {
        if !has_finalizer(kp) {
            return Plan::nothing("KuryrPort deleted, nothing of ours left", Then::AwaitChange);
        }
        return match pod {
            PodState::Running => Plan::steps(
                "KuryrPort deleted while its pod runs",
                vec![Step::WarnPortKept],
                Then::Requeue(KEPT_RECHECK),
            ),
            _ => Plan::steps(
                "KuryrPort deleted",
                vec![Step::ReleasePorts(port_ids(kp)), Step::RemoveFinalizer],
                Then::AwaitChange,
            ),
        };
    }
    let invalid = invalid_vifs(kp);
    if has_vifs(kp) {
        let mut steps = vec![Step::TrackInactive];
        if !invalid.is_empty() {
            steps.insert(0, Step::WarnInvalidVifs(invalid));
        }
        return Plan::steps("VIFs assigned", steps, Then::AwaitChange);
    }
    if !invalid.is_empty() && pod == PodState::Running {
        // No readable VIF: the pod's port is written again. A port the unreadable entry names
        // is the pod's in the pool (recovery counts it as in use), so the pool hands that same
        // port back and the running pod keeps its wiring; otherwise a new one is assigned.
        let steps = vec![Step::WarnInvalidVifs(invalid), Step::AssignPort];
        return Plan::steps("unreadable VIFs written again", steps, Then::AwaitChange);
    }
    match pod {
        PodState::Missing => Plan::steps(
            "the KuryrPort's pod is gone",
            vec![Step::DeleteKuryrPort],
            Then::AwaitChange,
        ),
        PodState::Going => Plan::nothing(
            "pod going: the pod handler deletes the KuryrPort",
            Then::AwaitChange,
        ),
        PodState::Running => Plan::steps("pod needs a port", vec![Step::AssignPort], Then::AwaitChange),
        PodState::NotRead => Plan::nothing("pod not read (invariant: needs_pod)", Then::AwaitChange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kuryr_types::{KuryrPortSpec, VifEntry, vif::Vif};
    use serde_json::json;

    fn kp() -> KuryrPort {
        let mut k = KuryrPort::new(
            "web",
            KuryrPortSpec {
                pod_uid: "uid-1".into(),
                pod_node_name: "node-1".into(),
                pod_static: Some(false),
            },
        );
        k.metadata.namespace = Some("ns".into());
        k.metadata.finalizers = Some(vec![KURYRPORT_FINALIZER.into()]);
        k
    }

    fn with_vif(mut k: KuryrPort, port: &str) -> KuryrPort {
        let mut st = k.status.take().unwrap_or_default();
        let mut vif = Vif::new(kuryr_types::VifKind::OpenVSwitch, port);
        vif.active = Some(false);
        st.vifs.insert("eth0".into(), VifEntry { default: true, vif });
        k.status = Some(st);
        k
    }

    fn deleted(mut k: KuryrPort) -> KuryrPort {
        k.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        k
    }

    fn pod(uid: &str, extra: serde_json::Value) -> Pod {
        let mut v = json!({"metadata": {"name": "web", "namespace": "ns", "uid": uid}, "status": {"phase": "Pending"}});
        if let (Some(a), Some(b)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in b {
                a.insert(k.clone(), val.clone());
            }
        }
        serde_json::from_value(v).expect("pod")
    }

    fn with_garbage(mut k: KuryrPort, vifs: serde_json::Value) -> KuryrPort {
        k.status = Some(serde_json::from_value(json!({ "vifs": vifs })).expect("lenient status"));
        k
    }

    #[test]
    fn unreadable_vifs_are_told_and_written_again_and_released_with_the_kuryrport() {
        let port_named = json!({"default": true, "vif": {"versioned_object.data": {"id": "p-old"}}});
        let k = with_garbage(kp(), json!({"eth0": port_named}));
        let p = plan(&k, PodState::Running);
        assert!(
            matches!(&p.steps[0], Step::WarnInvalidVifs(w) if w[0].contains("eth0")),
            "{p:?}"
        );
        assert_eq!(p.steps[1..], [Step::AssignPort]);
        // Nothing the entry names: just a new port.
        let k = with_garbage(kp(), json!({"eth0": "x"}));
        let p = plan(&k, PodState::Running);
        assert_eq!(p.steps.len(), 2);
        assert_eq!(p.steps[1], Step::AssignPort);
        // A readable default and an unreadable extra entry: told, nothing else.
        let k = with_vif(with_garbage(kp(), json!({"eth1": 7})), "p1");
        let p = plan(&k, PodState::NotRead);
        assert!(matches!(&p.steps[0], Step::WarnInvalidVifs(_)));
        assert_eq!(p.steps[1], Step::TrackInactive);
        // Deleted: the unreadable entry's port is released too.
        let k = deleted(with_garbage(kp(), json!({"eth0": port_named_again()})));
        let p = plan(&k, PodState::Missing);
        assert_eq!(p.steps[0], Step::ReleasePorts(vec!["p-old".into()]));
    }

    fn port_named_again() -> serde_json::Value {
        json!({"default": true, "vif": {"versioned_object.data": {"id": "p-old"}}})
    }

    #[test]
    fn pod_state_follows_uid_deletion_and_phase() {
        let k = kp();
        assert_eq!(PodState::of(&k, None), PodState::Missing);
        assert_eq!(
            PodState::of(&k, Some(&pod("other", json!({})))),
            PodState::Missing
        );
        assert_eq!(
            PodState::of(&k, Some(&pod("uid-1", json!({})))),
            PodState::Running
        );
        let done = pod("uid-1", json!({"status": {"phase": "Succeeded"}}));
        assert_eq!(PodState::of(&k, Some(&done)), PodState::Going);
        let mut going = pod("uid-1", json!({}));
        going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(PodState::of(&k, Some(&going)), PodState::Going);
    }

    #[test]
    fn a_new_kuryrport_of_a_running_pod_gets_a_port() {
        let k = kp();
        assert!(needs_pod(&k));
        let p = plan(&k, PodState::Running);
        assert_eq!(p.steps, vec![Step::AssignPort]);
        assert_eq!(p.then, Then::AwaitChange);
    }

    #[test]
    fn a_kuryrport_without_its_pod_is_deleted_and_a_going_pod_is_left_to_the_pod_handler() {
        assert_eq!(plan(&kp(), PodState::Missing).steps, vec![Step::DeleteKuryrPort]);
        assert!(plan(&kp(), PodState::Going).steps.is_empty());
    }

    #[test]
    fn assigned_vifs_are_only_tracked_and_need_no_pod_read() {
        let k = with_vif(kp(), "port-1");
        assert!(!needs_pod(&k));
        assert_eq!(plan(&k, PodState::NotRead).steps, vec![Step::TrackInactive]);
    }

    #[test]
    fn deletion_releases_the_ports_then_the_finalizer() {
        let k = deleted(with_vif(kp(), "port-1"));
        assert!(needs_pod(&k));
        for pod in [PodState::Missing, PodState::Going] {
            assert_eq!(
                plan(&k, pod).steps,
                vec![Step::ReleasePorts(vec!["port-1".into()]), Step::RemoveFinalizer]
            );
        }
        // Even a KuryrPort that never got a VIF gives back what the pool handed its pod.
        assert_eq!(
            plan(&deleted(kp()), PodState::Missing).steps,
            vec![Step::ReleasePorts(vec![]), Step::RemoveFinalizer]
        );
    }

    #[test]
    fn a_kuryrport_deleted_under_a_running_pod_keeps_its_port() {
        let k = deleted(with_vif(kp(), "port-1"));
        let p = plan(&k, PodState::Running);
        assert_eq!(p.steps, vec![Step::WarnPortKept]);
        assert_eq!(p.then, Then::Requeue(KEPT_RECHECK));
    }

    #[test]
    fn without_our_finalizer_a_deleted_kuryrport_needs_nothing() {
        let mut k = deleted(with_vif(kp(), "port-1"));
        k.metadata.finalizers = Some(vec!["someone.else/finalizer".into()]);
        assert!(!needs_pod(&k));
        assert!(plan(&k, PodState::NotRead).steps.is_empty());
    }

    #[test]
    fn port_ids_come_from_every_vif() {
        let k = with_vif(kp(), "port-1");
        assert_eq!(port_ids(&k), vec!["port-1".to_string()]);
        assert!(port_ids(&kp()).is_empty());
    }
}
