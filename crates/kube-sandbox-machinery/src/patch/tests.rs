//! Unit tests of patch flavours and server-side apply.

use super::*;
use serde_json::json;

fn ssa(cur: &Value, body: &str, mgr: &str, force: bool) -> Result<Value, PatchError> {
    apply_patch(
        PatchType::Apply,
        cur,
        body.as_bytes(),
        Some(&ApplyOptions {
            field_manager: mgr,
            force,
        }),
    )
}

fn entry<'a>(obj: &'a Value, mgr: &str, op: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == mgr && e["operation"] == op)
}

const DEPLOY_A: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels:
    app: web
spec:
  replicas: 2
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1
"#;

fn fresh() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "default"}})
}

#[test]
fn content_types() {
    assert_eq!(
        PatchType::from_content_type("application/apply-patch+yaml; charset=utf-8"),
        Some(PatchType::Apply)
    );
    assert_eq!(
        PatchType::from_content_type("application/strategic-merge-patch+json"),
        Some(PatchType::StrategicMerge)
    );
    assert_eq!(PatchType::from_content_type("text/plain"), None);
}

#[test]
fn json_patch_and_errors() {
    let cur = json!({"metadata": {"name": "a", "labels": {"x": "1"}}});
    let out = apply_patch(
        PatchType::Json,
        &cur,
        br#"[{"op":"add","path":"/metadata/labels/y","value":"2"},{"op":"test","path":"/metadata/name","value":"a"}]"#,
        None,
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"x": "1", "y": "2"}));
    let e = apply_patch(
        PatchType::Json,
        &cur,
        br#"[{"op":"test","path":"/metadata/name","value":"b"}]"#,
        None,
    );
    assert!(matches!(e, Err(PatchError::Invalid(_))), "{e:?}");
    let e = apply_patch(
        PatchType::Json,
        &cur,
        br#"[{"op":"replace","path":"/spec/x","value":1}]"#,
        None,
    );
    assert!(matches!(e, Err(PatchError::Invalid(_))));
    assert!(matches!(
        apply_patch(PatchType::Json, &cur, b"{not json", None),
        Err(PatchError::BadRequest(_))
    ));
}

#[test]
fn merge_patch() {
    let cur = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "spec": {"l": [1, 2]}});
    let out = apply_patch(
        PatchType::Merge,
        &cur,
        br#"{"metadata":{"labels":{"x":null,"y":"2"}},"spec":{"l":[3]}}"#,
        None,
    )
    .unwrap();
    assert_eq!(
        out,
        json!({"metadata": {"name": "a", "labels": {"y": "2"}}, "spec": {"l": [3]}})
    );
    assert!(matches!(
        apply_patch(PatchType::Merge, &cur, b"", None),
        Err(PatchError::BadRequest(_))
    ));
}

#[test]
fn strategic_patch_uses_kind() {
    let cur = json!({"kind": "Service", "spec": {"ports": [{"port": 80, "name": "a"}]}});
    let out = apply_patch(
        PatchType::StrategicMerge,
        &cur,
        br#"{"spec":{"ports":[{"port":81}]}}"#,
        None,
    )
    .unwrap();
    assert_eq!(
        out["spec"]["ports"],
        json!([{"port": 80, "name": "a"}, {"port": 81}])
    );
}

#[test]
fn apply_requires_field_manager_and_rejects_managed_fields() {
    let e = apply_patch(PatchType::Apply, &fresh(), DEPLOY_A.as_bytes(), None);
    assert!(matches!(e, Err(PatchError::Invalid(m)) if m.contains("fieldManager")));
    let body =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","managedFields":[{"manager":"x"}]}}"#;
    let e = ssa(&json!({}), body, "m", false);
    assert!(matches!(e, Err(PatchError::BadRequest(m)) if m == "metadata.managedFields must be nil"));
    assert!(matches!(
        ssa(&json!({}), "- a\n- b", "m", false),
        Err(PatchError::BadRequest(_))
    ));
    assert!(matches!(
        ssa(&json!({}), "{\"kind\": \"X\"}", "m", false),
        Err(PatchError::BadRequest(_))
    ));
    assert!(matches!(
        ssa(&json!({}), ":\n  - [", "m", false),
        Err(PatchError::BadRequest(_))
    ));
    let e = ssa(
        &fresh(),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n",
        "m",
        false,
    );
    assert!(matches!(e, Err(PatchError::BadRequest(_))));
}

#[test]
fn apply_creates_and_records_ownership() {
    let out = ssa(&fresh(), DEPLOY_A, "kubectl", false).unwrap();
    assert_eq!(out["spec"]["replicas"], 2);
    assert_eq!(out["metadata"]["labels"]["app"], "web");
    assert_eq!(out["metadata"]["name"], "web");
    let e = entry(&out, "kubectl", "Apply").unwrap();
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        e["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
            }}}}
        })
    );
    assert!(e["fieldsV1"].to_string().find("managedFields").is_none());
}

#[test]
fn reapply_with_change_and_removal() {
    let v1 = ssa(&fresh(), DEPLOY_A, "kubectl", false).unwrap();
    let body2 = DEPLOY_A
        .replace("replicas: 2", "replicas: 3")
        .replace("  labels:\n    app: web\n", "");
    let v2 = ssa(&v1, &body2, "kubectl", false).unwrap();
    assert_eq!(v2["spec"]["replicas"], 3);
    assert!(v2["metadata"].get("labels").is_none(), "{v2}");
    let mf = v2["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 1);
    assert!(mf[0]["fieldsV1"]["f:metadata"].is_null());
}

#[test]
fn conflicts_between_managers_and_force() {
    let v1 = ssa(&fresh(), DEPLOY_A, "alice", false).unwrap();
    // Same value: shared ownership, no conflict.
    let same = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n";
    let shared = ssa(&v1, same, "bob", false).unwrap();
    assert!(entry(&shared, "alice", "Apply").unwrap()["fieldsV1"]["f:spec"]["f:replicas"].is_object());
    assert!(entry(&shared, "bob", "Apply").unwrap()["fieldsV1"]["f:spec"]["f:replicas"].is_object());
    // Different value: conflict.
    let other = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 5}\n";
    match ssa(&v1, other, "bob", false) {
        Err(PatchError::Conflict { conflicts }) => {
            assert_eq!(
                conflicts,
                vec!["conflict with \"alice\": .spec.replicas".to_string()]
            );
        }
        r => panic!("expected conflict, got {r:?}"),
    }
    let e = ssa(&v1, other, "bob", false).unwrap_err().to_string();
    assert!(
        e.starts_with("Apply failed with 1 conflict(s): conflict with \"alice\": .spec.replicas"),
        "{e}"
    );
    // Forced: ownership moves to bob.
    let forced = ssa(&v1, other, "bob", true).unwrap();
    assert_eq!(forced["spec"]["replicas"], 5);
    assert!(
        entry(&forced, "alice", "Apply").unwrap()["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    assert!(entry(&forced, "bob", "Apply").unwrap()["fieldsV1"]["f:spec"]["f:replicas"].is_object());
    // Alice re-applying without replicas no longer removes bob's field.
    let body = DEPLOY_A.replace("  replicas: 2\n", "");
    let v3 = ssa(&forced, &body, "alice", false).unwrap();
    assert_eq!(v3["spec"]["replicas"], 5);
}

#[test]
fn removal_keeps_fields_owned_by_others() {
    let v1 = ssa(&fresh(), DEPLOY_A, "alice", false).unwrap();
    let bob = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, labels: {app: web}}\n";
    let v2 = ssa(&v1, bob, "bob", false).unwrap();
    let body = DEPLOY_A.replace("  labels:\n    app: web\n", "");
    let v3 = ssa(&v2, &body, "alice", false).unwrap();
    assert_eq!(v3["metadata"]["labels"]["app"], "web", "bob still owns it");
}

#[test]
fn keyed_lists_merge_per_key() {
    let v1 = ssa(&fresh(), DEPLOY_A, "alice", false).unwrap();
    let bob = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  template:
    spec:
      containers:
      - name: sidecar
        image: busybox
"#;
    let v2 = ssa(&v1, bob, "bob", false).unwrap();
    let names: Vec<&str> = v2["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["nginx", "sidecar"]);
    // Bob changes alice's container image: conflict on that path.
    let bob2 = bob.replace("sidecar", "nginx").replace("busybox", "nginx:2");
    match ssa(&v2, &bob2, "bob", false) {
        Err(PatchError::Conflict { conflicts }) => assert_eq!(
            conflicts,
            vec!["conflict with \"alice\": .spec.template.spec.containers[name=\"nginx\"].image".to_string()]
        ),
        r => panic!("{r:?}"),
    }
    // Alice drops her container: it goes, bob's stays.
    let alice2 = DEPLOY_A.replace(
        "      - name: nginx\n        image: nginx:1\n",
        "      - name: other\n        image: o\n",
    );
    let v3 = ssa(&v2, &alice2, "alice", false).unwrap();
    let names: Vec<&str> = v3["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["sidecar", "other"]);
    let bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - image: x\n";
    assert!(matches!(
        ssa(&json!({}), bad, "m", false),
        Err(PatchError::BadRequest(_))
    ));
}

#[test]
fn finalizers_as_set_under_apply() {
    let cur = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "c", "finalizers": ["other/f"]}});
    let body = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  finalizers: [mine/f]\n";
    let v = ssa(&cur, body, "m", false).unwrap();
    assert_eq!(v["metadata"]["finalizers"], json!(["other/f", "mine/f"]));
    assert_eq!(
        entry(&v, "m", "Apply").unwrap()["fieldsV1"],
        json!({"f:metadata": {"f:finalizers": {"v:\"mine/f\"": {}}}})
    );
    let body2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n";
    let v2 = ssa(&v, body2, "m", false).unwrap();
    assert_eq!(v2["metadata"]["finalizers"], json!(["other/f"]));
}

#[test]
fn json_body_is_accepted_for_apply() {
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}}"#;
    let v = ssa(&json!({}), body, "m", false).unwrap();
    assert_eq!(v["data"]["k"], "v");
    assert_eq!(v["kind"], "ConfigMap");
}

#[test]
fn update_ownership_makes_apply_conflict() {
    // kubectl create (Update by "kubectl-create"), then an apply changing the same field.
    let old = json!({});
    let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default", "uid": "u", "resourceVersion": "1",
                     "labels": {"a": "1"}},
        "data": {"k": "v"}});
    record_update(&old, &mut created, "kubectl-create", "v1");
    let e = entry(&created, "kubectl-create", "Update").unwrap();
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
    );
    let body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: other}\n";
    match ssa(&created, body, "kubectl", false) {
        Err(PatchError::Conflict { conflicts }) => {
            assert_eq!(conflicts.len(), 1);
            assert!(
                conflicts[0].starts_with("conflict with \"kubectl-create\" using v1 at "),
                "{conflicts:?}"
            );
            assert!(conflicts[0].ends_with(": .data.k"));
        }
        r => panic!("{r:?}"),
    }
    // A later update by someone else takes the field over.
    let mut updated = created.clone();
    updated["data"]["k"] = "w".into();
    updated["data"]["k2"] = "x".into();
    record_update(&created, &mut updated, "kubectl-edit", "v1");
    let create_e = entry(&updated, "kubectl-create", "Update").unwrap();
    assert!(create_e["fieldsV1"]["f:data"].get("f:k").is_none());
    let edit_e = entry(&updated, "kubectl-edit", "Update").unwrap();
    assert_eq!(edit_e["fieldsV1"], json!({"f:data": {"f:k": {}, "f:k2": {}}}));
    // Removing a field drops it from ownership; emptied entries disappear.
    let mut removed = updated.clone();
    removed["metadata"]["labels"] = json!({});
    record_update(&updated, &mut removed, "x", "v1");
    let names: Vec<&str> = removed["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["manager"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"kubectl-create"),
        "labels map node still owned: {names:?}"
    );
    // No change: no new entry.
    let mut same = removed.clone();
    record_update(&removed, &mut same, "nobody", "v1");
    assert!(entry(&same, "nobody", "Update").is_none());
}

#[test]
fn record_update_subresource_and_client_reset() {
    let old = json!({"kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Pending"}});
    let mut new = old.clone();
    new["status"]["phase"] = "Running".into();
    record_update_subresource(&old, &mut new, "kubelet", "v1", Some("status"));
    let e = entry(&new, "kubelet", "Update").unwrap();
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:phase": {}}}));
    // A client-provided managedFields list replaces the stored one.
    let mut reset = new.clone();
    reset["metadata"]["managedFields"] = json!([{"manager": "a", "operation": "Update",
        "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}}]);
    record_update(&new, &mut reset, "b", "v1");
    let mf = reset["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(mf[0]["manager"], "a");
}

#[test]
fn apply_after_update_same_value_is_shared() {
    let mut created = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c"}, "data": {"k": "v"}});
    record_update(&json!({}), &mut created, "kubectl-create", "v1");
    let body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v, j: w}\n";
    let v = ssa(&created, body, "kubectl", false).unwrap();
    assert_eq!(v["data"], json!({"k": "v", "j": "w"}));
    assert_eq!(v["metadata"]["managedFields"].as_array().unwrap().len(), 2);
}

#[test]
fn json_patch_test_null_on_missing_path_like_go() {
    // kube-rs finalizer(): test /metadata/finalizers == null, then add it.
    let cur = json!({"metadata": {"name": "a"}});
    let body = br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["f"]}]"#;
    let out = apply_patch(PatchType::Json, &cur, body, None).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
    // The same patch against an object that has finalizers fails the test.
    assert!(matches!(
        apply_patch(PatchType::Json, &out, body, None),
        Err(PatchError::Invalid(_))
    ));
    // Missing parent: still an error.
    let body = br#"[{"op":"test","path":"/spec/x/y","value":null}]"#;
    assert!(apply_patch(PatchType::Json, &cur, body, None).is_err());
    // Later ops see earlier ones.
    let body = br#"[{"op":"add","path":"/metadata/finalizers","value":["f"]},{"op":"test","path":"/metadata/finalizers/0","value":"f"},{"op":"remove","path":"/metadata/finalizers/0"}]"#;
    let out = apply_patch(PatchType::Json, &cur, body, None).unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!([]));
}

#[test]
fn json_patch_replace_of_a_missing_key_adds_it_like_go() {
    // Upstream Kuryr: replace /status/nsLabels on a KuryrNetwork whose status has none yet.
    let cur = json!({"metadata": {"name": "a"}, "status": {"netId": "n"}});
    let body = br#"[{"op":"replace","path":"/status/nsLabels","value":{"a":"b"}}]"#;
    let out = apply_patch(PatchType::Json, &cur, body, None).unwrap();
    assert_eq!(out["status"], json!({"netId": "n", "nsLabels": {"a": "b"}}));
    // Replacing the whole status when there is none: its parent (the object) exists.
    let body = br#"[{"op":"replace","path":"/status","value":{}}]"#;
    let out = apply_patch(PatchType::Json, &json!({"metadata": {"name": "a"}}), body, None).unwrap();
    assert_eq!(out["status"], json!({}));
    // A missing parent is still an error (422 "doc is missing path" there).
    let body = br#"[{"op":"replace","path":"/spec/x/y","value":1}]"#;
    assert!(matches!(
        apply_patch(PatchType::Json, &cur, body, None),
        Err(PatchError::Invalid(_))
    ));
    // Array indices out of range too.
    let cur = json!({"metadata": {"name": "a", "finalizers": ["f"]}});
    let body = br#"[{"op":"replace","path":"/metadata/finalizers/3","value":"g"}]"#;
    assert!(apply_patch(PatchType::Json, &cur, body, None).is_err());
}

#[test]
fn status_subresource_apply_entries_are_separate() {
    let cur = json!({"apiVersion": "openstack.org/v1", "kind": "KuryrPort",
                     "metadata": {"name": "kp"}, "spec": {"podUid": "u"}});
    let body = br#"{"apiVersion":"openstack.org/v1","kind":"KuryrPort","status":{"ready":true}}"#;
    let opts = ApplyOptions {
        field_manager: "ctrl",
        force: true,
    };
    let v = apply_patch_subresource(PatchType::Apply, &cur, body, Some(&opts), Some("status")).unwrap();
    assert_eq!(v["status"]["ready"], true);
    let e = entry(&v, "ctrl", "Apply").unwrap();
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:ready": {}}}));
    // The same manager applying the main resource gets its own entry.
    let body = br#"{"apiVersion":"openstack.org/v1","kind":"KuryrPort","spec":{"podUid":"u"}}"#;
    let v2 = apply_patch(PatchType::Apply, &v, body, Some(&opts)).unwrap();
    let mf = v2["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf.len(), 2, "{mf:?}");
    assert_eq!(
        v2["status"]["ready"], true,
        "main apply without status keeps the status entry's field"
    );
}

#[test]
fn service_ports_are_keyed_by_port_and_protocol_under_apply() {
    let body = r#"
apiVersion: v1
kind: Service
metadata: {name: dns}
spec:
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
"#;
    let v = ssa(&json!({}), body, "m", false).unwrap();
    assert_eq!(v["spec"]["ports"].as_array().unwrap().len(), 2);
    let e = entry(&v, "m", "Apply").unwrap();
    let ports = e["fieldsV1"]["f:spec"]["f:ports"].as_object().unwrap();
    assert!(
        ports.contains_key(r#"k:{"port":53,"protocol":"UDP"}"#),
        "{ports:?}"
    );
    assert!(
        ports.contains_key(r#"k:{"port":53,"protocol":"TCP"}"#),
        "{ports:?}"
    );
    // The stored object has protocol defaulted; an applied port without it matches TCP.
    let mut stored = v.clone();
    stored["spec"]["ports"][1]["targetPort"] = json!(5353);
    let body2 = r#"
apiVersion: v1
kind: Service
metadata: {name: dns}
spec:
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53}
"#;
    let v2 = ssa(&stored, body2, "m", false).unwrap();
    let ports = v2["spec"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2, "{ports:?}");
    assert_eq!(ports[1]["targetPort"], 5353);
}

#[test]
fn apply_keeps_system_metadata_of_current() {
    let mut cur = fresh();
    cur["metadata"]["resourceVersion"] = json!("5");
    cur["metadata"]["uid"] = json!("u-1");
    cur["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    let body = DEPLOY_A.replace(
        "  namespace: default\n",
        "  namespace: default\n  resourceVersion: \"1\"\n  uid: other\n",
    );
    let v = ssa(&cur, &body, "kubectl", false).unwrap();
    assert_eq!(v["metadata"]["resourceVersion"], "5");
    assert_eq!(v["metadata"]["uid"], "u-1");
    assert_eq!(v["metadata"]["creationTimestamp"], "2026-01-01T00:00:00Z");
}

#[test]
fn service_selector_is_atomic_under_apply() {
    let body =
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  selector: {app: old, tier: fe}\n";
    let v = ssa(&json!({}), body, "m", false).unwrap();
    let e = entry(&v, "m", "Apply").unwrap();
    assert_eq!(e["fieldsV1"], json!({"f:spec": {"f:selector": {}}}));
    let body2 = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  selector: {app: new}\n";
    let v2 = ssa(&v, body2, "m", false).unwrap();
    assert_eq!(
        v2["spec"]["selector"],
        json!({"app": "new"}),
        "replaced, not merged"
    );
    // Another manager changing the selector conflicts on the whole map.
    match ssa(&v2, body, "other", false) {
        Err(PatchError::Conflict { conflicts }) => {
            assert_eq!(conflicts, vec!["conflict with \"m\": .spec.selector".to_string()])
        }
        r => panic!("{r:?}"),
    }
}

/// The patch `kubectl apply` (client side) sends when a Deployment's image changes and its
/// strategy switches to Recreate: containers merge by name, `$retainKeys` drops the defaulted
/// `rollingUpdate`.
#[test]
fn kubectl_deployment_patch_merges_template_containers() {
    let cur = json!({"kind": "Deployment", "spec": {
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
            "containers": [
                {"name": "web", "image": "nginx:1", "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "busybox"}]}}}});
    let patch = br#"{"spec":{"strategy":{"$retainKeys":["type"],"type":"Recreate"},
        "template":{"spec":{"$setElementOrder/containers":[{"name":"web"},{"name":"side"}],
        "containers":[{"image":"nginx:2","name":"web","env":[{"name":"B","value":"2"}]}]}}}}"#;
    let out = apply_patch(PatchType::StrategicMerge, &cur, patch, None).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let cs = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(cs[0]["image"], "nginx:2");
    assert_eq!(cs[0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        cs[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
    );
    assert_eq!(cs[1], json!({"name": "side", "image": "busybox"}));
}
