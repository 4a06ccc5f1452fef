//! Objects a user or another version wrote with contents the Rust types cannot hold still read,
//! so that one of them cannot make a whole list (and the watches built on it) fail: unreadable
//! VIF entries are kept aside with the reason, odd label values are tolerated.

use kuryr_types::{KuryrNetwork, KuryrPort};
use serde_json::json;

fn kp(vifs: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "openstack.org/v1", "kind": "KuryrPort",
           "metadata": {"name": "web", "namespace": "ns"},
           "spec": {"podUid": "u", "podNodeName": "node-1"},
           "status": {"vifs": vifs}})
}

#[test]
fn unreadable_vif_entries_are_kept_aside_with_the_reason() {
    let good =
        serde_json::to_value(serde_json::from_value::<KuryrPort>(kp(json!({}))).expect("empty vifs read"))
            .expect("serialize");
    assert_eq!(good["status"]["vifs"], json!({}));
    for garbage in [
        json!("x"),
        json!(7),
        json!({"default": "yes", "vif": {}}),
        json!({"default": true}),
        json!({"default": true, "vif": {"versioned_object.name": "VIFOpenVSwitch", "versioned_object.data": {"id": 5}}}),
    ] {
        let k: KuryrPort = serde_json::from_value(kp(json!({"eth0": garbage.clone()})))
            .unwrap_or_else(|e| panic!("{garbage} made the KuryrPort unreadable: {e}"));
        let st = k.status.expect("status");
        assert!(st.vifs.is_empty(), "{garbage}");
        let bad = &st.invalid["eth0"];
        assert_eq!(bad.raw, garbage);
        assert!(!bad.error.is_empty());
        // Never written back.
        let out = serde_json::to_value(&st).expect("serialize");
        assert_eq!(out, json!({"vifs": {}}), "{garbage}");
    }
    // A whole `vifs` that is not an object (an old writer).
    let k: KuryrPort = serde_json::from_value(kp(json!(["eth0"]))).expect("reads");
    assert!(
        k.status.expect("status").invalid[""]
            .error
            .contains("not an object")
    );
    // The port an unreadable entry names is still known.
    let named = json!({"default": true, "vif": {"versioned_object.data": {"id": "p-1"}}});
    let k: KuryrPort = serde_json::from_value(kp(json!({"eth0": named}))).expect("reads");
    assert_eq!(k.status.expect("status").invalid["eth0"].port_id(), Some("p-1"));
}

#[test]
fn namespace_labels_of_any_json_type_read() {
    let kn: KuryrNetwork = serde_json::from_value(json!({
        "apiVersion": "openstack.org/v1", "kind": "KuryrNetwork",
        "metadata": {"name": "ns", "namespace": "ns"},
        "spec": {"nsName": "ns", "projectId": "p", "nsLabels": {"a": "b", "tier": 1, "on": true, "x": {"y": 1}, "n": null}},
        "status": {"nsLabels": "garbage"}
    }))
    .expect("reads");
    let labels: Vec<(&str, &str)> = kn
        .spec
        .ns_labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(labels, [("a", "b"), ("on", "true"), ("tier", "1")]);
    assert_eq!(kn.status.expect("status").ns_labels, Some(Default::default()));
}
