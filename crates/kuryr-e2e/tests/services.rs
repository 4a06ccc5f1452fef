//! Services end to end (issue 13): a cluster with the Service handlers on the sandbox cloud
//! (Octavia, OVN provider); every claim proven by real connections from inside a pod's network
//! namespace through the Service's VIP.

mod common;

use std::{collections::BTreeSet, time::Duration};

use common::*;
use kuryr_e2e::{pods, services as svc};

const NS: &str = "svc-e2e";
const LB_WAIT: Duration = Duration::from_secs(90);

fn names(answers: &std::collections::BTreeMap<String, usize>) -> BTreeSet<String> {
    answers.keys().cloned().collect()
}

/// One cluster, many claims (each cluster up costs a minute on this machine): balancing over
/// backends on two nodes, hairpin, UDP, member removal and addition, port change, selector
/// change, a selectorless Service with hand-written Endpoints, headless, and deletion leaving nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_are_octavia_load_balancers_answering_on_their_vip() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.services = true);
    let client = check(&cluster, "client", cluster.client().await);
    check(&cluster, "namespace", pods::ensure_namespace(&client, NS).await);
    // Two backends, one per node; names of equal length so answers compare.
    let ports = [(8080, "TCP"), (5353, "UDP")];
    let mut keys = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let name = format!("web-{i}");
        check(
            &cluster,
            "create pod",
            pods::create_pod_with_ports(&client, NS, &name, Some(&node.name), &ports).await,
        );
        keys.push((NS.to_string(), name));
    }
    check(
        &cluster,
        "pods Ready",
        pods::wait_ready(&client, &keys, READY).await,
    );
    let vip = check(
        &cluster,
        "create service",
        svc::create_service(
            &client,
            NS,
            "web",
            &[("http", 80, "TCP", 8080), ("dns", 53, "UDP", 5353)],
            Some(("app", "kuryr-e2e")),
            false,
        )
        .await,
    );
    let t0 = std::time::Instant::now();
    let lb_id = check(
        &cluster,
        "load balancer",
        svc::wait_members(&client, NS, "web", 4, LB_WAIT).await,
    );
    eprintln!(
        "Service web: VIP {vip}, load balancer {lb_id} ready in {:?}",
        t0.elapsed()
    );
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &[NS.into()]).await,
    );
    let Some(client_pod) = views.iter().find(|v| v.name == "web-0") else {
        panic!("web-0 not collected: {views:?}");
    };

    // TCP through the VIP reaches both backends (on two nodes), including the client itself
    // (hairpin).
    let answers = svc::tcp_answers(&client_pod.netns, &vip, 80, 24).await;
    eprintln!("TCP {vip}:80 from {}: {answers:?}", client_pod.name);
    assert_or_logs(
        &cluster,
        names(&answers) == BTreeSet::from(["web-0".to_string(), "web-1".to_string()]),
        format!("TCP through the VIP should reach web-0 and web-1, got {answers:?}"),
    );
    // kuryrctl lbs: the Service's load balancer, ACTIVE in Octavia, with both members.
    let (_, rows, stderr) = kuryrctl_json(&cluster, &["lbs"]);
    let web = format!("{NS}/web");
    let row = rows["items"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["service"].as_str() == Some(web.as_str())))
        .cloned()
        .unwrap_or_default();
    assert_or_logs(
        &cluster,
        row["provisioning"] == "ACTIVE"
            && row["members"].as_array().map(Vec::len) == Some(4)
            && row["id"] == lb_id.as_str(),
        format!(
            "kuryrctl lbs should show {NS}/web ACTIVE with 4 members (load balancer {lb_id}): row {row}; stderr {}",
            stderr
        ),
    );
    // UDP.
    let udp = svc::udp_answer(&client_pod.netns, &vip, 53, Duration::from_secs(3)).await;
    assert_or_logs(
        &cluster,
        udp == "web-0" || udp == "web-1",
        format!("UDP through the VIP: answer {udp:?}"),
    );

    // A backend deleted: its member goes; only the other answers.
    check(
        &cluster,
        "delete pod",
        pods::delete_pod(&client, NS, "web-1").await,
    );
    check(
        &cluster,
        "member removed",
        svc::wait_members(&client, NS, "web", 2, LB_WAIT).await,
    );
    let answers = svc::tcp_answers(&client_pod.netns, &vip, 80, 10).await;
    assert_or_logs(
        &cluster,
        names(&answers) == BTreeSet::from(["web-0".to_string()]),
        format!("after deleting web-1 only web-0 should answer, got {answers:?}"),
    );
    // One created: its member comes.
    let node1 = cluster.nodes.get(1).map(|n| n.name.clone());
    check(
        &cluster,
        "create pod",
        pods::create_pod_with_ports(&client, NS, "web-2", node1.as_deref(), &ports).await,
    );
    check(
        &cluster,
        "pod Ready",
        pods::wait_ready(&client, &[(NS.into(), "web-2".into())], READY).await,
    );
    check(
        &cluster,
        "member added",
        svc::wait_members(&client, NS, "web", 4, LB_WAIT).await,
    );
    let answers = svc::tcp_answers(&client_pod.netns, &vip, 80, 24).await;
    assert_or_logs(
        &cluster,
        names(&answers).contains("web-2"),
        format!("the new backend web-2 should answer, got {answers:?}"),
    );

    // Port change: 80 → 81 (the listener follows; 80 no longer answers).
    check(
        &cluster,
        "port change",
        svc::set_service_ports(&client, NS, "web", &[("http", 81, "TCP", 8080)]).await,
    );
    let deadline = std::time::Instant::now() + LB_WAIT;
    loop {
        let a = svc::tcp_answers(&client_pod.netns, &vip, 81, 1).await;
        if names(&a).iter().any(|n| n.starts_with("web-")) {
            break;
        }
        assert_or_logs(
            &cluster,
            std::time::Instant::now() < deadline,
            format!("port 81 never answered: {a:?}"),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let old = svc::tcp_answers(&client_pod.netns, &vip, 80, 1).await;
    assert_or_logs(
        &cluster,
        !names(&old).iter().any(|n| n.starts_with("web-")),
        format!("port 80 still answers after the change: {old:?}"),
    );

    // Selector change: only the pod carrying the new label stays a backend.
    check(
        &cluster,
        "label",
        svc::label_pod(&client, NS, "web-2", "role", "solo").await,
    );
    check(
        &cluster,
        "selector change",
        svc::set_service_selector(&client, NS, "web", ("role", "solo"), "app").await,
    );
    let deadline = std::time::Instant::now() + LB_WAIT;
    loop {
        let a = svc::tcp_answers(&client_pod.netns, &vip, 81, 8).await;
        if names(&a) == BTreeSet::from(["web-2".to_string()]) {
            break;
        }
        assert_or_logs(
            &cluster,
            std::time::Instant::now() < deadline,
            format!("after the selector change only web-2 should answer, got {a:?}"),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A selectorless Service with hand-written Endpoints (web-0's address).
    let web0_ip = views
        .iter()
        .find(|v| v.name == "web-0")
        .map(|v| v.pod_ip.clone())
        .unwrap_or_default();
    let manual_vip = check(
        &cluster,
        "selectorless service",
        svc::create_service(&client, NS, "manual", &[("http", 80, "TCP", 8080)], None, false).await,
    );
    check(
        &cluster,
        "endpoints",
        svc::write_endpoints(&client, NS, "manual", &[&web0_ip], &[("http", 8080, "TCP")]).await,
    );
    check(
        &cluster,
        "manual lb",
        svc::wait_members(&client, NS, "manual", 1, LB_WAIT).await,
    );
    let a = svc::tcp_answers(&client_pod.netns, &manual_vip, 80, 3).await;
    assert_or_logs(
        &cluster,
        names(&a) == BTreeSet::from(["web-0".to_string()]),
        format!("selectorless Service should reach web-0, got {a:?}"),
    );

    // Headless: no load balancer.
    check(
        &cluster,
        "headless service",
        svc::create_service(
            &client,
            NS,
            "headless",
            &[("http", 80, "TCP", 8080)],
            Some(("app", "kuryr-e2e")),
            true,
        )
        .await,
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let k = check(&cluster, "headless klb", svc::klb(&client, NS, "headless").await);
    assert_or_logs(
        &cluster,
        k.is_none(),
        "a headless Service got a KuryrLoadBalancer".into(),
    );

    // Deleting the namespace leaves no load balancer of it in Octavia.
    check(
        &cluster,
        "delete namespace",
        pods::delete_namespace(&client, NS).await,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let left: Vec<_> = check(&cluster, "octavia", svc::lbs_tagged(&cluster.tag))
            .into_iter()
            .filter(|l| l.name.starts_with(&format!("{NS}/")))
            .collect();
        if left.is_empty() {
            break;
        }
        assert_or_logs(
            &cluster,
            std::time::Instant::now() < deadline,
            format!("load balancers left after deleting the namespace: {left:?}"),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `kill -9` of the controller while 10 Services are being created: after the restart every
/// Service converges (its VIP answers), and Octavia holds exactly one load balancer per Service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_killed_while_services_are_created_converges_without_duplicates() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.services = true);
    let client = check(&cluster, "client", cluster.client().await);
    let ns = "svc-kill";
    check(&cluster, "namespace", pods::ensure_namespace(&client, ns).await);
    let mut keys = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let name = format!("web-{i}");
        check(
            &cluster,
            "create pod",
            pods::create_pod(&client, ns, &name, Some(&node.name)).await,
        );
        keys.push((ns.to_string(), name));
    }
    check(
        &cluster,
        "pods Ready",
        pods::wait_ready(&client, &keys, READY).await,
    );
    let mut vips = Vec::new();
    for i in 0..10 {
        vips.push(check(
            &cluster,
            "create service",
            svc::create_service(
                &client,
                ns,
                &format!("s{i}"),
                &[("http", 80, "TCP", 8080)],
                Some(("app", "kuryr-e2e")),
                false,
            )
            .await,
        ));
    }
    // Mid-creation: the first load balancers are being written.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut recorded = 0;
    for i in 0..10 {
        let k = check(&cluster, "klb", svc::klb(&client, ns, &format!("s{i}")).await);
        recorded += usize::from(k.and_then(|k| k.status).and_then(|s| s.loadbalancer).is_some());
    }
    let in_octavia = check(&cluster, "octavia", svc::lbs_tagged(&cluster.tag))
        .iter()
        .filter(|l| l.name.starts_with("svc-kill/"))
        .count();
    eprintln!(
        "at the kill: {recorded}/10 KuryrLoadBalancers record a load balancer, {in_octavia} exist in Octavia"
    );
    check(
        &cluster,
        "kill -9 controller",
        cluster.restart("controller", true),
    );
    for i in 0..10 {
        check(
            &cluster,
            "converged",
            svc::wait_members(&client, ns, &format!("s{i}"), 2, Duration::from_secs(180)).await,
        );
    }
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &[ns.into()]).await,
    );
    let netns = views.first().map(|v| v.netns.clone()).unwrap_or_default();
    for vip in &vips {
        let a = svc::tcp_answers(&netns, vip, 80, 2).await;
        assert_or_logs(
            &cluster,
            a.keys().all(|k| k.starts_with("web-")),
            format!("VIP {vip} after the restart: {a:?}"),
        );
    }
    let lbs = check(&cluster, "octavia", svc::lbs_tagged(&cluster.tag));
    let mut per_name: std::collections::BTreeMap<String, usize> = Default::default();
    for l in lbs.iter().filter(|l| l.name.starts_with("svc-kill/")) {
        *per_name.entry(l.name.clone()).or_default() += 1;
    }
    eprintln!("load balancers per Service after the kill: {per_name:?}");
    assert_or_logs(
        &cluster,
        per_name.len() == 10 && per_name.values().all(|n| *n == 1),
        format!("expected exactly one load balancer per Service: {per_name:?}"),
    );
}

/// `type: LoadBalancer` (issue 13 §4): a floating IP from the external network on the VIP,
/// shown in the Service's `status.loadBalancer.ingress` and answered by the backends from the
/// machine's root namespace (the sandbox's outside); released when the type changes back; a
/// user's `loadBalancerIP` used and kept after the Service is deleted; deleting the namespace
/// leaves no floating IP or load balancer of kuryr's behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_balancer_services_answer_from_outside_on_a_floating_ip() {
    use kuryr_e2e::public_ip as pip;
    const NS: &str = "svc-lb-e2e";
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.services = true);
    let client = check(&cluster, "client", cluster.client().await);
    check(&cluster, "namespace", pods::ensure_namespace(&client, NS).await);
    let mut keys = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let name = format!("web-{i}");
        check(
            &cluster,
            "create pod",
            pods::create_pod_with_ports(&client, NS, &name, Some(&node.name), &[(8080, "TCP")]).await,
        );
        keys.push((NS.to_string(), name));
    }
    check(
        &cluster,
        "pods Ready",
        pods::wait_ready(&client, &keys, READY).await,
    );
    let ports = [("http", 80, "TCP", 8080)];
    let sel = Some(("app", "kuryr-e2e"));
    check(
        &cluster,
        "create service",
        svc::create_service(&client, NS, "web", &ports, sel, false).await,
    );
    check(
        &cluster,
        "members",
        svc::wait_members(&client, NS, "web", 2, LB_WAIT).await,
    );
    let ours = |f: &pip::Fip| f.tags.contains(&cluster.tag);

    // ClusterIP → LoadBalancer: a floating IP, answered from outside by both backends.
    let t0 = std::time::Instant::now();
    check(
        &cluster,
        "type LoadBalancer",
        pip::set_service_type(&client, NS, "web", "LoadBalancer", None).await,
    );
    let fip = check(
        &cluster,
        "ingress",
        pip::wait_ingress(&client, NS, "web", false, LB_WAIT).await,
    );
    let first = pip::outside_tcp_until_answered(&fip, 80, Duration::from_secs(30)).await;
    eprintln!(
        "LoadBalancer web: floating IP {fip} answered {first:?} from outside after {:?}",
        t0.elapsed()
    );
    let mut answers = BTreeSet::new();
    for _ in 0..24 {
        answers.insert(pip::outside_tcp_answer(&fip, 80, Duration::from_secs(3)).await);
    }
    assert_or_logs(
        &cluster,
        answers == BTreeSet::from(["web-0".to_string(), "web-1".to_string()]),
        format!("{fip}:80 from outside should reach web-0 and web-1, got {answers:?} (first {first:?})"),
    );
    let fips = check(&cluster, "neutron", pip::floating_ips());
    let row = fips.iter().find(|f| f.address == fip).cloned();
    assert_or_logs(
        &cluster,
        row.as_ref().is_some_and(|f| ours(f) && f.port_id.is_some()),
        format!(
            "floating IP {fip} should be kuryr's (tag {}) and on the VIP port: {row:?}",
            cluster.tag
        ),
    );
    let k = check(&cluster, "klb", svc::klb(&client, NS, "web").await);
    let info = k.and_then(|k| k.status).and_then(|s| s.service_pub_ip_info);
    assert_or_logs(
        &cluster,
        info.as_ref()
            .is_some_and(|i| i.ip_addr == fip && i.alloc_method == "pool"),
        format!("KLB status.service_pub_ip_info should record {fip} (pool): {info:?}"),
    );

    // Back to ClusterIP: the address is released and the Service shows none.
    check(
        &cluster,
        "type ClusterIP",
        pip::set_service_type(&client, NS, "web", "ClusterIP", None).await,
    );
    check(
        &cluster,
        "ingress cleared",
        pip::wait_ingress(&client, NS, "web", true, LB_WAIT).await,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while check(&cluster, "neutron", pip::floating_ips())
        .iter()
        .any(|f| f.address == fip)
    {
        assert_or_logs(
            &cluster,
            std::time::Instant::now() < deadline,
            format!("floating IP {fip} not released after the type went back to ClusterIP"),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A user's address (loadBalancerIP): used, and kept (freed) when the Service goes.
    let user = check(
        &cluster,
        "user floating IP",
        pip::create_user_fip("kuryr-sandbox-external"),
    );
    check(
        &cluster,
        "loadBalancerIP",
        pip::set_service_type(&client, NS, "web", "LoadBalancer", Some(&user.address)).await,
    );
    let got = check(
        &cluster,
        "ingress",
        pip::wait_ingress(&client, NS, "web", false, LB_WAIT).await,
    );
    let answer = pip::outside_tcp_until_answered(&user.address, 80, Duration::from_secs(30)).await;
    assert_or_logs(
        &cluster,
        got == user.address && (answer == "web-0" || answer == "web-1"),
        format!(
            "loadBalancerIP {}: ingress {got}, outside answer {answer:?}",
            user.address
        ),
    );
    check(
        &cluster,
        "delete service",
        svc::delete_service(&client, NS, "web").await,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = check(&cluster, "neutron", pip::floating_ips());
        let kept = now.iter().find(|f| f.id == user.id).cloned();
        if kept.as_ref().is_some_and(|f| f.port_id.is_none()) {
            break;
        }
        assert_or_logs(
            &cluster,
            kept.is_some() && std::time::Instant::now() < deadline,
            format!("the user's floating IP must be kept and freed after the Service is deleted: {kept:?}"),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    check(&cluster, "delete user floating IP", pip::delete_fip(&user.id));

    // Deleting the namespace of a LoadBalancer Service leaves nothing of kuryr's behind.
    check(
        &cluster,
        "create web2",
        svc::create_service(&client, NS, "web2", &ports, sel, false).await,
    );
    check(
        &cluster,
        "type LoadBalancer",
        pip::set_service_type(&client, NS, "web2", "LoadBalancer", None).await,
    );
    let fip2 = check(
        &cluster,
        "ingress",
        pip::wait_ingress(&client, NS, "web2", false, LB_WAIT).await,
    );
    // loadBalancerSourceRanges and sessionAffinity: the ovn provider has neither (no listener
    // ACLs, no session persistence): each named in a Warning Event on the Service.
    check(
        &cluster,
        "source ranges",
        pip::patch_service_spec(
            &client,
            NS,
            "web2",
            serde_json::json!({"loadBalancerSourceRanges": ["192.0.2.0/24"], "sessionAffinity": "ClientIP"}),
        )
        .await,
    );
    for text in [
        "loadBalancerSourceRanges: the ovn provider",
        "sessionAffinity ClientIP: the ovn provider",
    ] {
        let m = check(
            &cluster,
            "warning",
            pip::wait_warning(&client, NS, "web2", text, Duration::from_secs(30)).await,
        );
        eprintln!("Warning on {NS}/web2: {m}");
    }
    // A health monitor (cloud-provider-openstack's annotation): the ovn provider here cannot
    // create one for Kuryr's DHCP-less subnets (see docs/services.md): the monitor is left in
    // ERROR, the Service is told, the load balancer stays ACTIVE and keeps answering.
    check(
        &cluster,
        "health monitor annotation",
        svc::annotate_service(
            &client,
            NS,
            "web2",
            "loadbalancer.openstack.org/enable-health-monitor",
            "true",
        )
        .await,
    );
    let m = check(
        &cluster,
        "warning",
        pip::wait_warning(&client, NS, "web2", "health monitor of", Duration::from_secs(60)).await,
    );
    eprintln!("Warning on {NS}/web2: {m}");
    let answer = pip::outside_tcp_until_answered(&fip2, 80, Duration::from_secs(30)).await;
    let lbs: Vec<_> = check(&cluster, "octavia", svc::lbs_tagged(&cluster.tag))
        .into_iter()
        .filter(|l| l.name == format!("{NS}/web2"))
        .collect();
    assert_or_logs(
        &cluster,
        (answer == "web-0" || answer == "web-1") && lbs.len() == 1 && lbs[0].status == "ACTIVE",
        format!(
            "with its monitor in ERROR, web2 should keep one ACTIVE load balancer answering: {answer:?} {lbs:?}"
        ),
    );
    check(
        &cluster,
        "delete namespace",
        pods::delete_namespace(&client, NS).await,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let lbs: Vec<_> = check(&cluster, "octavia", svc::lbs_tagged(&cluster.tag))
            .into_iter()
            .filter(|l| l.name.starts_with(&format!("{NS}/")))
            .collect();
        let fips: Vec<_> = check(&cluster, "neutron", pip::floating_ips())
            .into_iter()
            .filter(|f| ours(f) || f.address == fip2)
            .collect();
        if lbs.is_empty() && fips.is_empty() {
            break;
        }
        assert_or_logs(
            &cluster,
            std::time::Instant::now() < deadline,
            format!("left after deleting the namespace: load balancers {lbs:?}, floating IPs {fips:?}"),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Octavia unreachable on the real cloud (issue 13 §5): with octavia-api stopped, a new Service
/// gets Warning Events and the controller keeps running (same process, retrying with back-off);
/// once Octavia is back the Service converges with exactly one load balancer. Then a ClusterIP
/// another Neutron port holds (another cluster's load balancer on a shared service subnet, a VIP
/// port left behind): the Warning names that port, and the Service converges once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octavia_outage_is_retried_with_events_and_converges_when_it_returns() {
    use k8s_openapi::api::core::v1::Event;
    use kube::{Api, api::ListParams};
    const NS: &str = "svc-outage-e2e";
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.services = true);
    let client = check(&cluster, "client", cluster.client().await);
    check(&cluster, "namespace", pods::ensure_namespace(&client, NS).await);
    let node = cluster.nodes.first().map(|n| n.name.clone());
    check(
        &cluster,
        "create pod",
        pods::create_pod_with_ports(&client, NS, "web-0", node.as_deref(), &[(8080, "TCP")]).await,
    );
    check(
        &cluster,
        "pod Ready",
        pods::wait_ready(&client, &[(NS.into(), "web-0".into())], READY).await,
    );
    let controller_pid = cluster.pid("controller");

    // Octavia goes away; whatever happens next, it comes back before the test ends.
    let sandbox = kuryr_e2e::cluster::repo_root().join("sandbox");
    check(
        &cluster,
        "stop octavia-api",
        kuryr_e2e::cluster::run(
            "sandbox/down --component octavia-api",
            std::process::Command::new(sandbox.join("down")).args(["--component", "octavia-api"]),
        ),
    );
    let restore = RestoreCloud;
    let ports = [("http", 80, "TCP", 8080)];
    let vip = check(
        &cluster,
        "create service",
        svc::create_service(&client, NS, "web", &ports, Some(("app", "kuryr-e2e")), false).await,
    );
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let warning = loop {
        let l = check(
            &cluster,
            "events",
            events
                .list(&ListParams::default())
                .await
                .map_err(|e| kuryr_e2e::error::Error::Kube {
                    what: "list events".into(),
                    source: e,
                }),
        );
        if let Some(e) = l.items.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.involved_object.kind.as_deref() == Some("Service")
                && e.involved_object.name.as_deref() == Some("web")
        }) {
            break e;
        }
        assert_or_logs(
            &cluster,
            std::time::Instant::now() < deadline,
            "no Warning Event on the Service while Octavia is down".into(),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!(
        "while Octavia is down: {} {}",
        warning.reason.unwrap_or_default(),
        warning.message.unwrap_or_default()
    );
    // Some more seconds of outage: the controller retries, it does not die.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_or_logs(
        &cluster,
        cluster.pid("controller") == controller_pid && controller_pid.is_some(),
        format!(
            "the controller must survive the outage: pid {controller_pid:?} → {:?}",
            cluster.pid("controller")
        ),
    );

    // Octavia back: the Service converges, one load balancer.
    drop(restore);
    let t0 = std::time::Instant::now();
    check(
        &cluster,
        "members",
        svc::wait_members(&client, NS, "web", 1, Duration::from_secs(120)).await,
    );
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &[NS.into()]).await,
    );
    let Some(pod) = views.first() else {
        panic!("no pod collected")
    };
    let answer = svc::tcp_answer(&pod.netns, &vip, 80, Duration::from_secs(3)).await;
    eprintln!(
        "Octavia back: converged in {:?}, VIP answered {answer:?}",
        t0.elapsed()
    );
    assert_or_logs(
        &cluster,
        answer == "web-0",
        format!("VIP {vip} after the outage: {answer:?}"),
    );
    let lbs: Vec<_> = check(&cluster, "octavia", svc::lbs_tagged(&cluster.tag))
        .into_iter()
        .filter(|l| l.name == format!("{NS}/web"))
        .collect();
    assert_or_logs(
        &cluster,
        lbs.len() == 1,
        format!("exactly one load balancer for {NS}/web: {lbs:?}"),
    );

    // A ClusterIP held behind kuryr's back.
    let topo = check(&cluster, "topology", kuryr_e2e::cluster::topology());
    let (net, subnet) = (
        topo.get("SERVICE_NETWORK_ID").cloned().unwrap_or_default(),
        topo.get("SERVICE_SUBNET_ID").cloned().unwrap_or_default(),
    );
    const HELD: &str = "10.96.100.77";
    let squatter = check(
        &cluster,
        "create the squatting port",
        kuryr_e2e::neutron::create_port_at(&net, &subnet, HELD, "kuryr-e2e-squatter"),
    );
    let unsquat = DeletePort(squatter.clone());
    check(
        &cluster,
        "create service at the held address",
        svc::create_service_at(&client, NS, "held", &ports, Some(("app", "kuryr-e2e")), HELD).await,
    );
    let said = check(
        &cluster,
        "a Warning naming the holder",
        kuryr_e2e::public_ip::wait_warning(
            &client,
            NS,
            "held",
            &format!("is held by port {squatter} (kuryr-e2e-squatter)"),
            Duration::from_secs(60),
        )
        .await,
    );
    eprintln!("ClusterIP held: {said}");
    drop(unsquat);
    check(
        &cluster,
        "members once the address is free",
        svc::wait_members(&client, NS, "held", 1, Duration::from_secs(120)).await,
    );
    let answer = svc::tcp_answer(&pod.netns, HELD, 80, Duration::from_secs(3)).await;
    assert_or_logs(
        &cluster,
        answer == "web-0",
        format!("VIP {HELD} once freed: {answer:?}"),
    );
}

/// Deletes a Neutron port the test made when dropped (also on a failed check).
struct DeletePort(String);

impl Drop for DeletePort {
    fn drop(&mut self) {
        if let Err(e) = kuryr_e2e::neutron::delete_port(&self.0) {
            eprintln!("deleting port {}: {e}", self.0);
        }
    }
}
