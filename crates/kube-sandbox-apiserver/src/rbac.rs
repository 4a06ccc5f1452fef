//! Authorization by RBAC (`rbac.authorization.k8s.io/v1`) for ServiceAccount identities: the
//! request's verb, API group, resource (with subresource), namespace and name are matched
//! against the rules of every Role and ClusterRole bound to the user, one of its groups or its
//! ServiceAccount; a request no rule allows is 403 Forbidden with the real server's message.
//! The administrator is not checked (as `system:masters`).
//!
//! Built in, as the real server's bootstrap policy: every authenticated user may read the
//! discovery and OpenAPI documents, `/version` and the health endpoints (`system:discovery`,
//! `system:public-info-viewer`). Knowingly different: aggregated ClusterRoles (`aggregationRule`)
//! are not aggregated, no other bootstrap roles exist, and SelfSubjectAccessReviews are not served.

use serde_json::{Value, json};

use crate::{
    app::App,
    auth::Identity,
    error::{ApiError, ApiResult},
};

const GROUP: &str = "rbac.authorization.k8s.io";

/// What a request wants to do, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes<'a> {
    /// A resource request.
    Resource {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
        verb: &'a str,
        /// API group (`""` for core).
        group: &'a str,
        /// Plural resource.
        resource: &'a str,
        /// Subresource (`status`, `exec`, `token`, ...).
        subresource: Option<&'a str>,
        /// Namespace, for namespaced requests.
        namespace: Option<&'a str>,
        /// Object name, for requests on one object.
        name: Option<&'a str>,
    },
    /// A non-resource path (discovery, OpenAPI, health).
    NonResource {
        /// `get` (for GET/HEAD) or the lower-case method.
        verb: &'a str,
        /// The URL path.
        path: &'a str,
    },
}

/// The name a field selector requires exactly (`metadata.name=x` or `metadata.name==x`, alone or
/// among other terms), as the real server's request info takes it for list and watch.
pub fn selected_name(selector: &str) -> Option<&str> {
    selector.split(',').find_map(|term| {
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        (k.trim() == "metadata.name" && !k.ends_with('!') && !v.is_empty()).then_some(v.trim())
    })
}

/// The verb of a resource request.
pub fn verb(method: &http::Method, has_name: bool, watch: bool, subresource: Option<&str>) -> &'static str {
    use http::Method;
    // A WebSocket exec is a GET, but it opens a process: the real server also asks for `create`.
    if subresource == Some("exec") {
        return "create";
    }
    match *method {
        Method::GET | Method::HEAD if watch => "watch",
        Method::GET | Method::HEAD if has_name => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if has_name => "delete",
        Method::DELETE => "deletecollection",
        _ => "unknown",
    }
}

fn strs(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

fn has(list: &Value, want: &str) -> bool {
    strs(list).any(|s| s == "*" || s == want)
}

/// Whether one PolicyRule allows the request.
pub fn rule_allows(rule: &Value, a: &Attributes<'_>) -> bool {
    match a {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            if !has(&rule["verbs"], verb) || !has(&rule["apiGroups"], group) {
                return false;
            }
            let combined = match subresource {
                Some(s) => format!("{resource}/{s}"),
                None => resource.to_string(),
            };
            let resource_ok = strs(&rule["resources"]).any(|r| {
                r == "*" || r == combined || subresource.is_some_and(|s| r.strip_prefix("*/") == Some(s))
            });
            if !resource_ok {
                return false;
            }
            let names: Vec<&str> = strs(&rule["resourceNames"]).collect();
            names.is_empty() || name.is_some_and(|n| names.contains(&n))
        }
        Attributes::NonResource { verb, path } => {
            has(&rule["verbs"], verb)
                && strs(&rule["nonResourceURLs"]).any(|u| {
                    u == "*"
                        || u == *path
                        || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
                })
        }
    }
}

/// Whether a binding subject names the identity (`binding_ns`: the RoleBinding's namespace,
/// the default of a ServiceAccount subject without one).
pub fn subject_matches(subject: &Value, id: &Identity, binding_ns: Option<&str>) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("ServiceAccount") => match id {
            Identity::ServiceAccount { namespace, name: sa } => {
                let ns = subject["namespace"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .or(binding_ns);
                name == sa && ns == Some(namespace.as_str())
            }
            Identity::Admin => false,
        },
        Some("User") => name == id.user(),
        Some("Group") => id.groups().iter().any(|g| g == name),
        _ => false,
    }
}

fn discovery_path(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    matches!(
        p,
        "/api" | "/apis" | "/openapi/v2" | "/openapi/v3" | "/version" | "/healthz" | "/livez" | "/readyz"
    ) || p.starts_with("/api/")
        || p.starts_with("/apis/")
        || p.starts_with("/openapi/")
}

/// The rules bound to `id` that apply in `namespace` (cluster-wide bindings always apply).
fn rules_for(app: &App, id: &Identity, namespace: Option<&str>) -> Vec<Value> {
    app.store.read(|t| {
        let key = |plural: &str| (GROUP.to_string(), plural.to_string());
        let role_rules = |kind: &str, name: &str, ns: Option<&str>| -> Vec<Value> {
            let obj = match kind {
                "ClusterRole" => t.get(&key("clusterroles"), "", name),
                "Role" => ns.and_then(|ns| t.get(&key("roles"), ns, name)),
                _ => None,
            };
            obj.and_then(|o| o["rules"].as_array().cloned())
                .unwrap_or_default()
        };
        let mut rules = Vec::new();
        for b in t.list(&key("clusterrolebindings"), None) {
            if strs_obj(&b["subjects"]).any(|s| subject_matches(s, id, None))
                && b["roleRef"]["kind"] == "ClusterRole"
            {
                rules.extend(role_rules(
                    "ClusterRole",
                    b["roleRef"]["name"].as_str().unwrap_or_default(),
                    None,
                ));
            }
        }
        if let Some(ns) = namespace {
            for b in t.list(&key("rolebindings"), Some(ns)) {
                if strs_obj(&b["subjects"]).any(|s| subject_matches(s, id, Some(ns))) {
                    rules.extend(role_rules(
                        b["roleRef"]["kind"].as_str().unwrap_or_default(),
                        b["roleRef"]["name"].as_str().unwrap_or_default(),
                        Some(ns),
                    ));
                }
            }
        }
        rules
    })
}

fn strs_obj(v: &Value) -> impl Iterator<Item = &Value> {
    v.as_array().into_iter().flatten()
}

/// `pods` or `deployments.apps`, as in Forbidden messages.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// The Forbidden error the real server returns for `a`.
pub fn forbidden(id: &Identity, a: &Attributes<'_>) -> ApiError {
    let user = id.user();
    match a {
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let what = match name {
                Some(n) => format!("{} \"{n}\"", qualified(group, resource)),
                None => qualified(group, resource),
            };
            let res = match subresource {
                Some(s) => format!("{resource}/{s}"),
                None => resource.to_string(),
            };
            let scope = match namespace {
                Some(ns) => format!("in the namespace \"{ns}\""),
                None => "at the cluster scope".into(),
            };
            let mut details = json!({"kind": resource});
            if let Some(n) = name {
                details["name"] = json!(n);
            }
            if !group.is_empty() {
                details["group"] = json!(group);
            }
            ApiError::forbidden_with(
                format!(
                    "{what} is forbidden: User \"{user}\" cannot {verb} resource \"{res}\" in API group \"{group}\" {scope}"
                ),
                details,
            )
        }
        Attributes::NonResource { verb, path } => ApiError::forbidden_with(
            format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\""),
            json!({}),
        ),
    }
}

/// Allows or denies the request.
pub fn authorize(app: &App, id: &Identity, a: &Attributes<'_>) -> ApiResult<()> {
    if *id == Identity::Admin {
        return Ok(());
    }
    if let Attributes::NonResource { verb: "get", path } = a
        && discovery_path(path)
    {
        return Ok(());
    }
    let namespace = match a {
        Attributes::Resource { namespace, .. } => *namespace,
        Attributes::NonResource { .. } => None,
    };
    if rules_for(app, id, namespace).iter().any(|r| rule_allows(r, a)) {
        return Ok(());
    }
    tracing::debug!(user = %id.user(), attributes = ?a, "RBAC: forbidden");
    Err(forbidden(id, a))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sa() -> Identity {
        Identity::ServiceAccount {
            namespace: "kube-system".into(),
            name: "kuryr-daemon".into(),
        }
    }

    fn res<'a>(
        verb: &'a str,
        resource: &'a str,
        sub: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Attributes<'a> {
        Attributes::Resource {
            verb,
            group: "",
            resource,
            subresource: sub,
            namespace: Some("default"),
            name,
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "list", "watch"]});
        assert!(rule_allows(&rule, &res("list", "pods", None, None)));
        assert!(rule_allows(&rule, &res("get", "pods", Some("status"), Some("p"))));
        assert!(!rule_allows(&rule, &res("patch", "pods", None, Some("p"))));
        assert!(!rule_allows(&rule, &res("get", "pods", Some("exec"), Some("p"))));
        assert!(!rule_allows(&rule, &res("get", "secrets", None, Some("s"))));
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["kuryr"]});
        assert!(rule_allows(
            &named,
            &res("get", "configmaps", None, Some("kuryr"))
        ));
        assert!(!rule_allows(
            &named,
            &res("get", "configmaps", None, Some("other"))
        ));
        assert!(!rule_allows(&named, &res("list", "configmaps", None, None)));
        let star = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(rule_allows(
            &star,
            &res("delete", "pods", Some("status"), Some("p"))
        ));
        let sub_star = json!({"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]});
        assert!(rule_allows(
            &sub_star,
            &res("patch", "pods", Some("status"), Some("p"))
        ));
        assert!(!rule_allows(&sub_star, &res("patch", "pods", None, Some("p"))));
    }

    #[test]
    fn non_resource_rules_match_paths_and_prefixes() {
        let rule = json!({"nonResourceURLs": ["/metrics", "/logs/*"], "verbs": ["get"]});
        let get = |path| Attributes::NonResource { verb: "get", path };
        assert!(rule_allows(&rule, &get("/metrics")));
        assert!(rule_allows(&rule, &get("/logs/a")));
        assert!(!rule_allows(&rule, &get("/other")));
    }

    #[test]
    fn subjects_match_service_accounts_groups_and_users() {
        let s = json!({"kind": "ServiceAccount", "name": "kuryr-daemon", "namespace": "kube-system"});
        assert!(subject_matches(&s, &sa(), None));
        let s_default_ns = json!({"kind": "ServiceAccount", "name": "kuryr-daemon"});
        assert!(subject_matches(&s_default_ns, &sa(), Some("kube-system")));
        assert!(!subject_matches(&s_default_ns, &sa(), Some("default")));
        let g = json!({"kind": "Group", "name": "system:serviceaccounts:kube-system"});
        assert!(subject_matches(&g, &sa(), None));
        let u = json!({"kind": "User", "name": "system:serviceaccount:kube-system:kuryr-daemon"});
        assert!(subject_matches(&u, &sa(), None));
        assert!(!subject_matches(&s, &Identity::Admin, None));
    }

    #[test]
    fn forbidden_messages_are_the_real_servers() {
        let e = forbidden(&sa(), &res("get", "secrets", None, Some("clouds")));
        assert_eq!(
            e.message,
            "secrets \"clouds\" is forbidden: User \"system:serviceaccount:kube-system:kuryr-daemon\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(e.code, 403);
        let e = forbidden(
            &sa(),
            &Attributes::Resource {
                verb: "list",
                group: "openstack.org",
                resource: "kuryrports",
                subresource: None,
                namespace: None,
                name: None,
            },
        );
        assert_eq!(
            e.message,
            "kuryrports.openstack.org is forbidden: User \"system:serviceaccount:kube-system:kuryr-daemon\" cannot list resource \"kuryrports\" in API group \"openstack.org\" at the cluster scope"
        );
        assert_eq!(e.details.unwrap()["group"], "openstack.org");
    }

    #[test]
    fn verbs_follow_methods() {
        use http::Method;
        assert_eq!(verb(&Method::GET, false, true, None), "watch");
        assert_eq!(verb(&Method::GET, true, false, None), "get");
        assert_eq!(verb(&Method::GET, false, false, None), "list");
        assert_eq!(verb(&Method::DELETE, false, false, None), "deletecollection");
        assert_eq!(verb(&Method::PATCH, true, false, Some("status")), "patch");
        assert_eq!(verb(&Method::GET, true, false, Some("exec")), "create");
        assert_eq!(selected_name("metadata.name=kuryr-daemon"), Some("kuryr-daemon"));
        assert_eq!(selected_name("spec.nodeName=n1,metadata.name==a"), Some("a"));
        assert_eq!(selected_name("metadata.name!=a"), None);
        assert_eq!(selected_name("metadata.namespace=a"), None);
        assert!(discovery_path("/apis/apps/v1"));
        assert!(!discovery_path("/metrics"));
    }
}
