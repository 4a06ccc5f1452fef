//! The pod-burst benchmark client (`kuryr-e2e pod-burst`, run by `bench/pod-burst`): N pods
//! created at once, per-pod latencies taken from watch events with this process's monotonic
//! clock, Neutron requests from the controller's metrics delta, the controller's peak RSS, and
//! the daemons' wiring histogram.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use futures::{StreamExt, TryStreamExt, future::join_all};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};
use kube_lean::Lean;
use kuryr_types::KuryrPort;
use tracing::info;

use crate::{
    cluster::Cluster,
    error::{Error, Result},
    metrics::{self, Scrape, bucket_delta, histogram_quantile},
    pods,
};

/// Benchmark parameters.
#[derive(Debug, Clone)]
pub struct BurstConfig {
    /// Pods in the burst.
    pub pods: usize,
    /// Namespace of the burst.
    pub namespace: String,
    /// Bound on the whole burst.
    pub timeout: Duration,
    /// Measure from outside the implementation too (`bench/compare-upstream`): Neutron's log,
    /// `/proc`; the controller's own metrics become optional.
    pub outside: Option<OutsideConfig>,
    /// Pods go to these nodes in turn (`nodeName`); empty: where the scheduler puts them.
    pub nodes: Vec<String>,
}

/// What [`BurstConfig::outside`] measures.
#[derive(Debug, Clone, Default)]
pub struct OutsideConfig {
    /// Keystone user whose Neutron requests count (the controller's).
    pub neutron_user: String,
    /// Root processes of the controller (their trees count).
    pub controller_pids: Vec<u32>,
    /// Root processes of the node daemons.
    pub daemon_pids: Vec<u32>,
}

/// What was measured from outside over the burst.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OutsideResult {
    /// Neutron requests of the controller's user, from neutron-server's log.
    pub neutron: crate::outside::NeutronCounts,
    /// Controller CPU seconds over the burst.
    pub controller_cpu_s: f64,
    /// Controller peak RSS (sum of VmHWM over its processes), MiB.
    pub controller_peak_rss_mib: f64,
    /// Controller processes.
    pub controller_processes: usize,
    /// Daemons' RSS after the burst (sum over every node's processes), MiB.
    pub daemon_rss_mib: f64,
    /// Daemons' PSS after the burst (shared pages of forked workers counted once), MiB.
    pub daemon_pss_mib: f64,
    /// Controller PSS after the burst, MiB.
    pub controller_pss_mib: f64,
    /// Daemon processes (all nodes).
    pub daemon_processes: usize,
}

/// Measured figures of one burst.
#[derive(Debug, Clone, Default)]
pub struct BurstResult {
    /// Pods.
    pub pods: usize,
    /// Pod create → KuryrPort `status.vifs` written, ms, one per pod that got there.
    pub vifs_ms: Vec<f64>,
    /// Pod create → KuryrPort VIF `active`, ms.
    pub active_ms: Vec<f64>,
    /// Pod create → CNI ADD returned (the node's sandbox `started` time), ms.
    pub cni_ms: Vec<f64>,
    /// Pod create → Ready, ms.
    pub ready_ms: Vec<f64>,
    /// First create → last pod Ready (or last vifs without daemons), ms.
    pub total_ms: f64,
    /// Neutron requests during the burst (controller metrics delta).
    pub neutron_calls: f64,
    /// Neutron writes (non-GET) during the burst.
    pub neutron_writes: f64,
    /// Neutron requests by operation and method during the burst.
    pub neutron_by_op: BTreeMap<String, f64>,
    /// Controller VmHWM, MiB.
    pub controller_rss_mib: Option<f64>,
    /// Daemon-side wiring p99 over the burst (`kuryr_cni_wire_duration_seconds`), ms.
    pub cni_wire_p99_ms: Option<f64>,
    /// Daemon-side ADD request p99 (`kuryr_cni_request_duration_seconds{command="ADD"}`), ms.
    pub cni_request_p99_ms: Option<f64>,
    /// ADDs by the signal that ended their wait for activation
    /// (`kuryr_cni_active_wait_seconds_count{signal}`: `neutron`, `ovn_installed`, `timeout`).
    pub active_by_signal: BTreeMap<String, f64>,
    /// What did not complete, if anything.
    pub incomplete: Vec<String>,
    /// Measured from outside ([`BurstConfig::outside`]).
    pub outside: Option<OutsideResult>,
}

/// Nearest-rank percentile (`q` in 0–100) of unsorted samples.
pub fn percentile(samples: &[f64], q: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "NA".into(), |v| format!("{v:.0}"))
}

fn fmt_f(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "NA".into(), |v| format!("{v:.prec$}"))
}

impl BurstResult {
    /// The machine-readable last line.
    pub fn machine_line(&self) -> String {
        let per_pod = |x: f64| (self.pods > 0).then(|| x / self.pods as f64);
        format!(
            "pods={} p50_ms={} p99_ms={} neutron_calls_per_pod={} neutron_writes_per_pod={} controller_rss_mib={} ready_p50_ms={} ready_p99_ms={} cni_wire_p99_ms={}",
            self.pods,
            fmt_ms(percentile(&self.vifs_ms, 50.0)),
            fmt_ms(percentile(&self.vifs_ms, 99.0)),
            fmt_f(per_pod(self.neutron_calls), 2),
            fmt_f(per_pod(self.neutron_writes), 2),
            fmt_f(self.controller_rss_mib, 1),
            fmt_ms(percentile(&self.ready_ms, 50.0)),
            fmt_ms(percentile(&self.ready_ms, 99.0)),
            fmt_f(self.cni_wire_p99_ms, 1),
        )
    }

    /// A readable summary.
    pub fn summary(&self, label: &str) -> String {
        let line = |what: &str, v: &[f64]| {
            format!(
                "  {what:<34} n={:<4} p50={:>6} ms  p99={:>6} ms  max={:>6} ms\n",
                v.len(),
                fmt_ms(percentile(v, 50.0)),
                fmt_ms(percentile(v, 99.0)),
                fmt_ms(percentile(v, 100.0))
            )
        };
        let mut s = format!("{label}: {} pods\n", self.pods);
        s += &line("pod create -> status.vifs written", &self.vifs_ms);
        s += &line("pod create -> VIF active", &self.active_ms);
        if self.cni_ms.is_empty() && self.ready_ms.len() == self.pods {
            // Every pod became Ready, so ADDs returned: the nodes' sandbox records (the start
            // times) are where this client cannot read them, inside VM nodes.
            s += &format!(
                "  {:<34} not read here (the nodes' records are inside the VMs): see the daemons' ADD request p99\n",
                "pod create -> CNI ADD returned"
            );
        } else {
            s += &line("pod create -> CNI ADD returned", &self.cni_ms);
        }
        s += &line("pod create -> Ready", &self.ready_ms);
        s += &format!(
            "  {:<34} {:.0} ms\n",
            "burst total (first create -> last)", self.total_ms
        );
        if let Some(o) = &self.outside {
            s += &self.outside_summary(o);
        } else {
            s += &format!(
                "  {:<34} {} requests ({} writes) = {} per pod ({} writes per pod)\n",
                "Neutron until every VIF active",
                self.neutron_calls,
                self.neutron_writes,
                fmt_f((self.pods > 0).then(|| self.neutron_calls / self.pods as f64), 2),
                fmt_f((self.pods > 0).then(|| self.neutron_writes / self.pods as f64), 2),
            );
            for (op, n) in &self.neutron_by_op {
                s += &format!("      {op}: {n}\n");
            }
            s += &format!(
                "  {:<34} {} MiB\n",
                "controller peak RSS (VmHWM)",
                fmt_f(self.controller_rss_mib, 1)
            );
            s += &format!(
                "  {:<34} wire p99 {} ms, ADD request p99 {} ms\n",
                "daemon (histograms)",
                fmt_f(self.cni_wire_p99_ms, 1),
                fmt_f(self.cni_request_p99_ms, 1)
            );
        }
        if !self.active_by_signal.is_empty() {
            let by: Vec<String> = self
                .active_by_signal
                .iter()
                .map(|(k, v)| format!("{k} {v:.0}"))
                .collect();
            s += &format!("  {:<34} {}\n", "ADD active signal", by.join(", "));
        }
        for i in &self.incomplete {
            s += &format!("  INCOMPLETE: {i}\n");
        }
        s
    }
}

impl BurstResult {
    /// The lines of [`BurstResult::summary`] measured from outside.
    fn outside_summary(&self, o: &OutsideResult) -> String {
        let per_pod = |n: u64| fmt_f((self.pods > 0).then(|| n as f64 / self.pods as f64), 2);
        format!(
            "  {:<34} {} requests ({} writes) = {} per pod ({} writes per pod)\n  {:<34} {:.1} MiB (PSS now {:.1} MiB), {:.2} CPU s over the burst, {} process(es)\n  {:<34} RSS {:.1} MiB, PSS {:.1} MiB, {} process(es)\n",
            "Neutron (neutron-server's log)",
            o.neutron.all,
            o.neutron.writes,
            per_pod(o.neutron.all),
            per_pod(o.neutron.writes),
            "controller peak RSS (VmHWM)",
            o.controller_peak_rss_mib,
            o.controller_pss_mib,
            o.controller_cpu_s,
            o.controller_processes,
            "daemons, all nodes",
            o.daemon_rss_mib,
            o.daemon_pss_mib,
            o.daemon_processes,
        )
    }
}

/// `VmHWM` of a process in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    crate::outside::status_kib(pid, "VmHWM:").map(|kb| kb / 1024.0)
}

/// Reads one option of an INI file (last occurrence wins), without interpretation.
pub fn conf_get(path: &std::path::Path, group: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut current = String::new();
    let mut found = None;
    for l in text.lines() {
        let l = l.trim();
        if let Some(g) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = g.trim().to_string();
        } else if current == group {
            if let Some((k, v)) = l.split_once('=') {
                if k.trim() == key {
                    found = Some(v.trim().to_string());
                }
            }
        }
    }
    found
}

/// The daemons' metrics port (`[prometheus_exporter] cni_exporter_port`, default 9655).
pub fn daemon_metrics_port(cluster: &Cluster) -> u16 {
    conf_get(&cluster.conf, "prometheus_exporter", "cni_exporter_port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(9655)
}

/// Scrapes every daemon, the VM nodes' too (empty scrapes for daemons that do not answer).
pub async fn scrape_daemons(cluster: &Cluster) -> Vec<Scrape> {
    let port = daemon_metrics_port(cluster);
    let mut out = Vec::new();
    for n in &cluster.nodes {
        out.push(metrics::scrape_in_netns(&n.netns, port).await.unwrap_or_default());
    }
    for vm in cluster.vm_nodes() {
        out.push(metrics::scrape_in_vm(&vm, port).await.unwrap_or_default());
    }
    out
}

/// Available ports per host in the controller's pools.
pub fn pool_available(s: &Scrape) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for x in s.samples.iter().filter(|x| x.name == "kuryr_pool_ports") {
        if x.labels.get("state").map(String::as_str) == Some("available") {
            *m.entry(x.labels.get("host").cloned().unwrap_or_default())
                .or_insert(0.0) += x.value;
        }
    }
    m
}

/// Available pool ports per host as Neutron shows them, for any Kuryr implementation: ports of
/// the cluster's tag owned by `compute:kuryr`, bound to a host, referenced by no KuryrPort.
pub async fn pool_available_outside(cluster: &Cluster, client: &Client) -> Result<BTreeMap<String, f64>> {
    let in_use: std::collections::HashSet<String> = Api::<KuryrPort>::all(client.clone())
        .list(&Default::default())
        .await
        .map_err(|source| Error::Kube {
            what: "listing KuryrPorts".into(),
            source,
        })?
        .into_iter()
        .filter_map(|k| k.status)
        .flat_map(|s| s.vifs.into_values().filter_map(|v| v.vif.id))
        .collect();
    let tag = cluster.tag.clone();
    let ports = tokio::task::spawn_blocking(move || crate::neutron::ports_tagged(&tag))
        .await
        .map_err(|e| Error::Parse {
            what: "pool port query".into(),
            detail: e.to_string(),
        })??;
    let mut m = BTreeMap::new();
    for p in ports {
        if p.device_owner == "compute:kuryr" && !p.host.is_empty() && !in_use.contains(&p.id) {
            *m.entry(p.host).or_insert(0.0) += 1.0;
        }
    }
    Ok(m)
}

/// How [`warm_pools`] warms.
#[derive(Debug, Clone)]
pub struct Warming<'a> {
    /// Available ports each node's pool must hold at the end.
    pub per_node: usize,
    /// Bound of the whole warm-up.
    pub timeout: Duration,
    /// Count the available ports in Neutron (another controller's pools) instead of the
    /// controller's metrics.
    pub outside: bool,
    /// The nodes to warm (empty: every node of the cluster).
    pub only: &'a [String],
    /// Let each node's warm-up pod become Ready before it is deleted, so that every node has
    /// run its pod path (CNI plugin, daemon, binding) once before what is measured, as a node
    /// of a running cluster has: on a freshly booted emulated VM the first pods also pay for
    /// the emulator translating those kernel and program paths for the first time.
    pub until_ready: bool,
}

/// Warms the pools: one pod per node (which triggers each node's pool population), deleted
/// again, then waits until every node's pool has `per_node` available ports (counted by the
/// controller's metrics, or in Neutron with `outside`).
pub async fn warm_pools(cluster: &Cluster, client: &Client, ns: &str, w: &Warming<'_>) -> Result<()> {
    let Warming {
        per_node,
        timeout,
        outside,
        only,
        until_ready,
    } = *w;
    pods::ensure_namespace(client, ns).await?;
    // The nodes whose pools are warmed: `only`, or every node of the cluster.
    let nodes: Vec<String> = if only.is_empty() {
        cluster.nodes.iter().map(|n| n.name.clone()).collect()
    } else {
        only.to_vec()
    };
    let mut names = Vec::new();
    for n in &nodes {
        let name = format!("warm-{n}");
        pods::create_pod(client, ns, &name, Some(n)).await?;
        names.push((ns.to_string(), name));
    }
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    for (_, name) in &names {
        loop {
            let has = kps
                .get_opt(name)
                .await
                .ok()
                .flatten()
                .and_then(|k| k.status)
                .is_some_and(|s| !s.vifs.is_empty());
            if has {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("warm-up pod {ns}/{name} to get its VIF"),
                    secs: timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    if until_ready {
        pods::wait_ready(client, &names, deadline.saturating_duration_since(Instant::now())).await?;
    }
    for (ns, name) in &names {
        pods::delete_pod(client, ns, name).await?;
    }
    pods::wait_gone(client, &names, timeout).await?;
    loop {
        let avail = if outside {
            pool_available_outside(cluster, client).await?
        } else {
            pool_available(&metrics::scrape(&cluster.metrics_url).await?)
        };
        let short: Vec<String> = nodes
            .iter()
            .filter(|n| avail.get(*n).copied().unwrap_or(0.0) < per_node as f64)
            .map(|n| format!("{n}={}", avail.get(n).copied().unwrap_or(0.0)))
            .collect();
        if short.is_empty() {
            info!(?avail, "pools warm");
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!(
                    "pools to hold {per_node} available ports per node (now {})",
                    short.join(", ")
                ),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// How long the measurement goes on after the last pod is up, waiting for every VIF to be
/// marked active (Neutron's ACTIVE) so that the activation polls are counted.
const ACTIVE_GRACE: Duration = Duration::from_secs(120);

#[derive(Default)]
struct Seen {
    vifs: BTreeMap<String, Instant>,
    active: BTreeMap<String, Instant>,
    ready: BTreeMap<String, Instant>,
}

/// Runs one burst against `cluster` and deletes the pods afterwards.
pub async fn run(cluster: &Cluster, client: &Client, cfg: &BurstConfig) -> Result<BurstResult> {
    let ns = cfg.namespace.as_str();
    pods::ensure_namespace(client, ns).await?;
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(2);

    // Watchers first, so that no event of the burst is missed. Decoded without managedFields
    // (kube_lean): the measuring process shares the machine with the cluster it measures.
    let kp_api: Api<Lean<KuryrPort>> = Api::namespaced(client.clone(), ns);
    let s1 = seen.clone();
    let tx1 = ready_tx.clone();
    let kp_task = tokio::spawn(async move {
        let mut st = kube_lean::watcher(kp_api, watcher::Config::default()).boxed();
        while let Ok(Some(ev)) = st.try_next().await {
            match ev {
                watcher::Event::InitDone => {
                    let _ = tx1.send(()).await;
                }
                watcher::Event::Apply(kp) | watcher::Event::InitApply(kp) => {
                    let now = Instant::now();
                    let name = kp.metadata.name.clone().unwrap_or_default();
                    let Some(status) = kp.status.as_ref() else {
                        continue;
                    };
                    if status.vifs.is_empty() {
                        continue;
                    }
                    let mut g = s1.lock().unwrap_or_else(|e| e.into_inner());
                    g.vifs.entry(name.clone()).or_insert(now);
                    if status.default_vif().is_some_and(|(_, v)| v.active == Some(true)) {
                        g.active.entry(name).or_insert(now);
                    }
                }
                _ => {}
            }
        }
    });
    let pod_api: Api<Lean<Pod>> = Api::namespaced(client.clone(), ns);
    let s2 = seen.clone();
    let pod_task = tokio::spawn(async move {
        let mut st = kube_lean::watcher(pod_api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Ok(Some(ev)) = st.try_next().await {
            match ev {
                watcher::Event::InitDone => {
                    let _ = ready_tx.send(()).await;
                }
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) if pods::is_ready(&p) => {
                    let now = Instant::now();
                    let mut g = s2.lock().unwrap_or_else(|e| e.into_inner());
                    g.ready
                        .entry(p.metadata.name.clone().unwrap_or_default())
                        .or_insert(now);
                }
                _ => {}
            }
        }
    });
    for _ in 0..2 {
        tokio::time::timeout(Duration::from_secs(30), ready_rx.recv())
            .await
            .map_err(|_| Error::Timeout {
                what: "watches to start".into(),
                secs: 30,
            })?;
    }

    // Measured from outside: the implementations compared do not share a metrics endpoint,
    // and upstream's exporter calls Neutron when scraped (it would count in its figures).
    let before = match &cfg.outside {
        Some(_) => Default::default(),
        None => metrics::scrape(&cluster.metrics_url).await?,
    };
    let daemons_before = scrape_daemons(cluster).await;
    let outside_before = cfg.outside.as_ref().map(|o| {
        (
            crate::outside::log_mark(&crate::outside::neutron_log()),
            crate::outside::usage(&o.controller_pids),
        )
    });

    // The burst: every create in flight at once.
    let names: Vec<String> = (0..cfg.pods).map(|i| format!("burst-{i:04}")).collect();
    let created: Vec<(String, Instant, SystemTime, Result<()>)> =
        join_all(names.iter().enumerate().map(|(i, n)| async move {
            let node = (!cfg.nodes.is_empty()).then(|| cfg.nodes[i % cfg.nodes.len()].as_str());
            let t = Instant::now();
            let w = SystemTime::now();
            let r = pods::create_pod(client, ns, n, node).await;
            (n.clone(), t, w, r)
        }))
        .await;
    let start = created.iter().map(|c| c.1).min().unwrap_or_else(Instant::now);
    let mut incomplete = Vec::new();
    for (n, _, _, r) in &created {
        if let Err(e) = r {
            incomplete.push(format!("create {n}: {e}"));
        }
    }

    // Wait: every pod Ready (with daemons) or with its VIF (without); then, within
    // ACTIVE_GRACE, until the controller has marked every VIF active: the Neutron requests it
    // makes to observe activation belong to the burst, even when Ready came sooner.
    let deadline = Instant::now() + cfg.timeout;
    let mut grace_end: Option<Instant> = None;
    loop {
        let (done, all_active) = {
            let g = seen.lock().unwrap_or_else(|e| e.into_inner());
            let done = names.iter().all(|n| {
                if cluster.has_daemon {
                    g.ready.contains_key(n)
                } else {
                    g.vifs.contains_key(n)
                }
            });
            (done, names.iter().all(|n| g.active.contains_key(n)))
        };
        let now = Instant::now();
        if done && (all_active || now >= *grace_end.get_or_insert(now + ACTIVE_GRACE)) {
            break;
        }
        if now >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = match &cfg.outside {
        Some(_) => Default::default(),
        None => metrics::scrape(&cluster.metrics_url).await?,
    };
    let daemons_after = scrape_daemons(cluster).await;
    let outside = match (&cfg.outside, outside_before) {
        (Some(o), Some((mark, ctl_before))) => {
            let ctl = crate::outside::usage(&o.controller_pids);
            let daemons = crate::outside::usage(&o.daemon_pids);
            Some(OutsideResult {
                neutron: crate::outside::count_requests(
                    &crate::outside::neutron_log(),
                    mark,
                    &o.neutron_user,
                )?,
                controller_cpu_s: ctl.cpu_s - ctl_before.cpu_s,
                controller_peak_rss_mib: ctl.peak_rss_mib,
                controller_processes: ctl.processes,
                daemon_rss_mib: daemons.rss_mib,
                daemon_pss_mib: daemons.pss_mib,
                controller_pss_mib: ctl.pss_mib,
                daemon_processes: daemons.processes,
            })
        }
        _ => None,
    };
    kp_task.abort();
    pod_task.abort();

    let mut r = BurstResult {
        pods: cfg.pods,
        incomplete,
        outside,
        ..BurstResult::default()
    };
    let mut cni_started = BTreeMap::new();
    for n in &cluster.nodes {
        cni_started.extend(pods::node_netns_by_uid(cluster, &n.name));
    }
    let uids: BTreeMap<String, String> = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&Default::default())
        .await
        .map_err(|source| Error::Kube {
            what: "list burst pods".into(),
            source,
        })?
        .items
        .into_iter()
        .map(|p| {
            (
                p.metadata.name.unwrap_or_default(),
                p.metadata.uid.unwrap_or_default(),
            )
        })
        .collect();
    {
        let g = seen.lock().unwrap_or_else(|e| e.into_inner());
        let ms = |t: Instant, t0: Instant| t.saturating_duration_since(t0).as_secs_f64() * 1000.0;
        let mut last = start;
        for (n, t0, wall0, _) in &created {
            match g.vifs.get(n) {
                Some(t) => {
                    r.vifs_ms.push(ms(*t, *t0));
                    last = last.max(*t);
                }
                None => r.incomplete.push(format!("{n}: no status.vifs")),
            }
            if let Some(t) = g.active.get(n) {
                r.active_ms.push(ms(*t, *t0));
            }
            match g.ready.get(n) {
                Some(t) => {
                    r.ready_ms.push(ms(*t, *t0));
                    last = last.max(*t);
                }
                None if cluster.has_daemon => r.incomplete.push(format!("{n}: not Ready")),
                None => {}
            }
            let started = uids
                .get(n)
                .and_then(|u| cni_started.get(u))
                .and_then(|(_, s)| s.as_deref())
                .and_then(|s| s.parse::<jiff::Timestamp>().ok());
            if let Some(ts) = started {
                let wall0 = jiff::Timestamp::try_from(*wall0).ok();
                if let Some(w0) = wall0 {
                    let d = ts.duration_since(w0).as_secs_f64() * 1000.0;
                    if d >= 0.0 {
                        r.cni_ms.push(d);
                    }
                }
            }
        }
        r.total_ms = ms(last, start);
    }
    let neutron = |s: &Scrape, writes: bool| {
        s.sum("kuryr_neutron_requests_total", |l| {
            !writes || l.get("method").is_some_and(|m| m != "GET")
        })
    };
    r.neutron_calls = neutron(&after, false) - neutron(&before, false);
    r.neutron_writes = neutron(&after, true) - neutron(&before, true);
    for x in after
        .samples
        .iter()
        .filter(|x| x.name == "kuryr_neutron_requests_total")
    {
        let b = before
            .samples
            .iter()
            .find(|y| y.name == x.name && y.labels == x.labels)
            .map_or(0.0, |y| y.value);
        if x.value - b > 0.0 {
            let key = format!(
                "{} {} {}",
                x.labels.get("method").map_or("", String::as_str),
                x.labels.get("operation").map_or("", String::as_str),
                x.labels.get("outcome").map_or("", String::as_str)
            );
            *r.neutron_by_op.entry(key).or_insert(0.0) += x.value - b;
        }
    }
    r.controller_rss_mib = cluster.pid("controller").and_then(peak_rss_mib);
    let hist_p99 = |name: &str, filter: &dyn Fn(&BTreeMap<String, String>) -> bool| {
        let mut total: Vec<(f64, f64)> = Vec::new();
        for (b, a) in daemons_before.iter().zip(&daemons_after) {
            let d = bucket_delta(&b.buckets(name, filter), &a.buckets(name, filter));
            for (le, c) in d {
                match total.iter_mut().find(|x| x.0 == le) {
                    Some(x) => x.1 += c,
                    None => total.push((le, c)),
                }
            }
        }
        total.sort_by(|a, b| a.0.total_cmp(&b.0));
        histogram_quantile(0.99, &total).map(|s| s * 1000.0)
    };
    r.cni_wire_p99_ms = hist_p99("kuryr_cni_wire_duration_seconds", &|_| true);
    r.cni_request_p99_ms = hist_p99("kuryr_cni_request_duration_seconds", &|l| {
        l.get("command").is_none_or(|c| c.eq_ignore_ascii_case("add"))
    });
    for signal in ["neutron", "ovn_installed", "timeout"] {
        let has = |l: &BTreeMap<String, String>| l.get("signal").is_some_and(|s| s == signal);
        let n: f64 = daemons_before
            .iter()
            .zip(&daemons_after)
            .map(|(b, a)| {
                a.sum("kuryr_cni_active_wait_seconds_count", has)
                    - b.sum("kuryr_cni_active_wait_seconds_count", has)
            })
            .sum();
        if n > 0.0 {
            r.active_by_signal.insert(signal.to_string(), n);
        }
    }

    // Clean up: the pods go, their ports return to the pool (or are deleted without pools).
    for n in &names {
        let _ = pods::delete_pod(client, ns, n).await;
    }
    let keys: Vec<(String, String)> = names.iter().map(|n| (ns.to_string(), n.clone())).collect();
    if let Err(e) = pods::wait_gone(client, &keys, Duration::from_secs(120)).await {
        r.incomplete.push(format!("cleanup: {e}"));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn machine_line_has_every_field_with_na_for_missing_ones() {
        let r = BurstResult {
            pods: 2,
            vifs_ms: vec![10.0, 20.0],
            neutron_calls: 1.0,
            ..BurstResult::default()
        };
        assert_eq!(
            r.machine_line(),
            "pods=2 p50_ms=10 p99_ms=20 neutron_calls_per_pod=0.50 neutron_writes_per_pod=0.00 \
             controller_rss_mib=NA ready_p50_ms=NA ready_p99_ms=NA cni_wire_p99_ms=NA"
        );
    }

    #[test]
    fn add_times_missing_for_ready_pods_are_explained_not_printed_as_na() {
        let mut r = BurstResult {
            pods: 2,
            ready_ms: vec![100.0, 200.0],
            ..BurstResult::default()
        };
        let s = r.summary("vm");
        assert!(s.contains("CNI ADD returned     not read here"), "{s}");
        // Pods that did not all become Ready keep the plain (NA) line.
        r.ready_ms.pop();
        assert!(r.summary("vm").contains("CNI ADD returned     n=0"));
    }

    #[test]
    fn conf_get_reads_the_last_value_of_a_group() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("k.conf");
        std::fs::write(
            &p,
            "[a]\nx = 1\n[prometheus_exporter]\ncni_exporter_port = 9700\n[a]\nx = 2\n",
        )
        .expect("write");
        assert_eq!(conf_get(&p, "a", "x").as_deref(), Some("2"));
        assert_eq!(
            conf_get(&p, "prometheus_exporter", "cni_exporter_port").as_deref(),
            Some("9700")
        );
        assert_eq!(conf_get(&p, "a", "y"), None);
    }
}
