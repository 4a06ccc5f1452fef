//! Printer columns and cells of the workload and policy kinds, as the real server's printers
//! define them: Deployment (`READY UP-TO-DATE AVAILABLE AGE`), ReplicaSet (`DESIRED CURRENT
//! READY AGE`), DaemonSet (`DESIRED CURRENT READY UP-TO-DATE AVAILABLE NODE SELECTOR AGE`), each
//! with the wide `CONTAINERS IMAGES SELECTOR`; PodDisruptionBudget; RoleBinding and
//! ClusterRoleBinding (`ROLE AGE`, wide `USERS GROUPS SERVICEACCOUNTS`). Roles and ClusterRoles
//! use the generic `Name` + `Created At`, which is what their real printer shows too.

use serde_json::Value;

use super::Column;
use super::columns::{AGE_DESC, name_col};

fn col(name: &str, type_: &str, path: &str, priority: i32, desc: &str) -> Column {
    Column::new(name, type_, path, priority, desc)
}

fn age() -> Column {
    col("Age", "string", "@age", 0, AGE_DESC)
}

fn template_cols(selector_desc: &str) -> [Column; 3] {
    [
        col(
            "Containers",
            "string",
            "@wl.containers",
            1,
            "Names of each container in the template.",
        ),
        col(
            "Images",
            "string",
            "@wl.images",
            1,
            "Images referenced by each container in the template.",
        ),
        col("Selector", "string", "@wl.selector", 1, selector_desc),
    ]
}

/// The columns of `kind` (kind or plural, lower case), if it is one of these kinds.
pub(super) fn columns(kind: &str) -> Option<Vec<Column>> {
    let cols = match kind {
        "deployment" | "deployments" => {
            let mut c = vec![
                name_col(),
                col(
                    "Ready",
                    "string",
                    "@wl.deploy.ready",
                    0,
                    "Number of the pod with ready state",
                ),
                col(
                    "Up-to-date",
                    "string",
                    "@wl.int:/status/updatedReplicas",
                    0,
                    "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
                ),
                col(
                    "Available",
                    "string",
                    "@wl.int:/status/availableReplicas",
                    0,
                    "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
                ),
                age(),
            ];
            c.extend(template_cols(
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
            ));
            c
        }
        "replicaset" | "replicasets" => {
            let mut c = vec![
                name_col(),
                col(
                    "Desired",
                    "integer",
                    "@wl.int:/spec/replicas",
                    0,
                    "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1.",
                ),
                col(
                    "Current",
                    "integer",
                    "@wl.int:/status/replicas",
                    0,
                    "Replicas is the most recently observed number of non-terminating pods.",
                ),
                col(
                    "Ready",
                    "integer",
                    "@wl.int:/status/readyReplicas",
                    0,
                    "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
                ),
                age(),
            ];
            c.extend(template_cols(
                "Selector is a label query over pods that should match the replica count. It must match the pod template's labels.",
            ));
            c
        }
        "daemonset" | "daemonsets" => {
            let int = |name: &str, field: &str, desc: &str| {
                col(name, "integer", &format!("@wl.int:/status/{field}"), 0, desc)
            };
            let mut c = vec![
                name_col(),
                int(
                    "Desired",
                    "desiredNumberScheduled",
                    "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod).",
                ),
                int(
                    "Current",
                    "currentNumberScheduled",
                    "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
                ),
                int(
                    "Ready",
                    "numberReady",
                    "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
                ),
                int(
                    "Up-to-date",
                    "updatedNumberScheduled",
                    "The total number of nodes that are running updated daemon pod",
                ),
                int(
                    "Available",
                    "numberAvailable",
                    "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
                ),
                col(
                    "Node Selector",
                    "string",
                    "@wl.nodeselector",
                    0,
                    "NodeSelector is a selector which must be true for the pod to fit on a node.",
                ),
                age(),
            ];
            c.extend(template_cols(
                "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels.",
            ));
            c
        }
        "poddisruptionbudget" | "poddisruptionbudgets" => vec![
            name_col(),
            col(
                "Min Available",
                "string",
                "@wl.na:/spec/minAvailable",
                0,
                "The minimum number of pods that must be available",
            ),
            col(
                "Max Unavailable",
                "string",
                "@wl.na:/spec/maxUnavailable",
                0,
                "The maximum number of pods that may be unavailable",
            ),
            col(
                "Allowed Disruptions",
                "integer",
                "@wl.int:/status/disruptionsAllowed",
                0,
                "Calculated number of pods that may be disrupted at this time",
            ),
            age(),
        ],
        "rolebinding" | "rolebindings" | "clusterrolebinding" | "clusterrolebindings" => vec![
            name_col(),
            col(
                "Role",
                "string",
                "@wl.roleref",
                0,
                "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
            ),
            age(),
            col(
                "Users",
                "string",
                "@wl.subjects:User",
                1,
                "Users in the roleBinding",
            ),
            col(
                "Groups",
                "string",
                "@wl.subjects:Group",
                1,
                "Groups in the roleBinding",
            ),
            col(
                "ServiceAccounts",
                "string",
                "@wl.subjects:ServiceAccount",
                1,
                "ServiceAccounts in the roleBinding",
            ),
        ],
        _ => return None,
    };
    Some(cols)
}

fn str_of(v: Option<&Value>) -> &str {
    v.and_then(Value::as_str).unwrap_or_default()
}

/// `metav1.FormatLabelSelector`: requirements sorted by key, `<none>` when empty.
fn label_selector_text(sel: Option<&Value>) -> String {
    let Some(sel) = sel else {
        return "<none>".into();
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(ml) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in ml {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    if let Some(me) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in me {
            let key = str_of(e.get("key")).to_string();
            let mut values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            values.sort_unstable();
            let text = match str_of(e.get("operator")) {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.clone(),
                "DoesNotExist" => format!("!{key}"),
                _ => return "<error>".into(),
            };
            reqs.push((key, text));
        }
    }
    if reqs.is_empty() {
        return "<none>".into();
    }
    reqs.sort();
    reqs.into_iter().map(|(_, t)| t).collect::<Vec<_>>().join(",")
}

fn containers(obj: &Value, field: &str) -> String {
    obj.pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| str_of(c.get(field)).to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

fn int_at(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// The cell of a `@wl.` column.
pub(super) fn cell(path: &str, obj: &Value) -> Value {
    let p = path.strip_prefix("@wl.").unwrap_or(path);
    if let Some(ptr) = p.strip_prefix("int:") {
        return int_at(obj, ptr).into();
    }
    if let Some(ptr) = p.strip_prefix("na:") {
        return match obj.pointer(ptr) {
            Some(Value::String(s)) => s.clone().into(),
            Some(Value::Number(n)) => n.to_string().into(),
            _ => "N/A".into(),
        };
    }
    if let Some(kind) = p.strip_prefix("subjects:") {
        let items: Vec<String> = obj
            .get("subjects")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|s| str_of(s.get("kind")) == kind)
            .map(|s| {
                let name = str_of(s.get("name"));
                if kind == "ServiceAccount" {
                    format!("{}/{name}", str_of(s.get("namespace")))
                } else {
                    name.to_string()
                }
            })
            .collect();
        return items.join(", ").into();
    }
    match p {
        "deploy.ready" => format!(
            "{}/{}",
            int_at(obj, "/status/readyReplicas"),
            int_at(obj, "/spec/replicas")
        )
        .into(),
        "containers" => containers(obj, "name").into(),
        "images" => containers(obj, "image").into(),
        "selector" => label_selector_text(obj.pointer("/spec/selector")).into(),
        "nodeselector" => {
            let mut parts: Vec<String> = obj
                .pointer("/spec/template/spec/nodeSelector")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", str_of(Some(v))))
                        .collect()
                })
                .unwrap_or_default();
            parts.sort();
            if parts.is_empty() {
                "<none>".into()
            } else {
                parts.join(",").into()
            }
        }
        "roleref" => format!(
            "{}/{}",
            str_of(obj.pointer("/roleRef/kind")),
            str_of(obj.pointer("/roleRef/name"))
        )
        .into(),
        _ => Value::Null,
    }
}
