//! The DaemonSet controller's decisions, without I/O: where a daemon pod should run
//! (`NodeShouldRunDaemonPod`), the pod it creates there (`CreatePodTemplate` + the node pinned by
//! a required `matchFields metadata.name In [node]` affinity + the automatic tolerations), which
//! pods to create and delete (`podsShouldBeOnNode`), the rolling update (`rollingUpdate`, with
//! `maxUnavailable` or `maxSurge`), and the status (`updateDaemonSetStatus`).

use std::{
    cmp::Ordering,
    collections::{BTreeMap, HashSet},
    sync::Arc,
};

use jiff::Timestamp;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, DaemonSetStatus},
    core::v1::{
        Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
        PodTemplateSpec, Toleration,
    },
};
use kube::ResourceExt;

use super::super::{
    predicates::{NOT_READY, UNREACHABLE, fits_node_affinity, node_taints, untolerated_taint},
    workload::{is_available, is_ready, is_terminal, next_available_at, scaled_value, template_hash},
};

/// Label with the hash of the template a daemon pod was made from.
pub const REVISION_HASH: &str = "controller-revision-hash";
/// Label with the DaemonSet's template generation a daemon pod was made from.
pub const TEMPLATE_GENERATION: &str = "pod-template-generation";
/// Annotation where apps/v1 keeps a DaemonSet's template generation.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// The DaemonSet's template hash (`controller-revision-hash`). Upstream names a ControllerRevision
/// after it; none are served here, only the label is kept.
pub fn hash(ds: &DaemonSet) -> String {
    let template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    template_hash(&template, ds.status.as_ref().and_then(|s| s.collision_count))
}

/// The template generation from the annotation the API server maintains.
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.annotations()
        .get(TEMPLATE_GENERATION_ANNOTATION)
        .and_then(|v| v.parse().ok())
}

fn toleration(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    }
}

/// `AddOrUpdateDaemonPodTolerations`: not-ready and unreachable `NoExecute`; disk, memory and
/// pid pressure and unschedulable `NoSchedule`; network-unavailable `NoSchedule` for host-network
/// pods. Existing tolerations with the same key and effect are replaced.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut add = vec![
        toleration(NOT_READY, "NoExecute"),
        toleration(UNREACHABLE, "NoExecute"),
        toleration("node.kubernetes.io/disk-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/memory-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/pid-pressure", "NoSchedule"),
        toleration("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        add.push(toleration("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for t in add {
        match tolerations
            .iter_mut()
            .find(|x| x.key == t.key && x.effect == t.effect)
        {
            Some(existing) => *existing = t,
            None => tolerations.push(t),
        }
    }
}

/// `CreatePodTemplate`: the DaemonSet's template with the automatic tolerations and the
/// `pod-template-generation` / `controller-revision-hash` labels.
pub fn pod_template(ds: &DaemonSet, hash: &str) -> PodTemplateSpec {
    let mut t = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    add_daemon_tolerations(t.spec.get_or_insert_with(Default::default));
    let labels = t
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(BTreeMap::new);
    if let Some(g) = template_generation(ds) {
        labels.insert(TEMPLATE_GENERATION.into(), g.to_string());
    }
    labels.insert(REVISION_HASH.into(), hash.into());
    t
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes the one term
/// `matchFields metadata.name In [node]` (the DaemonSet already checked the others).
pub fn pin_to_node(affinity: Option<Affinity>, node: &str) -> Affinity {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
            match_expressions: None,
        }],
    };
    let mut a = affinity.unwrap_or_default();
    let na = a.node_affinity.get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(selector);
    a
}

/// `GetTargetNodeName`: the pod's node, or the node its pinning affinity names.
pub fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms.iter().find_map(|t| {
        t.match_fields.as_ref()?.iter().find_map(|r| {
            let values = r.values.as_deref().unwrap_or_default();
            (r.key == "metadata.name" && r.operator == "In" && values.len() == 1).then(|| values[0].clone())
        })
    })
}

/// `NodeShouldRunDaemonPod`: (should run a pod there, may keep a running one there).
pub fn should_run(ds: &DaemonSet, node: &Node) -> (bool, bool) {
    let Some(template) = ds.spec.as_ref().map(|s| &s.template) else {
        return (false, false);
    };
    let mut spec = template.spec.clone().unwrap_or_default();
    if spec
        .node_name
        .as_ref()
        .is_some_and(|n| !n.is_empty() && *n != node.name_any())
    {
        return (false, false);
    }
    add_daemon_tolerations(&mut spec);
    if !fits_node_affinity(&spec, node) {
        return (false, false);
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let taints = node_taints(node);
    if untolerated_taint(taints, tolerations, &["NoSchedule", "NoExecute"]).is_some() {
        return (
            false,
            untolerated_taint(taints, tolerations, &["NoExecute"]).is_none(),
        );
    }
    (true, true)
}

/// Whether `pod` was made from the current template (by hash or template generation).
pub fn is_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.labels();
    let by_generation = generation.is_some_and(|g| labels.get(TEMPLATE_GENERATION) == Some(&g.to_string()));
    let by_hash = !hash.is_empty() && labels.get(REVISION_HASH).map(String::as_str) == Some(hash);
    by_hash || by_generation
}

/// Scheduled first, then oldest, then by name (`podByCreationTimestampAndPhase`).
fn by_creation_and_phase(a: &Arc<Pod>, b: &Arc<Pod>) -> Ordering {
    let scheduled = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some_and(|n| !n.is_empty())
    };
    scheduled(b)
        .cmp(&scheduled(a))
        .then_with(|| {
            let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            t(a).cmp(&t(b))
        })
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// The DaemonSet's pods by target node (terminal pods already being deleted left out).
pub fn pods_by_node(pods: &[Arc<Pod>]) -> BTreeMap<String, Vec<Arc<Pod>>> {
    let mut out: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for p in pods {
        if is_terminal(p) && p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(n) = target_node(p) {
            out.entry(n).or_default().push(p.clone());
        }
    }
    out
}

/// Pods to create (by node) and delete.
#[derive(Debug, Default)]
pub struct Changes {
    /// Nodes that need a new pod.
    pub create_on: Vec<String>,
    /// Pods to delete.
    pub delete: Vec<Arc<Pod>>,
    /// Failed pods to delete (the caller backs off per node).
    pub delete_failed: Vec<Arc<Pod>>,
}

fn max_surge(ds: &DaemonSet, desired: i32) -> i32 {
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .filter(|u| u.type_.as_deref().is_none_or(|t| t == "RollingUpdate"))
        .and_then(|u| u.rolling_update.as_ref());
    scaled_value(ru.and_then(|r| r.max_surge.as_ref()), desired, true).unwrap_or(0)
}

fn max_unavailable(ds: &DaemonSet, desired: i32) -> i32 {
    let ru = ds
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref());
    scaled_value(ru.and_then(|r| r.max_unavailable.as_ref()), desired, true).unwrap_or(1)
}

fn min_ready(ds: &DaemonSet) -> i32 {
    ds.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0)
}

/// `manage`: per node, create the missing pod, delete failed / succeeded / surplus pods, delete
/// pods from nodes that must not run one; and delete unscheduled pods aimed at missing nodes.
pub fn manage(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    by_node: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    now: Timestamp,
) -> Changes {
    let mut c = Changes::default();
    let surge = max_surge(ds, 1) > 0;
    let empty = Vec::new();
    for node in nodes {
        let name = node.name_any();
        let pods = by_node.get(&name).unwrap_or(&empty);
        let (run, keep) = should_run(ds, node);
        if run && pods.is_empty() {
            c.create_on.push(name);
        } else if keep {
            let mut running: Vec<Arc<Pod>> = Vec::new();
            for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
                match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
                    Some("Failed") => c.delete_failed.push(p.clone()),
                    Some("Succeeded") => c.delete.push(p.clone()),
                    _ => running.push(p.clone()),
                }
            }
            running.sort_by(by_creation_and_phase);
            if !surge {
                c.delete.extend(running.into_iter().skip(1));
            } else if running.is_empty() {
                if run {
                    c.create_on.push(name);
                }
            } else if running.len() > 1 {
                let (mut oldest_new, mut oldest_old) = (None, None);
                for p in running {
                    let slot = if p.labels().get(REVISION_HASH).map(String::as_str) == Some(hash) {
                        &mut oldest_new
                    } else {
                        &mut oldest_old
                    };
                    if slot.is_none() {
                        *slot = Some(p);
                    } else {
                        c.delete.push(p);
                    }
                }
                if let (Some(new), Some(old)) = (oldest_new, oldest_old) {
                    if !is_ready(&old) || is_available(&new, min_ready(ds), now) {
                        c.delete.push(old);
                    }
                }
            }
        } else if !pods.is_empty() {
            c.delete.extend(
                pods.iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .cloned(),
            );
        }
    }
    let names: HashSet<String> = nodes.iter().map(|n| n.name_any()).collect();
    for (node, pods) in by_node {
        if names.contains(node) {
            continue;
        }
        let unscheduled = |p: &&Arc<Pod>| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_none_or(|n| n.is_empty())
        };
        c.delete.extend(
            pods.iter()
                .filter(unscheduled)
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .cloned(),
        );
    }
    c
}

/// A node's current-template pod and old-template pod, each optional.
type NewAndOld = (Option<Arc<Pod>>, Option<Arc<Pod>>);

/// `findUpdatedPodsOnNode`: the node's (new, old) live pods; `None` with more than one of a kind.
fn updated_on_node(pods: &[Arc<Pod>], hash: &str, generation: Option<i64>) -> Option<NewAndOld> {
    let (mut new, mut old) = (None, None);
    for p in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let slot = if is_updated(p, hash, generation) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(p.clone());
    }
    Some((new, old))
}

/// `rollingUpdate`: without surge, delete old pods while fewer than `maxUnavailable` nodes are
/// unavailable (unavailable old pods always); with surge, create new pods next to old ones up to
/// `maxSurge` and delete each old pod once the new one is available.
pub fn rolling_update(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    by_node: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    now: Timestamp,
) -> Changes {
    let generation = template_generation(ds);
    let mr = min_ready(ds);
    let mut nodes_pods: BTreeMap<String, Vec<Arc<Pod>>> = by_node.clone();
    let mut desired = 0;
    for node in nodes {
        if should_run(ds, node).0 {
            desired += 1;
            nodes_pods.entry(node.name_any()).or_default();
        }
    }
    let mut surge = max_surge(ds, desired);
    let mut unavailable_budget = max_unavailable(ds, desired);
    if desired > 0 && surge == 0 && unavailable_budget == 0 {
        unavailable_budget = 1;
    }
    let mut c = Changes::default();
    if surge == 0 {
        let mut unavailable = 0;
        let mut candidates = Vec::new();
        for pods in nodes_pods.values() {
            let Some((new, old)) = updated_on_node(pods, hash, generation) else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !is_available(&new, mr, now) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !is_available(&old, mr, now) {
                        c.delete.push(old);
                    } else if unavailable < unavailable_budget {
                        candidates.push(old);
                    }
                }
            }
        }
        let room = usize::try_from((unavailable_budget - unavailable).max(0)).unwrap_or(0);
        c.delete.extend(candidates.into_iter().take(room));
        return c;
    }
    let node_by_name = |n: &str| nodes.iter().find(|x| x.name_any() == n);
    let (mut allowed, mut candidates, mut not_run) = (Vec::new(), Vec::new(), Vec::new());
    let (mut surging, mut available) = (0, 0);
    for (node, pods) in &nodes_pods {
        let Some((new, old)) = updated_on_node(pods, hash, generation) else {
            surging += 1;
            continue;
        };
        if let Some(p) = old.as_ref().or(new.as_ref()) {
            if is_available(p, mr, now) {
                available += 1;
            }
        }
        let runs_here = node_by_name(node).is_some_and(|n| should_run(ds, n).0);
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) if !is_available(&old, mr, now) => {
                if runs_here {
                    allowed.push(node.clone());
                } else {
                    c.delete.push(old);
                }
            }
            (None, Some(old)) => {
                if !runs_here {
                    not_run.push(old);
                } else if surging < surge {
                    candidates.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if is_available(&new, mr, now) {
                    c.delete.push(old);
                } else {
                    surging += 1;
                }
            }
        }
    }
    let deletable = usize::try_from((available - desired).max(0)).unwrap_or(0);
    c.delete.extend(not_run.into_iter().take(deletable));
    surge = (surge - surging).max(0);
    c.create_on = allowed;
    c.create_on
        .extend(candidates.into_iter().take(usize::try_from(surge).unwrap_or(0)));
    c
}

/// `updateDaemonSetStatus`: the counts over nodes that should run a pod (the oldest pod of a
/// node counts), `numberMisscheduled` for pods on nodes that should not, the observed generation.
pub fn status(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    by_node: &BTreeMap<String, Vec<Arc<Pod>>>,
    hash: &str,
    now: Timestamp,
) -> DaemonSetStatus {
    let generation = template_generation(ds);
    let (mut desired, mut current, mut misscheduled, mut ready, mut available, mut updated) =
        (0, 0, 0, 0, 0, 0);
    for node in nodes {
        let pods = by_node.get(&node.name_any()).filter(|p| !p.is_empty());
        if should_run(ds, node).0 {
            desired += 1;
            let Some(pods) = pods else { continue };
            current += 1;
            let mut sorted = pods.clone();
            sorted.sort_by(by_creation_and_phase);
            let pod = &sorted[0];
            if is_ready(pod) {
                ready += 1;
                if is_available(pod, min_ready(ds), now) {
                    available += 1;
                }
            }
            if is_updated(pod, hash, generation) {
                updated += 1;
            }
        } else if pods.is_some() {
            misscheduled += 1;
        }
    }
    let old = ds.status.clone().unwrap_or_default();
    let nonzero = |n: i32| (n != 0).then_some(n);
    DaemonSetStatus {
        desired_number_scheduled: desired,
        current_number_scheduled: current,
        number_misscheduled: misscheduled,
        number_ready: ready,
        number_available: nonzero(available),
        number_unavailable: nonzero(desired - available),
        updated_number_scheduled: nonzero(updated),
        observed_generation: ds.metadata.generation,
        collision_count: old.collision_count,
        conditions: old.conditions,
    }
}

/// When a ready daemon pod becomes available.
pub fn wake_at(
    ds: &DaemonSet,
    by_node: &BTreeMap<String, Vec<Arc<Pod>>>,
    now: Timestamp,
) -> Option<Timestamp> {
    by_node
        .values()
        .flatten()
        .filter_map(|p| next_available_at(p, min_ready(ds), now))
        .min()
}

#[cfg(test)]
mod tests;
