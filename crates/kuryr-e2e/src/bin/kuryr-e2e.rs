//! `kuryr-e2e`: the measuring and reporting client of `sandbox/demo` and `bench/pod-burst`,
//! against a cluster started by `sandbox/cluster up`.
//!
//! * `kuryr-e2e report --state-dir D --namespaces a,b`: waits for the pods of those namespaces
//!   to be Ready, prints the pod table (with what Neutron says of each port) and the
//!   connectivity matrix; exits 1 naming the failed step.
//! * `kuryr-e2e pod-burst --state-dir D --pods N [--warm-pool]`: one burst, a readable summary
//!   and the machine-readable line.
//! * `kuryr-e2e soak --state-dir D --seconds N`: pods across namespaces and nodes, every pod
//!   probing every other pod (TCP and UDP) in rounds; the last line is
//!   `soak pods=P rounds=R probes=X unanswered=U daemon_crashes=C` (`sandbox/soak`).
//! * `kuryr-e2e service-report --namespace a --clients a,b`: a Service over the `app=web` pods
//!   of `a`, its load balancer, and its VIP probed from every pod of `a` and `b`.
//! * `kuryr-e2e service-burst --services N --backends M`: `bench/service-burst`'s measurement.
//! * `kuryr-e2e chaos [--scenarios a,b] [--iterations N] [--short]`: `bench/chaos`, faults
//!   injected under churn, each followed by an audit; `kuryr-e2e chaos-proxy`: the
//!   fault-injecting proxy in front of Neutron it uses (needs no cluster).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use kuryr_e2e::{
    burst::{self, BurstConfig},
    cluster::Cluster,
    neutron, pods, probe, report, settle,
    soak::{self, SoakConfig, SoakPod},
};

#[derive(Parser)]
#[command(about = "End-to-end reporting and benchmarking client of kuryr-rs (sandbox/demo, bench/pod-burst)")]
struct Args {
    /// State dir of the cluster (`sandbox/cluster up --state-dir`).
    #[arg(long, global = true, default_value = "/var/lib/kuryr-sandbox/cluster")]
    state_dir: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Pod table and connectivity matrix of the pods in some namespaces.
    Report {
        /// Namespaces (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        namespaces: Vec<String>,
        /// Seconds to wait for the pods to be Ready.
        #[arg(long, default_value_t = 180)]
        timeout: u64,
    },
    /// One burst of pods created at once, measured.
    PodBurst {
        /// Pods in the burst.
        #[arg(long, default_value_t = 50)]
        pods: usize,
        /// Label of the run in the summary.
        #[arg(long, default_value = "burst")]
        label: String,
        /// Warm the pools first (one pod per node) and wait until each node's pool holds
        /// this many available ports.
        #[arg(long)]
        warm_pool: Option<usize>,
        /// Namespace of the burst.
        #[arg(long, default_value = "pod-burst")]
        namespace: String,
        /// Seconds the burst may take.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
        /// Measure from outside the implementation (bench/compare-upstream): Neutron requests
        /// from neutron-server's log, controller and daemons from /proc, pool ports from
        /// Neutron; no metrics endpoint is read (upstream's calls Neutron when scraped).
        #[arg(long)]
        outside: bool,
        /// Name of the implementation in the figures (with --outside).
        #[arg(long, default_value = "kuryr-rs")]
        implementation: String,
        /// Write the figures measured from outside to this JSON file (with --outside).
        #[arg(long, requires = "outside")]
        json: Option<PathBuf>,
        /// Pods go to these nodes in turn (comma-separated, e.g. the VM nodes `vm-1,vm-2`), and
        /// only their pools are warmed; default: the cluster's nodes, pods where the scheduler
        /// puts them.
        #[arg(long, value_delimiter = ',')]
        on_nodes: Vec<String>,
    },
    /// The side-by-side table and ratios of two `pod-burst --outside --json` runs
    /// (bench/compare-upstream).
    CompareReport {
        /// Figures of upstream Kuryr-Kubernetes.
        #[arg(long)]
        upstream: PathBuf,
        /// Figures of kuryr-rs.
        #[arg(long)]
        ours: PathBuf,
    },
    /// The drop-in migration from upstream Kuryr-Kubernetes, measured
    /// (bench/compare-upstream --switch): `before` under upstream, `after` once kuryr-rs runs.
    SwitchOver {
        /// `before` (pods under upstream, recorded) or `after` (compared, new pods, one deleted).
        #[arg(long, value_parser = ["before", "after"])]
        phase: String,
        /// Pods created in the phase.
        #[arg(long, default_value_t = 6)]
        pods: usize,
        /// Namespace.
        #[arg(long, default_value = "switch")]
        namespace: String,
        /// Seconds the pods may take to be Ready.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// Pods across namespaces and nodes connecting to each other in rounds (sandbox/soak).
    Soak(SoakArgs),
    /// A Service over the `app=web` pods of a namespace, probed through its VIP from the pods
    /// of some namespaces (sandbox/demo).
    ServiceReport {
        /// Namespace of the Service.
        #[arg(long)]
        namespace: String,
        /// Namespaces whose pods probe the VIP (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        clients: Vec<String>,
        /// Backends expected (pods of the Service).
        #[arg(long, default_value_t = 2)]
        backends: usize,
    },
    /// A NetworkPolicy isolating one namespace's pods, probed between every pair of pods of
    /// some namespaces, then deleted (sandbox/demo).
    PolicyReport {
        /// Namespace whose pods the policy isolates.
        #[arg(long)]
        namespace: String,
        /// Namespaces whose pods are probed, and probe (comma-separated).
        #[arg(long, value_delimiter = ',', required = true)]
        clients: Vec<String>,
    },
    /// Faults injected under pod and Service churn, each followed by an audit (bench/chaos).
    Chaos(kuryr_e2e::chaos::cli::ChaosArgs),
    /// The fault-injecting proxy in front of Neutron (bench/chaos; needs no cluster).
    ChaosProxy(kuryr_e2e::chaos::cli::ProxyArgs),
    /// N Services created at once over M backends, measured (bench/service-burst).
    ServiceBurst {
        /// Services.
        #[arg(long, default_value_t = 20)]
        services: usize,
        /// Backend pods.
        #[arg(long, default_value_t = 3)]
        backends: usize,
        /// Namespace.
        #[arg(long, default_value = "service-burst")]
        namespace: String,
        /// Seconds each phase may take.
        #[arg(long, default_value_t = 180)]
        timeout: u64,
        /// Control-plane figures only (a cloud without a data path: the model cloud).
        #[arg(long)]
        no_traffic: bool,
    },
    /// K NetworkPolicies over N pods; pod, namespace and policy changes timed until a probe
    /// flips (bench/policy-enforce).
    PolicyEnforce {
        /// Policies (K).
        #[arg(long, default_value_t = 10)]
        policies: usize,
        /// Pods (N).
        #[arg(long, default_value_t = 30)]
        pods: usize,
        /// Seconds one change may take.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Control-plane figures only (a cloud without a data path: the model cloud).
        #[arg(long)]
        no_traffic: bool,
    },
}

/// How long the report waits after Ready for Neutron to report the pods' ports ACTIVE.
const ACTIVE_WAIT: Duration = Duration::from_secs(90);

async fn cmd_report(cluster: &Cluster, namespaces: &[String], timeout: u64) -> anyhow::Result<bool> {
    let client = cluster.client().await?;
    let step = |s: &str| eprintln!("[{}] demo: {s}", jiff::Zoned::now().strftime("%H:%M:%S"));
    step("waiting for the pods to be Ready");
    let mut keys = Vec::new();
    for ns in namespaces {
        for p in pods::collect(cluster, &client, std::slice::from_ref(ns)).await? {
            keys.push((p.namespace, p.name));
        }
    }
    if keys.is_empty() {
        bail!("step \"pods\": no pods in namespaces {}", namespaces.join(","));
    }
    let ready = pods::wait_ready(&client, &keys, Duration::from_secs(timeout)).await;
    let mut views = pods::collect(cluster, &client, namespaces).await?;
    if ready.is_ok() && !views.iter().all(|v| v.vif_active) {
        // Ready comes on OVN's local signal (the port's flows are installed on the node);
        // Neutron's own ACTIVE, which the controller copies into the KuryrPort, follows.
        step("pods Ready; waiting for Neutron to report their ports ACTIVE too");
        let started = Instant::now();
        while started.elapsed() < ACTIVE_WAIT && !views.iter().all(|v| v.vif_active) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            views = pods::collect(cluster, &client, namespaces).await?;
        }
        if views.iter().all(|v| v.vif_active) {
            step(&format!(
                "Neutron reported every port ACTIVE {} s after the pods were Ready",
                started.elapsed().as_secs()
            ));
        } else {
            step(&format!(
                "WARNING: not every port is ACTIVE in Neutron after {} s (see PORT STATUS)",
                ACTIVE_WAIT.as_secs()
            ));
        }
    }
    step("asking Neutron about each pod's port");
    let ids: Vec<String> = views
        .iter()
        .filter(|p| !p.port_id.is_empty())
        .map(|p| p.port_id.clone())
        .collect();
    let ports: BTreeMap<String, neutron::NeutronPort> = match neutron::ports_by_id(&ids) {
        Ok(list) => list.into_iter().map(|p| (p.id.clone(), p)).collect(),
        Err(e) => {
            eprintln!("demo: WARNING: cannot read the ports from Neutron: {e}");
            BTreeMap::new()
        }
    };
    println!("\nPods and their Neutron ports\n");
    print!("{}", report::pod_table(&views, &ports));
    if let Err(e) = ready {
        eprintln!("\ndemo: ERROR in step \"pods Ready\": {e}");
        eprintln!(
            "demo: read {} (controller), {}/node-*.log (nodes), {}/daemon-*.log (daemons)",
            cluster.log("controller").display(),
            cluster.state_dir.join("logs").display(),
            cluster.state_dir.join("logs").display()
        );
        return Ok(false);
    }
    let mut ok = true;
    for p in &views {
        if p.port_id.is_empty() || !ports.contains_key(&p.port_id) {
            eprintln!(
                "demo: ERROR: {}/{} has no Neutron port in its KuryrPort (or Neutron does not know it)",
                p.namespace, p.name
            );
            ok = false;
        }
    }
    step("connecting from every pod's network namespace to every other pod");
    let probes = probe::matrix(&views, Duration::from_secs(5), 8).await;
    println!(
        "\nConnectivity: TCP connections from each pod's network namespace (rows) to each pod's IP:{} (columns);\n\
         \"ok\" = the other pod answered its own name\n",
        pods::POD_PORT
    );
    print!("{}", report::matrix_table(&views, &probes));
    if probes.iter().any(|p| !p.ok) {
        eprintln!("demo: ERROR in step \"connectivity\": some connections failed (above)");
        ok = false;
    }
    Ok(ok)
}

async fn cmd_switch(
    cluster: &Cluster,
    phase: &str,
    n: usize,
    ns: &str,
    timeout: u64,
) -> anyhow::Result<bool> {
    let client = cluster.client().await?;
    let timeout = Duration::from_secs(timeout);
    if phase == "before" {
        println!(
            "{}",
            kuryr_e2e::switch::before(cluster, &client, ns, n, timeout).await?
        );
        return Ok(true);
    }
    let a = kuryr_e2e::switch::after(cluster, &client, ns, n, timeout).await?;
    for c in &a.changed {
        println!("  changed: {c}");
    }
    println!("{}", a.line());
    Ok(a.ok())
}

/// What `pod-burst` was asked.
struct BurstArgs<'a> {
    pods_n: usize,
    label: &'a str,
    warm: Option<usize>,
    namespace: &'a str,
    timeout: u64,
    /// `--outside`: the implementation's name and where to write its figures.
    outside: Option<(&'a str, Option<&'a std::path::Path>)>,
    /// `--on-nodes`.
    on_nodes: &'a [String],
}

fn read_figures(path: &std::path::Path) -> anyhow::Result<kuryr_e2e::compare::RunFigures> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a pod-burst --json file", path.display()))
}

fn compare_report(upstream: &std::path::Path, ours: &std::path::Path) -> anyhow::Result<String> {
    Ok(kuryr_e2e::compare::render(
        &read_figures(upstream)?,
        &read_figures(ours)?,
    ))
}

/// The processes measured from outside: the controller's and every node daemon's (the pids
/// `sandbox/cluster` started; their descendants count too).
fn outside_config(cluster: &Cluster) -> anyhow::Result<burst::OutsideConfig> {
    let controller = cluster
        .pid("controller")
        .context("the cluster's controller is not running (sandbox/cluster status)")?;
    let daemons = cluster
        .nodes
        .iter()
        .filter_map(|n| cluster.pid(&format!("daemon-{}", n.name.trim_start_matches("node-"))))
        .collect();
    Ok(burst::OutsideConfig {
        neutron_user: kuryr_e2e::outside::kuryr_user_id().context("the Keystone user of the controller")?,
        controller_pids: vec![controller],
        daemon_pids: daemons,
    })
}

/// A burst starts once the machine's CPU is at most this busy (all cores) for two seconds...
const SETTLE_BUSY: f64 = 0.30;
/// ...or after this long.
const SETTLE_MAX: Duration = Duration::from_secs(90);

async fn cmd_burst(cluster: &Cluster, a: BurstArgs<'_>) -> anyhow::Result<bool> {
    let BurstArgs {
        pods_n,
        label,
        warm,
        namespace,
        timeout,
        outside,
        on_nodes,
    } = a;
    let client = cluster.client().await?;
    if let Some(per_node) = warm {
        eprintln!(
            "pod-burst: warming the pools ({per_node} available ports per node) and each node's pod path (a pod Ready on it)"
        );
        let warming = burst::Warming {
            per_node,
            timeout: Duration::from_secs(timeout),
            outside: outside.is_some(),
            only: on_nodes,
            until_ready: true,
        };
        burst::warm_pools(cluster, &client, namespace, &warming)
            .await
            .context("warming the pools")?;
        // The warm-up's own work (Neutron, OVN) goes on after the pools count their ports:
        // the burst waits for it, bounded (kuryr_e2e::settle says why).
        let s = settle::wait_quiet(SETTLE_BUSY, 2, SETTLE_MAX).await;
        if s.quiet {
            eprintln!(
                "pod-burst: the machine went quiet {:.0} s after the warm-up (CPU {:.0} % busy)",
                s.waited.as_secs_f64(),
                s.busy * 100.0
            );
        } else {
            eprintln!(
                "pod-burst: the machine did not go quiet within {} s (CPU {:.0} % busy): measuring anyway",
                SETTLE_MAX.as_secs(),
                s.busy * 100.0
            );
        }
    }
    eprintln!("pod-burst: creating {pods_n} pods at once in namespace {namespace}");
    let r = burst::run(
        cluster,
        &client,
        &BurstConfig {
            pods: pods_n,
            namespace: namespace.to_string(),
            timeout: Duration::from_secs(timeout),
            outside: match outside {
                Some(_) => Some(outside_config(cluster)?),
                None => None,
            },
            nodes: on_nodes.to_vec(),
        },
    )
    .await?;
    print!("{}", r.summary(label));
    if let Some((name, json)) = outside {
        let f = kuryr_e2e::compare::RunFigures::from_burst(name, &r)
            .context("no figures measured from outside")?;
        if let Some(path) = json {
            std::fs::write(path, serde_json::to_string_pretty(&f)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        println!("{}", f.line());
    } else {
        println!("{}", r.machine_line());
    }
    Ok(r.incomplete.is_empty())
}

/// TCP and UDP ports every soak pod answers on.
const SOAK_PORTS: [(u16, &str); 4] = [(8080, "TCP"), (8081, "TCP"), (8080, "UDP"), (8081, "UDP")];

#[derive(clap::Args)]
struct SoakArgs {
    /// Seconds of probing.
    #[arg(long, default_value_t = 300)]
    seconds: u64,
    /// Pods (spread over the namespaces and the cluster's nodes).
    #[arg(long, default_value_t = 9)]
    pods: usize,
    /// Namespaces (`soak-1`, `soak-2`, ...).
    #[arg(long, default_value_t = 3)]
    namespaces: usize,
    /// Milliseconds between the starts of two rounds.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// Milliseconds one probe waits for its answer.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Mark of the sandbox crash record taken before the cluster started
    /// (`sandbox/crashes --mark`); crashes after it are counted.
    #[arg(long)]
    crash_mark: Option<u64>,
    /// Leave the pods and namespaces in place at the end.
    #[arg(long)]
    keep: bool,
}

async fn cmd_soak(cluster: &Cluster, a: SoakArgs) -> anyhow::Result<bool> {
    if a.pods < 2 || a.namespaces == 0 || a.interval_ms == 0 || a.timeout_ms == 0 {
        bail!("soak needs --pods >= 2, --namespaces >= 1 and non-zero --interval-ms/--timeout-ms");
    }
    let say = |s: &str| eprintln!("[{}] soak: {s}", jiff::Zoned::now().strftime("%H:%M:%S"));
    let client = cluster.client().await?;
    let namespaces: Vec<String> = (1..=a.namespaces).map(|i| format!("soak-{i}")).collect();
    let nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    if nodes.is_empty() {
        bail!("the cluster has no nodes");
    }
    let mut keys = Vec::new();
    for ns in &namespaces {
        pods::ensure_namespace(&client, ns).await?;
    }
    for i in 0..a.pods {
        let ns = &namespaces[i % namespaces.len()];
        let node = &nodes[i % nodes.len()];
        let name = format!("soak-{i}");
        pods::create_pod_with_ports(&client, ns, &name, Some(node), &SOAK_PORTS).await?;
        keys.push((ns.clone(), name));
    }
    say(&format!(
        "{} pods in {} namespaces on {} nodes created; waiting for them to be Ready",
        a.pods,
        namespaces.len(),
        nodes.len()
    ));
    pods::wait_ready(&client, &keys, Duration::from_secs(180)).await?;
    let views = pods::collect(cluster, &client, &namespaces).await?;
    let mut peers = Vec::new();
    for v in &views {
        let ip = v
            .pod_ip
            .parse()
            .with_context(|| format!("pod {}/{} has no usable IP ({:?})", v.namespace, v.name, v.pod_ip))?;
        if v.netns.is_empty() {
            bail!(
                "pod {}/{}: its node does not report a network namespace",
                v.namespace,
                v.name
            );
        }
        peers.push(SoakPod {
            label: format!("{}/{}", v.namespace, v.name),
            node: v.node.clone(),
            ip,
            expect: v.name.clone(),
            netns: v.netns.clone(),
        });
    }
    let cfg = SoakConfig {
        duration: Duration::from_secs(a.seconds),
        interval: Duration::from_millis(a.interval_ms),
        timeout: Duration::from_millis(a.timeout_ms),
        tcp_ports: SOAK_PORTS.iter().filter(|p| p.1 == "TCP").map(|p| p.0).collect(),
        udp_ports: SOAK_PORTS.iter().filter(|p| p.1 == "UDP").map(|p| p.0).collect(),
    };
    say("all Ready; warming up: every pod connects once to every other pod (retrying up to 30 s)");
    let warm = {
        let (peers, cfg) = (peers.clone(), cfg.clone());
        tokio::task::spawn_blocking(move || soak::warm_up(&peers, &cfg, Duration::from_secs(30)))
            .await
            .context("the warm-up's client threads")?
    };
    say(&format!(
        "warm-up: every pair answered within {} ms; {} probe(s) failed before their pair first answered",
        warm.elapsed.as_millis(),
        warm.early_failures.len()
    ));
    for f in warm.early_failures.iter().take(20) {
        say(&format!("warm-up:   {f}"));
    }
    if !warm.unreachable.is_empty() {
        for u in &warm.unreachable {
            say(&format!("warm-up: NEVER ANSWERED: {u}"));
        }
        bail!(
            "{} pair(s) of pods never reached each other within 30 s",
            warm.unreachable.len()
        );
    }
    say(&format!(
        "every pod probes every other pod on tcp {:?} and udp {:?}, a round every {} ms, for {} s",
        cfg.tcp_ports, cfg.udp_ports, a.interval_ms, a.seconds
    ));
    let record = sandbox_guard::Record::default();
    let mark = a.crash_mark.map_or_else(|| record.mark(), sandbox_guard::Mark);
    let progress = std::sync::Arc::new(soak::Progress::default());
    let job = {
        let (peers, cfg, progress) = (peers.clone(), cfg.clone(), progress.clone());
        tokio::task::spawn_blocking(move || soak::run(&peers, &cfg, progress))
    };
    tokio::pin!(job);
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    tick.tick().await;
    let report = loop {
        tokio::select! {
            r = &mut job => break r.context("the soak's client threads")?,
            _ = tick.tick() => {
                let crashes = record.since(mark).map(|c| c.len()).unwrap_or(0);
                say(&format!(
                    "{:>4} s: {} probes, {} unanswered, {} sandbox daemon crash(es)",
                    started.elapsed().as_secs(),
                    progress.probes.load(std::sync::atomic::Ordering::Relaxed),
                    progress.unanswered.load(std::sync::atomic::Ordering::Relaxed),
                    crashes
                ));
            }
        }
    };
    let crashes = record.since(mark).context("reading the sandbox crash record")?;
    print!("{}", report.summary(&peers));
    for c in &crashes {
        println!("soak: sandbox daemon crashed: {c}");
    }
    if !a.keep {
        say("deleting the soak's namespaces");
        for ns in &namespaces {
            pods::delete_namespace(&client, ns).await?;
        }
        pods::wait_gone(&client, &keys, Duration::from_secs(120)).await?;
    }
    println!("{}", report.machine_line(crashes.len()));
    Ok(report.unanswered == 0 && crashes.is_empty() && report.setup_errors.is_empty() && report.rounds > 0)
}

async fn cmd_service_burst(
    cluster: &Cluster,
    services: usize,
    backends: usize,
    namespace: String,
    timeout: u64,
    no_traffic: bool,
) -> anyhow::Result<bool> {
    let client = cluster.client().await?;
    let cfg = kuryr_e2e::svc_burst::SvcBurstConfig {
        services,
        backends,
        namespace,
        timeout: Duration::from_secs(timeout),
        no_traffic,
    };
    let r = kuryr_e2e::svc_burst::run(cluster, &client, &cfg).await?;
    print!("{}", kuryr_e2e::svc_burst::summary(&r));
    println!("{}", r.machine_line());
    Ok(r.leaked.unwrap_or(0) == 0)
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if let Cmd::CompareReport { upstream, ours } = &args.cmd {
        return match compare_report(upstream, ours) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kuryr-e2e compare-report: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if let Cmd::ChaosProxy(p) = &args.cmd {
        return match kuryr_e2e::chaos::cli::proxy(p).await {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kuryr-e2e chaos-proxy: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let cluster = match Cluster::attach(&args.state_dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "kuryr-e2e: no cluster in {} ({e}); start one with sandbox/cluster up",
                args.state_dir.display()
            );
            return ExitCode::from(2);
        }
    };
    let r = match args.cmd {
        Cmd::Report { namespaces, timeout } => cmd_report(&cluster, &namespaces, timeout).await,
        Cmd::PodBurst {
            pods,
            label,
            warm_pool,
            namespace,
            timeout,
            outside,
            implementation,
            json,
            on_nodes,
        } => {
            let b = BurstArgs {
                pods_n: pods,
                label: &label,
                warm: warm_pool,
                namespace: &namespace,
                timeout,
                outside: outside.then_some((implementation.as_str(), json.as_deref())),
                on_nodes: &on_nodes,
            };
            cmd_burst(&cluster, b).await
        }
        Cmd::CompareReport { .. } => unreachable!("handled before attaching a cluster"),
        Cmd::SwitchOver {
            phase,
            pods,
            namespace,
            timeout,
        } => cmd_switch(&cluster, &phase, pods, &namespace, timeout).await,
        Cmd::Soak(a) => cmd_soak(&cluster, a).await,
        Cmd::ServiceReport {
            namespace,
            clients,
            backends,
        } => match cluster.client().await {
            Ok(client) => kuryr_e2e::svc_demo::run(&cluster, &client, &namespace, &clients, backends)
                .await
                .map_err(anyhow::Error::from),
            Err(e) => Err(e.into()),
        },
        Cmd::PolicyReport { namespace, clients } => match cluster.client().await {
            Ok(client) => kuryr_e2e::netpol_demo::run(&cluster, &client, &namespace, &clients)
                .await
                .map_err(anyhow::Error::from),
            Err(e) => Err(e.into()),
        },
        Cmd::Chaos(a) => kuryr_e2e::chaos::cli::run(&cluster, &a).await,
        Cmd::ChaosProxy(_) => Ok(true),
        Cmd::ServiceBurst {
            services,
            backends,
            namespace,
            timeout,
            no_traffic,
        } => cmd_service_burst(&cluster, services, backends, namespace, timeout, no_traffic).await,
        Cmd::PolicyEnforce {
            policies,
            pods,
            timeout,
            no_traffic,
        } => {
            let opts = kuryr_e2e::policy_bench::Options {
                policies,
                pods,
                timeout: Duration::from_secs(timeout),
                no_traffic,
            };
            match cluster.client().await {
                Ok(client) => kuryr_e2e::policy_bench::run(&cluster, &client, &opts)
                    .await
                    .map(|out| {
                        println!("{out}");
                        true
                    })
                    .map_err(anyhow::Error::from),
                Err(e) => Err(e.into()),
            }
        }
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("kuryr-e2e: {e:#}");
            ExitCode::FAILURE
        }
    }
}
