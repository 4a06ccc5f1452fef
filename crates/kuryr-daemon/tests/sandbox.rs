//! End-to-end tests of kuryr-daemon against the REAL sandbox (Neutron/OVN, the nodes' Open
//! vSwitch, real namespaces and veths) with the emulated API server, the real `kuryr-cni`
//! plugin and hand-written KuryrPorts (playing the controller's part). They fail when the
//! sandbox is down.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

/// `ip -j addr show dev ifname` inside `ns`.
fn link_json(ns: &str, ifname: &str) -> Value {
    let out = netns_exec(ns, &["ip", "-j", "addr", "show", "dev", ifname]);
    let v: Value = serde_json::from_str(&out).unwrap();
    v[0].clone()
}

/// Runs ADD through the real plugin on a blocking thread; the handle yields `(ok, result)`.
fn spawn_add(
    d: &DaemonProc,
    container: &str,
    netns: &str,
    pod: &str,
    uid: &str,
) -> tokio::task::JoinHandle<(bool, Value)> {
    let (c, n, p, u, shim) = (
        container.to_owned(),
        netns.to_owned(),
        pod.to_owned(),
        uid.to_owned(),
        d.shim(),
    );
    tokio::task::spawn_blocking(move || shim.cni("ADD", &c, &n, &p, &u))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_wires_the_pod_and_del_removes_it() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = topology();
    let os = openstack(&topo).await;
    let os2 = os.clone();
    with_cleanup(&os, async move {
        let os = os2;
        let cluster = cluster(&topo).await;
        let state = tempfile::tempdir().unwrap();
        let mut d = DaemonProc::start(&cluster, &topo, 1, state.path(), "");
        d.wait_ready().await;
        assert_eq!(d.health("/alive").0, 200);
        assert_eq!(d.raw("GET", "/status", b"").0, 200);

        let port = os.ports(&d.node, 1).await.remove(0);
        let vif = os.vif(&port);
        let pod = unique("pod-");
        let uid = uuid::Uuid::new_v4().to_string();
        // First a KuryrPort of an earlier incarnation of the pod (another UID): ADD must wait
        // for the controller to replace it rather than wire the old pod's port.
        put_kuryrport(&cluster.client, &pod, &d.node, "uid-of-an-older-pod", &vif).await;
        let podns = PodNs::new();
        let container = unique("ctr-");

        // ADD through the real plugin; the test plays the controller: once Neutron reports the
        // port ACTIVE (it was plugged), mark the VIF active.
        let add = spawn_add(&d, &container, &podns.path, &pod, &uid);
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            !add.is_finished(),
            "ADD did not wait for the KuryrPort of this pod UID"
        );
        assert!(
            !run_ok(&["ip", "netns", "exec", &d.netns, "ip", "link"])
                .contains(&kuryr_daemon::binding::spec::host_dev_name(&port.id))
        );
        // Leftovers of an earlier, interrupted attempt on both sides: ADD replaces them.
        let tap = kuryr_daemon::binding::spec::host_dev_name(&port.id);
        // (veth pairs: this kernel may lack the dummy driver; deleting one end removes both.)
        let add_leftover = |ns: &str, name: &str| {
            netns_exec(
                ns,
                &[
                    "ip",
                    "link",
                    "add",
                    name,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "leftover-peer",
                ],
            )
        };
        add_leftover(&d.netns, &tap);
        add_leftover(&podns.name, "eth0");
        // A VIF whose text names a host link as its device: the daemon wires `tap<port>` and
        // never touches that link (it used to delete it on a name clash).
        netns_exec(
            &d.netns,
            &[
                "ip",
                "link",
                "add",
                "kdt-victim",
                "type",
                "veth",
                "peer",
                "name",
                "kdt-victim-p",
            ],
        );
        let mut vif = vif;
        vif.vif_name = Some("kdt-victim".into());
        put_kuryrport(&cluster.client, &pod, &d.node, &uid, &vif).await;
        let active = os.wait_active(&port.id, Duration::from_secs(30)).await;
        println!("port ACTIVE {} ms after ADD started", t0.elapsed().as_millis());
        assert_eq!(active.status, "ACTIVE");
        set_active(&cluster.client, &pod, &vif).await;
        let (ok, result) = add.await.unwrap();
        assert!(ok, "ADD failed: {result}\n{}", d.log_text());
        println!("ADD result: {result}");
        assert_eq!(result["interfaces"][0]["mac"], port.mac_address);
        assert!(
            result["ips"][0]["address"]
                .as_str()
                .unwrap()
                .starts_with(&ip_of(&port))
        );

        // The pod end: name, MAC, MTU, IP, default route, TX checksum offload off.
        let eth0 = link_json(&podns.name, "eth0");
        assert_eq!(eth0["address"], port.mac_address);
        assert_eq!(eth0["mtu"], json!(1442));
        assert!(eth0["flags"].as_array().unwrap().contains(&json!("UP")));
        let addrs: Vec<String> = eth0["addr_info"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| format!("{}/{}", a["local"].as_str().unwrap(), a["prefixlen"]))
            .collect();
        assert!(addrs.contains(&format!("{}/24", ip_of(&port))), "{addrs:?}");
        let routes = netns_exec(&podns.name, &["ip", "route", "show", "default"]);
        assert!(
            routes.contains(&format!("via {}", topo.get("POD_SUBNET_GATEWAY"))),
            "{routes}"
        );
        let features = netns_exec(&podns.name, &["ethtool", "-k", "eth0"]);
        assert!(features.contains("tx-checksumming: off"), "{features}");
        // One queue each way, allocated so (no trim under RTNL at creation).
        let details = netns_exec(&podns.name, &["ip", "-d", "link", "show", "eth0"]);
        assert!(details.contains("numtxqueues 1 numrxqueues 1"), "{details}");

        assert!(
            d.log_text().contains("removing leftover links"),
            "{}",
            d.log_text()
        );
        // The host end on br-int with the external IDs OVN needs.
        let ports =
            String::from_utf8_lossy(&ovs_vsctl(&d.ovs_rundir, &["list-ports", "br-int"]).stdout).into_owned();
        assert!(ports.lines().any(|l| l == tap), "{tap} not in {ports}");
        let ids = String::from_utf8_lossy(
            &ovs_vsctl(&d.ovs_rundir, &["get", "Interface", &tap, "external_ids"]).stdout,
        )
        .into_owned();
        for want in [
            format!("iface-id=\"{}\"", port.id),
            format!("attached-mac=\"{}\"", port.mac_address),
            "iface-status=active".to_owned(),
            format!("vm-uuid=\"{uid}\""),
        ] {
            assert!(ids.contains(&want), "{want} not in {ids}");
        }

        // CHECK passes; metrics show the request and the wiring.
        let shim = d.shim();
        let (ok, out) = shim.cni_prev("CHECK", &container, &podns.path, &pod, &uid, Some(&result));
        assert!(ok, "CHECK failed: {out}");
        let m = d.metrics();
        assert!(m.contains("kuryr_cni_wire_duration_seconds_count 1"), "{m}");
        assert!(m.contains("command=\"ADD\",outcome=\"ok\""), "{m}");

        // A DEL for another container of the same pod is stale: ignored, wiring intact.
        let (ok, out) = shim.cni("DEL", "some-old-container", &podns.path, &pod, &uid);
        assert!(ok, "stale DEL failed: {out}");
        assert!(netns_exec(&podns.name, &["ip", "link"]).contains("eth0"));

        // DEL removes veth and OVS port; a second DEL is fine; CHECK now fails.
        let (ok, out) = shim.cni("DEL", &container, &podns.path, &pod, &uid);
        assert!(ok, "DEL failed: {out}");
        let links = netns_exec(&d.netns, &["ip", "link"]);
        assert!(
            links.contains("kdt-victim"),
            "the host link a VIF named was deleted: {links}"
        );
        netns_exec(&d.netns, &["ip", "link", "del", "kdt-victim"]);
        assert!(!netns_exec(&podns.name, &["ip", "link"]).contains("eth0"));
        assert!(!run_ok(&["ip", "netns", "exec", &d.netns, "ip", "link"]).contains(&tap));
        let ports =
            String::from_utf8_lossy(&ovs_vsctl(&d.ovs_rundir, &["list-ports", "br-int"]).stdout).into_owned();
        assert!(!ports.lines().any(|l| l == tap), "{tap} still in {ports}");
        let (ok, out) = shim.cni("DEL", &container, &podns.path, &pod, &uid);
        assert!(ok, "second DEL failed: {out}");
        let (ok, out) = shim.cni_prev("CHECK", &container, &podns.path, &pod, &uid, Some(&result));
        assert!(!ok, "CHECK after DEL passed: {out}");
        assert!(
            state.path().read_dir().unwrap().next().is_none(),
            "state left behind"
        );
        d.stop();
    })
    .await;
}

/// Nobody marks the VIF active (no controller): ADD still returns, as soon as the node's
/// ovn-controller flags the OVS interface `ovn-installed`, and the pod is reachable then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_returns_on_ovn_installed_without_the_neutron_signal() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = topology();
    let os = openstack(&topo).await;
    let os2 = os.clone();
    with_cleanup(&os, async move {
        let os = os2;
        let cluster = cluster(&topo).await;
        let state = tempfile::tempdir().unwrap();
        let mut d = DaemonProc::start(&cluster, &topo, 1, state.path(), "");
        d.wait_ready().await;
        let port = os.ports(&d.node, 1).await.remove(0);
        let vif = os.vif(&port);
        let pod = unique("pod-");
        let uid = uuid::Uuid::new_v4().to_string();
        put_kuryrport(&cluster.client, &pod, &d.node, &uid, &vif).await;
        let podns = PodNs::new();
        let container = unique("ctr-");
        let shim = d.shim();
        let t0 = Instant::now();
        let (ok, result) = spawn_add(&d, &container, &podns.path, &pod, &uid).await.unwrap();
        let took = t0.elapsed();
        assert!(ok, "ADD failed: {result}\n{}", d.log_text());
        println!(
            "ADD returned in {} ms without the Neutron signal",
            took.as_millis()
        );
        let tap = kuryr_daemon::binding::spec::host_dev_name(&port.id);
        let flag = String::from_utf8_lossy(
            &ovs_vsctl(
                &d.ovs_rundir,
                &["get", "Interface", &tap, "external_ids:ovn-installed"],
            )
            .stdout,
        )
        .trim()
        .to_owned();
        assert_eq!(flag, "\"true\"", "ovn-installed of {tap}");
        let m = d.metrics();
        assert!(
            m.contains("kuryr_cni_active_wait_seconds_count{signal=\"ovn_installed\"} 1"),
            "{m}"
        );
        // The datapath is really there: the pod reaches its gateway (the router's port).
        let gw = topo.get("POD_SUBNET_GATEWAY");
        let ping = run(&[
            "ip",
            "netns",
            "exec",
            &podns.name,
            "ping",
            "-c",
            "2",
            "-W",
            "3",
            gw,
        ]);
        assert!(
            ping.status.success(),
            "ping {gw} failed: {}",
            String::from_utf8_lossy(&ping.stdout)
        );
        let (ok, out) = shim.cni("DEL", &container, &podns.path, &pod, &uid);
        assert!(ok, "DEL failed: {out}");
        d.stop();
    })
    .await;
}

/// One pod wired on a daemon: its namespace, port, container and ADD result.
struct WiredPod {
    ns: PodNs,
    port: kuryr_openstack::Port,
    name: String,
    uid: String,
    container: String,
    result: Value,
}

/// Creates a KuryrPort for a new port on the daemon's node, runs ADD through the plugin and
/// plays the controller (marks the VIF active once Neutron says ACTIVE).
async fn wire_pod(os: &Os, cluster: &Cluster, d: &DaemonProc) -> WiredPod {
    let port = os.ports(&d.node, 1).await.remove(0);
    let vif = os.vif(&port);
    let name = unique("pod-");
    let uid = uuid::Uuid::new_v4().to_string();
    put_kuryrport(&cluster.client, &name, &d.node, &uid, &vif).await;
    let ns = PodNs::new();
    let container = unique("ctr-");
    let add = spawn_add(d, &container, &ns.path, &name, &uid);
    os.wait_active(&port.id, Duration::from_secs(30)).await;
    set_active(&cluster.client, &name, &vif).await;
    let (ok, result) = add.await.unwrap();
    assert!(ok, "ADD failed: {result}\n{}", d.log_text());
    WiredPod {
        ns,
        port,
        name,
        uid,
        container,
        result,
    }
}

/// Ping and TCP from `a` to `b`.
fn assert_reaches(a: &WiredPod, b: &WiredPod, what: &str) {
    let ip = ip_of(&b.port);
    let ping = run(&[
        "ip", "netns", "exec", &a.ns.name, "ping", "-c", "2", "-W", "3", &ip,
    ]);
    assert!(
        ping.status.success(),
        "{what}: ping {ip} failed: {}",
        String::from_utf8_lossy(&ping.stdout)
    );
    let port = tcp_server(&b.ns.name, "hello over geneve");
    let got = tcp_fetch(&a.ns.name, &ip, port);
    assert_eq!(
        got.as_deref(),
        Ok("hello over geneve"),
        "{what}: TCP to {ip}:{port}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_on_two_nodes_talk_and_survive_a_daemon_restart() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = topology();
    let os = openstack(&topo).await;
    let os2 = os.clone();
    with_cleanup(&os, async move {
        let os = os2;
        let cluster = cluster(&topo).await;
        let (s1, s2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut d1 = DaemonProc::start(&cluster, &topo, 1, s1.path(), "");
        let mut d2 = DaemonProc::start(&cluster, &topo, 2, s2.path(), "");
        d1.wait_ready().await;
        d2.wait_ready().await;
        let a = wire_pod(&os, &cluster, &d1).await;
        let b = wire_pod(&os, &cluster, &d2).await;
        assert_reaches(&a, &b, "node-1 → node-2");
        assert_reaches(&b, &a, "node-2 → node-1");

        // Restart the node-1 daemon: running pods keep their connectivity, and the restarted
        // daemon serves new ADDs and cleans up pods wired by its predecessor.
        d1.stop();
        assert_reaches(&a, &b, "with the node-1 daemon down");
        d1.spawn();
        d1.wait_ready().await;
        assert_reaches(&a, &b, "after the node-1 daemon restarted");
        assert!(netns_exec(&a.ns.name, &["ip", "link"]).contains("eth0"));
        let c = wire_pod(&os, &cluster, &d1).await;
        assert_reaches(&c, &b, "pod wired by the restarted daemon → node-2");
        assert_reaches(&a, &c, "same node, old → new pod");

        let tap = kuryr_daemon::binding::spec::host_dev_name(&a.port.id);
        let (ok, out) = d1.shim().cni("DEL", &a.container, &a.ns.path, &a.name, &a.uid);
        assert!(ok, "DEL after restart failed: {out}");
        assert!(!netns_exec(&a.ns.name, &["ip", "link"]).contains("eth0"));
        let ports = String::from_utf8_lossy(&ovs_vsctl(&d1.ovs_rundir, &["list-ports", "br-int"]).stdout).into_owned();
        assert!(!ports.lines().any(|l| l == tap), "{tap} still on br-int");

        // A GC without `cni.dev/valid-attachments` is refused: nothing is unwired.
        let gc = json!({"CNI_COMMAND": "GC", "config_kuryr": {"cniVersion": "1.1.0"}});
        let (code, body) = d1.raw("POST", "/gcNetworks", gc.to_string().as_bytes());
        assert_ne!(code, 204, "a GC without attachments was obeyed: {body}");
        assert!(body.contains("valid-attachments"), "{body}");
        assert_reaches(&c, &b, "after a GC without attachments");
        // A DEL of a container the daemon never wired, naming a namespace and a link of the
        // node's (here a namespace standing for the host, holding a link named like a host's):
        // nothing is deleted.
        let host = PodNs::new();
        netns_exec(&host.name, &["ip", "link", "add", "uplink0", "type", "veth", "peer", "name", "uplink0p"]);
        let del = json!({"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "never-wired", "CNI_NETNS": host.path,
            "CNI_IFNAME": "uplink0", "CNI_ARGS": "", "config_kuryr": {"cniVersion": "1.1.0"}});
        let (code, body) = d1.raw("POST", "/delNetwork", del.to_string().as_bytes());
        assert_eq!(code, 204, "{body}");
        assert!(netns_exec(&host.name, &["ip", "link"]).contains("uplink0"), "a DEL of an unknown container deleted a link");
        // GC with only `c` valid removes nothing else on node-1 (a is gone already) and keeps c.
        let gc = json!({"CNI_COMMAND": "GC", "config_kuryr": {"cniVersion": "1.1.0",
            "cni.dev/valid-attachments": [{"containerID": c.container, "ifname": "eth0"}]}});
        assert_eq!(d1.raw("POST", "/gcNetworks", gc.to_string().as_bytes()).0, 204);
        assert_reaches(&c, &b, "after GC");
        // GC with nothing valid on node-2 unwires b.
        let gc = json!({"CNI_COMMAND": "GC", "config_kuryr": {"cniVersion": "1.1.0", "cni.dev/valid-attachments": []}});
        assert_eq!(d2.raw("POST", "/gcNetworks", gc.to_string().as_bytes()).0, 204);
        assert!(!netns_exec(&b.ns.name, &["ip", "link"]).contains("eth0"));
        let (ok, out) = d1.shim().cni("DEL", &c.container, &c.ns.path, &c.name, &c.uid);
        assert!(ok, "DEL failed: {out}");
        assert!(!netns_exec(&c.ns.name, &["ip", "link"]).contains("eth0"));
        let _ = (&a.result, &b.result);
        d1.stop();
        d2.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_errors_and_the_daemon_keeps_serving() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = topology();
    let cluster = cluster(&topo).await;
    let state = tempfile::tempdir().unwrap();
    let mut d = DaemonProc::start(
        &cluster,
        &topo,
        1,
        state.path(),
        "[cni_daemon]\nvif_annotation_timeout = 2\n",
    );
    d.wait_ready().await;
    let podns = PodNs::new();
    let body = |cmd: &str, netns: &str, args: &str| {
        json!({"CNI_COMMAND": cmd, "CNI_CONTAINERID": "c-bad", "CNI_NETNS": netns, "CNI_IFNAME": "eth0",
            "CNI_ARGS": args, "CNI_PATH": "/opt/cni/bin", "config_kuryr": {"cniVersion": "1.0.0"}})
        .to_string()
    };
    let args = format!("K8S_POD_NAMESPACE={NS};K8S_POD_NAME=nope;K8S_POD_UID=u-1");
    let cases: Vec<(&str, String, u16, u64, &str)> = vec![
        ("/addNetwork", "not json at all".into(), 400, 6, "not a valid"),
        ("/addNetwork", "{}".into(), 400, 6, "not a valid"),
        (
            "/addNetwork",
            r#"{"CNI_COMMAND": 7, "config_kuryr": {}}"#.into(),
            400,
            6,
            "not a valid",
        ),
        (
            "/addNetwork",
            body("ADD", &podns.path, "K8S_POD_NAMESPACE=x"),
            400,
            4,
            "K8S_POD_NAME",
        ),
        (
            "/addNetwork",
            body("ADD", &podns.path, "garbage"),
            400,
            4,
            "CNI_ARGS",
        ),
        ("/addNetwork", body("ADD", "", &args), 400, 4, "CNI_NETNS"),
        (
            "/addNetwork",
            body("ADD", "/run/netns/does-not-exist-kdt", &args),
            400,
            4,
            "does not exist",
        ),
        (
            "/addNetwork",
            body("ADD", &podns.path, &args),
            504,
            11,
            "timed out",
        ),
        (
            "/checkNetwork",
            body("CHECK", &podns.path, &args),
            410,
            3,
            "not wired",
        ),
        (
            "/gcNetworks",
            r#"{"CNI_COMMAND": "GC", "config_kuryr": {"cni.dev/valid-attachments": 5}}"#.into(),
            400,
            7,
            "valid-attachments",
        ),
    ];
    for (path, b, status, code, what) in cases {
        let (st, resp) = d.raw("POST", path, b.as_bytes());
        assert_eq!(st, status, "{path} {b}: {resp}");
        let v: Value = serde_json::from_str(&resp).unwrap_or_else(|_| panic!("not a CNI error body: {resp}"));
        assert_eq!(v["code"], json!(code), "{resp}");
        assert!(
            v["msg"].as_str().unwrap().contains(what),
            "{resp} does not mention {what}"
        );
    }
    // A DEL does not wait behind an ADD that waits for its KuryrPort.
    let add = {
        let (shim, b) = (d.shim(), body("ADD", &podns.path, &args));
        tokio::task::spawn_blocking(move || shim.raw("POST", "/addNetwork", b.as_bytes()))
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = Instant::now();
    assert_eq!(
        d.raw("POST", "/delNetwork", body("DEL", &podns.path, &args).as_bytes())
            .0,
        204
    );
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "DEL waited {:?} behind ADD",
        t.elapsed()
    );
    assert_ne!(add.await.unwrap().0, 202);
    // A DEL for something never wired is fine (idempotent).
    assert_eq!(
        d.raw("POST", "/delNetwork", body("DEL", &podns.path, &args).as_bytes())
            .0,
        204
    );
    assert_eq!(d.raw("POST", "/nope", b"{}").0, 404);
    // Through the plugin: an ADD without a KuryrPort is a CNI error with "try again later".
    let (ok, out) = d.shim().cni("ADD", "c-plugin", &podns.path, "nope", "u-2");
    assert!(!ok);
    assert_eq!(out["code"], json!(11), "{out}");
    // Still serving and healthy: none of this was the daemon's own failure.
    assert_eq!(d.raw("GET", "/status", b"").0, 200);
    assert_eq!(d.health("/alive").0, 200);
    assert_eq!(d.health("/ready").0, 200);
    let m = d.metrics();
    assert!(m.contains("outcome=\"invalid\""), "{m}");
    assert!(m.contains("kuryr_cni_failures_total 0"), "{m}");

    // A VIF the daemon cannot wire (here: a class without a binding driver) is bad input in a
    // KuryrPort, not a sick daemon: "try again later" (the controller rewrites what it cannot
    // read), with the reason, and it does not count towards the failure limit.
    let mut vif = kuryr_types::Vif::new(kuryr_types::VifKind::MacvlanNested, "nested-port");
    vif.address = Some("fa:16:3e:00:00:01".into());
    put_kuryrport(&cluster.client, "nested", &d.node, "u-nested", &vif).await;
    let args = format!("K8S_POD_NAMESPACE={NS};K8S_POD_NAME=nested;K8S_POD_UID=u-nested");
    for _ in 1..=3 {
        let (st, resp) = d.raw("POST", "/addNetwork", body("ADD", &podns.path, &args).as_bytes());
        assert_eq!(st, 504, "{resp}");
        let v: Value = serde_json::from_str(&resp).unwrap();
        assert_eq!(v["code"], json!(11), "{resp}");
        assert!(
            v["details"]
                .as_str()
                .unwrap()
                .contains("no binding driver for VIF class VIFMacvlanNested"),
            "{resp}"
        );
    }
    assert_eq!(d.health("/alive").0, 200, "a bad VIF is not the daemon's failure");

    // Failures of the daemon itself (here: its state file cannot be written) are 500s with
    // code 999; after [cni_daemon] cni_failures_count (3) of them /alive fails, as upstream.
    // Nothing is wired: the attachment is recorded before wiring.
    let mut vif = kuryr_types::Vif::new(kuryr_types::VifKind::OpenVSwitch, "state-port");
    vif.address = Some("fa:16:3e:00:00:02".into());
    put_kuryrport(&cluster.client, "unrecorded", &d.node, "u-unrecorded", &vif).await;
    std::fs::create_dir_all(state.path().join("c-bad.json.tmp")).unwrap();
    let args = format!("K8S_POD_NAMESPACE={NS};K8S_POD_NAME=unrecorded;K8S_POD_UID=u-unrecorded");
    for i in 1..=3 {
        let (st, resp) = d.raw("POST", "/addNetwork", body("ADD", &podns.path, &args).as_bytes());
        assert_eq!(st, 500, "{resp}");
        let v: Value = serde_json::from_str(&resp).unwrap();
        assert_eq!(v["code"], json!(999), "{resp}");
        assert!(v["details"].as_str().unwrap().contains("c-bad.json"), "{resp}");
        let alive = d.health("/alive").0;
        assert_eq!(alive, if i < 3 { 200 } else { 500 }, "after {i} failures");
    }
    let links = std::process::Command::new("ip")
        .args(["-n", &podns.name, "-o", "link", "show"])
        .output()
        .unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(
        !links.contains("eth0"),
        "a failed ADD left an interface in the pod's namespace: {links}"
    );
    assert_eq!(d.raw("GET", "/status", b"").0, 200, "still serving");
    assert!(d.metrics().contains("kuryr_cni_failures_total 3"));

    // Only root is served. An unprivileged process (nobody) cannot reach the socket (its
    // directory and the socket are root's only), and when the file modes are opened up the
    // daemon itself closes the connection (SO_PEERCRED) before reading a byte.
    let as_nobody = |sock: &std::path::Path| {
        std::process::Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "curl",
                "-sS",
                "-m",
                "5",
            ])
            .arg("--unix-socket")
            .arg(sock)
            .args(["-X", "POST", "--data-binary"])
            .arg(body("GC", "", ""))
            .arg("http://localhost/gcNetworks")
            .output()
            .expect("setpriv curl")
    };
    let mode = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).expect("stat").mode() & 0o777
    };
    assert_eq!(mode(&d.sock), 0o600, "the socket is root's only");
    let out = as_nobody(&d.sock);
    assert!(
        !out.status.success(),
        "nobody was served: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    use std::os::unix::fs::PermissionsExt;
    // The socket's directory and the test cluster's temporary directory above it.
    let mut opened = Vec::new();
    for dir in d.sock.ancestors().skip(1).take(2) {
        opened.push((dir.to_path_buf(), mode(dir)));
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    }
    std::fs::set_permissions(&d.sock, std::fs::Permissions::from_mode(0o666)).expect("chmod sock");
    let out = as_nobody(&d.sock);
    assert!(
        !out.status.success() && out.stdout.is_empty(),
        "nobody was served: {} {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        d.log_text().contains("refused a CNI API connection"),
        "{}",
        d.log_text()
    );
    for (dir, m) in opened {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(m)).expect("chmod back");
    }
    assert_eq!(d.raw("GET", "/status", b"").0, 200, "root is still served");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_uid_comes_from_the_pod_watcher_and_deleted_pods_are_gone() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    use k8s_openapi::api::core::v1::Pod;
    use kube::{Api, api::PostParams};
    let topo = topology();
    let cluster = cluster(&topo).await;
    let state = tempfile::tempdir().unwrap();
    let mut d = DaemonProc::start(
        &cluster,
        &topo,
        1,
        state.path(),
        "[cni_daemon]\nvif_annotation_timeout = 5\n",
    );
    d.wait_ready().await;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), NS);
    let mk = |name: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS, "finalizers": ["kuryr.openstack.org/pod-finalizer"]},
            "spec": {"nodeName": d.node, "containers": [{"name": "c", "image": "i"}]}}))
        .unwrap()
    };
    // No K8S_POD_UID in CNI_ARGS (older runtimes): the pod watcher supplies it.
    let pod = pods
        .create(&PostParams::default(), &mk("from-watcher"))
        .await
        .unwrap();
    let uid = pod.metadata.uid.clone().unwrap();
    let vif = synthetic_vif(&topo, 1);
    put_kuryrport(&cluster.client, "from-watcher", &d.node, &uid, &vif).await;
    let podns = PodNs::new();
    let body = |pod: &str, ctr: &str| {
        json!({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": ctr, "CNI_NETNS": podns.path, "CNI_IFNAME": "eth0",
            "CNI_ARGS": format!("IgnoreUnknown=1;K8S_POD_NAMESPACE={NS};K8S_POD_NAME={pod}"),
            "CNI_PATH": "", "config_kuryr": {"cniVersion": "1.0.0"}})
        .to_string()
    };
    let (st, resp) = d.raw("POST", "/addNetwork", body("from-watcher", "c-1").as_bytes());
    assert_eq!(st, 202, "{resp}\n{}", d.log_text());
    assert!(netns_exec(&podns.name, &["ip", "link"]).contains("eth0"));
    let del = json!({"CNI_COMMAND": "DEL", "CNI_CONTAINERID": "c-1", "CNI_NETNS": podns.path, "CNI_IFNAME": "eth0",
        "CNI_ARGS": format!("K8S_POD_NAMESPACE={NS};K8S_POD_NAME=from-watcher"), "config_kuryr": {}});
    assert_eq!(d.raw("POST", "/delNetwork", del.to_string().as_bytes()).0, 204);
    assert!(!netns_exec(&podns.name, &["ip", "link"]).contains("eth0"));

    // A pod being deleted (deletionTimestamp set, held by its finalizer): ADD answers "gone".
    let pod = pods.create(&PostParams::default(), &mk("dying")).await.unwrap();
    let uid = pod.metadata.uid.clone().unwrap();
    put_kuryrport(&cluster.client, "dying", &d.node, &uid, &synthetic_vif(&topo, 2)).await;
    pods.delete("dying", &Default::default()).await.unwrap();
    wait_for("deletionTimestamp", Duration::from_secs(5), async || {
        pods.get("dying")
            .await
            .ok()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (st, resp) = d.raw("POST", "/addNetwork", body("dying", "c-2").as_bytes());
    assert_eq!(st, 410, "{resp}");
    assert!(resp.contains("gone"), "{resp}");
    d.stop();
}
