//! The demo's Service step: a ClusterIP Service over the demo's `web` pods on both nodes, its
//! KuryrLoadBalancer and Octavia load balancer printed, and its VIP probed from every pod's
//! network namespace (same namespace and across namespaces): which backends answered. Then a
//! `type: LoadBalancer` Service over the same pods: its floating IP (from the sandbox's
//! external network) probed from the machine's root namespace, the sandbox's outside.

use std::{collections::BTreeSet, time::Duration};

use kube::Client;

use crate::{
    cluster::Cluster,
    error::Result,
    pods, public_ip,
    services::{self, tcp_answers},
};

/// Connections per client pod.
const PROBES: usize = 12;

/// Creates Service `ns/web` (80 → 8080, selector `app=web`) unless it exists, waits for its
/// load balancer to have `backends` members and prints the probes from the pods of
/// `namespaces`. `Ok(false)`: a probe failed or a backend never answered.
pub async fn run(
    cluster: &Cluster,
    client: &Client,
    ns: &str,
    namespaces: &[String],
    backends: usize,
) -> Result<bool> {
    let say = |s: &str| eprintln!("[{}] demo: {s}", jiff::Zoned::now().strftime("%H:%M:%S"));
    let vip = match services::klb(client, ns, "web").await? {
        Some(k) => k.spec.ip.unwrap_or_default(),
        None => {
            services::create_service(
                client,
                ns,
                "web",
                &[("http", 80, "TCP", 8080)],
                Some(("app", "web")),
                false,
            )
            .await?
        }
    };
    say(&format!(
        "Service {ns}/web (ClusterIP {vip}, port 80 → 8080): waiting for its Octavia load balancer"
    ));
    let started = std::time::Instant::now();
    let lb_id = services::wait_members(client, ns, "web", backends, Duration::from_secs(120)).await?;
    say(&format!(
        "load balancer {lb_id} ACTIVE with {backends} members after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    if let Some(k) = services::klb(client, ns, "web").await? {
        let st = k.status.unwrap_or_default();
        println!("\nService {ns}/web as an Octavia load balancer (KuryrLoadBalancer status)\n");
        if let Some(lb) = &st.loadbalancer {
            println!(
                "  load balancer  {} {} VIP {} (port {}), provider {}",
                lb.id, lb.name, lb.ip, lb.port_id, lb.provider
            );
        }
        for l in st.listeners.iter().flatten() {
            println!("  listener       {} {} {}:{}", l.id, l.name, l.protocol, l.port);
        }
        for m in st.members.iter().flatten() {
            println!("  member         {} {} {}:{}", m.id, m.name, m.ip, m.port);
        }
    }
    let views = pods::collect(cluster, client, namespaces).await?;
    println!(
        "\nTCP connections to the VIP {vip}:80 from each pod's network namespace ({PROBES} each): who answered\n"
    );
    let mut ok = true;
    let mut seen = BTreeSet::new();
    for v in &views {
        let answers = tcp_answers(&v.netns, &vip, 80, PROBES).await;
        let failed: usize = answers
            .iter()
            .filter(|(a, _)| a.starts_with("error"))
            .map(|(_, n)| n)
            .sum();
        ok &= failed == 0;
        seen.extend(answers.keys().filter(|a| !a.starts_with("error")).cloned());
        let list: Vec<String> = answers.iter().map(|(a, n)| format!("{a} ×{n}")).collect();
        println!("  {:<10} {:<12} {}", v.namespace, v.name, list.join(", "));
    }
    let all_backends = seen.len() >= backends;
    if !all_backends {
        eprintln!("demo: ERROR: only {seen:?} answered through the VIP; expected {backends} backends");
    }
    Ok(ok && all_backends && public(client, ns, backends).await?)
}

/// Service `ns/web-public`, `type: LoadBalancer` over the same pods: waits for its floating IP
/// and probes it from the root namespace. `Ok(false)`: no address, or not every backend answered.
async fn public(client: &Client, ns: &str, backends: usize) -> Result<bool> {
    let say = |s: &str| eprintln!("[{}] demo: {s}", jiff::Zoned::now().strftime("%H:%M:%S"));
    if services::klb(client, ns, "web-public").await?.is_none() {
        services::create_service(
            client,
            ns,
            "web-public",
            &[("http", 80, "TCP", 8080)],
            Some(("app", "web")),
            false,
        )
        .await?;
        public_ip::set_service_type(client, ns, "web-public", "LoadBalancer", None).await?;
    }
    say(&format!(
        "Service {ns}/web-public (type LoadBalancer): waiting for its floating IP"
    ));
    let started = std::time::Instant::now();
    let fip = public_ip::wait_ingress(client, ns, "web-public", false, Duration::from_secs(120)).await?;
    let first = public_ip::outside_tcp_until_answered(&fip, 80, Duration::from_secs(30)).await;
    say(&format!(
        "floating IP {fip} in status.loadBalancer.ingress, first answer from outside after {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let mut answers = std::collections::BTreeMap::<String, usize>::new();
    *answers.entry(first).or_default() += 1;
    for _ in 1..PROBES {
        *answers
            .entry(public_ip::outside_tcp_answer(&fip, 80, Duration::from_secs(3)).await)
            .or_default() += 1;
    }
    let list: Vec<String> = answers.iter().map(|(a, n)| format!("{a} ×{n}")).collect();
    println!(
        "\nTCP connections to the floating IP {fip}:80 from the machine's root namespace (the outside): who answered\n"
    );
    println!("  {:<23} {}", "root namespace", list.join(", "));
    let answered = answers.keys().filter(|a| !a.starts_with("error")).count();
    let failed = answers.keys().any(|a| a.starts_with("error"));
    if failed || answered < backends {
        eprintln!("demo: ERROR: from outside {answers:?}; expected {backends} backends and no failure");
    }
    Ok(!failed && answered >= backends)
}
