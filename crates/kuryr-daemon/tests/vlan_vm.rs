//! Nested mode's binding for real (issue 16): a VM node (`sandbox/vm`: QEMU booting Debian's
//! kernel, its NIC on node-1's Open vSwitch bound to the parent port of a Neutron trunk on the
//! worker-nodes network) and a pod port added to that trunk as a VLAN subport, its VLAN ID from
//! the allocator. Inside the VM, this same test binary runs the daemon's real [`VlanBinding`]:
//! the VLAN link of the VM's `ens3` is created in a fresh pod namespace with the port's MAC,
//! addresses and routes (`VIFVlanNested` → `WireSpec`, as the CNI ADD computes it), CHECK finds
//! nothing wrong, the pod reaches the pod network's router through OVN (which strips and adds
//! the tag), and DEL leaves nothing. Fails — never skips — when the sandbox is down.

mod common;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use common::{vm::sh, *};
use kuryr_core::nested::{VlanIds, node_trunk};
use kuryr_daemon::binding::{
    spec::{SpecContext, WireSpec, wire_spec},
    vlan::VlanBinding,
};
use kuryr_openstack::{Neutron, PortCreate, SubPort};
use kuryr_types::VifKind;

/// Set when this binary runs inside the VM: the spec to wire, as JSON.
const INNER_SPEC: &str = "KURYR_TEST_VLAN_SPEC";
/// And the router address the pod must reach.
const INNER_GATEWAY: &str = "KURYR_TEST_VLAN_GATEWAY";
const POD_NS: &str = "kuryr-test-vlan-pod";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vlan_binding_wires_a_trunk_subport_pod_in_a_vm_node() {
    if let Ok(spec) = std::env::var(INNER_SPEC) {
        let gw = std::env::var(INNER_GATEWAY).expect("gateway");
        inside_the_vm(&spec, &gw).await;
        return;
    }
    vm::with_one_vm(|topo, os| async move { on_the_host(&topo, &os).await }).await;
}

async fn on_the_host(topo: &Topo, os: &Os) {
    let vm = vm::vm_topology(topo);
    let v = |k: &str| {
        vm.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("vm topology lacks {k}"))
    };
    // The VM's trunk, found as the controller finds a node's: by its IP on the workers' subnet.
    let parent = os
        .client
        .get_port(&v("VM_1_PARENT_PORT_ID"))
        .await
        .expect("parent port");
    let trunk = node_trunk(&[parent], &v("VM_1_IP"), &[v("WORKER_NODES_SUBNET_ID")]).expect("the VM's trunk");
    assert_eq!(trunk.trunk_id, v("VM_1_TRUNK_ID"));

    // A pod port on the pod network, added to the trunk with an allocated VLAN ID.
    let port = os
        .client
        .create_ports_bulk(&[PortCreate {
            network_id: os.network.id.clone(),
            subnet_ids: os.subnets.iter().map(|s| s.id.clone()).collect(),
            security_groups: Some(vec![os.topo_sg.clone()]),
            name: Some(os.tag.clone()),
            tags: vec![os.tag.clone()],
            ..Default::default()
        }])
        .await
        .expect("pod port")
        .remove(0);
    let mut ids = VlanIds::default();
    ids.observe(&trunk);
    let vlan = ids.reserve(&trunk.trunk_id, 1).expect("a VLAN ID")[0];
    os.client
        .add_subports(&trunk.trunk_id, &[SubPort::vlan(port.id.clone(), vlan)])
        .await
        .expect("add the subport");
    ids.confirm(&trunk.trunk_id, &[vlan]);

    // The VIF the controller writes for it, and the spec the daemon's ADD computes.
    let vif = kuryr_types::from_neutron::vif_vlan_nested(&port, &os.network, &os.subnets, vlan)
        .expect("VIFVlanNested");
    assert_eq!(vif.kind, VifKind::VlanNested);
    let spec = wire_spec(
        &vif,
        SpecContext {
            ifname: "eth0",
            default: true,
            pod_uid: "vlan-test",
            default_bridge: None,
            network_device_mtu: 0,
        },
    )
    .expect("wire spec");
    assert_eq!(spec.vlan_id, Some(vlan));
    assert!(spec.bridge.is_empty(), "no bridge on a VM");

    // This binary, inside the VM, with the spec.
    let me = std::env::current_exe().expect("test binary");
    let cmd = format!(
        "{INNER_SPEC}='{}' {INNER_GATEWAY}={} {} --exact vlan_binding_wires_a_trunk_subport_pod_in_a_vm_node --nocapture",
        serde_json::to_string(&spec).expect("json"),
        topo.get("POD_SUBNET_GATEWAY"),
        me.display()
    );
    let t = Instant::now();
    let out = tokio::task::spawn_blocking(move || vm::sandbox_vm(&["exec", "vm-1", &cmd]))
        .await
        .expect("join");
    match out {
        Ok(text) => println!("inside vm-1 ({} ms):\n{text}", t.elapsed().as_millis()),
        Err(e) => panic!("inside vm-1: {e}"),
    }
    // OVN claimed the subport on the VM's hypervisor node: Neutron reports it ACTIVE (what the
    // controller's activation loop waits for).
    let t = Instant::now();
    os.wait_active(&port.id, Duration::from_secs(60)).await;
    println!(
        "subport ACTIVE {} ms after the pod's traffic",
        t.elapsed().as_millis()
    );
    os.client
        .remove_subports(&trunk.trunk_id, std::slice::from_ref(&port.id))
        .await
        .expect("remove the subport");
    ids.release(&trunk.trunk_id, &[vlan]);
}

/// Runs inside the VM: wires, checks, pings, unwires.
async fn inside_the_vm(spec_json: &str, gateway: &str) {
    let spec: WireSpec = serde_json::from_str(spec_json).expect("spec");
    let vlan = spec.vlan_id.expect("vlan");
    let _ = sh(&format!("ip netns del {POD_NS}"));
    let (ok, out) = sh(&format!("ip netns add {POD_NS}"));
    assert!(ok, "ip netns add: {out}");
    let netns = PathBuf::from(format!("/run/netns/{POD_NS}"));
    let binding = VlanBinding::new("ens3");
    let t = Instant::now();
    binding.connect(&spec, &netns).await.expect("connect");
    println!("VLAN {vlan} wired in {} ms", t.elapsed().as_millis());
    // Again, as a retried ADD would: the leftover is replaced.
    binding.connect(&spec, &netns).await.expect("connect again");
    let report = binding.check(&spec, &netns).await.expect("check");
    assert!(report.is_empty(), "CHECK: {report:?}");
    let (_, link) = sh(&format!("ip -n {POD_NS} -d link show eth0"));
    assert!(
        link.contains(&format!("vlan protocol 802.1Q id {vlan}")),
        "{link}"
    );
    assert!(link.contains(&spec.mac_string()), "{link}");
    let start = Instant::now();
    let mut answered = false;
    while start.elapsed() < Duration::from_secs(40) {
        if sh(&format!("ip netns exec {POD_NS} ping -c 1 -W 1 {gateway}")).0 {
            answered = true;
            break;
        }
    }
    assert!(answered, "the pod never reached {gateway} over VLAN {vlan}");
    let (ok, out) = sh(&format!("ip netns exec {POD_NS} ping -c 3 -W 2 {gateway}"));
    assert!(ok, "{out}");
    println!(
        "pod -> {gateway} over VLAN {vlan}: first answer after {} ms; {}",
        start.elapsed().as_millis(),
        out.lines().rev().find(|l| l.contains("packets")).unwrap_or("")
    );
    binding.disconnect(&spec, &netns).await.expect("disconnect");
    binding.disconnect(&spec, &netns).await.expect("disconnect again");
    let report = binding.check(&spec, &netns).await.expect("check");
    assert!(report.iter().any(|r| r.contains("missing")), "{report:?}");
    // A CNI interface name that a link of the VM itself has (its management NIC, ens4): the
    // kernel would take the creation for a change of that link, so the pod's link is created
    // under the port's device name and renamed inside the pod's namespace.
    let clash = WireSpec {
        ifname: "ens4".into(),
        ..spec.clone()
    };
    binding.connect(&clash, &netns).await.expect("connect as ens4");
    let report = binding.check(&clash, &netns).await.expect("check ens4");
    assert!(report.is_empty(), "CHECK: {report:?}");
    let (_, link) = sh(&format!("ip -n {POD_NS} -d link show ens4"));
    assert!(
        link.contains(&format!("vlan protocol 802.1Q id {vlan}")),
        "{link}"
    );
    let (_, own) = sh("ip -4 addr show ens4");
    assert!(own.contains("10.0.2.15"), "the VM's own ens4 was changed: {own}");
    binding.disconnect(&clash, &netns).await.expect("disconnect ens4");
    let _ = sh(&format!("ip netns del {POD_NS}"));
    // A deleted namespace: DEL still succeeds.
    binding
        .disconnect(&spec, &netns)
        .await
        .expect("disconnect without netns");
}
