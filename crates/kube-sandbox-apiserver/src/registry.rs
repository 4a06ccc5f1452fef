//! The resource table: built-in kinds (static) and CustomResourceDefinition-backed kinds (added
//! and removed at run time), with what discovery and the handlers need to know about each.

use std::{collections::HashMap, sync::Arc};

use parking_lot::RwLock;
use serde_json::Value;

/// Storage key of a resource: `(group, plural)`; every served version shares it.
pub type ResKey = (String, String);

/// Per-version data of a custom resource.
#[derive(Debug, Clone, Default)]
pub struct CrdVersion {
    /// The `openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub printer_columns: Option<Value>,
    /// `subresources.status` declared.
    pub status: bool,
}

/// What the server knows about one resource.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// API group (`""` for core).
    pub group: String,
    /// Served versions, preferred (storage) first.
    pub versions: Vec<String>,
    /// The version objects are stored in.
    pub storage_version: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names for discovery.
    pub short_names: Vec<String>,
    /// Categories for discovery.
    pub categories: Vec<String>,
    /// Has a `status` subresource (status writes only through it).
    pub status_subresource: bool,
    /// Tracks `metadata.generation`.
    pub generation: bool,
    /// PUT on a missing object creates it.
    pub create_on_update: bool,
    /// PUT without `metadata.resourceVersion` is allowed.
    pub unconditional_update: bool,
    /// Delete returns the object instead of a success Status.
    pub return_deleted_object: bool,
    /// Field selector labels beyond `metadata.name`/`metadata.namespace`.
    pub field_labels: Vec<String>,
    /// Per-version CRD data (custom resources only).
    pub crd: Option<HashMap<String, CrdVersion>>,
}

impl ResourceInfo {
    /// `(group, plural)` — except `events.k8s.io` events, stored with core events.
    pub fn key(&self) -> ResKey {
        if self.group == "events.k8s.io" && self.plural == "events" {
            return (String::new(), "events".into());
        }
        (self.group.clone(), self.plural.clone())
    }
    /// `pods` or `kuryrports.openstack.org` (as in error messages).
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
    /// `Pod` or `KuryrPort.openstack.org` (as in Invalid messages).
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
    /// `v1` or `group/version`.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }
    /// True when `version` is served.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }
    /// True for field labels this resource supports.
    pub fn supports_field(&self, field: &str) -> bool {
        field == "metadata.name"
            || (field == "metadata.namespace" && self.namespaced)
            || self.field_labels.iter().any(|f| f == field)
    }
    /// The CRD data for `version`.
    pub fn crd_version(&self, version: &str) -> Option<&CrdVersion> {
        self.crd.as_ref().and_then(|m| m.get(version))
    }
}

struct Builtin {
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    status: bool,
    generation: bool,
    create_on_update: bool,
    return_deleted: bool,
    fields: &'static [&'static str],
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
const EVENTS_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

macro_rules! b {
    ($g:expr, $p:expr, $s:expr, $k:expr, $ns:expr, $short:expr, $status:expr, $gen:expr, $cou:expr, $rdo:expr, $f:expr) => {
        Builtin {
            group: $g,
            plural: $p,
            singular: $s,
            kind: $k,
            namespaced: $ns,
            short: $short,
            status: $status,
            generation: $gen,
            create_on_update: $cou,
            return_deleted: $rdo,
            fields: $f,
        }
    };
}

const BUILTINS: &[Builtin] = &[
    b!(
        "",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        true,
        false,
        false,
        true,
        &["status.phase"]
    ),
    b!(
        "",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        true,
        true,
        false,
        true,
        POD_FIELDS
    ),
    b!(
        "",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        true,
        false,
        false,
        true,
        &["spec.clusterIP", "spec.type"]
    ),
    b!(
        "",
        "endpoints",
        "endpoints",
        "Endpoints",
        true,
        &["ep"],
        false,
        false,
        true,
        false,
        &[]
    ),
    b!(
        "",
        "nodes",
        "node",
        "Node",
        false,
        &["no"],
        true,
        false,
        false,
        false,
        &["spec.unschedulable"]
    ),
    b!(
        "",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        false,
        false,
        true,
        false,
        EVENT_FIELDS
    ),
    b!(
        "",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        false,
        false,
        false,
        false,
        &[]
    ),
    b!(
        "",
        "secrets",
        "secret",
        "Secret",
        true,
        &[],
        false,
        false,
        false,
        false,
        &["type"]
    ),
    b!(
        "",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
        false,
        false,
        false,
        false,
        &[]
    ),
    b!(
        "discovery.k8s.io",
        "endpointslices",
        "endpointslice",
        "EndpointSlice",
        true,
        &[],
        false,
        false,
        true,
        false,
        &[]
    ),
    b!(
        "events.k8s.io",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        false,
        false,
        true,
        false,
        EVENTS_V1_FIELDS
    ),
    b!(
        "coordination.k8s.io",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        false,
        false,
        true,
        false,
        &[]
    ),
    b!(
        "networking.k8s.io",
        "networkpolicies",
        "networkpolicy",
        "NetworkPolicy",
        true,
        &["netpol"],
        false,
        true,
        false,
        false,
        &[]
    ),
    b!(
        "apps",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        true,
        true,
        false,
        false,
        &[]
    ),
    b!(
        "apps",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        true,
        true,
        false,
        false,
        &["status.replicas"]
    ),
    b!(
        "apps",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
        true,
        true,
        false,
        false,
        &[]
    ),
    b!(
        "policy",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        true,
        true,
        false,
        false,
        &[]
    ),
    // RBAC objects are stored and served, never enforced (there is no authorizer). Their
    // strategies allow create-on-update, as the real ones do (for reconcilers).
    b!(
        "rbac.authorization.k8s.io",
        "roles",
        "role",
        "Role",
        true,
        &[],
        false,
        false,
        true,
        false,
        &[]
    ),
    b!(
        "rbac.authorization.k8s.io",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        &[],
        false,
        false,
        true,
        false,
        &[]
    ),
    b!(
        "rbac.authorization.k8s.io",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        &[],
        false,
        false,
        true,
        false,
        &[]
    ),
    b!(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        &[],
        false,
        false,
        true,
        false,
        &[]
    ),
    b!(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        true,
        true,
        false,
        false,
        &[]
    ),
];

/// The built-in members of the `all` category (`kubectl get all`), as on the real server.
fn in_category_all(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        ("", "pods" | "services") | ("apps", "deployments" | "replicasets" | "daemonsets")
    )
}

/// Built-in and custom resources.
#[derive(Debug)]
pub struct Registry {
    builtin: Vec<Arc<ResourceInfo>>,
    crds: RwLock<HashMap<ResKey, Arc<ResourceInfo>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// The built-in table.
    pub fn new() -> Self {
        let builtin = BUILTINS
            .iter()
            .map(|b| {
                Arc::new(ResourceInfo {
                    group: b.group.into(),
                    versions: vec!["v1".into()],
                    storage_version: "v1".into(),
                    plural: b.plural.into(),
                    singular: b.singular.into(),
                    kind: b.kind.into(),
                    namespaced: b.namespaced,
                    short_names: b.short.iter().map(|s| s.to_string()).collect(),
                    categories: if in_category_all(b.group, b.plural) {
                        vec!["all".into()]
                    } else {
                        vec![]
                    },
                    status_subresource: b.status,
                    generation: b.generation,
                    create_on_update: b.create_on_update,
                    unconditional_update: true,
                    return_deleted_object: b.return_deleted,
                    field_labels: b.fields.iter().map(|s| s.to_string()).collect(),
                    crd: None,
                })
            })
            .collect();
        Self {
            builtin,
            crds: RwLock::new(HashMap::new()),
        }
    }

    /// Finds the resource served at `group/version` under `plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        if let Some(b) = self
            .builtin
            .iter()
            .find(|r| r.group == group && r.plural == plural && r.serves(version))
        {
            return Some(b.clone());
        }
        let crds = self.crds.read();
        crds.get(&(group.to_string(), plural.to_string()))
            .filter(|r| r.serves(version))
            .cloned()
    }

    /// Finds a resource by storage key, regardless of version.
    pub fn by_key(&self, key: &ResKey) -> Option<Arc<ResourceInfo>> {
        if let Some(b) = self
            .builtin
            .iter()
            .find(|r| r.group == key.0 && r.plural == key.1)
        {
            return Some(b.clone());
        }
        self.crds.read().get(key).cloned()
    }

    /// Every resource (built-in first, then custom ones sorted by key).
    pub fn all(&self) -> Vec<Arc<ResourceInfo>> {
        let mut out = self.builtin.clone();
        let crds = self.crds.read();
        let mut custom: Vec<_> = crds.values().cloned().collect();
        custom.sort_by_key(|r| r.key());
        out.extend(custom);
        out
    }

    /// Resources served at `group/version`.
    pub fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.all()
            .into_iter()
            .filter(|r| r.group == group && r.serves(version))
            .collect()
    }

    /// Groups (excluding core) with their versions, preferred first, in a stable order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.all() {
            if r.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, vs)) => {
                    for v in &r.versions {
                        if !vs.contains(v) {
                            vs.push(v.clone());
                        }
                    }
                }
                None => out.push((r.group.clone(), r.versions.clone())),
            }
        }
        out
    }

    /// Adds or replaces a custom resource.
    pub fn register(&self, info: ResourceInfo) {
        self.crds.write().insert(info.key(), Arc::new(info));
    }

    /// Removes a custom resource.
    pub fn unregister(&self, key: &ResKey) {
        self.crds.write().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_builtin_and_custom() {
        let r = Registry::new();
        assert_eq!(
            r.lookup("", "v1", "pods").map(|i| i.kind.clone()),
            Some("Pod".into())
        );
        assert!(r.lookup("", "v2", "pods").is_none());
        assert!(r.lookup("openstack.org", "v1", "kuryrports").is_none());
        let mut info = (*r.lookup("", "v1", "configmaps").expect("cm")).clone();
        info.group = "openstack.org".into();
        info.plural = "kuryrports".into();
        info.kind = "KuryrPort".into();
        r.register(info);
        assert!(r.lookup("openstack.org", "v1", "kuryrports").is_some());
        assert!(r.groups().iter().any(|(g, _)| g == "openstack.org"));
        r.unregister(&("openstack.org".into(), "kuryrports".into()));
        assert!(r.lookup("openstack.org", "v1", "kuryrports").is_none());
    }

    #[test]
    fn workload_policy_and_rbac_builtins() {
        let r = Registry::new();
        let get = |g: &str, p: &str| r.lookup(g, "v1", p).expect(p);
        for (p, short) in [
            ("deployments", "deploy"),
            ("replicasets", "rs"),
            ("daemonsets", "ds"),
        ] {
            let i = get("apps", p);
            assert!(i.namespaced && i.status_subresource && i.generation, "{p}");
            assert_eq!(i.short_names, [short]);
            assert_eq!(i.categories, ["all"]);
            assert_eq!(i.api_version("v1"), "apps/v1");
            assert!(r.lookup("apps", "v1beta2", p).is_none());
        }
        assert!(get("apps", "replicasets").supports_field("status.replicas"));
        let pdb = get("policy", "poddisruptionbudgets");
        assert!(pdb.status_subresource && pdb.generation);
        assert_eq!(pdb.short_names, ["pdb"]);
        assert!(pdb.categories.is_empty());
        for (p, ns) in [
            ("roles", true),
            ("rolebindings", true),
            ("clusterroles", false),
            ("clusterrolebindings", false),
        ] {
            let i = get("rbac.authorization.k8s.io", p);
            assert_eq!(i.namespaced, ns, "{p}");
            assert!(
                !i.status_subresource && !i.generation && i.create_on_update,
                "{p}"
            );
        }
        let groups: Vec<String> = r.groups().into_iter().map(|(g, _)| g).collect();
        for g in ["apps", "policy", "rbac.authorization.k8s.io"] {
            assert!(groups.iter().any(|x| x == g), "{g} in {groups:?}");
        }
    }

    #[test]
    fn field_labels() {
        let r = Registry::new();
        let pods = r.lookup("", "v1", "pods").expect("pods");
        assert!(pods.supports_field("spec.nodeName"));
        assert!(pods.supports_field("metadata.namespace"));
        assert!(!pods.supports_field("spec.foo"));
        let nodes = r.lookup("", "v1", "nodes").expect("nodes");
        assert!(!nodes.supports_field("metadata.namespace"));
        assert_eq!(pods.qualified_resource(), "pods");
    }
}
