//! Which ReplicaSet is a Deployment's new one and how it is built, without I/O: template
//! equality ignoring `pod-template-hash` (`EqualIgnoreHash`), the new ReplicaSet object
//! (`<deployment>-<hash>`, hash label on its labels, selector and template), and the annotations
//! a new ReplicaSet carries (`SetNewReplicaSetAnnotations`: the Deployment's own annotations, the
//! revision, the revision history of a rollback, `desired-replicas` / `max-replicas`).

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec},
        core::v1::PodTemplateSpec,
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta},
};
use kube::ResourceExt;
use serde_json::Value;

use super::{
    super::workload::{controller_ref, template_hash},
    rollout::{
        DESIRED_REPLICAS, MAX_REPLICAS, POD_TEMPLATE_HASH, Params, REVISION, REVISION_HISTORY, SKIP_COPY,
        append_revision_history,
    },
};

/// Upstream's limit on the length of the revision history annotation.
const MAX_REV_HISTORY_CHARS: usize = 2000;

fn comparable(t: &PodTemplateSpec) -> Value {
    let mut v = serde_json::to_value(t).unwrap_or(Value::Null);
    if let Some(labels) = v.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove(POD_TEMPLATE_HASH);
        if labels.is_empty() {
            if let Some(m) = v.pointer_mut("/metadata").and_then(Value::as_object_mut) {
                m.remove("labels");
            }
        }
    }
    v
}

/// `EqualIgnoreHash`: the templates are equal once `pod-template-hash` is removed.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    comparable(a) == comparable(b)
}

fn template(d: &Deployment) -> PodTemplateSpec {
    d.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default()
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template is the Deployment's.
pub fn find_new(d: &Deployment, rss: &[ReplicaSet]) -> Option<usize> {
    let want = template(d);
    let mut idx: Vec<usize> = (0..rss.len()).collect();
    idx.sort_by(|a, b| {
        let (x, y) = (&rss[*a], &rss[*b]);
        x.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0)
            .cmp(&y.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .then_with(|| x.name_any().cmp(&y.name_any()))
    });
    idx.into_iter().find(|i| {
        rss[*i]
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| equal_ignore_hash(t, &want))
    })
}

/// The hash naming the Deployment's new ReplicaSet (template + `status.collisionCount`).
pub fn hash(d: &Deployment) -> String {
    let collisions = d.status.as_ref().and_then(|s| s.collision_count);
    template_hash(&template(d), collisions)
}

/// The new ReplicaSet to create, with `replicas` and revision `revision`.
pub fn build(d: &Deployment, p: &Params, replicas: i32, revision: i64) -> ReplicaSet {
    let h = hash(d);
    let mut tmpl = template(d);
    let mut labels = tmpl
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(POD_TEMPLATE_HASH.into(), h.clone());
    tmpl.metadata.get_or_insert_with(Default::default).labels = Some(labels.clone());
    let mut selector: LabelSelector = d.spec.as_ref().map(|s| s.selector.clone()).unwrap_or_default();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH.into(), h.clone());
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{h}", d.name_any())),
            namespace: d.namespace(),
            owner_references: Some(vec![controller_ref(d)]),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: d.spec.as_ref().and_then(|s| s.min_ready_seconds),
            selector,
            template: Some(tmpl),
        }),
        status: None,
    };
    if let Some(a) = annotations(d, &rs, revision, false, p) {
        rs.metadata.annotations = Some(a);
    }
    rs
}

/// `SetNewReplicaSetAnnotations`: the annotations `rs` should have as the new ReplicaSet of
/// `d` at `new_revision`; `None` when they are already right. `exists` is false while building
/// it (then the replica annotations are added too).
pub fn annotations(
    d: &Deployment,
    rs: &ReplicaSet,
    new_revision: i64,
    exists: bool,
    p: &Params,
) -> Option<BTreeMap<String, String>> {
    let mut a = rs.metadata.annotations.clone().unwrap_or_default();
    let mut changed = false;
    for (k, v) in d.annotations() {
        if SKIP_COPY.contains(&k.as_str()) || a.get(k) == Some(v) {
            continue;
        }
        a.insert(k.clone(), v.clone());
        changed = true;
    }
    let old = a.get(REVISION).cloned();
    let old_int = match old.as_deref() {
        None | Some("") => 0,
        Some(s) => s.parse::<i64>().ok()?,
    };
    if old_int < new_revision {
        a.insert(REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old.filter(|s| !s.is_empty()) {
            let history = a.get(REVISION_HISTORY).cloned().unwrap_or_default();
            if let Some(h) = append_revision_history(&history, &old, MAX_REV_HISTORY_CHARS) {
                a.insert(REVISION_HISTORY.into(), h);
            }
        }
    }
    if !exists && set_replicas_annotations(&mut a, p) {
        changed = true;
    }
    changed.then_some(a)
}

/// `SetReplicasAnnotations`: `desired-replicas` and `max-replicas` for the Deployment's current
/// size; true when something changed.
pub fn set_replicas_annotations(a: &mut BTreeMap<String, String>, p: &Params) -> bool {
    let desired = p.replicas.to_string();
    let max = (p.replicas + p.max_surge).to_string();
    let changed = a.get(DESIRED_REPLICAS) != Some(&desired) || a.get(MAX_REPLICAS) != Some(&max);
    a.insert(DESIRED_REPLICAS.into(), desired);
    a.insert(MAX_REPLICAS.into(), max);
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::deployment::rollout::params;

    fn deploy() -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "d", "uid": "du",
                         "annotations": {"team": "a", "kubectl.kubernetes.io/last-applied-configuration": "{}",
                                         REVISION: "1"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}))
        .unwrap()
    }

    #[test]
    fn builds_the_new_replica_set() {
        let d = deploy();
        let rs = build(&d, &params(&d), 1, 2);
        let h = hash(&d);
        assert_eq!(rs.name_any(), format!("web-{h}"));
        assert_eq!(rs.labels()[POD_TEMPLATE_HASH], h);
        let spec = rs.spec.as_ref().unwrap();
        assert_eq!(spec.selector.match_labels.as_ref().unwrap()[POD_TEMPLATE_HASH], h);
        assert_eq!(spec.selector.match_labels.as_ref().unwrap()["app"], "web");
        let tl = spec
            .template
            .as_ref()
            .unwrap()
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap();
        assert_eq!(tl[POD_TEMPLATE_HASH], h);
        assert_eq!(spec.replicas, Some(1));
        let a = rs.annotations();
        assert_eq!(a["team"], "a");
        assert_eq!(a[REVISION], "2");
        assert_eq!(a[DESIRED_REPLICAS], "3");
        assert_eq!(a[MAX_REPLICAS], "4");
        assert!(!a.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
        let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Deployment", "du", Some(true))
        );
        // The built template equals the Deployment's, ignoring the hash.
        assert_eq!(find_new(&d, std::slice::from_ref(&rs)), Some(0));
        let mut changed = d.clone();
        changed
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("nginx:2".into());
        assert_eq!(find_new(&changed, &[rs]), None);
        assert_ne!(hash(&changed), h);
    }

    #[test]
    fn rollback_keeps_revision_history() {
        let d = deploy();
        let p = params(&d);
        let mut rs = build(&d, &p, 0, 1);
        rs.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("team".into(), "a".into());
        assert!(annotations(&d, &rs, 1, true, &p).is_none(), "up to date");
        let a = annotations(&d, &rs, 3, true, &p).unwrap();
        assert_eq!(a[REVISION], "3");
        assert_eq!(a[REVISION_HISTORY], "1");
    }
}
