//! End to end, as a user sees it (issue 5): every test starts its own cluster with
//! `sandbox/cluster up` (its own state dir and ports, the workspace's dev binaries) on the
//! sandbox cloud, and stops it with `sandbox/cluster down`. They fail — never skip — when the
//! sandbox cloud is down. nextest runs them one at a time (`.config/nextest.toml`, group `e2e`):
//! they share the nodes' namespaces and switches.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
    time::Duration,
};

use common::*;

use kuryr_e2e::{
    cluster::{Cluster, ClusterOptions, free_port, netns_exists, repo_root, run, topology},
    metrics, neutron, pods, report,
};

/// Pods in two namespaces on two nodes become Ready, each with its own real Neutron port of the
/// right network, project, security group and binding host; they all talk to each other
/// (same namespace, across namespaces, across nodes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_in_two_namespaces_on_two_nodes_get_neutron_ports_and_talk() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|_| {});
    let topo = topology().expect("topology.env");
    let client = check(&cluster, "client", cluster.client().await);
    let keys = create_spread(&client, &cluster, &["e2e-a", "e2e-b"], "web").await;
    check(
        &cluster,
        "pods Ready",
        pods::wait_ready(&client, &keys, READY).await,
    );
    // A pod is Ready as soon as OVN installed its port's flows (the daemon's `ovn-installed`
    // signal); the controller marks the VIF active when Neutron reports the port ACTIVE, which
    // may come a little later: wait for that too (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let views = loop {
        let views = check(
            &cluster,
            "collect",
            pods::collect(&cluster, &client, &ns_list(&keys)).await,
        );
        if views.iter().all(|v| v.vif_active) || std::time::Instant::now() >= deadline {
            break views;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let ids: Vec<String> = views.iter().map(|v| v.port_id.clone()).collect();
    let ports: BTreeMap<String, neutron::NeutronPort> =
        check(&cluster, "neutron", neutron::ports_by_id(&ids))
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
    eprintln!("{}", report::pod_table(&views, &ports));
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        views.len(),
        "ports not distinct"
    );
    for v in &views {
        let p = ports.get(&v.port_id).unwrap_or_else(|| {
            panic!(
                "{}/{}: port {:?} unknown to Neutron",
                v.namespace, v.name, v.port_id
            )
        });
        assert_eq!(p.host, v.node, "{}: binding host", v.name);
        assert_eq!(p.status, "ACTIVE", "{}: port status", v.name);
        assert_eq!(p.mac, v.mac, "{}: MAC", v.name);
        assert!(
            p.ips.contains(&v.pod_ip),
            "{}: pod IP {} not on port {:?}",
            v.name,
            v.pod_ip,
            p.ips
        );
        assert_eq!(
            Some(&p.network_id),
            topo.get("POD_NETWORK_ID"),
            "{}: network",
            v.name
        );
        assert_eq!(
            Some(&p.project_id),
            topo.get("KURYR_SANDBOX_PROJECT_ID"),
            "{}: project",
            v.name
        );
        let sg = topo.get("POD_SG_ID").cloned().unwrap_or_default();
        assert!(
            p.security_groups.contains(&sg),
            "{}: security groups {:?}",
            v.name,
            p.security_groups
        );
        assert!(p.tags.contains(&cluster.tag), "{}: tags {:?}", v.name, p.tags);
        assert!(v.vif_active, "{}: VIF not active", v.name);
    }
    assert_full_connectivity(&cluster, &views).await;
}

/// With `--subnets namespace` every namespace gets its own Neutron subnet from the pool, and
/// pods reach each other across namespaces through the router.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_subnets_route_between_namespaces() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.namespace_subnets = true);
    let topo = topology().expect("topology.env");
    let client = check(&cluster, "client", cluster.client().await);
    let keys = create_spread(&client, &cluster, &["e2e-ns-a", "e2e-ns-b"], "web").await;
    check(
        &cluster,
        "pods Ready",
        pods::wait_ready(&client, &keys, READY).await,
    );
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &ns_list(&keys)).await,
    );
    eprintln!("{}", report::pod_table(&views, &BTreeMap::new()));
    let cidr_of = |ns: &str| -> BTreeSet<String> {
        views
            .iter()
            .filter(|v| v.namespace == ns)
            .map(|v| v.cidr.clone())
            .collect()
    };
    let (a, b) = (cidr_of("e2e-ns-a"), cidr_of("e2e-ns-b"));
    assert_eq!(a.len(), 1, "one subnet per namespace: {a:?}");
    assert_eq!(b.len(), 1, "one subnet per namespace: {b:?}");
    assert_ne!(a, b, "namespaces share a subnet");
    let default_cidr = topo.get("POD_SUBNET_CIDR").cloned().unwrap_or_default();
    assert!(
        !a.contains(&default_cidr) && !b.contains(&default_cidr),
        "default subnet used: {a:?} {b:?}"
    );
    assert_full_connectivity(&cluster, &views).await;
}

/// Deleting a pod removes its veth, its OVS port and its namespace, and leaves its Neutron
/// port in the pool; the next pod on that node gets a pooled port (no new one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_pods_unplugs_them_and_returns_ports_to_the_pool() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.sets.push("vif_pool.ports_pool_cooldown=1".into()));
    let client = check(&cluster, "client", cluster.client().await);
    let node = cluster.nodes[0].clone();
    check(
        &cluster,
        "namespace",
        pods::ensure_namespace(&client, "e2e-del").await,
    );
    check(
        &cluster,
        "create",
        pods::create_pod(&client, "e2e-del", "victim", Some(&node.name)).await,
    );
    let key = vec![("e2e-del".to_string(), "victim".to_string())];
    check(&cluster, "Ready", pods::wait_ready(&client, &key, READY).await);
    let v = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &["e2e-del".into()]).await,
    )
    .remove(0);
    assert!(netns_exists(&v.netns), "pod netns {} missing", v.netns);
    let ifaces = check(&cluster, "ovs", cluster.ovs_interfaces(&node, &v.port_id));
    assert_eq!(ifaces.len(), 1, "OVS interfaces of {}: {ifaces:?}", v.port_id);

    check(
        &cluster,
        "delete",
        pods::delete_pod(&client, "e2e-del", "victim").await,
    );
    check(
        &cluster,
        "gone",
        pods::wait_gone(&client, &key, Duration::from_secs(60)).await,
    );
    assert!(!netns_exists(&v.netns), "pod netns {} still there", v.netns);
    let left = check(&cluster, "ovs", cluster.ovs_interfaces(&node, &v.port_id));
    assert!(left.is_empty(), "OVS port still plugged: {left:?}");
    let host_ifs = run(
        "ip link in node netns",
        Command::new("ip").args(["netns", "exec", &node.netns, "ip", "-o", "link", "show"]),
    )
    .unwrap_or_default();
    assert!(
        !host_ifs.contains(&ifaces[0]),
        "veth {} still in {}: {host_ifs}",
        ifaces[0],
        node.netns
    );
    let port = check(
        &cluster,
        "neutron",
        neutron::ports_by_id(std::slice::from_ref(&v.port_id)),
    );
    assert_eq!(
        port.len(),
        1,
        "port {} was deleted instead of going back to the pool",
        v.port_id
    );
    // The controller's pool accounts for it again.
    let mut pooled = 0.0;
    for _ in 0..100 {
        let s = check(&cluster, "metrics", metrics::scrape(&cluster.metrics_url).await);
        pooled = s.sum("kuryr_pool_ports", |l| {
            l.get("host") == Some(&node.name)
                && l.get("state").is_some_and(|s| s == "available" || s == "cooling")
        });
        if pooled >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_or_logs(
        &cluster,
        pooled >= 1.0,
        format!("no pooled port on {}", node.name),
    );

    // The next pod on that node takes a port that already existed.
    let before: BTreeSet<String> = check(&cluster, "tagged", neutron::ports_tagged(&cluster.tag))
        .into_iter()
        .map(|p| p.id)
        .collect();
    check(
        &cluster,
        "create",
        pods::create_pod(&client, "e2e-del", "next", Some(&node.name)).await,
    );
    let key = vec![("e2e-del".to_string(), "next".to_string())];
    check(&cluster, "Ready", pods::wait_ready(&client, &key, READY).await);
    let n = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &["e2e-del".into()]).await,
    )
    .remove(0);
    assert!(
        before.contains(&n.port_id),
        "pod got a new port {} instead of a pooled one",
        n.port_id
    );
}

/// Restarting the daemons (one crashes with SIGKILL, one stops cleanly) leaves the running pods'
/// connectivity intact, and pods created afterwards are wired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_restart_keeps_connectivity_and_later_adds_work() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|_| {});
    assert_or_logs(
        &cluster,
        cluster.has_daemon,
        "no kuryr-daemon binary: the daemon is not built".into(),
    );
    let client = check(&cluster, "client", cluster.client().await);
    let keys = create_spread(&client, &cluster, &["e2e-rst"], "before").await;
    check(&cluster, "Ready", pods::wait_ready(&client, &keys, READY).await);
    check(&cluster, "restart daemon-1", cluster.restart("daemon-1", true));
    check(&cluster, "restart daemon-2", cluster.restart("daemon-2", false));
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &ns_list(&keys)).await,
    );
    assert_full_connectivity(&cluster, &views).await;
    let more = create_spread(&client, &cluster, &["e2e-rst"], "after").await;
    check(
        &cluster,
        "Ready after restart",
        pods::wait_ready(&client, &more, READY).await,
    );
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &ns_list(&keys)).await,
    );
    assert_eq!(views.len(), 4);
    assert_full_connectivity(&cluster, &views).await;
}

/// Runs the installed kuryr-cni inside node-1's namespace with `env` and `stdin`.
fn cni_call(cluster: &Cluster, env: &[(&str, &str)], stdin: &str) -> (bool, serde_json::Value, String) {
    use std::io::Write;
    let node = &cluster.nodes[0];
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &node.netns])
        .arg(cluster.state_dir.join("cni/bin/kuryr-cni"))
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn kuryr-cni");
    if let Some(mut s) = child.stdin.take() {
        let _ = s.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().expect("kuryr-cni output");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.success(),
        json,
        format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// Malformed CNI calls get CNI error objects and a non-zero exit; malformed requests straight to
/// the daemon get HTTP errors; the daemon keeps serving and the next pod is wired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_cni_calls_get_errors_and_the_daemon_keeps_serving() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    // An ADD for a pod that does not exist waits `vif_annotation_timeout` (upstream: 60 s).
    let (_dir, cluster) = start(|o| o.sets.push("cni_daemon.vif_annotation_timeout=5".into()));
    assert_or_logs(
        &cluster,
        cluster.has_daemon,
        "no kuryr-daemon binary: the daemon is not built".into(),
    );
    let conf = std::fs::read_to_string(cluster.state_dir.join("nodes/node-1/net.d/10-kuryr.conflist"))
        .expect("installed conflist");
    let conflist: serde_json::Value = serde_json::from_str(&conf).expect("conflist JSON");
    let mut net = conflist["plugins"][0].clone();
    net["name"] = conflist["name"].clone();
    net["cniVersion"] = serde_json::json!("1.0.0");
    let good = net.to_string();
    let cid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let base = [
        ("CNI_CONTAINERID", cid),
        ("CNI_IFNAME", "eth0"),
        ("CNI_PATH", "/usr/lib/cni"),
        (
            "CNI_ARGS",
            "K8S_POD_NAMESPACE=default;K8S_POD_NAME=ghost;K8S_POD_UID=00000000-0000-0000-0000-000000000000",
        ),
    ];
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    let mut bad_version = net.clone();
    bad_version["cniVersion"] = serde_json::json!("9.9.9");
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, String);
    let cases: Vec<Case<'_>> = vec![
        ("no CNI_COMMAND", base.to_vec(), good.clone()),
        (
            "unknown command",
            with(&[("CNI_COMMAND", "EXPLODE"), ("CNI_NETNS", "/var/run/netns/none")]),
            good.clone(),
        ),
        (
            "bad JSON on stdin",
            with(&[("CNI_COMMAND", "ADD"), ("CNI_NETNS", "/var/run/netns/none")]),
            "{not json".into(),
        ),
        (
            "netns that does not exist",
            with(&[
                ("CNI_COMMAND", "ADD"),
                ("CNI_NETNS", "/var/run/netns/kuryr-e2e-missing"),
            ]),
            good.clone(),
        ),
        (
            "unsupported version",
            with(&[("CNI_COMMAND", "ADD"), ("CNI_NETNS", "/var/run/netns/none")]),
            bad_version.to_string(),
        ),
        (
            "ADD for a pod that does not exist",
            with(&[("CNI_COMMAND", "ADD"), ("CNI_NETNS", "/proc/self/ns/net")]),
            good.clone(),
        ),
    ];
    for (what, env, stdin) in &cases {
        let (ok, json, raw) = cni_call(&cluster, env, stdin);
        assert!(!ok, "{what}: kuryr-cni succeeded: {raw}");
        assert!(
            json.get("code").and_then(|c| c.as_u64()).is_some()
                && json.get("msg").and_then(|m| m.as_str()).is_some(),
            "{what}: no CNI error object on stdout: {raw}"
        );
    }
    // Garbage straight to the daemon's API (its unix socket; as root, the one caller it serves).
    let node = &cluster.nodes[0];
    let sock = cluster.daemon_socket(&node.name);
    for body in ["{", "[]", "{\"CNI_COMMAND\": 5}", ""] {
        let out = run(
            "curl to the daemon",
            Command::new("ip").args([
                "netns",
                "exec",
                &node.netns,
                "curl",
                "--unix-socket",
                &sock.display().to_string(),
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "--max-time",
                "10",
                "-H",
                "Content-Type: application/json",
                "-X",
                "POST",
                "--data",
                body,
                "http://localhost/addNetwork",
            ]),
        )
        .unwrap_or_else(|e| panic!("daemon did not answer a malformed request: {e}"));
        let code: u16 = out.trim().parse().unwrap_or(0);
        assert!(
            (400..600).contains(&code),
            "malformed body {body:?} answered {code}"
        );
    }
    assert!(cluster.pid("daemon-1").is_some(), "daemon-1 died");
    let client = check(&cluster, "client", cluster.client().await);
    let keys = create_spread(&client, &cluster, &["e2e-bad"], "after").await;
    check(
        &cluster,
        "Ready after bad calls",
        pods::wait_ready(&client, &keys, READY).await,
    );
}

/// The README's command: `sandbox/demo` (here on the dev build, its own state dir and ports)
/// ends with the table, the matrix and exit 0; `sandbox/demo --down` stops it.
#[test]
fn the_readme_demo_command_works() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    init();
    let dir = tempfile::Builder::new()
        .prefix("kuryr-demo-")
        .tempdir()
        .expect("tempdir");
    let state = dir.path().join("cluster");
    let demo = repo_root().join("sandbox/demo");
    let out = Command::new(&demo)
        .arg("--bin-dir")
        .arg(kuryr_e2e::cluster::dev_bin_dir())
        .arg("--state-dir")
        .arg(&state)
        .args(["--port", &free_port().to_string()])
        .args(["--health-port", &free_port().to_string()])
        .args(["--metrics-port", &free_port().to_string()])
        .output()
        .expect("run sandbox/demo");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    // On failure the demo stops the cluster and keeps its logs: show their tails before the
    // temp dir goes.
    let logs = if out.status.success() {
        String::new()
    } else {
        Cluster::attach(&state)
            .map(|c| c.log_tails(40))
            .unwrap_or_default()
    };
    let down = Command::new(&demo)
        .arg("--down")
        .arg("--state-dir")
        .arg(&state)
        .output();
    assert!(
        out.status.success(),
        "sandbox/demo failed:\n{stdout}\n{stderr}\n{logs}"
    );
    assert!(
        stdout.contains("NEUTRON PORT") && stdout.contains("FROM \\ TO"),
        "{stdout}"
    );
    assert!(
        stderr.contains("every connection answered") || stdout.contains("every connection answered"),
        "{stderr}"
    );
    let down = down.expect("sandbox/demo --down");
    assert!(
        down.status.success(),
        "sandbox/demo --down: {}",
        String::from_utf8_lossy(&down.stderr)
    );
}

/// The harness itself, with no kuryr component: a dry run of the node plumbing with the
/// reference bridge plugin proves cluster up/restart/down, the table and the probes; a second
/// cluster is refused while one runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harness_dry_run_with_the_reference_bridge_plugin() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let (dir, cluster) = start(|o| {
        o.cni_bridge = true;
        o.controller = false;
    });
    let client = check(&cluster, "client", cluster.client().await);
    let node = cluster.nodes[0].name.clone();
    let mut keys = Vec::new();
    for ns in ["dry-a", "dry-b"] {
        check(&cluster, "ns", pods::ensure_namespace(&client, ns).await);
        for name in ["p1", "p2"] {
            check(
                &cluster,
                "create",
                pods::create_pod(&client, ns, name, Some(&node)).await,
            );
            keys.push((ns.to_string(), name.to_string()));
        }
    }
    check(
        &cluster,
        "Ready",
        pods::wait_ready(&client, &keys, Duration::from_secs(60)).await,
    );
    // A second cluster is refused while this one runs.
    let mut other = ClusterOptions::for_test(&dir.path().join("other"));
    other.cni_bridge = true;
    let err = Cluster::up(&other).expect_err("second cluster started");
    assert!(err.to_string().contains("another cluster runs"), "{err}");
    // The node restarts (SIGKILL) and adopts its pods.
    check(&cluster, "restart node-1", cluster.restart("node-1", true));
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &ns_list(&keys)).await,
    );
    assert!(
        views.iter().all(|v| !v.netns.is_empty() && !v.pod_ip.is_empty()),
        "{views:?}"
    );
    assert_full_connectivity(&cluster, &views).await;
    let netns: Vec<String> = views.iter().map(|v| v.netns.clone()).collect();
    let mut cluster = cluster;
    let out = cluster
        .down()
        .unwrap_or_else(|e| panic!("sandbox/cluster down: {e}"));
    assert!(out.contains("removed"), "{out}");
    assert!(
        netns.iter().all(|n| !netns_exists(n)),
        "pod namespaces left behind"
    );
    assert!(!cluster.state_dir.exists(), "state dir left behind");
}
