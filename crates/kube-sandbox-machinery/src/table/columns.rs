//! Column sets of the Table: the built-in printers of the real server, the
//! `additionalPrinterColumns` of custom resources, and the generic `Name` + `Created At` pair.

use serde_json::Value;

use super::Column;

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(super) const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

pub(super) fn name_col() -> Column {
    Column::new("Name", "string", ".metadata.name", 0, NAME_DESC)
}

fn age_col() -> Column {
    Column::new("Age", "string", "@age", 0, AGE_DESC)
}

fn s(name: &str, path: &str, priority: i32, desc: &str) -> Column {
    Column::new(name, "string", path, priority, desc)
}

/// The columns for a resource kind; `printer_columns` are a CRD version's
/// `additionalPrinterColumns` when the resource is custom.
///
/// `kind` may be the kind (`Pod`) or the plural resource name (`pods`), any case.
pub fn columns_for(kind: &str, printer_columns: Option<&Value>) -> Vec<Column> {
    if let Some(pc) = printer_columns {
        return crd_columns(pc);
    }
    let k = kind.to_ascii_lowercase();
    let k = k.as_str();
    if let Some(cols) = super::workloads::columns(k) {
        return cols;
    }
    match k {
        "pod" | "pods" => vec![
            name_col(),
            s(
                "Ready",
                "@pod.ready",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            s(
                "Status",
                "@pod.status",
                0,
                "The aggregate status of the containers in this pod.",
            ),
            s(
                "Restarts",
                "@pod.restarts",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age_col(),
            s(
                "IP",
                "@pod.ip",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            s(
                "Node",
                "@pod.node",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
            s(
                "Nominated Node",
                "@pod.nominated",
                1,
                "nominatedNodeName is set only when this pod preempts other pods on the node.",
            ),
            s(
                "Readiness Gates",
                "@pod.gates",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        "namespace" | "namespaces" => vec![
            name_col(),
            s("Status", "@ns.status", 0, "The status of the namespace"),
            age_col(),
        ],
        "service" | "services" => vec![
            name_col(),
            s("Type", "@svc.type", 0, "The type of the service."),
            s(
                "Cluster-IP",
                "@svc.clusterip",
                0,
                "The cluster IP of the service.",
            ),
            s(
                "External-IP",
                "@svc.externalip",
                0,
                "The external IP of the service.",
            ),
            s("Port(s)", "@svc.ports", 0, "The ports of the service."),
            age_col(),
            s(
                "Selector",
                "@svc.selector",
                1,
                "Route service traffic to pods with label keys and values matching this selector.",
            ),
        ],
        "node" | "nodes" => vec![
            name_col(),
            s("Status", "@node.status", 0, "The status of the node"),
            s("Roles", "@node.roles", 0, "The roles of the node"),
            age_col(),
            s(
                "Version",
                "@node.version",
                0,
                "Kubelet Version reported by the node.",
            ),
            s(
                "Internal-IP",
                "@node.internalip",
                1,
                "List of addresses reachable to the node.",
            ),
            s(
                "External-IP",
                "@node.externalip",
                1,
                "List of addresses reachable to the node.",
            ),
            s(
                "OS-Image",
                "@node.osimage",
                1,
                "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
            ),
            s(
                "Kernel-Version",
                "@node.kernel",
                1,
                "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
            ),
            s(
                "Container-Runtime",
                "@node.runtime",
                1,
                "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
            ),
        ],
        "endpoints" => vec![
            name_col(),
            s("Endpoints", "@ep.endpoints", 0, "Endpoints of the service"),
            age_col(),
        ],
        "endpointslice" | "endpointslices" => vec![
            name_col(),
            s("AddressType", ".addressType", 0, "The IP protocol for this slice"),
            s("Ports", "@eps.ports", 0, "The ports of this slice"),
            s("Endpoints", "@eps.endpoints", 0, "The addresses of this slice"),
            age_col(),
        ],
        "configmap" | "configmaps" => vec![
            name_col(),
            Column::new(
                "Data",
                "integer",
                "@data.count",
                0,
                "Data contains the configuration data.",
            ),
            age_col(),
        ],
        "secret" | "secrets" => vec![
            name_col(),
            s(
                "Type",
                ".type",
                0,
                "Used to facilitate programmatic handling of secret data.",
            ),
            Column::new(
                "Data",
                "integer",
                "@data.count",
                0,
                "Data contains the secret data.",
            ),
            age_col(),
        ],
        "serviceaccount" | "serviceaccounts" => vec![
            name_col(),
            Column::new(
                "Secrets",
                "integer",
                "@sa.secrets",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
            ),
            age_col(),
        ],
        "event" | "events" => vec![
            s(
                "Last Seen",
                "@ev.lastseen",
                0,
                "Time when last this event was seen",
            ),
            s("Type", ".type", 0, "Type of this event (Normal, Warning)"),
            s(
                "Reason",
                ".reason",
                0,
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            s("Object", "@ev.object", 0, "The object that this event is about."),
            s(
                "Subobject",
                ".involvedObject.fieldPath",
                1,
                "The subobject of the event.",
            ),
            s("Source", "@ev.source", 1, "The component reporting this event."),
            s(
                "Message",
                ".message",
                0,
                "A human-readable description of the status of this operation.",
            ),
            s(
                "First Seen",
                "@ev.firstseen",
                1,
                "The time at which the event was first recorded.",
            ),
            Column::new(
                "Count",
                "integer",
                "@ev.count",
                1,
                "The number of times this event has occurred.",
            ),
            Column::new("Name", "string", ".metadata.name", 1, NAME_DESC),
        ],
        "lease" | "leases" => vec![
            name_col(),
            s(
                "Holder",
                "@lease.holder",
                0,
                "HolderIdentity contains the identity of the holder of a current lease.",
            ),
            age_col(),
        ],
        "networkpolicy" | "networkpolicies" => vec![
            name_col(),
            s(
                "Pod-Selector",
                "@np.podselector",
                0,
                "Pod selector of the policy.",
            ),
            age_col(),
        ],
        _ => vec![
            name_col(),
            Column::new("Created At", "date", "@createdat", 0, AGE_DESC),
        ],
    }
}

/// Columns of a custom resource: `Name`, then the printer columns, or `Age` when there are none.
fn crd_columns(pc: &Value) -> Vec<Column> {
    let mut cols = vec![name_col()];
    let list = pc.as_array().map(Vec::as_slice).unwrap_or_default();
    for c in list {
        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        cols.push(Column {
            name: text("name"),
            type_: text("type"),
            json_path: text("jsonPath"),
            priority: c
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            format: text("format"),
            description: text("description"),
        });
    }
    if list.is_empty() {
        let mut age = Column::new("Age", "date", ".metadata.creationTimestamp", 0, AGE_DESC);
        age.format = String::new();
        cols.push(age);
    }
    cols
}
