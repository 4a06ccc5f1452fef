//! NetworkPolicy end to end (issue 14): a cluster with the policy driver and handlers on the
//! sandbox cloud; every claim proven by TCP connections from inside pods' network namespaces,
//! with the time each change took to be enforced (printed, then summarised).

mod common;

use std::time::{Duration, Instant};

use common::*;
use kuryr_e2e::{netpol, netpol::Expect, pods, public_ip, services as svc};
use serde_json::json;

const X: &str = "np-x";
const Y: &str = "np-y";
const PORT: u16 = 8080;
/// The bound on one enforcement in this test (the target, 2 s p99, is the benchmark's).
const WITHIN: Duration = Duration::from_secs(20);

struct Pod {
    ns: &'static str,
    name: &'static str,
    ip: String,
    netns: String,
}

/// Records how long each change took.
#[derive(Default)]
struct Times(Vec<(String, Duration)>);

impl Times {
    fn add(&mut self, what: &str, d: Duration) {
        eprintln!("enforced in {:>6} ms: {what}", d.as_millis());
        self.0.push((what.to_string(), d));
    }
}

/// Each claim `(what, from, to, want)` holds: waits until `from` reaching `to` gives `want`
/// and records the time since `since`.
async fn expect(
    cluster: &kuryr_e2e::cluster::Cluster,
    times: &mut Times,
    since: Instant,
    claims: &[(&str, &Pod, &Pod, Expect)],
) {
    for (what, from, to, want) in claims {
        let r = netpol::converge(&from.netns, &to.ip, PORT, to.name, *want, since, WITHIN).await;
        let context = format!(
            "{what}: {}/{} -> {}/{} {want:?}",
            from.ns, from.name, to.ns, to.name
        );
        times.add(what, check(cluster, &context, r));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_policies_are_security_groups_enforced_on_real_traffic() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.policies = true);
    let client = check(&cluster, "client", cluster.client().await);
    for ns in [X, Y] {
        check(&cluster, "namespace", pods::ensure_namespace(&client, ns).await);
    }
    check(
        &cluster,
        "label",
        netpol::label_namespace(&client, X, "team", "red").await,
    );
    check(
        &cluster,
        "label",
        netpol::label_namespace(&client, Y, "team", "blue").await,
    );
    // a and c on the first node, b on the other: rules hold across nodes and on one.
    let nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    let spec: [(&str, &str, &str, usize); 3] = [(X, "a", "a", 0), (X, "b", "b", 1), (Y, "c", "c", 0)];
    for (ns, name, app, node) in spec {
        let node = &nodes[node % nodes.len()];
        check(
            &cluster,
            "pod",
            pods::create_pod_with_ports(&client, ns, name, Some(node), &[(PORT, "TCP")]).await,
        );
        check(
            &cluster,
            "label",
            svc::label_pod(&client, ns, name, "app", app).await,
        );
    }
    let keys: Vec<(String, String)> = spec
        .iter()
        .map(|(ns, name, ..)| (ns.to_string(), name.to_string()))
        .collect();
    check(
        &cluster,
        "ready",
        pods::wait_ready(&client, &keys, Duration::from_secs(120)).await,
    );
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &[X.into(), Y.into()]).await,
    );
    let pod = |ns: &'static str, name: &'static str| {
        let v = views
            .iter()
            .find(|v| v.namespace == ns && v.name == name)
            .unwrap_or_else(|| panic!("{ns}/{name}"));
        Pod {
            ns,
            name,
            ip: v.pod_ip.clone(),
            netns: v.netns.clone(),
        }
    };
    let (a, b, c) = (pod(X, "a"), pod(X, "b"), pod(Y, "c"));
    let mut times = Times::default();

    // Open before any policy (the first packets across nodes may need a moment).
    let t = Instant::now();
    for (from, to) in [(&b, &a), (&c, &a), (&a, &c), (&a, &b)] {
        check(
            &cluster,
            "baseline",
            netpol::converge(
                &from.netns,
                &to.ip,
                PORT,
                to.name,
                Expect::Allowed,
                t,
                Duration::from_secs(30),
            )
            .await,
        );
    }

    // 1. a admits only app=b, on the named port; its egress stays open.
    let t = Instant::now();
    let from_b = json!({"podSelector": {"matchLabels": {"app": "a"}},
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "b"}}}], "ports": [{"port": "tcp-8080"}]}]});
    check(
        &cluster,
        "policy",
        netpol::apply_policy(&client, X, "a-from-b", from_b).await,
    );
    expect(
        &cluster,
        &mut times,
        t,
        &[
            ("new policy denies c -> a", &c, &a, Expect::Denied),
            ("new policy keeps b -> a", &b, &a, Expect::Allowed),
            ("ingress policy leaves a's egress open", &a, &c, Expect::Allowed),
        ],
    )
    .await;

    // 2. Relabelling the peer takes its address out of the rules and back.
    let t = Instant::now();
    check(
        &cluster,
        "relabel",
        svc::label_pod(&client, X, "b", "app", "z").await,
    );
    expect(
        &cluster,
        &mut times,
        t,
        &[("peer relabelled away: b -> a denied", &b, &a, Expect::Denied)],
    )
    .await;
    let t = Instant::now();
    check(
        &cluster,
        "relabel",
        svc::label_pod(&client, X, "b", "app", "b").await,
    );
    expect(
        &cluster,
        &mut times,
        t,
        &[("peer relabelled back: b -> a allowed", &b, &a, Expect::Allowed)],
    )
    .await;

    // 3. A namespace selector follows the namespace's labels.
    let t = Instant::now();
    let from_blue = json!({"podSelector": {"matchLabels": {"app": "a"}},
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"team": "blue"}}}]}]});
    check(
        &cluster,
        "policy",
        netpol::apply_policy(&client, X, "a-from-blue", from_blue).await,
    );
    expect(
        &cluster,
        &mut times,
        t,
        &[("second policy adds up: c -> a allowed", &c, &a, Expect::Allowed)],
    )
    .await;
    let t = Instant::now();
    check(
        &cluster,
        "label",
        netpol::label_namespace(&client, Y, "team", "green").await,
    );
    expect(
        &cluster,
        &mut times,
        t,
        &[("namespace relabelled: c -> a denied", &c, &a, Expect::Denied)],
    )
    .await;
    check(
        &cluster,
        "delete",
        netpol::delete_policy(&client, X, "a-from-blue").await,
    );

    // 4. Egress: b may reach only app=a; its ingress stays open.
    let t = Instant::now();
    let egress = json!({"podSelector": {"matchLabels": {"app": "b"}}, "policyTypes": ["Egress"],
        "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "a"}}}], "ports": [{"protocol": "TCP", "port": 8000, "endPort": 8090}]}]});
    check(
        &cluster,
        "policy",
        netpol::apply_policy(&client, X, "b-egress", egress).await,
    );
    expect(
        &cluster,
        &mut times,
        t,
        &[
            ("egress policy denies b -> c", &b, &c, Expect::Denied),
            (
                "egress policy (endPort range) keeps b -> a",
                &b,
                &a,
                Expect::Allowed,
            ),
            ("egress policy leaves b's ingress open", &c, &b, Expect::Allowed),
        ],
    )
    .await;

    // 5. No window: a pod created under a default-deny is never reachable.
    check(
        &cluster,
        "policy",
        netpol::apply_policy(
            &client,
            X,
            "deny-d",
            json!({"podSelector": {"matchLabels": {"app": "d"}}}),
        )
        .await,
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    check(
        &cluster,
        "pod d",
        pods::create_pod_with_ports(&client, X, "d", Some(&nodes[0]), &[(PORT, "TCP")]).await,
    );
    check(
        &cluster,
        "label",
        svc::label_pod(&client, X, "d", "app", "d").await,
    );
    let mut d_ip = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while d_ip.is_empty() && Instant::now() < deadline {
        let v = check(
            &cluster,
            "collect",
            pods::collect(&cluster, &client, &[X.into()]).await,
        );
        d_ip = v
            .iter()
            .find(|v| v.name == "d")
            .map(|v| v.pod_ip.clone())
            .unwrap_or_default();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_or_logs(&cluster, !d_ip.is_empty(), "pod d got no address".into());
    let mut answered = Vec::new();
    for _ in 0..10 {
        let r = svc::tcp_answer(&c.netns, &d_ip, PORT, netpol::PROBE_TIMEOUT).await;
        if !r.starts_with("error") {
            answered.push(r);
        }
    }
    assert_or_logs(
        &cluster,
        answered.is_empty(),
        format!("pod d answered under a default-deny: {answered:?}"),
    );
    check(
        &cluster,
        "ready d",
        pods::wait_ready(&client, &[(X.into(), "d".into())], Duration::from_secs(60)).await,
    );

    // kuryrctl policies: each policy's group, its rules in Neutron as applied, the pods it
    // selects; the open-direction groups; nothing orphaned (exit 0).
    let want = [("a-from-b", "a"), ("b-egress", "b"), ("deny-d", "d")];
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut code, mut rows) = kuryrctl_policies(&cluster);
    while code != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        (code, rows) = kuryrctl_policies(&cluster);
    }
    for (policy, pod) in want {
        let key = format!("{X}/{policy}");
        let row = rows
            .iter()
            .find(|r| r["policy"].as_str() == Some(key.as_str()))
            .cloned()
            .unwrap_or_default();
        assert_or_logs(
            &cluster,
            row["state"] == "ok"
                && row["pods"] == json!([format!("{X}/{pod}")])
                && row["rules_in_neutron"] == row["rules_applied"]
                && row["security_group"].is_string(),
            format!("kuryrctl policies: {key} should be ok, select {X}/{pod}: {row} (all: {rows:?})"),
        );
    }
    assert_or_logs(
        &cluster,
        code == 0 && rows.iter().filter(|r| r["state"] == "open-direction").count() == 2,
        format!("kuryrctl policies exit {code}, rows {rows:?}"),
    );

    // 6. An untranslatable policy is told, not applied.
    let bad = json!({"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0/8"}}]}]});
    check(
        &cluster,
        "policy",
        netpol::apply_policy(&client, Y, "bad", bad).await,
    );
    let m = check(
        &cluster,
        "warning",
        public_ip::wait_warning_on(
            &client,
            Y,
            "NetworkPolicy",
            "bad",
            "is not a CIDR",
            Duration::from_secs(30),
        )
        .await,
    );
    eprintln!("invalid policy told: {m}");
    let t = Instant::now();
    check(&cluster, "delete", netpol::delete_policy(&client, Y, "bad").await);

    // 7. Policies deleted: open again, and their groups gone from Neutron.
    for name in ["a-from-b", "b-egress", "deny-d"] {
        check(&cluster, "delete", netpol::delete_policy(&client, X, name).await);
    }
    expect(
        &cluster,
        &mut times,
        t,
        &[
            ("policies deleted: c -> a allowed", &c, &a, Expect::Allowed),
            ("policies deleted: b -> c allowed", &b, &c, Expect::Allowed),
        ],
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut left = Vec::new();
    while Instant::now() < deadline {
        left = check(&cluster, "groups", netpol::groups_tagged(&cluster.tag));
        if left.iter().all(|g| g.name.starts_with("kuryr-rs/open-")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_or_logs(
        &cluster,
        left.iter().all(|g| g.name.starts_with("kuryr-rs/open-")),
        format!("policy groups left after their policies were deleted: {left:?}"),
    );

    let mut all: Vec<u128> = times.0.iter().map(|(_, d)| d.as_millis()).collect();
    all.sort_unstable();
    eprintln!(
        "{} changes enforced; max {} ms, median {} ms",
        all.len(),
        all.last().copied().unwrap_or(0),
        all.get(all.len() / 2).copied().unwrap_or(0)
    );
}

/// `kuryrctl policies -o json` against the cluster: exit code and rows.
fn kuryrctl_policies(cluster: &kuryr_e2e::cluster::Cluster) -> (i32, Vec<serde_json::Value>) {
    let (code, doc, _) = kuryrctl_json(cluster, &["policies"]);
    let rows = doc["items"].as_array().cloned().unwrap_or_default();
    eprintln!("kuryrctl policies (exit {code}): {} rows", rows.len());
    (code, rows)
}
