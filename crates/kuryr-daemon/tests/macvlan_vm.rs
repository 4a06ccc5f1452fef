//! nested-macvlan for real (issue 16): a VM node (`sandbox/vm`: QEMU booting Debian's kernel,
//! its NIC on node-1's Open vSwitch bound to its Neutron port on the worker-nodes network) and
//! three pods of it served by the controller's own noop driver with the macvlan attachment
//! (`Direct` + `AddressPairs`) against the real Neutron: each pod's port is created unbound on
//! the VM's network and its `(IP, MAC)` added to the VM port's `allowed_address_pairs`, the
//! three pods at once. Inside the VM this same test binary runs the daemon's real
//! [`MacvlanBinding`]: each pod a macvlan of the VM's `ens3` with its port's MAC and address;
//! every pod reaches the network's router through OVN's port security, the pods reach each
//! other, and a fourth namespace with an address and MAC nobody allowed is dropped by it. The
//! release takes exactly the pods' pairs away. Fails — never skips — when the sandbox is down.

mod common;

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use common::{vm::sh, *};
use kuryr_controller::{
    drivers::PodTarget,
    pool::{
        PoolMode, PoolSettings, PortRequest,
        attach::{macvlan::AddressPairs, nested::NodeAddresses},
        direct::Direct,
        source::PortSource,
    },
};
use kuryr_core::{PoolConfig, TagPolicy, pairs::pairs_of, pool::PodKey};
use kuryr_daemon::binding::{
    spec::{SpecContext, WireSpec, wire_spec},
    vlan::MacvlanBinding,
};
use kuryr_openstack::Neutron;
use kuryr_types::VifKind;

/// Set when this binary runs inside the VM: the pods' specs and the intruder's, as JSON.
const INNER_SPECS: &str = "KURYR_TEST_MACVLAN_SPECS";
/// And the router address the pods must reach.
const INNER_GATEWAY: &str = "KURYR_TEST_MACVLAN_GATEWAY";
const TEST: &str = "macvlan_pods_of_a_vm_node_talk_through_allowed_address_pairs";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn macvlan_pods_of_a_vm_node_talk_through_allowed_address_pairs() {
    if let Ok(specs) = std::env::var(INNER_SPECS) {
        let gw = std::env::var(INNER_GATEWAY).expect("gateway");
        inside_the_vm(&specs, &gw).await;
        return;
    }
    vm::with_one_vm(|topo, os| async move { on_the_host(&topo, &os).await }).await;
}

fn settings(tag: &str, workers: &str) -> PoolSettings {
    PoolSettings {
        mode: PoolMode::Noop,
        pool: PoolConfig::default(),
        tags: TagPolicy::new(vec![], Some(tag.to_owned())).expect("tag"),
        project: None,
        ovs_bridge: None,
        janitor_interval: Duration::ZERO,
        janitor_min_age: Duration::from_secs(600),
        activation: Default::default(),
        nested: Some(vec![workers.to_owned()]),
        multi: None,
        vif_driver: "nested-macvlan".into(),
        pair_update_attempts: 3,
    }
}

async fn on_the_host(topo: &Topo, os: &Os) {
    let vm = vm::vm_topology(topo);
    let v = |k: &str| {
        vm.get(k)
            .cloned()
            .unwrap_or_else(|| panic!("vm topology lacks {k}"))
    };
    let (vm_port, workers) = (v("VM_1_PARENT_PORT_ID"), v("WORKER_NODES_SUBNET_ID"));
    let neutron: Arc<dyn Neutron> = Arc::new(os.client.clone());
    let parent = neutron.get_port(&vm_port).await.expect("the VM's port");
    let before = pairs_of(&parent).expect("pairs");
    let nodes: Arc<dyn NodeAddresses> = Arc::new(HashMap::from([("vm-1".to_string(), v("VM_1_IP"))]));
    let attach = AddressPairs::new(neutron.clone(), nodes, vec![workers.clone()], 3);
    let direct = Direct::with_attachment(settings(&os.tag, &workers), neutron.clone(), attach.clone());
    let target = PodTarget {
        project_id: parent.project().to_owned(),
        network_id: v("WORKER_NODES_NETWORK_ID"),
        subnet_ids: vec![workers.clone()],
        security_groups: vec![os.topo_sg.clone()],
    };

    // Three pods of vm-1 at once, as the controller's handlers ask for them.
    let pods: Vec<PodKey> = (0..3)
        .map(|i| PodKey::new("macvlan-test", format!("p{i}")))
        .collect();
    let t = Instant::now();
    let acquired = futures::future::join_all(pods.iter().map(|pod| {
        let direct = direct.clone();
        let target = &target;
        async move {
            let req = PortRequest {
                pod: pod.clone(),
                pod_uid: "uid",
                host: "vm-1",
                target,
            };
            direct.acquire(&req, Duration::from_secs(30)).await
        }
    }))
    .await;
    println!(
        "3 pods' ports created and allowed on the VM's port in {} ms",
        t.elapsed().as_millis()
    );
    let acquired: Vec<_> = acquired
        .into_iter()
        .map(|r| r.expect("acquire").expect("a port"))
        .collect();
    for (pod, a) in pods.iter().zip(&acquired) {
        direct.committed(pod);
        assert_eq!(a.vif.kind, VifKind::MacvlanNested);
        assert_eq!(a.vif.active, Some(true));
        let port = neutron.get_port(&a.port.id).await.expect("the pod's port");
        assert!(port.binding_host_id.is_empty(), "never bound");
        assert_eq!(port.device_id, vm_port, "names its VM's port");
        assert!(
            port.security_groups.is_empty(),
            "no port security on a macvlan pod's port"
        );
        assert_eq!(
            port.extra.get("port_security_enabled"),
            Some(&serde_json::json!(false))
        );
    }
    let now = pairs_of(&neutron.get_port(&vm_port).await.expect("VM port")).expect("pairs");
    for a in &acquired {
        let ip = format!("{}/32", a.port.fixed_ips[0].ip_address);
        assert!(
            now.iter()
                .any(|p| p.ip_address == ip && p.mac_address.eq_ignore_ascii_case(&a.port.mac_address)),
            "{ip} missing from {now:?}"
        );
    }
    assert_eq!(now.len(), before.len() + 3, "{now:?}");

    // The specs the daemon's ADD computes, and an intruder nobody allowed: pod 0's spec with
    // another MAC and an address of the subnet no port has.
    let cx = |i: usize| SpecContext {
        ifname: "eth0",
        default: true,
        pod_uid: if i == 0 { "macvlan-0" } else { "macvlan-n" },
        default_bridge: None,
        network_device_mtu: 0,
    };
    let mut specs: Vec<WireSpec> = acquired
        .iter()
        .enumerate()
        .map(|(i, a)| wire_spec(&a.vif, cx(i)).expect("wire spec"))
        .collect();
    let mut intruder = specs[0].clone();
    intruder.mac = [0xfa, 0x16, 0x3e, 0x0b, 0xad, 0x01];
    intruder.addresses = vec!["10.20.0.250/24".parse().expect("cidr")];
    intruder.host_dev = "mvintruder".into();
    specs.push(intruder);

    let me = std::env::current_exe().expect("test binary");
    let cmd = format!(
        "{INNER_SPECS}='{}' {INNER_GATEWAY}={} {} --exact {TEST} --nocapture",
        serde_json::to_string(&specs).expect("json"),
        v("WORKER_NODES_GATEWAY"),
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

    // Release: the pods' pairs leave the VM's port (nothing else does), then their ports.
    for (pod, a) in pods.iter().zip(&acquired) {
        direct
            .release(pod, std::slice::from_ref(&a.port.id))
            .await
            .expect("release");
    }
    let after = pairs_of(&neutron.get_port(&vm_port).await.expect("VM port")).expect("pairs");
    assert_eq!(after, before, "exactly the pods' pairs were removed");
    for a in &acquired {
        assert!(
            neutron.get_port(&a.port.id).await.is_err(),
            "port {} deleted",
            a.port.id
        );
    }
}

fn ns_of(i: usize) -> String {
    format!("kuryr-test-mv{i}")
}

/// Waits up to `secs` for one answer of `ns` → `dst`.
fn answers(ns: &str, dst: &str, secs: u64) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        if sh(&format!("ip netns exec {ns} ping -c 1 -W 1 {dst}")).0 {
            return Some(start.elapsed());
        }
    }
    None
}

/// Runs inside the VM: wires the pods and the intruder, probes, unwires.
async fn inside_the_vm(specs_json: &str, gateway: &str) {
    let specs: Vec<WireSpec> = serde_json::from_str(specs_json).expect("specs");
    let (pods, intruder) = specs.split_at(specs.len() - 1);
    let binding = MacvlanBinding::new("ens3");
    for (i, spec) in specs.iter().enumerate() {
        let ns = ns_of(i);
        let _ = sh(&format!("ip netns del {ns}"));
        let (ok, out) = sh(&format!("ip netns add {ns}"));
        assert!(ok, "ip netns add: {out}");
        let path = PathBuf::from(format!("/run/netns/{ns}"));
        let t = Instant::now();
        binding.connect(spec, &path).await.expect("connect");
        println!(
            "macvlan of {} wired in {} ms",
            spec.mac_string(),
            t.elapsed().as_millis()
        );
        let report = binding.check(spec, &path).await.expect("check");
        assert!(report.is_empty(), "CHECK: {report:?}");
        let (_, link) = sh(&format!("ip -n {ns} -d link show eth0"));
        assert!(link.contains("macvlan mode bridge"), "{link}");
        assert!(link.contains(&spec.mac_string()), "{link}");
    }
    // Again, as a retried ADD would: the leftover is replaced.
    let p0 = PathBuf::from(format!("/run/netns/{}", ns_of(0)));
    binding.connect(&pods[0], &p0).await.expect("connect again");

    for i in 0..pods.len() {
        let took = answers(&ns_of(i), gateway, 40)
            .unwrap_or_else(|| panic!("pod {i} never reached {gateway}: its pair is not allowed?"));
        println!("pod {i} -> {gateway}: first answer after {} ms", took.as_millis());
    }
    // Pod to pod on the VM (the macvlans' bridge).
    let ip1 = pods[1].addresses[0].addr();
    assert!(
        answers(&ns_of(0), &ip1.to_string(), 10).is_some(),
        "pod 0 -> pod 1 ({ip1})"
    );
    let (ok, out) = sh(&format!("ip netns exec {} ping -c 3 -W 2 {gateway}", ns_of(2)));
    assert!(ok, "{out}");
    // Port security drops what nobody allowed.
    let n = pods.len();
    assert!(
        answers(&ns_of(n), gateway, 4).is_none(),
        "the intruder {} reached {gateway}: the VM port lets anything out",
        intruder[0].mac_string()
    );
    println!("intruder dropped by the VM port's port security");

    for (i, spec) in specs.iter().enumerate() {
        let path = PathBuf::from(format!("/run/netns/{}", ns_of(i)));
        binding.disconnect(spec, &path).await.expect("disconnect");
        binding.disconnect(spec, &path).await.expect("disconnect again");
        let _ = sh(&format!("ip netns del {}", ns_of(i)));
    }
}
