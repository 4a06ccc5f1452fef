//! The chaos suite (`bench/chaos`): pod and Service churn on the sandbox cluster, a continuous
//! connectivity probe between long-lived pods, and faults injected one scenario at a time
//! ([`faults`]); after each, the suite waits for the cluster to converge and audits it from the
//! outside ([`audit`]): leaked, stuck and duplicated resources, connectivity lost, time to
//! converge, controller crashes and crashes of the sandbox cloud's own daemons.

pub mod audit;
pub mod churn;
pub mod cli;
pub mod evidence;
pub mod faults;
pub mod links;
pub mod netdiag;
pub mod proxy;
pub mod report;
pub mod sandbox_logs;
pub mod wiring;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use kube::Client;
use tracing::{info, warn};

use crate::{
    cluster::{Cluster, NodeInfo, repo_root},
    error::Result,
    pods,
    soak::SoakPod,
};
use audit::{Findings, Limits};
use churn::{CHURN_NS, Churn, ChurnConfig, ChurnStats};
use faults::{FaultCtx, Intensity, Scenario};
use links::{LinkProbe, LinkWindow};
use netdiag::{Snapshot, Snapshots};

/// The namespace of the long-lived, probed pods.
pub const STABLE_NS: &str = "chaos-stable";
/// Their label (the churned Services select it).
pub const STABLE_LABEL: (&str, &str) = ("app", "kuryr-e2e");

/// How the suite runs.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Scenarios, in order.
    pub scenarios: Vec<Scenario>,
    /// Iterations of each.
    pub iterations: u32,
    /// The workload.
    pub churn: ChurnConfig,
    /// Fault strength.
    pub intensity: Intensity,
    /// Long-lived pods per node.
    pub stable_per_node: usize,
    /// Churn before each fault.
    pub warm_up: Duration,
    /// Upper bound of convergence after a fault.
    pub converge_timeout: Duration,
    /// What counts as stuck.
    pub limits: Limits,
    /// The probe watches each iteration at least this long from the fault's start (a fault
    /// that ends at once, then a quick convergence, would otherwise be watched for seconds).
    pub min_window: Duration,
    /// The cluster's tag (audits are by tag).
    pub tag: String,
}

/// One iteration's outcome.
#[derive(Debug, Clone)]
pub struct IterationResult {
    /// Which scenario.
    pub scenario: Scenario,
    /// Which iteration.
    pub iteration: u32,
    /// What the injector said.
    pub fault: String,
    /// Error of the injector itself (the fault could not be injected or undone).
    pub fault_error: Option<String>,
    /// Churn during the iteration.
    pub churn: ChurnStats,
    /// The connectivity probe over the iteration.
    pub links: LinkWindow,
    /// The last audit (after convergence, or at the timeout).
    pub findings: Findings,
    /// From the end of the fault until the audit was clean (None: never within the timeout).
    pub converged_after: Option<Duration>,
    /// The last audit before convergence that was not clean: when (from the fault's end) and
    /// its first finding — what the convergence time was spent waiting for.
    pub held_by: Option<(Duration, String)>,
    /// The controller died or changed pid outside the fault.
    pub controller_crashed: bool,
    /// When the fault began and ended (wall clock).
    pub fault_span: (SystemTime, SystemTime),
    /// When running pods went without an answer for over [`LOSS_WORTH_A_LOOK`]: what the
    /// sandbox's data plane logged meanwhile ([`sandbox_logs::excerpt`]).
    pub data_plane_log: Vec<String>,
    /// The data plane's state, taken while a pair of running pods was dark for over
    /// [`SNAPSHOT_AFTER`] ([`netdiag`]).
    pub snapshots: Vec<Snapshot>,
    /// When the audit found something: what the controller logged about it
    /// ([`evidence`]).
    pub controller_log: Vec<String>,
}

/// A pair of running pods dark this long gets the data plane snapshotted (`sandbox/netdiag`).
pub const SNAPSHOT_AFTER: Duration = Duration::from_secs(5);

/// A loss of connectivity long enough to collect the data plane's logs for (one lost probe
/// round on a busy machine is shorter).
pub const LOSS_WORTH_A_LOOK: Duration = Duration::from_millis(2500);

/// What the whole run gave.
#[derive(Debug, Clone, Default)]
pub struct ChaosReport {
    /// Every iteration.
    pub iterations: Vec<IterationResult>,
    /// Crashes of the sandbox cloud's daemons during the run (`sandbox/crashes`).
    pub sandbox_crashes: Vec<String>,
    /// Setup errors of the connectivity probe.
    pub probe_errors: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Creates the long-lived pods (`stable_per_node` per node, in [`STABLE_NS`]) and waits until
/// they are Ready; returns them as probe peers.
async fn stable_pods(
    cluster: &Cluster,
    client: &Client,
    nodes: &[String],
    per_node: usize,
    generation: u32,
) -> Result<Vec<SoakPod>> {
    pods::ensure_namespace(client, STABLE_NS).await?;
    let mut keys = Vec::new();
    for node in nodes {
        for k in 0..per_node {
            let name = format!("stable-{}-{k}-g{generation}", node.trim_start_matches("node-"));
            pods::create_pod(client, STABLE_NS, &name, Some(node)).await?;
            keys.push((STABLE_NS.to_string(), name));
        }
    }
    pods::wait_ready(client, &keys, Duration::from_secs(180)).await?;
    let views = pods::collect(cluster, client, &[STABLE_NS.to_string()]).await?;
    Ok(views
        .iter()
        .filter(|v| keys.iter().any(|(_, n)| n == &v.name))
        .filter_map(|v| {
            Some(SoakPod {
                label: format!("{}/{}", v.namespace, v.name),
                node: v.node.clone(),
                ip: v.pod_ip.parse().ok()?,
                expect: v.name.clone(),
                netns: v.netns.clone(),
            })
        })
        .collect())
}

fn start_probe(peers: &[SoakPod], snapshots: &Arc<Snapshots>) -> LinkProbe {
    LinkProbe::start(
        peers,
        pods::POD_PORT,
        Duration::from_millis(250),
        Duration::from_secs(1),
        Some(snapshots.clone()),
    )
}

/// What [`converge`] saw: the last audit, when it was clean, and what the last unclean audit
/// before it found first (when, from the fault's end).
struct Convergence {
    findings: Findings,
    after: Option<Duration>,
    held_by: Option<(Duration, String)>,
}

/// Polls the audit until it is clean or `timeout` passes.
async fn converge(client: &Client, nodes: &[NodeInfo], cfg: &ChaosConfig, since: Instant) -> Convergence {
    let deadline = Instant::now() + cfg.converge_timeout;
    let mut last = Findings::default();
    let mut held_by = None;
    loop {
        // An audit takes seconds (the cloud queries): what it saw is of the moment it began.
        let began = since.elapsed();
        match audit::observe(client, &cfg.tag, nodes).await {
            Ok(o) => {
                last = audit::classify(&o, cfg.limits);
                if last.clean() {
                    return Convergence {
                        findings: last,
                        after: Some(began),
                        held_by,
                    };
                }
            }
            Err(e) => {
                // The API server or the cloud may still be coming back.
                last.stuck = vec![format!("audit failed: {}", crate::error_chain(&e))];
            }
        }
        held_by = last.first().map(|f| (began, f));
        if Instant::now() >= deadline {
            return Convergence {
                findings: last,
                after: None,
                held_by,
            };
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// Runs the suite on a running cluster (host mode: the faults restart its processes).
pub async fn run(
    cluster: &Cluster,
    cfg: &ChaosConfig,
    proxy: Option<std::net::SocketAddr>,
) -> Result<ChaosReport> {
    let client = cluster.client().await?;
    let crash_record = sandbox_guard::Record::default();
    let crash_mark = crash_record.mark();
    let all_nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    let live_nodes = Arc::new(Mutex::new(all_nodes.clone()));
    pods::ensure_namespace(&client, CHURN_NS).await?;
    let mut generation = 0;
    let mut peers = stable_pods(cluster, &client, &all_nodes, cfg.stable_per_node, generation).await?;
    let snapshots = Snapshots::new(
        repo_root().join("sandbox").join("netdiag"),
        &cluster.state_dir,
        SNAPSHOT_AFTER,
        Duration::from_secs(60),
    );
    let mut probe = start_probe(&peers, &snapshots);
    let churn = Churn::start(
        client.clone(),
        cfg.churn,
        live_nodes.clone(),
        (STABLE_LABEL.0.into(), STABLE_LABEL.1.into()),
    );
    let mut report = ChaosReport::default();
    let ctx = FaultCtx {
        cluster,
        client: &client,
        live_nodes: &live_nodes,
        proxy,
        intensity: cfg.intensity,
    };
    for &scenario in &cfg.scenarios {
        for i in 0..cfg.iterations {
            info!(
                scenario = scenario.name(),
                iteration = i,
                "chaos: churn, then the fault"
            );
            if scenario == Scenario::NodeLost {
                // Probe only what survives: pods of the lost node go with it.
                let lost = lock(&live_nodes).last().cloned().unwrap_or_default();
                let survivors: Vec<SoakPod> = peers.iter().filter(|p| p.node != lost).cloned().collect();
                report
                    .probe_errors
                    .extend(std::mem::replace(&mut probe, start_probe(&survivors, &snapshots)).stop());
            }
            let before = churn.stats();
            churn.set_running(true);
            tokio::time::sleep(cfg.warm_up).await;
            let _ = probe.take_window();
            let window_start = SystemTime::now();
            let controller_before = cluster.pid("controller");
            let (fault_start, fault_start_wall) = (Instant::now(), SystemTime::now());
            let fault = faults::inject(scenario, i, &ctx).await;
            let (fault_end, fault_end_wall) = (Instant::now(), SystemTime::now());
            churn.set_running(false);
            let controller_after_fault = cluster.pid("controller");
            let (fault, fault_error) = match fault {
                Ok(f) => (f, None),
                Err(e) => {
                    warn!(scenario = scenario.name(), error = %crate::error_chain(&e), "chaos: the fault went wrong");
                    (String::new(), Some(crate::error_chain(&e)))
                }
            };
            let Convergence {
                findings,
                after: converged_after,
                held_by,
            } = converge(&client, &cluster.nodes, cfg, fault_end).await;
            if let Some(rest) = cfg.min_window.checked_sub(fault_start.elapsed()) {
                tokio::time::sleep(rest).await;
            }
            let links = probe.take_window();
            let data_plane_log = match links.lost_pairs.first().and_then(|p| p.span) {
                Some(span) if links.max_outage > LOSS_WORTH_A_LOOK => {
                    sandbox_logs::excerpt(&sandbox_logs::log_dir(), span, Duration::from_secs(2), 30)
                }
                _ => Vec::new(),
            };
            let controller_log = if findings.clean() {
                Vec::new()
            } else {
                let log = std::fs::read_to_string(cluster.log("controller")).unwrap_or_default();
                evidence::matching(&log, &evidence::needles(&findings), evidence::MAX_LINES)
            };
            let controller_end = cluster.pid("controller");
            let controller_crashed = controller_end.is_none()
                || controller_end != controller_after_fault
                || (scenario != Scenario::ControllerKill && controller_before != controller_end);
            let result = IterationResult {
                scenario,
                iteration: i,
                fault,
                fault_error,
                churn: churn.stats().since(&before),
                links,
                findings,
                converged_after,
                held_by,
                controller_crashed,
                fault_span: (fault_start_wall, fault_end_wall),
                data_plane_log,
                snapshots: snapshots.since(window_start),
                controller_log,
            };
            info!(line = %report::iteration_line(&result), "chaos: iteration done");
            report.iterations.push(result);
            if scenario == Scenario::NodeLost {
                let lost: Vec<String> = all_nodes
                    .iter()
                    .filter(|n| !lock(&live_nodes).contains(n))
                    .cloned()
                    .collect();
                for n in &lost {
                    faults::node_returns(&ctx, n).await?;
                }
                generation += 1;
                let back = stable_pods(cluster, &client, &lost, cfg.stable_per_node, generation).await?;
                peers.retain(|p| !lost.contains(&p.node));
                peers.extend(back);
                report
                    .probe_errors
                    .extend(std::mem::replace(&mut probe, start_probe(&peers, &snapshots)).stop());
            }
        }
    }
    churn.stop().await;
    report.probe_errors.extend(probe.stop());
    report.sandbox_crashes = match crash_record.since(crash_mark) {
        Ok(c) => c.iter().map(ToString::to_string).collect(),
        Err(e) => vec![format!("cannot read the crash record: {e}")],
    };
    Ok(report)
}
