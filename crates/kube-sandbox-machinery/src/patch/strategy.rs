//! The per-path table of list merge strategies shared by strategic merge patch and server-side
//! apply: which lists merge by a key, which merge as sets of scalars, and (by default) which are
//! atomic (replaced whole).
//!
//! Entries are matched against the **suffix** of the field path (list items appear as `[]`), so
//! `spec.containers` also covers `spec.template.spec.containers` of workload templates.
//!
//! | path suffix | strategy |
//! |---|---|
//! | `metadata.finalizers` | set of scalars |
//! | `metadata.ownerReferences` | key `uid` |
//! | `status.conditions` | key `type` |
//! | `spec.containers`, `spec.initContainers`, `spec.ephemeralContainers` | key `name` |
//! | `containers[].ports` (and init/ephemeral) | key `containerPort` |
//! | `containers[].env` | key `name` |
//! | `containers[].volumeMounts` (and init/ephemeral) | key `mountPath` |
//! | `containers[].volumeDevices` (and init/ephemeral) | key `devicePath` |
//! | `spec.volumes`, `spec.imagePullSecrets`, `spec.schedulingGates`, `spec.resourceClaims` | key `name` |
//! | `status.resourceClaimStatuses` | key `name` |
//! | `spec.hostAliases`, `status.podIPs`, `status.hostIPs` | key `ip` |
//! | `spec.topologySpreadConstraints` | key `topologyKey` |
//! | `spec.podCIDRs` (Node) | set of scalars |
//! | `spec.ports` (Service only) | key `port` |
//! | `status.addresses` (Node only) | key `type` |
//! | anything else (`spec.tolerations`, `spec.taints`, `subsets`, RBAC `rules`, ...) | atomic |
//!
//! Pod templates of workloads (`spec.template.spec` of Deployment, ReplicaSet, DaemonSet) have
//! exactly a Pod spec's strategies, which the suffix match gives them. A Deployment's
//! `spec.strategy` is `retainKeys` upstream: that is a directive clients send
//! (`$retainKeys`, honoured by the patch itself), not a list strategy.

/// Maps and structs that server-side apply treats as atomic (replaced whole, owned as one field):
/// `metav1.LabelSelector` values (`podSelector`, `namespaceSelector`, workload `spec.selector`)
/// and the `+mapType=atomic` Service `spec.selector`. Strategic merge patch still merges them,
/// as the real server does (they carry no patch strategy).
pub fn map_is_atomic(kind: &str, path: &[&str]) -> bool {
    match path {
        [.., "podSelector" | "namespaceSelector"] => true,
        ["spec", "selector"] => matches!(
            kind,
            "Service"
                | "Deployment"
                | "ReplicaSet"
                | "StatefulSet"
                | "DaemonSet"
                | "Job"
                | "PodDisruptionBudget"
        ),
        _ => false,
    }
}

/// How a list field merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars: union on merge.
    Set,
    /// A list of objects identified by the named key field.
    Keyed(&'static str),
}

const TABLE: &[(&[&str], Option<&str>, ListStrategy)] = &[
    (&["metadata", "finalizers"], None, ListStrategy::Set),
    (&["metadata", "ownerReferences"], None, ListStrategy::Keyed("uid")),
    (&["status", "conditions"], None, ListStrategy::Keyed("type")),
    (&["spec", "containers"], None, ListStrategy::Keyed("name")),
    (&["spec", "initContainers"], None, ListStrategy::Keyed("name")),
    (
        &["spec", "ephemeralContainers"],
        None,
        ListStrategy::Keyed("name"),
    ),
    (
        &["containers", "[]", "ports"],
        None,
        ListStrategy::Keyed("containerPort"),
    ),
    (
        &["initContainers", "[]", "ports"],
        None,
        ListStrategy::Keyed("containerPort"),
    ),
    (
        &["ephemeralContainers", "[]", "ports"],
        None,
        ListStrategy::Keyed("containerPort"),
    ),
    (&["containers", "[]", "env"], None, ListStrategy::Keyed("name")),
    (
        &["initContainers", "[]", "env"],
        None,
        ListStrategy::Keyed("name"),
    ),
    (
        &["containers", "[]", "volumeMounts"],
        None,
        ListStrategy::Keyed("mountPath"),
    ),
    (
        &["initContainers", "[]", "volumeMounts"],
        None,
        ListStrategy::Keyed("mountPath"),
    ),
    (
        &["ephemeralContainers", "[]", "env"],
        None,
        ListStrategy::Keyed("name"),
    ),
    (
        &["ephemeralContainers", "[]", "volumeMounts"],
        None,
        ListStrategy::Keyed("mountPath"),
    ),
    (
        &["containers", "[]", "volumeDevices"],
        None,
        ListStrategy::Keyed("devicePath"),
    ),
    (
        &["initContainers", "[]", "volumeDevices"],
        None,
        ListStrategy::Keyed("devicePath"),
    ),
    (
        &["ephemeralContainers", "[]", "volumeDevices"],
        None,
        ListStrategy::Keyed("devicePath"),
    ),
    (&["spec", "volumes"], None, ListStrategy::Keyed("name")),
    (&["spec", "imagePullSecrets"], None, ListStrategy::Keyed("name")),
    (&["spec", "schedulingGates"], None, ListStrategy::Keyed("name")),
    (&["spec", "resourceClaims"], None, ListStrategy::Keyed("name")),
    (
        &["status", "resourceClaimStatuses"],
        None,
        ListStrategy::Keyed("name"),
    ),
    (&["spec", "hostAliases"], None, ListStrategy::Keyed("ip")),
    (&["status", "podIPs"], None, ListStrategy::Keyed("ip")),
    (&["status", "hostIPs"], None, ListStrategy::Keyed("ip")),
    (
        &["spec", "topologySpreadConstraints"],
        None,
        ListStrategy::Keyed("topologyKey"),
    ),
    (&["spec", "podCIDRs"], Some("Node"), ListStrategy::Set),
    (&["spec", "ports"], Some("Service"), ListStrategy::Keyed("port")),
    (
        &["status", "addresses"],
        Some("Node"),
        ListStrategy::Keyed("type"),
    ),
];

/// The strategy of the list at `path` (field names, `[]` for list items) in an object of `kind`.
pub fn list_strategy(kind: &str, path: &[&str]) -> ListStrategy {
    for (suffix, only_kind, strategy) in TABLE {
        if only_kind.is_some_and(|k| k != kind) {
            continue;
        }
        // Kind-specific entries are anchored at the root; the others match any suffix.
        let matched = if only_kind.is_some() {
            path == *suffix
        } else {
            path.ends_with(suffix)
        };
        if matched {
            return *strategy;
        }
    }
    ListStrategy::Atomic
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(
            list_strategy("Pod", &["metadata", "finalizers"]),
            ListStrategy::Set
        );
        assert_eq!(
            list_strategy("Pod", &["spec", "containers"]),
            ListStrategy::Keyed("name")
        );
        assert_eq!(
            list_strategy(
                "Deployment",
                &["spec", "template", "spec", "containers", "[]", "ports"]
            ),
            ListStrategy::Keyed("containerPort")
        );
        assert_eq!(
            list_strategy("Service", &["spec", "ports"]),
            ListStrategy::Keyed("port")
        );
        assert_eq!(
            list_strategy("EndpointSlice", &["spec", "ports"]),
            ListStrategy::Atomic
        );
        assert_eq!(
            list_strategy("Node", &["status", "addresses"]),
            ListStrategy::Keyed("type")
        );
        assert_eq!(
            list_strategy("Pod", &["status", "addresses"]),
            ListStrategy::Atomic
        );
        assert_eq!(
            list_strategy("Pod", &["spec", "tolerations"]),
            ListStrategy::Atomic
        );
        assert_eq!(
            list_strategy("KuryrPort", &["status", "conditions"]),
            ListStrategy::Keyed("type")
        );
    }

    #[test]
    fn workload_templates_merge_like_pod_specs() {
        let pod_lists: &[(&[&str], ListStrategy)] = &[
            (&["containers"], ListStrategy::Keyed("name")),
            (&["initContainers"], ListStrategy::Keyed("name")),
            (
                &["containers", "[]", "ports"],
                ListStrategy::Keyed("containerPort"),
            ),
            (&["containers", "[]", "env"], ListStrategy::Keyed("name")),
            (
                &["containers", "[]", "volumeMounts"],
                ListStrategy::Keyed("mountPath"),
            ),
            (
                &["initContainers", "[]", "volumeDevices"],
                ListStrategy::Keyed("devicePath"),
            ),
            (&["volumes"], ListStrategy::Keyed("name")),
            (&["imagePullSecrets"], ListStrategy::Keyed("name")),
            (&["hostAliases"], ListStrategy::Keyed("ip")),
            (&["schedulingGates"], ListStrategy::Keyed("name")),
            (&["topologySpreadConstraints"], ListStrategy::Keyed("topologyKey")),
            (&["tolerations"], ListStrategy::Atomic),
            (&["containers", "[]", "args"], ListStrategy::Atomic),
        ];
        for kind in ["Deployment", "ReplicaSet", "DaemonSet"] {
            for (tail, want) in pod_lists {
                let mut path = vec!["spec", "template", "spec"];
                path.extend_from_slice(tail);
                let mut pod_path = vec!["spec"];
                pod_path.extend_from_slice(tail);
                assert_eq!(list_strategy(kind, &path), *want, "{kind} {path:?}");
                assert_eq!(list_strategy("Pod", &pod_path), *want, "Pod {pod_path:?}");
            }
            assert_eq!(
                list_strategy(kind, &["status", "conditions"]),
                ListStrategy::Keyed("type")
            );
            assert!(map_is_atomic(kind, &["spec", "selector"]));
        }
        assert_eq!(list_strategy("ClusterRole", &["rules"]), ListStrategy::Atomic);
    }
}
