//! Unit tests of Table rendering.

use super::*;

fn now() -> jiff::Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn names(cols: &[Column]) -> Vec<&str> {
    cols.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn human_durations_like_kubectl() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (4 * 3600 + 5 * 60, "4h5m"),
        (8 * 3600, "8h"),
        (47 * 3600, "47h"),
        (2 * 86400, "2d"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (30 * 86400, "30d"),
        (2 * 365 * 86400, "2y"),
        (3 * 365 * 86400 + 12 * 86400, "3y12d"),
        (10 * 365 * 86400, "10y"),
    ];
    for (s, want) in cases {
        assert_eq!(human_duration(s), want, "{s}");
    }
}

#[test]
fn wants_table_detects_kubectl_accept() {
    assert!(wants_table(
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
    ));
    assert!(!wants_table("application/json"));
}

#[test]
fn metadata_only_requests_are_told_from_tables_and_plain_json() {
    assert!(wants_metadata(
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    ));
    assert!(wants_metadata(
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    ));
    assert!(!wants_metadata("application/json"));
    // A request naming both is served as a Table, whatever their order (this server's rule).
    assert!(!wants_metadata(
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    ));
    let p = partial_object_metadata(&serde_json::json!({
        "kind": "Pod", "metadata": {"name": "a", "uid": "u"}, "spec": {"nodeName": "n"}
    }));
    assert_eq!(
        p,
        serde_json::json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"name": "a", "uid": "u"}
        })
    );
}

#[test]
fn generic_columns() {
    let cols = columns_for("Widget", None);
    assert_eq!(names(&cols), ["Name", "Created At"]);
    let t = to_table_at(
        &cols,
        &[json!({"metadata": {"name": "w", "creationTimestamp": "2026-01-01T11:00:00Z"}})],
        "42",
        None,
        now(),
    );
    assert_eq!(t["rows"][0]["cells"], json!(["w", "2026-01-01T11:00:00Z"]));
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["columnDefinitions"][1]["type"], "date");
}

#[test]
fn table_shape() {
    let cols = columns_for("namespaces", None);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "default", "uid": "u1", "resourceVersion": "7",
                     "creationTimestamp": "2026-01-01T11:59:55Z"},
        "status": {"phase": "Active"}});
    let t = to_table_at(&cols, std::slice::from_ref(&ns), "99", Some("tok"), now());
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["metadata"], json!({"resourceVersion": "99", "continue": "tok"}));
    assert_eq!(names(&cols), ["Name", "Status", "Age"]);
    assert_eq!(t["rows"][0]["cells"], json!(["default", "Active", "5s"]));
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(t["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["rows"][0]["object"]["metadata"]["uid"], "u1");
    let defs = t["columnDefinitions"].as_array().unwrap();
    for d in defs {
        for k in ["name", "type", "format", "description", "priority"] {
            assert!(d.get(k).is_some(), "{k}");
        }
    }
    let t = to_table_at(&cols, &[], "1", None, now());
    assert!(t["metadata"].get("continue").is_none());
    assert_eq!(t["rows"], json!([]));
    let t = to_table_with(
        &cols,
        std::slice::from_ref(&ns),
        "1",
        None,
        IncludeObject::Object,
        now(),
    );
    assert_eq!(t["rows"][0]["object"], ns);
    let t = to_table_with(&cols, &[ns], "1", None, IncludeObject::None, now());
    assert!(t["rows"][0].get("object").is_none());
    assert_eq!(IncludeObject::from_param(Some("Object")), IncludeObject::Object);
    assert_eq!(IncludeObject::from_param(None), IncludeObject::Metadata);
}

#[test]
fn pod_rows() {
    let cols = columns_for("Pod", None);
    assert_eq!(
        names(&cols),
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    assert_eq!(cols[5].priority, 1);
    let pod = json!({
        "metadata": {"name": "web", "creationTimestamp": "2026-01-01T11:56:58Z"},
        "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"running": {}}}
        ]}
    });
    let t = to_table_at(&cols, std::slice::from_ref(&pod), "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "web", "1/2", "Running", "0", "3m2s", "10.0.0.5", "n1", "<none>", "<none>"
        ])
    );
    let mut deleting = pod.clone();
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T11:59:00Z".into();
    let t = to_table_at(&cols, &[deleting], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][2], "Terminating");

    let pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Pending"}});
    let t = to_table_at(&cols, &[pending], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "p",
            "0/1",
            "Pending",
            "0",
            "<unknown>",
            "<none>",
            "<none>",
            "<none>",
            "<none>"
        ])
    );

    let waiting = json!({"metadata": {"name": "w"}, "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 2,
             "state": {"waiting": {"reason": "ContainerCreating"}},
             "lastState": {"terminated": {"finishedAt": "2026-01-01T11:55:00Z"}}}]}});
    let t = to_table_at(&cols, &[waiting], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][2], "ContainerCreating");
    assert_eq!(t["rows"][0]["cells"][3], "2 (5m ago)");

    let done = json!({"metadata": {"name": "d"}, "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Succeeded", "containerStatuses": [
            {"name": "a", "ready": false, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
    let t = to_table_at(&cols, &[done], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][2], "Completed");

    let init = json!({"metadata": {"name": "i"}, "spec": {"initContainers": [{"name": "x"}], "containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [{"name": "x", "state": {"running": {}}}]}});
    let t = to_table_at(&cols, &[init], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][2], "Init:0/1");
}

#[test]
fn service_rows() {
    let cols = columns_for("services", None);
    assert_eq!(
        names(&cols),
        [
            "Name",
            "Type",
            "Cluster-IP",
            "External-IP",
            "Port(s)",
            "Age",
            "Selector"
        ]
    );
    let svc = json!({"metadata": {"name": "kubernetes", "creationTimestamp": "2026-01-01T08:00:00Z"},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "ports": [{"port": 443, "protocol": "TCP"}]}});
    let lb = json!({"metadata": {"name": "lb", "creationTimestamp": "2026-01-01T11:00:00Z"},
        "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.9", "selector": {"b": "2", "a": "1"},
                 "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
    let mut lb_ready = lb.clone();
    lb_ready["status"] = json!({"loadBalancer": {"ingress": [{"ip": "172.24.4.10"}]}});
    let t = to_table_at(&cols, &[svc, lb, lb_ready], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "kubernetes",
            "ClusterIP",
            "10.96.0.1",
            "<none>",
            "443/TCP",
            "4h",
            "<none>"
        ])
    );
    assert_eq!(
        t["rows"][1]["cells"],
        json!([
            "lb",
            "LoadBalancer",
            "10.96.0.9",
            "<pending>",
            "80:30080/TCP,53/UDP",
            "60m",
            "a=1,b=2"
        ])
    );
    assert_eq!(t["rows"][2]["cells"][3], "172.24.4.10");
}

#[test]
fn node_rows() {
    let cols = columns_for("Node", None);
    let node = json!({"metadata": {"name": "n1", "creationTimestamp": "2025-12-30T12:00:00Z",
            "labels": {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""}},
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "addresses": [{"type": "InternalIP", "address": "192.0.2.1"}],
                   "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian", "kernelVersion": "6.1", "containerRuntimeVersion": "sandbox://1"}}});
    let t = to_table_at(&cols, &[node], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "n1",
            "Ready,SchedulingDisabled",
            "control-plane,worker",
            "2d",
            "v1.33.0",
            "192.0.2.1",
            "<none>",
            "Debian",
            "6.1",
            "sandbox://1"
        ])
    );
    let bare = json!({"metadata": {"name": "n2"}});
    let t = to_table_at(&cols, &[bare], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][1], "Unknown");
    assert_eq!(t["rows"][0]["cells"][2], "<none>");
}

#[test]
fn misc_builtin_rows() {
    let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 81}]}]});
    let t = to_table_at(&columns_for("Endpoints", None), &[ep], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"][1],
        "10.0.0.1:80,10.0.0.1:81,10.0.0.2:80 + 1 more..."
    );
    let empty = json!({"metadata": {"name": "e"}});
    let t = to_table_at(&columns_for("endpoints", None), &[empty], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][1], "<none>");

    let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
    let t = to_table_at(&columns_for("ConfigMap", None), &[cm], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][1], 3);

    let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}});
    let t = to_table_at(&columns_for("Lease", None), &[lease], "1", None, now());
    assert_eq!(names(&columns_for("leases", None)), ["Name", "Holder", "Age"]);
    assert_eq!(t["rows"][0]["cells"][1], "me");

    let ev = json!({"metadata": {"name": "e1", "creationTimestamp": "2026-01-01T11:00:00Z"}, "type": "Normal", "reason": "Scheduled",
        "involvedObject": {"kind": "Pod", "name": "web"}, "message": "ok", "lastTimestamp": "2026-01-01T11:59:30Z", "count": 2});
    let cols = columns_for("Event", None);
    let t = to_table_at(&cols, &[ev], "1", None, now());
    let cells = &t["rows"][0]["cells"];
    assert_eq!(cells[0], "30s");
    assert_eq!(cells[3], "pod/web");
    assert_eq!(cells[6], "ok");
    assert_eq!(cells[7], "60m");
    assert_eq!(cells[8], 2);
}

#[test]
fn crd_columns_and_cells() {
    let pc = json!([
        {"name": "PodUID", "type": "string", "jsonPath": ".spec.podUid", "description": "uid"},
        {"name": "Active", "type": "boolean", "jsonPath": ".status.active", "priority": 1},
        {"name": "Count", "type": "integer", "jsonPath": ".status.count"},
        {"name": "Labels", "type": "string", "jsonPath": ".metadata.labels"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    ]);
    let cols = columns_for("KuryrPort", Some(&pc));
    assert_eq!(
        names(&cols),
        ["Name", "PodUID", "Active", "Count", "Labels", "Age"]
    );
    assert_eq!(cols[2].priority, 1);
    let kp = json!({"metadata": {"name": "kp1", "creationTimestamp": "2026-01-01T11:59:00Z", "labels": {"a": "b"}},
        "spec": {"podUid": "u-1"}, "status": {"active": true, "count": 3}});
    let t = to_table_at(&cols, &[kp], "5", None, now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["kp1", "u-1", true, 3, "{\"a\":\"b\"}", "60s"])
    );
    assert_eq!(t["columnDefinitions"][1]["description"], "uid");
    // Missing values are null cells.
    let t = to_table_at(&cols, &[json!({"metadata": {"name": "x"}})], "5", None, now());
    assert_eq!(t["rows"][0]["cells"][1], Value::Null);

    // No printer columns: Name + Age.
    let cols = columns_for("KuryrPort", Some(&json!([])));
    assert_eq!(names(&cols), ["Name", "Age"]);
}

#[test]
fn json_paths() {
    let o = json!({"a": {"b.c": [10, {"d": "x"}]}, "s": "t"});
    assert_eq!(eval_json_path(&o, ".s"), Some(&json!("t")));
    assert_eq!(eval_json_path(&o, "{.s}"), Some(&json!("t")));
    assert_eq!(eval_json_path(&o, ".a['b.c'][0]"), Some(&json!(10)));
    assert_eq!(eval_json_path(&o, ".a['b.c'][1].d"), Some(&json!("x")));
    assert_eq!(eval_json_path(&o, ".a['b.c'][-1].d"), Some(&json!("x")));
    assert_eq!(eval_json_path(&o, ".a.x"), None);
    assert_eq!(eval_json_path(&o, ".a['b.c'][5]"), None);
}

#[test]
fn workload_printers() {
    let d = json!({"metadata": {"name": "web", "creationTimestamp": "2026-01-01T11:59:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                 "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                 "template": {"spec": {"containers": [{"name": "a", "image": "nginx:1"}, {"name": "b", "image": "busybox"}]}}},
        "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    let cols = columns_for("Deployment", None);
    assert_eq!(
        names(&cols),
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    let t = to_table_at(&cols, &[d], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "web",
            "2/3",
            3,
            2,
            "60s",
            "a,b",
            "nginx:1,busybox",
            "app=web,tier in (a,b)"
        ])
    );
    let rs = json!({"metadata": {"name": "web-abc"}, "spec": {"replicas": 2}, "status": {"replicas": 1}});
    let cols = columns_for("replicasets", None);
    assert_eq!(names(&cols)[..5], ["Name", "Desired", "Current", "Ready", "Age"]);
    let t = to_table_at(&cols, &[rs], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"].as_array().unwrap()[1..4],
        [json!(2), json!(1), json!(0)]
    );
    let ds = json!({"metadata": {"name": "agent"},
        "spec": {"template": {"spec": {"nodeSelector": {"zone": "a", "os": "linux"}}}},
        "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1,
                   "updatedNumberScheduled": 2, "numberAvailable": 1}});
    let cols = columns_for("DaemonSet", None);
    assert_eq!(
        names(&cols)[..8],
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age"
        ]
    );
    let t = to_table_at(&cols, &[ds], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"].as_array().unwrap()[1..7],
        json!([2, 2, 1, 2, 1, "os=linux,zone=a"]).as_array().unwrap()[..]
    );
    let empty = json!({"metadata": {"name": "x"}, "spec": {}});
    let t = to_table_at(&cols, &[empty], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][6], "<none>");
}

#[test]
fn policy_and_rbac_printers() {
    let pdb = json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
    let cols = columns_for("PodDisruptionBudget", None);
    assert_eq!(
        names(&cols),
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
    let t = to_table_at(&cols, &[pdb], "1", None, now());
    assert_eq!(
        t["rows"][0]["cells"].as_array().unwrap()[1..4],
        json!(["50%", "N/A", 1]).as_array().unwrap()[..]
    );
    let rb = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                     {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]});
    let cols = columns_for("RoleBinding", None);
    assert_eq!(
        names(&cols),
        ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
    );
    let t = to_table_at(&cols, &[rb], "1", None, now());
    assert_eq!(t["rows"][0]["cells"][1], "ClusterRole/view");
    assert_eq!(
        t["rows"][0]["cells"].as_array().unwrap()[3..6],
        json!(["alice, bob", "", "ns/sa"]).as_array().unwrap()[..]
    );
    assert_eq!(names(&columns_for("Role", None)), ["Name", "Created At"]);
}
