use super::*;
use kuryr_types::{KuryrPortSpec, KuryrPortStatus, Vif, VifEntry, VifKind};
use serde_json::json;

fn pod(ns: &str, name: &str, uid: &str, host: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "uid": uid},
        "spec": {"nodeName": "node-1", "hostNetwork": host, "containers": []},
    }))
    .unwrap()
}

fn kp(ns: &str, name: &str, uid: &str, port: Option<&str>) -> KuryrPort {
    let mut k = KuryrPort::new(
        name,
        KuryrPortSpec {
            pod_uid: uid.into(),
            pod_node_name: "node-1".into(),
            pod_static: None,
        },
    );
    k.metadata.namespace = Some(ns.into());
    if let Some(id) = port {
        let mut vif = Vif::new(VifKind::OpenVSwitch, id);
        vif.address = Some("fa:16:3e:00:00:01".into());
        vif.active = Some(true);
        k.status = Some(KuryrPortStatus {
            vifs: [("eth0".to_string(), VifEntry { default: true, vif })].into(),
            ..Default::default()
        });
    }
    k
}

fn port(id: &str, name: &str, host: &str) -> Port {
    serde_json::from_value(json!({
        "id": id, "name": name, "device_owner": DEVICE_OWNER, "binding:host_id": host,
        "network_id": "net", "project_id": "p", "security_groups": ["b", "a"], "status": "DOWN",
        "fixed_ips": [{"subnet_id": "s", "ip_address": "10.0.0.5"}],
    }))
    .unwrap()
}

#[test]
fn vif_rows() {
    assert!(vif_row(&pod("a", "h", "u", true), None).is_none());
    let r = vif_row(&pod("a", "p", "u", false), None).unwrap();
    assert_eq!(r.state, "no-kuryrport");
    let r = vif_row(&pod("a", "p", "u", false), Some(&kp("a", "p", "u", None))).unwrap();
    assert_eq!(r.state, "pending");
    let r = vif_row(
        &pod("a", "p", "u", false),
        Some(&kp("a", "p", "u", Some("port-1"))),
    )
    .unwrap();
    assert_eq!(r.state, "vifs");
    assert_eq!(r.port_id.as_deref(), Some("port-1"));
    assert_eq!(r.ifname.as_deref(), Some("eth0"));
    assert_eq!(r.active, Some(true));
    assert_eq!(r.mac.as_deref(), Some("fa:16:3e:00:00:01"));
    assert_eq!(r.cells()[0..3], ["a".to_string(), "p".into(), "node-1".into()]);
}

#[test]
fn ports_are_in_use_pooled_or_orphan() {
    let refs = referenced_ports(&[kp("a", "p", "u", Some("p1"))]);
    assert_eq!(
        classify_port(&port("p1", KURYR_PORT_NAME, "node-1"), &refs),
        PortClass::InUse { owner: "a/p".into() }
    );
    assert_eq!(
        classify_port(&port("p2", KURYR_PORT_NAME, "node-1"), &refs),
        PortClass::Pooled
    );
    assert_eq!(
        classify_port(&port("p3", KURYR_PORT_NAME, ""), &refs),
        PortClass::Orphan
    );
    assert_eq!(
        classify_port(&port("p4", "a/old-pod", "node-1"), &refs),
        PortClass::Orphan
    );
    let ports = [
        port("p1", KURYR_PORT_NAME, "node-1"),
        port("p2", KURYR_PORT_NAME, "node-1"),
        port("p5", KURYR_PORT_NAME, "node-1"),
        port("p6", KURYR_PORT_NAME, "node-2"),
    ];
    let pools = pools(&ports, &refs);
    assert_eq!(pools.len(), 2);
    assert_eq!((pools[0].host.as_str(), pools[0].ports), ("node-1", 2));
    assert_eq!(pools[0].security_groups, ["a", "b"]);
    let row = PortRow::new(&ports[0], classify_port(&ports[0], &refs));
    let v = serde_json::to_value(&row).unwrap();
    assert_eq!(v["class"], "inuse");
    assert_eq!(v["owner"], "a/p");
    assert_eq!(row.cells()[1], "in-use");
}

#[test]
fn status_checks() {
    let expected = vec!["a".to_string(), "b".to_string()];
    let all: BTreeSet<String> = expected.iter().cloned().collect();
    assert_eq!(check_crds(&expected, &all).result, Outcome::Success);
    let some: BTreeSet<String> = ["a".to_string()].into();
    let c = check_crds(&expected, &some);
    assert_eq!(c.result, Outcome::Failure);
    assert!(c.details.contains('b'));

    let mut legacy = pod("a", "old", "u1", false);
    legacy.metadata.annotations = Some([(ANNOTATION_VIF.to_string(), "{}".to_string())].into());
    let fine = pod("a", "new", "u2", false);
    assert_eq!(
        check_legacy_annotations(std::slice::from_ref(&fine)).result,
        Outcome::Success
    );
    let c = check_legacy_annotations(&[legacy, fine.clone()]);
    assert_eq!(c.result, Outcome::Failure);
    assert!(c.details.contains("a/old"));

    assert_eq!(
        check_stale_kuryrports(std::slice::from_ref(&fine), &[kp("a", "new", "u2", None)]).result,
        Outcome::Success
    );
    let c = check_stale_kuryrports(
        &[fine],
        &[kp("a", "new", "OTHER", None), kp("a", "gone", "u9", None)],
    );
    assert_eq!(c.result, Outcome::Warning);
    assert_eq!(Outcome::Failure.max(Outcome::Warning).code(), 2);
}

#[test]
fn upstream_finalizers_on_unhandled_kinds_are_a_warning() {
    let enabled: Vec<String> = ["vif", "kuryrport", "service", "endpoints", "kuryrloadbalancer"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let none = check_unhandled_finalizers(
        &[("Service", "default/web".into(), vec!["foreign/thing".into()])],
        Some(&enabled),
    );
    assert_eq!(none.result, Outcome::Success);
    let objects = [
        (
            "Service",
            "default/web".into(),
            vec![kuryr_types::constants::SERVICE_FINALIZER.into()],
        ),
        (
            "KuryrLoadBalancer",
            "default/web".into(),
            vec![kuryr_types::constants::KURYRLB_FINALIZER.into()],
        ),
        (
            "NetworkPolicy",
            "prod/deny".into(),
            vec![kuryr_types::constants::NETWORKPOLICY_FINALIZER.into()],
        ),
        ("Service", "default/plain".into(), vec![]),
    ];
    let c = check_unhandled_finalizers(&objects, Some(&enabled));
    assert_eq!(c.result, Outcome::Warning);
    // The Service handlers are enabled: only the policy counts.
    assert!(c.details.starts_with("1 NetworkPolicy(s) carry"), "{}", c.details);
    assert!(
        c.details.contains("(kuryrnetworkpolicy)") && c.details.contains("NetworkPolicy prod/deny"),
        "{}",
        c.details
    );
    let mut all = enabled.clone();
    all.extend(["policy", "kuryrnetworkpolicy", "pod_label"].map(String::from));
    assert_eq!(
        check_unhandled_finalizers(&objects, Some(&all)).result,
        Outcome::Success
    );
    assert_eq!(
        check_unhandled_finalizers(&objects, None).result,
        Outcome::Success
    );
}
