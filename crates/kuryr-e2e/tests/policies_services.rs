//! NetworkPolicy and Services together (issue 14 on top of issue 13): traffic through a
//! Service's Octavia VIP (OVN provider) follows the policies of the pods behind it, and a pod
//! whose egress is isolated reaches a Service's ClusterIP exactly when the policy lets it reach
//! the Service's backends on the target port. Every claim proven by TCP connections from inside
//! pods' network namespaces.

mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use common::*;
use kuryr_e2e::{netpol, pods, services as svc};
use serde_json::json;

const BACKENDS: &str = "nps-backend";
const CLIENTS: &str = "nps-client";
const PORT: u16 = 8080;
const WITHIN: Duration = Duration::from_secs(30);

/// Probes `ip:port` from `netns` until three answers in a row are what `ok` accepts; returns
/// how long that took from `since`.
async fn until(
    cluster: &kuryr_e2e::cluster::Cluster,
    what: &str,
    netns: &str,
    ip: &str,
    port: u16,
    ok: impl Fn(&str) -> bool,
    since: Instant,
) -> Duration {
    let mut good = 0;
    let mut first: Option<Duration> = None;
    let mut last = String::new();
    while since.elapsed() < WITHIN {
        let a = svc::tcp_answer(netns, ip, port, netpol::PROBE_TIMEOUT).await;
        if ok(&a) {
            first.get_or_insert(since.elapsed());
            good += 1;
            if good == 3 {
                let took = first.unwrap_or_default();
                eprintln!("{took:>10?}  {what}");
                return took;
            }
        } else {
            good = 0;
            first = None;
            last = a;
        }
    }
    panic!(
        "{what}: {ip}:{port} from {netns} not as expected within {WITHIN:?} (last answer {last:?})\n{}",
        cluster.log_tails(40)
    );
}

fn answered_by_backend(a: &str) -> bool {
    a.starts_with("web-")
}

fn dropped(a: &str) -> bool {
    a.starts_with("error")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_follow_the_policies_of_their_backends_and_clients() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| {
        o.services = true;
        o.policies = true;
    });
    let client = check(&cluster, "client", cluster.client().await);
    let nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    let node = |i: usize| nodes[i % nodes.len()].as_str();
    let mut keys = Vec::new();
    let spec: [(&str, &str, usize, &str, &str); 4] = [
        (BACKENDS, "web-0", 0, "app", "web"),
        (BACKENDS, "web-1", 1, "app", "web"),
        (CLIENTS, "client", 0, "role", "client"),
        (CLIENTS, "other", 1, "role", "other"),
    ];
    for (ns, name, n, k, v) in spec {
        check(&cluster, "namespace", pods::ensure_namespace(&client, ns).await);
        let labels = BTreeMap::from([(k.to_string(), v.to_string())]);
        check(
            &cluster,
            "pod",
            pods::create_pod_labelled(&client, (ns, name), Some(node(n)), &[(PORT, "TCP")], labels).await,
        );
        keys.push((ns.to_string(), name.to_string()));
    }
    check(&cluster, "ready", pods::wait_ready(&client, &keys, READY).await);
    let web_vip = check(
        &cluster,
        "service web",
        svc::create_service(
            &client,
            BACKENDS,
            "web",
            &[("http", 80, "TCP", PORT)],
            Some(("app", "web")),
            false,
        )
        .await,
    );
    let other_vip = check(
        &cluster,
        "service other",
        svc::create_service(
            &client,
            CLIENTS,
            "other",
            &[("http", 80, "TCP", PORT)],
            Some(("role", "other")),
            false,
        )
        .await,
    );
    check(
        &cluster,
        "members web",
        svc::wait_members(&client, BACKENDS, "web", 2, Duration::from_secs(120)).await,
    );
    check(
        &cluster,
        "members other",
        svc::wait_members(&client, CLIENTS, "other", 1, Duration::from_secs(120)).await,
    );
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &[BACKENDS.into(), CLIENTS.into()]).await,
    );
    let pod = |name: &str| {
        views
            .iter()
            .find(|v| v.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not collected: {views:?}"))
    };
    let (cl, other) = (pod("client"), pod("other"));

    // Open before any policy.
    let t = Instant::now();
    until(
        &cluster,
        "baseline: client -> web VIP",
        &cl.netns,
        &web_vip,
        80,
        answered_by_backend,
        t,
    )
    .await;
    until(
        &cluster,
        "baseline: other -> web VIP",
        &other.netns,
        &web_vip,
        80,
        answered_by_backend,
        t,
    )
    .await;
    until(
        &cluster,
        "baseline: client -> other VIP",
        &cl.netns,
        &other_vip,
        80,
        |a| a == "other",
        t,
    )
    .await;

    // 1. The backends admit only role=client (any namespace) on their port: through the VIP
    //    (the OVN load balancer keeps the client's address) client gets in, other does not.
    let t = Instant::now();
    let ingress = json!({"podSelector": {"matchLabels": {"app": "web"}},
        "ingress": [{"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"role": "client"}}}],
                     "ports": [{"port": PORT}]}]});
    check(
        &cluster,
        "policy",
        netpol::apply_policy(&client, BACKENDS, "web-from-clients", ingress).await,
    );
    until(
        &cluster,
        "backends isolated: other -> web VIP dropped",
        &other.netns,
        &web_vip,
        80,
        dropped,
        t,
    )
    .await;
    until(
        &cluster,
        "backends isolated: client -> web VIP answered",
        &cl.netns,
        &web_vip,
        80,
        answered_by_backend,
        t,
    )
    .await;
    // Both backends, not just one: every answer over several tries comes from web-0 or web-1.
    let answers = svc::tcp_answers(&cl.netns, &web_vip, 80, 16).await;
    assert_or_logs(
        &cluster,
        answers.keys().all(|a| answered_by_backend(a)) && answers.len() == 2,
        format!("client through the VIP should reach web-0 and web-1: {answers:?}"),
    );

    // 2. The client may only egress to the web backends on their port: the web Service's
    //    ClusterIP (port 80 → 8080) is reachable, the other Service's ClusterIP and the other
    //    pod directly are not.
    let t = Instant::now();
    let egress = json!({"podSelector": {"matchLabels": {"role": "client"}}, "policyTypes": ["Egress"],
        "egress": [{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": BACKENDS}},
                            "podSelector": {"matchLabels": {"app": "web"}}}],
                    "ports": [{"port": PORT}]}]});
    check(
        &cluster,
        "policy",
        netpol::apply_policy(&client, CLIENTS, "client-egress", egress).await,
    );
    until(
        &cluster,
        "client egress isolated: -> other VIP dropped",
        &cl.netns,
        &other_vip,
        80,
        dropped,
        t,
    )
    .await;
    until(
        &cluster,
        "client egress isolated: -> other pod dropped",
        &cl.netns,
        &other.pod_ip,
        PORT,
        dropped,
        t,
    )
    .await;
    until(
        &cluster,
        "client egress isolated: -> web VIP answered",
        &cl.netns,
        &web_vip,
        80,
        answered_by_backend,
        t,
    )
    .await;

    // 3. Policies deleted: everything open again.
    let t = Instant::now();
    for (ns, name) in [(BACKENDS, "web-from-clients"), (CLIENTS, "client-egress")] {
        check(&cluster, "delete", netpol::delete_policy(&client, ns, name).await);
    }
    until(
        &cluster,
        "deleted: other -> web VIP answered",
        &other.netns,
        &web_vip,
        80,
        answered_by_backend,
        t,
    )
    .await;
    until(
        &cluster,
        "deleted: client -> other VIP answered",
        &cl.netns,
        &other_vip,
        80,
        |a| a == "other",
        t,
    )
    .await;
}
