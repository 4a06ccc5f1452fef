//! Unit tests of [`Lean`]: the same object as `K` reads it, without `managedFields`, through
//! every path the API client decodes objects by (text, `Value`, watch events, lists,
//! metadata-only objects).

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::core::{ObjectList, PartialObjectMeta, WatchEvent};
use serde_json::{Value, json};

use super::*;

fn managed() -> Value {
    json!([
        {"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
         "time": "2026-11-29T00:00:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                      "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}}},
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "subresource": "status",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}}
    ])
}

fn pod_json() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                     "labels": {"app": "web"}, "annotations": {"managedFields": "kept"},
                     "managedFields": managed()},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.5"}
    })
}

/// `K` as it reads the same JSON, with `managedFields` cleared.
fn expected<K: for<'de> Deserialize<'de> + Resource>(v: &Value) -> K {
    let mut k: K = serde_json::from_value(v.clone()).expect("K reads the fixture");
    assert!(
        !k.meta().managed_fields.as_deref().unwrap_or_default().is_empty(),
        "fixture has managedFields"
    );
    k.meta_mut().managed_fields = None;
    k
}

#[test]
fn pod_from_text_is_the_pod_without_managed_fields() {
    let v = pod_json();
    let lean: Lean<Pod> = serde_json::from_str(&v.to_string()).expect("decodes");
    assert_eq!(lean.0, expected::<Pod>(&v));
    assert_eq!(
        lean.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("managedFields"))
            .map(String::as_str),
        Some("kept")
    );
}

#[test]
fn pod_from_a_value_and_from_bytes() {
    let v = pod_json();
    let from_value = Lean::<Pod>::deserialize(&v).expect("decodes from &Value");
    assert_eq!(from_value.0, expected::<Pod>(&v));
    let from_owned: Lean<Pod> = serde_json::from_value(v.clone()).expect("decodes from Value");
    assert_eq!(from_owned, from_value);
    let from_slice: Lean<Pod> = serde_json::from_slice(v.to_string().as_bytes()).expect("decodes from bytes");
    assert_eq!(from_slice, from_value);
}

#[test]
fn only_the_objects_own_metadata_is_filtered() {
    // A ConfigMap's data key and a key inside another field named like the filtered ones stay.
    let v = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "managedFields": managed()},
        "data": {"managedFields": "a", "metadata": "b"}
    });
    let lean: Lean<ConfigMap> = serde_json::from_str(&v.to_string()).expect("decodes");
    assert_eq!(lean.0, expected::<ConfigMap>(&v));
    let data = lean.data.as_ref().expect("data");
    assert_eq!(data.get("managedFields").map(String::as_str), Some("a"));
    assert_eq!(data.get("metadata").map(String::as_str), Some("b"));
}

#[test]
fn metadata_only_objects() {
    // PartialObjectMeta flattens its type fields: serde reads it as a map, not a struct.
    let v = json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "managedFields": managed(),
                     "deletionTimestamp": "2026-11-29T00:00:01Z"}
    });
    let lean: Lean<PartialObjectMeta<Pod>> = serde_json::from_str(&v.to_string()).expect("decodes");
    let full: PartialObjectMeta<Pod> = expected(&v);
    assert_eq!(lean.metadata, full.metadata);
    assert_eq!(lean.types, full.types);
    assert!(lean.metadata.deletion_timestamp.is_some());
    assert!(<Lean<PartialObjectMeta<Pod>> as Resource>::metadata_api());
}

#[test]
fn watch_events_whichever_key_comes_first() {
    let v = pod_json();
    let want = expected::<Pod>(&v);
    // "type" first (the API server's order) and "object" first (serde buffers the object).
    for text in [
        format!(r#"{{"type":"MODIFIED","object":{v}}}"#),
        format!(r#"{{"object":{v},"type":"ADDED"}}"#),
    ] {
        let ev: WatchEvent<Lean<Pod>> = serde_json::from_str(&text).expect("decodes");
        match ev {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => assert_eq!(p.0, want),
            other => panic!("unexpected event {other:?}"),
        }
    }
}

#[test]
fn lists() {
    let v = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "9"},
                   "items": [pod_json(), pod_json()]});
    let list: ObjectList<Lean<Pod>> = serde_json::from_str(&v.to_string()).expect("decodes");
    assert_eq!(list.items.len(), 2);
    assert!(list.items.iter().all(|p| p.0 == expected::<Pod>(&pod_json())));
}

#[test]
fn errors_are_the_objects_own() {
    let mut v = pod_json();
    v["spec"]["containers"] = json!("not a list");
    let lean = serde_json::from_str::<Lean<Pod>>(&v.to_string()).expect_err("invalid");
    let full = serde_json::from_str::<Pod>(&v.to_string()).expect_err("invalid");
    assert_eq!(lean.to_string(), full.to_string());
    // A broken managedFields is skipped, not read: it is no longer an error.
    let mut v = pod_json();
    v["metadata"]["managedFields"] = json!({"not": ["a", "list"]});
    let lean: Lean<Pod> = serde_json::from_str(&v.to_string()).expect("skipped");
    assert!(lean.metadata.managed_fields.is_none());
    // Not an object at all.
    assert!(serde_json::from_str::<Lean<Pod>>("[1, 2]").is_err());
    assert!(serde_json::from_str::<Lean<Pod>>(r#"{"metadata": 3}"#).is_err());
}

#[test]
fn same_resource_as_the_object() {
    assert_eq!(
        Lean::<Pod>::url_path(&(), Some("ns")),
        Pod::url_path(&(), Some("ns"))
    );
    assert_eq!(Lean::<Pod>::kind(&()), "Pod");
    assert_eq!(Lean::<Pod>::api_version(&()), "v1");
    assert!(!<Lean<Pod> as Resource>::metadata_api());
    let ev = unwrap_event(Event::Apply(Lean(Pod::default())));
    assert!(matches!(ev, Event::Apply(p) if p == Pod::default()));
}
