//! Nested mode end to end (issue 16): `sandbox/cluster up --vm-nodes 2 --vm-macvlan 1` — a
//! mixed cluster of all three pod VIF drivers: the two bare-metal-style nodes (`neutron-vif`)
//! and two Kubernetes nodes that are real VMs (QEMU) whose NICs are parent ports of Neutron
//! trunks, each VM running the emulated kubelet and kuryr-daemon inside; vm-1 is labelled
//! `pod_vif=nested-vlan`, vm-2 `pod_vif=nested-macvlan`; the multi pool driver routes each node
//! to its driver. Pods on vm-1 get VLAN subports of its trunk from the nested subport pools
//! (`VIFVlanNested`, the VLAN link created by the daemon inside the VM), pods on vm-2 a port
//! each on the VM's own subnet whose address pair is allowed on the VM's port
//! (`VIFMacvlanNested`, a macvlan of the VM's interface), pods on node-1 bound ports
//! (`VIFOpenVSwitch`), and every pod reaches every other by TCP — on one VM, across the two
//! VMs and drivers, between a VM and a bare-metal-style node, in one namespace and across two —
//! probed from inside the pods' network namespaces (in the VMs through `sandbox/vm exec`); a
//! Service over pods on all three kinds of node answers on its Octavia VIP from a VM's pod and
//! from node-1's, by VM backends among others; a NetworkPolicy admitting ingress from one
//! namespace only is enforced on a VLAN subport pod of a VM (the policy's security groups on the
//! subport, OVN's ACLs on its logical port), then lifted; last, `kuryrctl pools create|show|
//! delete|list` manage vm-1's subport pool through the controller's pool manager (vm-1 named by
//! its IP, as upstream's tools name a trunk).

mod common;

use std::{collections::BTreeMap, time::Duration};

use common::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, ResourceExt, api::ListParams};
use kuryr_e2e::{
    cluster::{Cluster, repo_root, run},
    netpol,
    neutron::sdk_query,
    pods, services,
};
use kuryr_types::{KuryrPort, vif::VifKind};
use serde_json::json;

const NAMESPACES: [&str; 2] = ["nested-a", "nested-b"];

/// `sandbox/vm exec VM SCRIPT`: its output.
fn vm_exec(vm: &str, script: &str) -> kuryr_e2e::error::Result<String> {
    run(
        &format!("sandbox/vm exec {vm}"),
        std::process::Command::new(repo_root().join("sandbox/vm"))
            .args(["exec", vm])
            .arg(script),
    )
}

/// From the pod with address `src` (inside `vm`), a TCP probe of each target `ip:port`: one
/// line per target, `tcp:ip:port connected <answer>` when it answered.
fn probe_from(cluster: &Cluster, vm: &str, src: &str, targets: &[String]) -> String {
    let ks = cluster.bin_dir.join("kube-sandbox");
    let script = format!(
        "ns=''; for n in $(ip netns list | cut -d' ' -f1); do ip -n \"$n\" -4 -o addr show 2>/dev/null | grep -q \" {src}/\" && ns=$n; done; \
         [ -n \"$ns\" ] || {{ echo 'no network namespace with {src} in {vm}'; ip netns list; exit 3; }}; \
         ip netns exec \"$ns\" {} probe --timeout 3s {}",
        ks.display(),
        targets.join(" ")
    );
    match vm_exec(vm, &script) {
        Ok(out) | Err(kuryr_e2e::error::Error::Command { output: out, .. }) => out,
        Err(e) => format!("{e}"),
    }
}

/// The pod's IP.
async fn pod_ip(cluster: &Cluster, client: &kube::Client, ns: &str, name: &str) -> String {
    let pod = check(
        cluster,
        "pod",
        Api::<Pod>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .map_err(|source| kuryr_e2e::error::Error::Kube {
                what: format!("get pod {ns}/{name}"),
                source,
            }),
    );
    pod.status
        .and_then(|s| s.pod_ip)
        .unwrap_or_else(|| panic!("{ns}/{name}: no pod IP"))
}

/// From a pod of a bare-metal-style node (its network namespace on this machine).
async fn probe_on_host(cluster: &Cluster, client: &kube::Client, ip: &str, targets: &[String]) -> String {
    let views = check(
        cluster,
        "pods",
        pods::collect(cluster, client, &NAMESPACES.map(String::from)).await,
    );
    let Some(v) = views.iter().find(|v| v.pod_ip == ip) else {
        return format!("no pod with {ip}");
    };
    let mut cmd = std::process::Command::new("ip");
    cmd.args(["netns", "exec", &v.netns])
        .arg(cluster.bin_dir.join("kube-sandbox"))
        .args(["probe", "--timeout", "3s"])
        .args(targets);
    match run("probe from a node-1 pod", &mut cmd) {
        Ok(out) | Err(kuryr_e2e::error::Error::Command { output: out, .. }) => out,
        Err(e) => format!("{e}"),
    }
}

/// Whether the pod with address `from_ip` on `node` (a VM or node-1) reaches `to_ip`, answered
/// by the pod named `to_name`.
async fn reaches(
    cluster: &Cluster,
    client: &kube::Client,
    node: &str,
    from_ip: &str,
    to_ip: &str,
    to_name: &str,
) -> bool {
    let targets = [format!("tcp:{to_ip}:{}", pods::POD_PORT)];
    let out = if node.starts_with("vm-") {
        probe_from(cluster, node, from_ip, &targets)
    } else {
        probe_on_host(cluster, client, from_ip, &targets).await
    };
    out.lines()
        .any(|l| l.contains(&format!("{to_ip}:")) && l.contains("connected") && l.contains(to_name))
}

/// One claim of the policy section: (what, source node, source IP, target IP, target name,
/// whether it must connect).
type Claim<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, bool);

/// Waits until every claim holds (each probe a real connection); panics with the ones that do
/// not after `within`.
async fn until_claims(
    cluster: &Cluster,
    client: &kube::Client,
    claims: &[Claim<'_>],
    within: Duration,
) -> Duration {
    let t0 = std::time::Instant::now();
    loop {
        let mut wrong = Vec::new();
        for (what, node, from, to, name, want) in claims {
            if reaches(cluster, client, node, from, to, name).await != *want {
                wrong.push(format!(
                    "{what} (want {})",
                    if *want { "connected" } else { "refused" }
                ));
            }
        }
        if wrong.is_empty() {
            return t0.elapsed();
        }
        assert_or_logs(
            cluster,
            t0.elapsed() < within,
            format!("after {} s: {wrong:#?}", t0.elapsed().as_secs()),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

const SUBPORTS: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
out = []
for t in conn.network.trunks():
    for s in t.sub_ports or []:
        out.append({"trunk": t.name or "", "port": s["port_id"], "vlan": s["segmentation_id"]})
print(json.dumps(out))
"#;

/// The allowed address pairs of the VMs' ports.
const VM_PAIRS: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
out = []
for p in conn.network.ports():
    if (p.name or "").startswith("kuryr-sandbox-vm-"):
        for a in p.allowed_address_pairs or []:
            out.append({"vm": p.name[len("kuryr-sandbox-"):], "ip": a["ip_address"], "mac": a.get("mac_address") or ""})
print(json.dumps(out))
"#;

#[derive(serde::Deserialize, Debug)]
struct Pair {
    vm: String,
    ip: String,
    mac: String,
}

#[derive(serde::Deserialize, Debug)]
struct Sub {
    trunk: String,
    port: String,
    vlan: u16,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_on_vm_nodes_get_vlan_subports_and_talk() {
    let (_dir, cluster) = start(|o| {
        o.vm_nodes = 2;
        o.vm_macvlan = 1;
        o.services = true;
        o.policies = true;
    });
    let client = check(&cluster, "client", cluster.client().await);
    let vms: Vec<String> = cluster
        .env
        .get("VM_NODE_LIST")
        .map(|l| l.split_whitespace().map(String::from).collect())
        .unwrap_or_default();
    assert_eq!(vms.len(), 2, "VM nodes: {vms:?} ({:?})", cluster.env);

    // Two pods per VM, one in each namespace.
    let mut keys = Vec::new();
    for ns in NAMESPACES {
        check(&cluster, "namespace", pods::ensure_namespace(&client, ns).await);
        for node in vms.iter().map(String::as_str).chain(["node-1"]) {
            let name = format!("p-{node}");
            check(
                &cluster,
                "create pod",
                pods::create_pod(&client, ns, &name, Some(node)).await,
            );
            keys.push((ns.to_string(), name));
        }
    }
    let t0 = std::time::Instant::now();
    check(
        &cluster,
        "pods Ready on the VM nodes",
        pods::wait_ready(&client, &keys, Duration::from_secs(300)).await,
    );
    println!(
        "6 pods (4 on 2 VM nodes, 2 on node-1) Ready after {} ms",
        t0.elapsed().as_millis()
    );

    // Each vm-1 pod's port is a subport of vm-1's trunk, with the VLAN ID its VIF says; each
    // vm-2 pod's address and MAC are a pair allowed on vm-2's port, its port no subport.
    let subs: Vec<Sub> = check(&cluster, "trunks", sdk_query("trunk subports", SUBPORTS, &[]));
    let pairs: Vec<Pair> = check(&cluster, "VM ports", sdk_query("VM port pairs", VM_PAIRS, &[]));
    let by_port: BTreeMap<&str, &Sub> = subs.iter().map(|s| (s.port.as_str(), s)).collect();
    let mut pod_ips: Vec<(String, String, String)> = Vec::new(); // (vm, ip, name)
    let mut vlan_ports: Vec<String> = Vec::new(); // vm-1 pods' subports
    for (ns, name) in &keys {
        let kp = check(
            &cluster,
            "kuryrport",
            Api::<KuryrPort>::namespaced(client.clone(), ns)
                .get(name)
                .await
                .map_err(|source| kuryr_e2e::error::Error::Kube {
                    what: format!("get kuryrport {ns}/{name}"),
                    source,
                }),
        );
        let (_, vif) = kp
            .status
            .as_ref()
            .and_then(|s| s.default_vif())
            .unwrap_or_else(|| panic!("{ns}/{name}: no VIF"));
        let node = kp.spec.pod_node_name.clone();
        if node == "node-1" {
            assert_eq!(vif.kind, VifKind::OpenVSwitch, "{ns}/{name}: {vif:?}");
            let ip = pod_ip(&cluster, &client, ns, name).await;
            pod_ips.push((node, ip, name.clone()));
            continue;
        }
        let port = vif.id.clone().unwrap_or_default();
        if node == "vm-2" {
            assert_eq!(vif.kind, VifKind::MacvlanNested, "{ns}/{name}: {vif:?}");
            assert!(
                !by_port.contains_key(port.as_str()),
                "{ns}/{name}: a macvlan port is no subport"
            );
            let ip = pod_ip(&cluster, &client, ns, name).await;
            let mac = vif.address.clone().unwrap_or_default();
            assert!(
                pairs.iter().any(|p| p.vm == "vm-2"
                    && p.ip == format!("{ip}/32")
                    && p.mac.eq_ignore_ascii_case(&mac)),
                "{ns}/{name}: ({ip}, {mac}) is not allowed on vm-2's port: {pairs:?}"
            );
            pod_ips.push((node, ip, name.clone()));
            continue;
        }
        assert_eq!(vif.kind, VifKind::VlanNested, "{ns}/{name}: {vif:?}");
        let sub = by_port
            .get(port.as_str())
            .unwrap_or_else(|| panic!("{ns}/{name}: port {port} is no trunk's subport ({subs:?})"));
        let vm = &kp.spec.pod_node_name;
        assert_eq!(
            sub.trunk,
            format!("kuryr-sandbox-{vm}"),
            "{ns}/{name}: on its own VM's trunk"
        );
        assert_eq!(vif.vlan_id, Some(i64::from(sub.vlan)), "{ns}/{name}");
        vlan_ports.push(port.clone());
        let ip = pod_ip(&cluster, &client, ns, name).await;
        pod_ips.push((vm.clone(), ip, name.clone()));
    }
    let listed = Api::<KuryrPort>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items.iter().map(|k| k.name_any()).collect::<Vec<_>>())
        .unwrap_or_default();
    println!("KuryrPorts: {listed:?}; subports: {subs:?}; VM port pairs: {pairs:?}");

    // Every pod reaches every other one: same VM, across VMs, across namespaces.
    let mut failures = Vec::new();
    for (vm, ip, name) in &pod_ips {
        let targets: Vec<String> = pod_ips
            .iter()
            .filter(|(_, other, _)| other != ip)
            .map(|(_, other, _)| format!("tcp:{other}:{}", pods::POD_PORT))
            .collect();
        let out = if vm.starts_with("vm-") {
            probe_from(&cluster, vm, ip, &targets)
        } else {
            probe_on_host(&cluster, &client, ip, &targets).await
        };
        for (_, other, other_name) in pod_ips.iter().filter(|(_, o, _)| o != ip) {
            let ok = out.lines().any(|l| {
                l.contains(&format!("{other}:")) && l.contains("connected") && l.contains(other_name.as_str())
            });
            if !ok {
                failures.push(format!("{name} ({ip} on {vm}) -> {other_name} ({other})"));
            }
        }
        println!("from {name} ({ip} on {vm}):\n{out}");
    }
    assert_or_logs(
        &cluster,
        failures.is_empty(),
        format!("pods on VM nodes do not reach each other: {failures:#?}"),
    );

    // A Service over nested-a's three pods (a subport on vm-1, a macvlan on vm-2, one on
    // node-1): an Octavia load balancer; its VIP answered from a VM's pod and from node-1's
    // pod, by VM backends among others.
    let vip = check(
        &cluster,
        "service",
        services::create_service(
            &client,
            NAMESPACES[0],
            "web",
            &[("http", 80, "TCP", pods::POD_PORT)],
            Some(("app", "kuryr-e2e")),
            false,
        )
        .await,
    );
    check(
        &cluster,
        "load balancer with 3 members",
        services::wait_members(&client, NAMESPACES[0], "web", 3, Duration::from_secs(240)).await,
    );
    let targets: Vec<String> = (0..12).map(|_| format!("tcp:{vip}:80")).collect();
    let (vm, ip, _) = pod_ips
        .iter()
        .find(|(n, _, _)| n.starts_with("vm-"))
        .cloned()
        .unwrap_or_default();
    let (_, bare_ip, _) = pod_ips
        .iter()
        .find(|(n, _, _)| n == "node-1")
        .cloned()
        .unwrap_or_default();
    for (from, out) in [
        (format!("a pod on {vm}"), probe_from(&cluster, &vm, &ip, &targets)),
        (
            "a pod on node-1".to_string(),
            probe_on_host(&cluster, &client, &bare_ip, &targets).await,
        ),
    ] {
        println!("the Service's VIP {vip} from {from}:\n{out}");
        let answered = out.lines().filter(|l| l.contains("connected")).count();
        let by_vms = out.lines().filter(|l| l.contains("connected p-vm-")).count();
        assert_or_logs(
            &cluster,
            answered == targets.len() && by_vms > 0,
            format!(
                "the VIP from {from}: {answered} of {} answered, {by_vms} by VM backends:\n{out}",
                targets.len()
            ),
        );
    }

    // NetworkPolicy: nested-b admits ingress only from namespace nested-a. Its target here is
    // nested-b's VLAN subport pod on vm-1 (and node-1's pod, as the control); macvlan pods are
    // sources only: their traffic passes their VM port's groups, not per-pod ones. And as a
    // source a macvlan pod is admitted by every policy whatever its namespace: its address is
    // on the worker nodes' subnet, which isolated pods always admit (kubelet probes come from
    // there, as upstream) — so nested-b's macvlan pod still reaches nested-b's VLAN pod
    // (docs/nested-plan.md).
    let at = |ns: &str, node: &str| -> (String, String, String) {
        let i = keys
            .iter()
            .position(|(n, name)| n == ns && name == &format!("p-{node}"))
            .unwrap_or_else(|| panic!("no pod p-{node} in {ns}"));
        pod_ips[i].clone()
    };
    let (a_vm1, a_vm2, a_host) = (
        at(NAMESPACES[0], "vm-1"),
        at(NAMESPACES[0], "vm-2"),
        at(NAMESPACES[0], "node-1"),
    );
    let (b_vm1, b_vm2, b_host) = (
        at(NAMESPACES[1], "vm-1"),
        at(NAMESPACES[1], "vm-2"),
        at(NAMESPACES[1], "node-1"),
    );
    check(
        &cluster,
        "label nested-a",
        netpol::label_namespace(&client, NAMESPACES[0], "side", "a").await,
    );
    check(
        &cluster,
        "policy",
        netpol::apply_policy(
            &client,
            NAMESPACES[1],
            "only-from-a",
            json!({"podSelector": {}, "policyTypes": ["Ingress"],
                   "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"side": "a"}}}]}]}),
        )
        .await,
    );
    let enforced: [Claim<'_>; 6] = [
        (
            "nested-a vm-1 (vlan) -> nested-b vm-1 (vlan)",
            &a_vm1.0,
            &a_vm1.1,
            &b_vm1.1,
            &b_vm1.2,
            true,
        ),
        (
            "nested-a vm-2 (macvlan) -> nested-b vm-1 (vlan)",
            &a_vm2.0,
            &a_vm2.1,
            &b_vm1.1,
            &b_vm1.2,
            true,
        ),
        (
            "nested-a node-1 -> nested-b vm-1 (vlan)",
            &a_host.0,
            &a_host.1,
            &b_vm1.1,
            &b_vm1.2,
            true,
        ),
        (
            "nested-b node-1 -> nested-b vm-1 (vlan)",
            &b_host.0,
            &b_host.1,
            &b_vm1.1,
            &b_vm1.2,
            false,
        ),
        (
            "nested-b vm-2 (macvlan, on the worker nodes' subnet) -> nested-b vm-1 (vlan)",
            &b_vm2.0,
            &b_vm2.1,
            &b_vm1.1,
            &b_vm1.2,
            true,
        ),
        (
            "nested-b vm-1 (vlan) -> nested-b node-1",
            &b_vm1.0,
            &b_vm1.1,
            &b_host.1,
            &b_host.2,
            false,
        ),
    ];
    let took = until_claims(&cluster, &client, &enforced, Duration::from_secs(120)).await;
    println!(
        "NetworkPolicy enforced on the VM pods after {} ms",
        took.as_millis()
    );
    check(
        &cluster,
        "delete policy",
        netpol::delete_policy(&client, NAMESPACES[1], "only-from-a").await,
    );
    let lifted: [Claim<'_>; 2] = [
        (
            "nested-b node-1 -> nested-b vm-1 (vlan), policy gone",
            &b_host.0,
            &b_host.1,
            &b_vm1.1,
            &b_vm1.2,
            true,
        ),
        (
            "nested-b vm-1 (vlan) -> nested-b node-1, policy gone",
            &b_vm1.0,
            &b_vm1.1,
            &b_host.1,
            &b_host.2,
            true,
        ),
    ];
    let took = until_claims(&cluster, &client, &lifted, Duration::from_secs(120)).await;
    println!(
        "NetworkPolicy lifted on the VM pods after {} ms",
        took.as_millis()
    );

    pools_management(&cluster, &client, &vlan_ports).await;
}

/// vm-1's trunk's subports.
fn vm1_subports(cluster: &Cluster) -> Vec<String> {
    let subs: Vec<Sub> = check(cluster, "trunks", sdk_query("trunk subports", SUBPORTS, &[]));
    subs.into_iter()
        .filter(|s| s.trunk == "kuryr-sandbox-vm-1")
        .map(|s| s.port)
        .collect()
}

/// Issue 16's pools management: `kuryrctl pools create|show|delete|list` against the
/// controller's pool manager, vm-1 named by its IP as upstream's tools name a trunk: 3 subports
/// created on its trunk, shown in its pool beside the pods' (`in_use`), the pool freed (its
/// subports leave the trunk and Neutron, the pods' stay); a trunk no node has is refused, named.
async fn pools_management(cluster: &Cluster, client: &kube::Client, in_use: &[String]) {
    let node = check(
        cluster,
        "node vm-1",
        Api::<Node>::all(client.clone())
            .get("vm-1")
            .await
            .map_err(|source| kuryr_e2e::error::Error::Kube {
                what: "get node vm-1".into(),
                source,
            }),
    );
    let ip = node
        .status
        .and_then(|s| s.addresses)
        .and_then(|a| a.into_iter().find(|a| a.type_ == "InternalIP"))
        .map(|a| a.address)
        .unwrap_or_else(|| panic!("vm-1 has no InternalIP"));
    let before = vm1_subports(cluster);

    let (code, doc, stderr) = kuryrctl_json(cluster, &["pools", "create", "--trunk", &ip, "-n", "3"]);
    println!("kuryrctl pools create --trunk {ip} -n 3: {doc}");
    assert_or_logs(cluster, code == 0, format!("pools create exit {code}: {stderr}"));
    let row = &doc["items"][0];
    assert_eq!(
        (row["host"].as_str(), row["created"].as_u64()),
        (Some("vm-1"), Some(3)),
        "{doc}"
    );
    let after = vm1_subports(cluster);
    let added: Vec<&String> = after.iter().filter(|p| !before.contains(p)).collect();
    assert!(
        added.len() >= 3,
        "3 subports more on vm-1's trunk: {before:?} -> {after:?}"
    );

    let (code, doc, stderr) = kuryrctl_json(cluster, &["pools", "show", "--trunk", &ip]);
    assert_or_logs(cluster, code == 0, format!("pools show exit {code}: {stderr}"));
    let rows = doc["items"].as_array().cloned().unwrap_or_default();
    let of = |state: &str| -> Vec<String> {
        rows.iter()
            .filter(|r| r["state"] == state && r["host"] == "vm-1")
            .filter_map(|r| r["port_id"].as_str().map(String::from))
            .collect()
    };
    let (available, shown_in_use) = (of("available"), of("in_use"));
    println!(
        "kuryrctl pools show --trunk {ip}: {} available, in use {shown_in_use:?}",
        available.len()
    );
    for p in in_use {
        assert!(shown_in_use.contains(p), "pod subport {p} shown in use: {doc}");
    }
    for p in &added {
        assert!(
            available.contains(p),
            "created subport {p} shown available: {doc}"
        );
    }
    for p in &available {
        assert!(
            after.contains(p),
            "available {p} is a subport of vm-1's trunk: {after:?}"
        );
    }

    let (code, doc, stderr) = kuryrctl_json(cluster, &["pools", "delete", "--trunk", &ip]);
    println!("kuryrctl pools delete --trunk {ip}: {doc}");
    assert_or_logs(cluster, code == 0, format!("pools delete exit {code}: {stderr}"));
    let deleted = doc["items"][0]["deleted"].as_u64().unwrap_or_default();
    assert!(
        deleted as usize >= available.len(),
        "{doc}: {} were available",
        available.len()
    );
    let left = vm1_subports(cluster);
    for p in in_use {
        assert!(left.contains(p), "pod subport {p} stays on the trunk: {left:?}");
    }
    let still: Vec<String> = check(cluster, "ports", kuryr_e2e::neutron::ports_by_id(&available))
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert!(still.is_empty(), "freed subports still in Neutron: {still:?}");
    assert!(
        available.iter().all(|p| !left.contains(p)),
        "freed subports still on the trunk: {left:?}"
    );

    let (code, doc, _) = kuryrctl_json(cluster, &["pools"]);
    assert_eq!((code, doc["source"].as_str()), (0, Some("pool-manager")), "{doc}");

    let (code, _, stderr) = kuryrctl_run(cluster, &["pools", "create", "--trunk", "203.0.113.77"]);
    assert!(
        code == 255 && stderr.contains("no node has the address or name 203.0.113.77"),
        "an unknown trunk is refused, named: exit {code}: {stderr}"
    );
    println!(
        "pools management: 3 subports created on vm-1's trunk, shown, {deleted} freed; unknown trunk refused: {}",
        stderr.trim()
    );
}
