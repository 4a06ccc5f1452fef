//! One step of a scale run ([`run_step`]) and the table and last line of a run ([`render`]).

use std::{path::PathBuf, time::Duration, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use serde_json::json;

use crate::{
    Error, burst,
    procs::{Bins, Usage},
    stats::{growth_exponent, percentile},
    world::{World, WorldSpec, namespace},
};

/// One step: its size and what it measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// Pods in the burst.
    pub pods: usize,
    /// Hollow nodes.
    pub nodes: usize,
    /// First create → last Ready (s).
    pub burst_s: f64,
    /// Pod create → `status.vifs`, p50 and p99 (ms).
    pub vifs_ms: (u64, u64),
    /// Pod create → Ready, p50 and p99 (ms).
    pub ready_ms: (u64, u64),
    /// CPU-seconds during the burst: controller, API server, fleet, model cloud.
    pub cpu_s: [f64; 4],
    /// Peak resident memory at the step's end (MiB): controller, API server, fleet, model cloud.
    pub hwm_mib: [f64; 4],
    /// The API server's resident memory grown per pod over the burst (KiB).
    pub apiserver_kib_per_pod: f64,
    /// API-server requests (not watches) per pod over the burst.
    pub api_requests_per_pod: f64,
    /// Cloud requests per pod over the burst.
    pub cloud_requests_per_pod: f64,
    /// Controller killed → a new pod's VIFs written by its successor (s).
    pub failover_s: f64,
    /// The largest Pod or KuryrPort stored (KiB).
    pub max_object_kib: f64,
    /// ClusterIP Services created after the pods (0: none).
    pub services: usize,
    /// Service create → its load balancer converged with every backend a member, p50 and p99
    /// (ms).
    pub lb_ms: (u64, u64),
    /// First Service create → last converged (s).
    pub services_s: f64,
    /// The controller's CPU-seconds during the Service burst.
    pub services_ctl_cpu_s: f64,
    /// Octavia requests per Service during the Service burst.
    pub octavia_requests_per_service: f64,
}

/// How a step is run.
#[derive(Debug, Clone)]
pub struct StepSpec {
    /// Pods.
    pub pods: usize,
    /// Hollow nodes.
    pub nodes: usize,
    /// Binaries.
    pub bins: Bins,
    /// The run's directory (the step gets `step-<pods>`).
    pub dir: PathBuf,
    /// The model's time scale.
    pub time_scale: f64,
    /// Create requests in flight.
    pub concurrency: usize,
    /// Pods a namespace.
    pub per_namespace: usize,
    /// ClusterIP Services over the pods, created once they are Ready (0: the Service handlers
    /// stay off).
    pub services: usize,
    /// A JSON file replacing parts of the model cloud's model.
    pub model: Option<PathBuf>,
    /// How long the burst (and the fail-over) may take.
    pub timeout: Duration,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn ms(d: Option<Duration>) -> u64 {
    d.map_or(0, |d| d.as_millis() as u64)
}

/// Requests the model cloud answered, of the operations `which` selects (its own
/// `provision:*` work is not a request).
async fn cloud_requests(w: &World, which: impl Fn(&str) -> bool) -> u64 {
    crate::http::get_text(&format!("{}/__model/stats", w.cloud_url))
        .await
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| {
            v.get("ops")?.as_object().map(|o| {
                o.iter()
                    .filter(|(op, _)| !op.starts_with("provision:") && which(op))
                    .filter_map(|(_, x)| x.get("requests")?.as_u64())
                    .sum::<u64>()
            })
        })
        .unwrap_or(0)
}

/// Whether operation `op` is Octavia's (`kuryr_openstack::ops` names).
fn is_octavia(op: &str) -> bool {
    ["lb_", "listener_", "pool_", "member_", "healthmonitor_"]
        .iter()
        .any(|p| op.starts_with(p))
}

async fn counts(w: &World) -> (u64, u64) {
    let api = crate::http::get_text(&format!("{}/metrics", w.api_url))
        .await
        .map(|t| crate::http::api_requests(&t))
        .unwrap_or(0);
    (api, cloud_requests(w, |_| true).await)
}

fn usages(w: &World) -> [Usage; 4] {
    [
        w.controller.usage(),
        w.apiserver.usage(),
        w.fleet.usage(),
        w.cloud.usage(),
    ]
}

/// The largest serialized object of `api`'s kind (bytes), read 500 a page.
async fn largest<K>(api: Api<K>, what: &str) -> Result<usize, Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let mut max = 0usize;
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let l = api
            .list(&lp)
            .await
            .map_err(Error::kube(format!("listing {what}")))?;
        let page = l
            .items
            .iter()
            .map(|o| serde_json::to_vec(o).map_or(0, |v| v.len()));
        max = max.max(page.max().unwrap_or(0));
        token = l.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(max);
        }
    }
}

/// The largest serialized Pod or KuryrPort (KiB).
async fn largest_object(client: &Client) -> Result<f64, Error> {
    let pods = largest(Api::<Pod>::all(client.clone()), "pods").await?;
    let kps = largest(Api::<kuryr_types::KuryrPort>::all(client.clone()), "KuryrPorts").await?;
    Ok(pods.max(kps) as f64 / 1024.0)
}

/// Runs one step in a fresh world: the burst, then a controller crash and its successor's first
/// pod; stops the world.
pub async fn run_step(spec: &StepSpec) -> Result<Row, Error> {
    let dir = spec.dir.join(format!("step-{}", spec.pods));
    let world = World::start(&WorldSpec {
        nodes: spec.nodes,
        bins: spec.bins.clone(),
        dir: dir.clone(),
        time_scale: spec.time_scale,
        services: spec.services > 0,
        model: spec.model.clone(),
    })
    .await?;
    let r = measure(spec, world).await;
    // The fleet's state (a directory per node) is large and rebuilt each run.
    let _ = std::fs::remove_dir_all(dir.join("fleet"));
    r
}

async fn measure(spec: &StepSpec, mut world: World) -> Result<Row, Error> {
    let out = measure_in(spec, &mut world).await;
    world.stop().await;
    out
}

async fn measure_in(spec: &StepSpec, world: &mut World) -> Result<Row, Error> {
    let mut layout = burst::layout("p", spec.pods, spec.nodes, spec.per_namespace);
    let services = crate::services::layout(&mut layout, spec.services);
    let mut namespaces: Vec<&str> = layout.iter().map(|p| p.ns.as_str()).collect();
    namespaces.dedup();
    for ns in namespaces {
        namespace(&world.client, ns).await?;
    }
    let observer = burst::Observer::start(&world.client);
    // Let the controller settle (pools recovered, watches synced) before the clock starts.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = usages(world);
    let (api0, cloud0) = counts(world).await;
    let client = world.client.clone();
    let b = burst::run(
        &client,
        &observer,
        &layout,
        spec.concurrency,
        spec.timeout,
        || world.exited(),
    )
    .await?;
    let after = usages(world);
    let (api1, cloud1) = counts(world).await;
    let pods = spec.pods.max(1) as f64;
    let mut row = Row {
        pods: spec.pods,
        nodes: spec.nodes,
        burst_s: b.took.as_secs_f64(),
        vifs_ms: (ms(percentile(&b.vifs, 50.0)), ms(percentile(&b.vifs, 99.0))),
        ready_ms: (ms(percentile(&b.ready, 50.0)), ms(percentile(&b.ready, 99.0))),
        apiserver_kib_per_pod: after[1].rss_kib.saturating_sub(before[1].rss_kib) as f64 / pods,
        api_requests_per_pod: api1.saturating_sub(api0) as f64 / pods,
        cloud_requests_per_pod: cloud1.saturating_sub(cloud0) as f64 / pods,
        max_object_kib: largest_object(&world.client).await?,
        ..Row::default()
    };
    for i in 0..4 {
        row.cpu_s[i] = after[i].cpu_s - before[i].cpu_s;
        row.hwm_mib[i] = mib(after[i].hwm_kib);
    }
    if !services.is_empty() {
        measure_services(spec, world, &services, &mut row).await?;
    }
    // Fail-over: the controller crashes; its successor recovers the pools from the cloud and
    // the cluster, then serves a new pod.
    let t0 = Instant::now();
    world.replace_controller().await?;
    let probe = burst::layout("failover-", 1, spec.nodes, spec.per_namespace);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": probe[0].name, "namespace": probe[0].ns, "labels": {burst::LABEL: "failover"}},
        "spec": {"nodeName": probe[0].node, "containers": [{"name": "c", "image": "busybox"}]}
    }))
    .map_err(|e| Error::Start {
        what: "the fail-over probe pod".into(),
        message: e.to_string(),
    })?;
    Api::<Pod>::namespaced(world.client.clone(), &probe[0].ns)
        .create(&PostParams::default(), &pod)
        .await
        .map_err(Error::kube("creating the fail-over probe pod"))?;
    let key = format!("{}/{}", probe[0].ns, probe[0].name);
    loop {
        if observer
            .vifs
            .lock()
            .map(|m| m.contains_key(&key))
            .unwrap_or(false)
        {
            break;
        }
        if let Some(why) = world.exited() {
            return Err(Error::Start {
                what: "the fail-over".into(),
                message: why,
            });
        }
        if t0.elapsed() > spec.timeout {
            return Err(Error::Timeout(format!(
                "the new controller gave no VIF to {key} within {:?}",
                spec.timeout
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    row.failover_s = t0.elapsed().as_secs_f64();
    Ok(row)
}

/// The Service burst over the step's Ready pods: create → converged, the controller's CPU,
/// Octavia requests per Service; peak memory updated.
async fn measure_services(
    spec: &StepSpec,
    world: &mut World,
    services: &[crate::services::ServiceAt],
    row: &mut Row,
) -> Result<(), Error> {
    let observer = crate::services::Observer::start(&world.client);
    let before = usages(world);
    let octavia0 = cloud_requests(world, is_octavia).await;
    let client = world.client.clone();
    let b = crate::services::run(
        &client,
        &observer,
        services,
        spec.concurrency,
        spec.timeout,
        || world.exited(),
    )
    .await?;
    let after = usages(world);
    let octavia1 = cloud_requests(world, is_octavia).await;
    row.services = services.len();
    row.lb_ms = (
        ms(percentile(&b.converged, 50.0)),
        ms(percentile(&b.converged, 99.0)),
    );
    row.services_s = b.took.as_secs_f64();
    row.services_ctl_cpu_s = after[0].cpu_s - before[0].cpu_s;
    row.octavia_requests_per_service =
        octavia1.saturating_sub(octavia0) as f64 / services.len().max(1) as f64;
    for (peak, u) in row.hwm_mib.iter_mut().zip(&after) {
        *peak = mib(u.hwm_kib);
    }
    Ok(())
}

/// The table of a run and its last line (issue 39's format).
pub fn render(rows: &[Row], time_scale: f64) -> String {
    let mut out = format!(
        "# bench/scale: every component its own process; the model cloud at {time_scale} × the sandbox's service times\n\
         | pods | nodes | burst s | vifs p50/p99 ms | Ready p50/p99 ms | CPU-s ctl / api / fleet / cloud | peak MiB ctl / api / fleet / cloud | api KiB/pod | api req/pod | cloud req/pod | fail-over s | max object KiB | services | LB converged p50/p99 ms | services s | ctl CPU-s (services) | Octavia req/service |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.1} | {} / {} | {} / {} | {:.1} / {:.1} / {:.1} / {:.1} | {:.0} / {:.0} / {:.0} / {:.0} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} | {} | {} / {} | {:.1} | {:.1} | {:.1} |\n",
            r.pods,
            r.nodes,
            r.burst_s,
            r.vifs_ms.0,
            r.vifs_ms.1,
            r.ready_ms.0,
            r.ready_ms.1,
            r.cpu_s[0],
            r.cpu_s[1],
            r.cpu_s[2],
            r.cpu_s[3],
            r.hwm_mib[0],
            r.hwm_mib[1],
            r.hwm_mib[2],
            r.hwm_mib[3],
            r.apiserver_kib_per_pod,
            r.api_requests_per_pod,
            r.cloud_requests_per_pod,
            r.failover_s,
            r.max_object_kib,
            r.services,
            r.lb_ms.0,
            r.lb_ms.1,
            r.services_s,
            r.services_ctl_cpu_s,
            r.octavia_requests_per_service,
        ));
    }
    let exp = |f: &dyn Fn(&Row) -> f64| {
        growth_exponent(&rows.iter().map(|r| (r.pods as f64, f(r))).collect::<Vec<_>>())
    };
    let fmt = |e: Option<f64>| e.map_or("n/a".to_string(), |e| format!("{e:.2}"));
    let cpu_exp = exp(&|r| r.cpu_s[0]);
    out.push_str(&format!(
        "growth exponents over the steps (cost ~ pods^k): controller CPU {}, API server CPU {}, controller memory {}, API server memory {}, fail-over {}\n",
        fmt(cpu_exp),
        fmt(exp(&|r| r.cpu_s[1])),
        fmt(exp(&|r| r.hwm_mib[0])),
        fmt(exp(&|r| r.hwm_mib[1])),
        fmt(exp(&|r| r.failover_s)),
    ));
    if let Some(r) = rows.iter().max_by_key(|r| r.pods) {
        out.push_str(&format!(
            "scale pods={} nodes={} services={} policies=0 controller_rss_mib={:.1} controller_cpu_s_per_1k_pods={:.2} vifs_p99_ms={} lb_p99_ms={} failover_s={:.1} max_object_kib={:.1} cpu_exponent={}\n",
            r.pods,
            r.nodes,
            r.services,
            r.hwm_mib[0],
            r.cpu_s[0] * 1000.0 / r.pods.max(1) as f64,
            r.vifs_ms.1,
            r.lb_ms.1,
            r.failover_s,
            r.max_object_kib,
            fmt(cpu_exp),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_is_the_largest_step_with_the_fitted_exponent() {
        let row = |pods: usize, cpu: f64| Row {
            pods,
            nodes: pods / 20,
            cpu_s: [cpu, 1.0, 1.0, 1.0],
            hwm_mib: [50.0, 100.0, 10.0, 10.0],
            vifs_ms: (100, 300),
            failover_s: 2.0,
            max_object_kib: 3.5,
            ..Row::default()
        };
        let t = render(&[row(1000, 2.0), row(2000, 4.0), row(4000, 8.0)], 0.01);
        let last = t.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            "scale pods=4000 nodes=200 services=0 policies=0 controller_rss_mib=50.0 \
             controller_cpu_s_per_1k_pods=2.00 vifs_p99_ms=300 lb_p99_ms=0 failover_s=2.0 max_object_kib=3.5 cpu_exponent=1.00"
        );
        assert_eq!(t.lines().filter(|l| l.starts_with("| ")).count(), 4);
    }
}
