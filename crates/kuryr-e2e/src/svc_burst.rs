//! `bench/service-burst`: N Services created at once over M backend pods, measured from the
//! client's side — create → the VIP answers (from a pod's network namespace); a backend pod
//! deleted → its VIPs no longer send connections to it; Octavia requests per Service (the
//! controller's request counter); load balancers left after deleting every Service. Beside
//! the traffic figures, the control plane's own: create → the KuryrLoadBalancer's status holds
//! every backend as a member, and backend deleted → its member gone from the status. Those are
//! all a cloud without a data path can show: `--no-traffic` measures only them (the model
//! cloud's calibration replays this benchmark against both clouds).

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use kube::Client;
use tokio::{task::JoinSet, time::Instant};

use crate::{
    burst::percentile,
    cluster::Cluster,
    error::{Error, Result},
    metrics, pods,
    services::{self, Prober},
};

/// What the benchmark measures.
#[derive(Debug, Clone)]
pub struct SvcBurstConfig {
    /// Services created at once.
    pub services: usize,
    /// Backend pods (spread over the nodes).
    pub backends: usize,
    /// Namespace.
    pub namespace: String,
    /// Bound of each phase.
    pub timeout: Duration,
    /// Control-plane figures only: no probe through the VIPs (a cloud without a data path,
    /// the model cloud), no count of the cloud's load balancers left.
    pub no_traffic: bool,
}

/// The figures.
#[derive(Debug, Clone, Default)]
pub struct SvcBurstResult {
    /// Per Service: create → first answer through the VIP (ms).
    pub create_answer_ms: Vec<f64>,
    /// Per Service: backend deleted → every probe answered by the live backends (ms).
    pub member_update_ms: Vec<f64>,
    /// Per Service: create → its KuryrLoadBalancer's status lists every backend (ms; polled
    /// every 250 ms).
    pub create_converged_ms: Vec<f64>,
    /// Per Service: backend deleted → its member gone from the status (ms; polled).
    pub member_removed_ms: Vec<f64>,
    /// Octavia requests per Service during creation.
    pub octavia_calls_per_service: f64,
    /// Octavia writes per Service during creation.
    pub octavia_writes_per_service: f64,
    /// Load balancers of the namespace left after deleting the Services.
    /// (`None`: not counted, `--no-traffic`.)
    pub leaked: Option<usize>,
}

impl SvcBurstResult {
    /// The machine-readable last line.
    pub fn machine_line(&self) -> String {
        let p = |v: &[f64], q: f64| percentile(v, q).map_or("NA".into(), |x| format!("{x:.0}"));
        format!(
            "services={} create_answer_p50_ms={} create_answer_p99_ms={} member_update_p99_ms={} create_converged_p50_ms={} create_converged_p99_ms={} member_removed_p99_ms={} octavia_calls_per_service={:.1} octavia_writes_per_service={:.1} leaked={}",
            self.create_converged_ms.len(),
            p(&self.create_answer_ms, 50.0),
            p(&self.create_answer_ms, 99.0),
            p(&self.member_update_ms, 99.0),
            p(&self.create_converged_ms, 50.0),
            p(&self.create_converged_ms, 99.0),
            p(&self.member_removed_ms, 99.0),
            self.octavia_calls_per_service,
            self.octavia_writes_per_service,
            self.leaked.map_or("NA".into(), |n| n.to_string())
        )
    }
}

fn is_octavia(op: &str) -> bool {
    ["lb_", "listener_", "pool_", "member_"]
        .iter()
        .any(|p| op.starts_with(p))
}

fn octavia_counts(s: &metrics::Scrape) -> (f64, f64) {
    let all = s.sum("kuryr_neutron_requests_total", |l| {
        l.get("operation").is_some_and(|o| is_octavia(o))
    });
    let writes = s.sum("kuryr_neutron_requests_total", |l| {
        l.get("operation").is_some_and(|o| is_octavia(o)) && l.get("method").is_some_and(|m| m != "GET")
    });
    (all, writes)
}

fn say(s: &str) {
    eprintln!("[{}] service-burst: {s}", jiff::Zoned::now().strftime("%H:%M:%S"));
}

/// Probes `vip:80` from `netns` until an answer in `live` (`live` empty: any pod name), every
/// 100 ms, up to `timeout`; the elapsed time from `since`.
async fn first_answer(p: Arc<Prober>, vip: String, since: Instant, timeout: Duration) -> Option<f64> {
    while since.elapsed() < timeout {
        let a = p.tcp(&vip, 80, Duration::from_millis(800)).await;
        if !a.starts_with("error") && !a.is_empty() {
            return Some(since.elapsed().as_secs_f64() * 1000.0);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Probes `vip:80` from `netns` in rounds of 6 until a whole round is answered by `live`
/// backends only; the elapsed time from `since`.
async fn settled(
    p: Arc<Prober>,
    vip: String,
    live: Arc<BTreeSet<String>>,
    since: Instant,
    timeout: Duration,
) -> Option<f64> {
    while since.elapsed() < timeout {
        let mut all = true;
        for _ in 0..6 {
            let a = p.tcp(&vip, 80, Duration::from_millis(500)).await;
            if !live.contains(&a) {
                all = false;
                break;
            }
        }
        if all {
            return Some(since.elapsed().as_secs_f64() * 1000.0);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Runs the benchmark on `cluster` (started with the Service handlers).
pub async fn run(cluster: &Cluster, client: &Client, cfg: &SvcBurstConfig) -> Result<SvcBurstResult> {
    let ns = cfg.namespace.as_str();
    pods::ensure_namespace(client, ns).await?;
    // Backends (all labelled app=kuryr-e2e), spread over the nodes; backend-0 is the client.
    let mut keys = Vec::new();
    for i in 0..cfg.backends.max(2) {
        let node = cluster
            .nodes
            .get(i % cluster.nodes.len().max(1))
            .map(|n| n.name.clone());
        let name = format!("backend-{i}");
        pods::create_pod(client, ns, &name, node.as_deref()).await?;
        keys.push((ns.to_string(), name));
    }
    say(&format!("{} backend pods: waiting for Ready", keys.len()));
    pods::wait_ready(client, &keys, cfg.timeout).await?;
    let views = pods::collect(cluster, client, &[ns.to_string()]).await?;
    let netns = views
        .iter()
        .find(|v| v.name == "backend-0")
        .map(|v| v.netns.clone())
        .ok_or_else(|| Error::Parse {
            what: "backend-0".into(),
            detail: "no network namespace".into(),
        })?;
    let prober = Arc::new(Prober::new(&netns)?);

    let before = metrics::scrape(&cluster.metrics_url).await?;
    say(&format!("creating {} Services at once", cfg.services));
    let started = Instant::now();
    let mut creates = JoinSet::new();
    for i in 0..cfg.services {
        let client = client.clone();
        let ns = ns.to_string();
        creates.spawn(async move {
            services::create_service(
                &client,
                &ns,
                &format!("svc-{i}"),
                &[("http", 80, "TCP", 8080)],
                Some(("app", "kuryr-e2e")),
                false,
            )
            .await
            .map(|vip| (vip, Instant::now()))
        });
    }
    let mut vips = Vec::new();
    while let Some(r) = creates.join_next().await {
        let (vip, at) = r.map_err(|e| Error::Parse {
            what: "create task".into(),
            detail: e.to_string(),
        })??;
        vips.push((vip, at));
    }
    let mut result = SvcBurstResult::default();
    let mut probes = JoinSet::new();
    if !cfg.no_traffic {
        for (vip, at) in vips.clone() {
            probes.spawn(first_answer(prober.clone(), vip, at, cfg.timeout));
        }
    }
    // The control plane, while the probes run: every Service's status holding every backend.
    result.create_converged_ms =
        times(client, ns, &vips, keys.len(), cfg.timeout, "with every backend").await?;
    while let Some(r) = probes.join_next().await {
        match r {
            Ok(Some(ms)) => result.create_answer_ms.push(ms),
            _ => {
                return Err(Error::Timeout {
                    what: "a Service VIP to answer".into(),
                    secs: cfg.timeout.as_secs(),
                });
            }
        }
    }
    say(&format!(
        "every Service converged{} {:.1} s after the first create",
        if cfg.no_traffic {
            ""
        } else {
            " and its VIP answered"
        },
        started.elapsed().as_secs_f64()
    ));
    let after = metrics::scrape(&cluster.metrics_url).await?;
    let (a0, w0) = octavia_counts(&before);
    let (a1, w1) = octavia_counts(&after);
    let n = cfg.services.max(1) as f64;
    result.octavia_calls_per_service = (a1 - a0) / n;
    result.octavia_writes_per_service = (w1 - w0) / n;

    // Member update: delete the last backend; every VIP must stop sending to it.
    let gone = keys.last().map(|k| k.1.clone()).unwrap_or_default();
    let live: Arc<BTreeSet<String>> =
        Arc::new(keys.iter().map(|k| k.1.clone()).filter(|n| *n != gone).collect());
    say(&format!(
        "deleting backend {gone}: measuring until no VIP sends to it"
    ));
    let since = Instant::now();
    pods::delete_pod(client, ns, &gone).await?;
    let removed: Vec<(String, Instant)> = vips.iter().map(|(v, _)| (v.clone(), since)).collect();
    let mut checks = JoinSet::new();
    for (vip, _) in vips.iter().filter(|_| !cfg.no_traffic) {
        checks.spawn(settled(
            prober.clone(),
            vip.clone(),
            live.clone(),
            since,
            cfg.timeout,
        ));
    }
    result.member_removed_ms = times(
        client,
        ns,
        &removed,
        keys.len() - 1,
        cfg.timeout,
        "without the deleted backend",
    )
    .await?;
    while let Some(r) = checks.join_next().await {
        match r {
            Ok(Some(ms)) => result.member_update_ms.push(ms),
            _ => {
                return Err(Error::Timeout {
                    what: "every VIP to stop sending to the deleted backend".into(),
                    secs: cfg.timeout.as_secs(),
                });
            }
        }
    }

    say("deleting every Service; counting load balancers left");
    for i in 0..cfg.services {
        services::delete_service(client, ns, &format!("svc-{i}")).await?;
    }
    let deadline = Instant::now() + cfg.timeout;
    loop {
        let mut klbs = 0;
        for i in 0..cfg.services {
            klbs += usize::from(services::klb(client, ns, &format!("svc-{i}")).await?.is_some());
        }
        if klbs == 0 || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Octavia finishes a cascade delete after answering: give it a moment. (Not counted
    // without a data path's cloud: the tool lists the real cloud's load balancers.)
    if !cfg.no_traffic {
        result.leaked = Some(leaked(cluster, ns).await?);
    }
    pods::delete_namespace(client, ns).await?;
    let remaining: Vec<(String, String)> = keys.into_iter().filter(|k| k.1 != gone).collect();
    pods::wait_gone(client, &remaining, cfg.timeout).await?;
    Ok(result)
}

/// The cloud's load balancers of namespace `ns` left after its Services were deleted, waiting
/// up to a minute for them to go.
async fn leaked(cluster: &Cluster, ns: &str) -> Result<usize> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let prefix = format!("{ns}/");
    loop {
        let n = services::lbs_tagged(&cluster.tag)?
            .iter()
            .filter(|l| l.name.starts_with(&prefix))
            .count();
        if n == 0 || Instant::now() >= deadline {
            return Ok(n);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Per Service `svc-<i>` (the order of `since`): the time from its instant until its
/// KuryrLoadBalancer's status lists `members` members, polled concurrently.
async fn times(
    client: &Client,
    ns: &str,
    since: &[(String, Instant)],
    members: usize,
    timeout: Duration,
    what: &str,
) -> Result<Vec<f64>> {
    let mut waits = JoinSet::new();
    for (i, (_, at)) in since.iter().enumerate() {
        let (client, ns, at) = (client.clone(), ns.to_string(), *at);
        waits.spawn(async move {
            services::wait_members(&client, &ns, &format!("svc-{i}"), members, timeout)
                .await
                .map(|_| at.elapsed().as_secs_f64() * 1000.0)
        });
    }
    let mut out = Vec::new();
    while let Some(r) = waits.join_next().await {
        out.push(r.map_err(|e| Error::Parse {
            what: format!("waiting for each KuryrLoadBalancer {what}"),
            detail: e.to_string(),
        })??);
    }
    Ok(out)
}

/// A readable summary.
pub fn summary(r: &SvcBurstResult) -> String {
    let p = |v: &[f64], q: f64| percentile(v, q).map_or("NA".into(), |x| format!("{x:.0}"));
    format!(
        "create → VIP answers: p50 {} ms, p99 {} ms, max {} ms ({} Services)\n\
         backend deleted → no VIP sends to it: p50 {} ms, p99 {} ms\n\
         create → status lists every backend: p50 {} ms, p99 {} ms\n\
         backend deleted → its member gone from the status: p50 {} ms, p99 {} ms\n\
         Octavia requests per Service: {:.1} ({:.1} writes)\n\
         load balancers left after deleting every Service: {}\n",
        p(&r.create_answer_ms, 50.0),
        p(&r.create_answer_ms, 99.0),
        p(&r.create_answer_ms, 100.0),
        r.create_answer_ms.len(),
        p(&r.member_update_ms, 50.0),
        p(&r.member_update_ms, 99.0),
        p(&r.create_converged_ms, 50.0),
        p(&r.create_converged_ms, 99.0),
        p(&r.member_removed_ms, 50.0),
        p(&r.member_removed_ms, 99.0),
        r.octavia_calls_per_service,
        r.octavia_writes_per_service,
        r.leaked.map_or("not counted".into(), |n| n.to_string())
    )
}
