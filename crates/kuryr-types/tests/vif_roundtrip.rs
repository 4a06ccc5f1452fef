//! Upstream-shaped KuryrPort documents (os-vif primitives in `status.vifs`) survive
//! JSON → Rust → JSON unchanged, and the typed view carries what the CNI side needs.

use kuryr_types::vif::{FixedIp, Network, PortProfile, Route, Subnet, Vif, VifKind};
use kuryr_types::{KuryrPort, VifEntry};
use serde_json::Value;

fn load(name: &str) -> Value {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("test data");
    serde_json::from_str(&text).expect("valid JSON")
}

#[test]
fn ovs_kuryrport_round_trips_identically() {
    let original = load("kuryrport_ovs.json");
    let kp: KuryrPort = serde_json::from_value(original.clone()).expect("parse KuryrPort");
    let back = serde_json::to_value(&kp).expect("serialize");
    assert_eq!(back, original);

    let status = kp.status.as_ref().expect("status");
    let eth0 = &status.vifs["eth0"];
    assert!(eth0.default);
    let vif = &eth0.vif;
    assert_eq!(vif.kind, VifKind::OpenVSwitch);
    assert_eq!(vif.id.as_deref(), Some("3e5f2a1b-7c8d-4e9f-a0b1-c2d3e4f5a6b7"));
    assert_eq!(vif.address.as_deref(), Some("fa:16:3e:12:34:56"));
    assert_eq!(vif.vif_name.as_deref(), Some("tap3e5f2a1b-7c"));
    assert_eq!(vif.bridge_name.as_deref(), Some("br-int"));
    assert!(vif.is_active());
    assert_eq!(vif.mtu(), Some(1442));
    let net = vif.network.as_ref().expect("network");
    assert_eq!(net.subnets.len(), 1);
    let s = &net.subnets[0];
    assert_eq!(s.cidr.as_deref(), Some("10.0.0.64/26"));
    assert_eq!(s.gateway.as_deref(), Some("10.0.0.65"));
    assert_eq!(s.dns.as_deref(), Some(&["10.0.0.2".to_string()][..]));
    assert_eq!(s.routes[0].cidr.as_deref(), Some("169.254.169.254/32"));
    assert_eq!(
        s.ips[0].meta.changes.as_deref(),
        Some(&["address".to_string()][..])
    );
    let ips: Vec<&str> = vif.ips().map(|(_, ip)| ip).collect();
    assert_eq!(ips, vec!["10.0.0.87"]);
    assert_eq!(
        vif.port_profile.as_ref().and_then(|p| p.interface_id()),
        vif.id.as_deref()
    );
    assert_eq!(kp.spec.pod_static, None);
}

#[test]
fn nested_kuryrport_round_trips_with_nulls_and_unknown_fields() {
    let original = load("kuryrport_nested_vlan.json");
    let kp: KuryrPort = serde_json::from_value(original.clone()).expect("parse KuryrPort");
    assert_eq!(serde_json::to_value(&kp).expect("serialize"), original);

    let vifs = &kp.status.as_ref().expect("status").vifs;
    let eth0 = &vifs["eth0"].vif;
    assert_eq!(eth0.kind, VifKind::VlanNested);
    assert_eq!(eth0.vlan_id, Some(1234));
    assert!(!eth0.is_active());
    let net = eth0.network.as_ref().expect("network");
    assert_eq!(net.vlan, None);
    assert!(net.extra.get("vlan").is_some_and(Value::is_null), "null kept");
    assert!(eth0.extra.contains_key("some_future_field"));
    assert!(net.subnets[0].routes.is_empty());
    let (ifname, default) = kp.status.as_ref().and_then(|s| s.default_vif()).expect("default");
    assert_eq!((ifname, default.kind.clone()), ("eth0", VifKind::VlanNested));
    let eth1 = &vifs["eth1"];
    assert!(!eth1.default);
    assert_eq!(eth1.vif.kind, VifKind::MacvlanNested);
    assert_eq!(eth1.vif.address, None);
}

#[test]
fn built_vif_has_upstream_shape() {
    let mut subnet = Subnet::new("10.0.0.0/24");
    subnet.gateway = Some("10.0.0.1".into());
    subnet.ips.push(FixedIp::new("10.0.0.5"));
    subnet.routes.push(Route::new("0.0.0.0/0", "10.0.0.1"));
    let mut net = Network::new("net-1");
    net.mtu = Some(1500);
    net.subnets.push(subnet);
    let mut vif = Vif::new(VifKind::OpenVSwitch, "port-1");
    vif.address = Some("fa:16:3e:00:00:01".into());
    vif.network = Some(net);
    vif.plugin = Some("ovs".into());
    vif.active = Some(false);
    vif.vif_name = Some("tapport-1".into());
    vif.port_profile = Some(PortProfile::open_vswitch("port-1"));
    let v = serde_json::to_value(VifEntry { default: true, vif }).expect("serialize");
    let p = &v["vif"];
    assert_eq!(p["versioned_object.name"], "VIFOpenVSwitch");
    assert_eq!(p["versioned_object.namespace"], "os_vif");
    assert_eq!(p["versioned_object.version"], "1.0");
    let d = &p["versioned_object.data"];
    assert_eq!(d["network"]["versioned_object.version"], "1.1");
    let sub = &d["network"]["versioned_object.data"]["subnets"]["versioned_object.data"]["objects"][0];
    assert_eq!(sub["versioned_object.name"], "Subnet");
    assert_eq!(
        sub["versioned_object.data"]["ips"]["versioned_object.data"]["objects"][0]["versioned_object.data"]["address"],
        "10.0.0.5"
    );
    assert_eq!(
        sub["versioned_object.data"]["routes"]["versioned_object.data"]["objects"][0]["versioned_object.data"]
            ["gateway"],
        "10.0.0.1"
    );
    assert!(p.get("versioned_object.changes").is_none());
    // and back
    let e: VifEntry = serde_json::from_value(v.clone()).expect("parse back");
    assert_eq!(serde_json::to_value(&e).expect("serialize again"), v);
}

#[test]
fn malformed_primitives_are_errors_not_panics() {
    for bad in [
        serde_json::json!(null),
        serde_json::json!("x"),
        serde_json::json!({"versioned_object.name": "VIFOpenVSwitch"}),
        serde_json::json!({"versioned_object.name": 1, "versioned_object.namespace": "os_vif", "versioned_object.version": "1.0"}),
        serde_json::json!({"versioned_object.name": "VIFOpenVSwitch", "versioned_object.namespace": "os_vif",
            "versioned_object.version": "1.0", "versioned_object.data": {"active": "yes"}}),
        serde_json::json!({"versioned_object.name": "VIFOpenVSwitch", "versioned_object.namespace": "os_vif",
            "versioned_object.version": "1.0", "versioned_object.data": {"network": {"versioned_object.name": "Network",
            "versioned_object.namespace": "os_vif", "versioned_object.version": "1.1",
            "versioned_object.data": {"subnets": {"versioned_object.name": "RouteList",
            "versioned_object.namespace": "os_vif", "versioned_object.version": "1.0"}}}}}),
    ] {
        let r: Result<Vif, _> = serde_json::from_value(bad.clone());
        assert!(r.is_err(), "{bad} should not parse");
    }
    let err = Vif::from_primitive(serde_json::json!({"versioned_object.name": "VIFOpenVSwitch",
        "versioned_object.namespace": "os_vif", "versioned_object.version": "1.0",
        "versioned_object.data": {"vlan_id": "x"}}))
    .expect_err("wrong type");
    assert_eq!(
        err.to_string(),
        "vif.versioned_object.data.vlan_id: expected an integer"
    );
}

/// The daemon and the benchmark watch KuryrPorts through `kube_lean::Lean`: the same KuryrPort,
/// VIFs included, without the server's `managedFields`.
#[test]
fn kuryrport_read_without_managed_fields_is_the_same_port() {
    for name in ["kuryrport_ovs.json", "kuryrport_nested_vlan.json"] {
        let mut doc = load(name);
        doc["metadata"]["managedFields"] = serde_json::json!([{
            "manager": "kuryr-controller", "operation": "Update", "apiVersion": "openstack.org/v1",
            "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": {"f:status": {"f:vifs": {".": {}, "f:eth0": {}}}}
        }]);
        let text = doc.to_string();
        let mut full: KuryrPort = serde_json::from_str(&text).expect("parse KuryrPort");
        assert_eq!(full.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
        full.metadata.managed_fields = None;
        let lean: kube_lean::Lean<KuryrPort> = serde_json::from_str(&text).expect("parse lean");
        assert_eq!(lean.into_inner(), full, "{name}");
    }
}
