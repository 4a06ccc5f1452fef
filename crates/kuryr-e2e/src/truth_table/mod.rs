//! The NetworkPolicy conformance suite (issue 14), re-derived from the documented scenarios of
//! the Kubernetes e2e "Netpol" truth tables: namespaces x, y, z (labelled `ns=<name>`) × pods a,
//! b, c (labelled `pod=<name>`), each serving 80 and 81 over TCP and UDP, spread over the nodes
//! (ports named `<proto>-<number>`, but [`SERVE_PORT`] is TCP 80 on a and TCP 81 on b).
//! After every change, every pod probes every pod from inside its network namespace with
//! `kube-sandbox probe` until the whole 9 × 9 table equals the scenario's expectation twice in a
//! row; the time that took is the convergence time reported. Each pod keeps one
//! `kubectl exec -i … probe --stdin` session open and gets a line of targets per round: a
//! `kubectl exec` per pod and round costs about 75 ms of CPU, which at nine pods a round took
//! most of the two cores and slowed the cloud under test (Neutron) down by half. A pod reaching itself is always allowed (loopback, as upstream).
//!
//! [`scenarios`] holds the scenarios; this module the world, the probing and the runner.

pub mod scenarios;

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::{core::v1::Namespace, networking::v1::NetworkPolicy};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams},
};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout},
    sync::Mutex,
};

use crate::{
    cluster::Cluster,
    error::{Error, Result},
    netpol::{self, Labelled},
    pods,
};

/// The namespaces of the suite.
pub const NAMESPACES: [&str; 3] = ["x", "y", "z"];
/// The pods in each namespace.
pub const PODS: [&str; 3] = ["a", "b", "c"];
/// A container port name that pods resolve differently: TCP 80 on the `a` pods, TCP 81 on the
/// `b` pods, absent on the `c` pods (their other ports are named `<proto>-<number>`).
pub const SERVE_PORT: &str = "serve";
/// How long one probe waits (a dropped SYN never answers).
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// How long one change may take to converge before the scenario fails.
pub const WITHIN: Duration = Duration::from_secs(40);

/// One pod of the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Namespace.
    pub ns: String,
    /// Name.
    pub name: String,
    /// Pod IP.
    pub ip: String,
}

impl Peer {
    /// `ns/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }
    /// Is it `ns/name`?
    pub fn is(&self, ns: &str, name: &str) -> bool {
        self.ns == ns && self.name == name
    }
}

/// Transport of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Proto {
    fn prefix(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// Which (from, to) pairs a probe expects to connect.
pub type Expectation = Arc<dyn Fn(&Peer, &Peer) -> bool + Send + Sync>;

/// One probed port and what it should show.
#[derive(Clone)]
pub struct Check {
    /// Transport.
    pub proto: Proto,
    /// Port.
    pub port: u16,
    /// The expected table.
    pub expect: Expectation,
}

impl Check {
    /// `proto/port` expecting `f`.
    pub fn new(proto: Proto, port: u16, f: impl Fn(&Peer, &Peer) -> bool + Send + Sync + 'static) -> Self {
        Self {
            proto,
            port,
            expect: Arc::new(f),
        }
    }
    fn label(&self) -> String {
        format!("{}/{}", self.proto.prefix(), self.port)
    }
}

/// A change a step makes before its checks.
#[derive(Debug, Clone)]
pub enum Action {
    /// Create or replace a NetworkPolicy (`spec` as in a manifest).
    Apply {
        /// Namespace.
        ns: &'static str,
        /// Name.
        name: &'static str,
        /// Spec.
        spec: Value,
    },
    /// Delete a NetworkPolicy.
    Delete {
        /// Namespace.
        ns: &'static str,
        /// Name.
        name: &'static str,
    },
    /// Set (`Some`) or remove (`None`) a pod label.
    LabelPod {
        /// Namespace.
        ns: &'static str,
        /// Pod.
        pod: &'static str,
        /// Key.
        key: &'static str,
        /// Value.
        value: Option<&'static str>,
    },
    /// Set (`Some`) or remove (`None`) a namespace label.
    LabelNs {
        /// Namespace.
        ns: &'static str,
        /// Key.
        key: &'static str,
        /// Value.
        value: Option<&'static str>,
    },
}

/// Changes, then the tables they must lead to.
#[derive(Clone)]
pub struct Step {
    /// What the step does.
    pub what: &'static str,
    /// The changes.
    pub actions: Vec<Action>,
    /// The tables to converge to.
    pub checks: Vec<Check>,
}

/// A named sequence of steps; the world is reset (no policies, baseline labels) after it.
#[derive(Clone)]
pub struct Scenario {
    /// Name.
    pub name: &'static str,
    /// Steps.
    pub steps: Vec<Step>,
}

/// Rounds start at most this often: a round where everything connects takes a few
/// milliseconds, and back-to-back rounds would burn the CPU the cloud under test needs.
pub const ROUND_EVERY: Duration = Duration::from_millis(250);

/// How long one round's answer may take on a session before the session is dropped.
const ROUND_WITHIN: Duration = Duration::from_secs(15);

/// The end-of-round line of `kube-sandbox probe --stdin`.
const END_OF_ROUND: &str = "end";

/// One pod's open `kubectl exec -i … probe --stdin`.
struct Session {
    /// Kept so the exec ends (killed) when the session is dropped.
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

/// The cluster the suite runs in.
pub struct World {
    client: Client,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    probe_bin: PathBuf,
    /// The nine pods, x/a … z/c.
    pub peers: Vec<Peer>,
    /// Each peer's probe session (opened on first use, reopened after a failure).
    sessions: Vec<Mutex<Option<Session>>>,
}

/// The kubectl binary: `$KUBECTL`, else where `tools/install-kubectl` puts it.
pub fn kubectl_path() -> PathBuf {
    std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/kube-sandbox/kubectl/bin/kubectl"))
}

impl World {
    /// Creates the namespaces and pods (a, c on the first node; b on the second) and waits
    /// until they are Ready.
    pub async fn setup(cluster: &Cluster, client: &Client) -> Result<Self> {
        let nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
        let ports = [(80, "TCP"), (81, "TCP"), (80, "UDP"), (81, "UDP")];
        let mut keys = Vec::new();
        for ns in NAMESPACES {
            pods::ensure_namespace(client, ns).await?;
            netpol::label_namespace(client, ns, "ns", ns).await?;
            for (i, name) in PODS.iter().enumerate() {
                let node = nodes.get((i % 2) % nodes.len().max(1)).map(String::as_str);
                let mut pod = pods::pod_manifest_with_ports(ns, name, node, &ports);
                pod.metadata.labels = Some(BTreeMap::from([("pod".to_string(), name.to_string())]));
                // One name, different numbers per pod: `serve` is TCP 80 on a, TCP 81 on b.
                let serve = match *name {
                    "a" => Some(80),
                    "b" => Some(81),
                    _ => None,
                };
                let container_ports = pod
                    .spec
                    .iter_mut()
                    .flat_map(|s| s.containers.iter_mut())
                    .flat_map(|c| c.ports.iter_mut().flatten());
                for cp in container_ports {
                    if Some(cp.container_port) == serve && cp.protocol.as_deref() == Some("TCP") {
                        cp.name = Some(SERVE_PORT.into());
                    }
                }
                Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns)
                    .create(&Default::default(), &pod)
                    .await
                    .map_err(|source| Error::Kube {
                        what: format!("create pod {ns}/{name}"),
                        source,
                    })?;
                keys.push((ns.to_string(), name.to_string()));
            }
        }
        pods::wait_ready(client, &keys, Duration::from_secs(180)).await?;
        let ns: Vec<String> = NAMESPACES.iter().map(|s| s.to_string()).collect();
        let views = pods::collect(cluster, client, &ns).await?;
        let mut peers = Vec::new();
        for (ns, name) in &keys {
            let v = views
                .iter()
                .find(|v| &v.namespace == ns && &v.name == name && !v.pod_ip.is_empty())
                .ok_or_else(|| Error::Parse {
                    what: format!("pod {ns}/{name}"),
                    detail: "no IP".into(),
                })?;
            peers.push(Peer {
                ns: ns.clone(),
                name: name.clone(),
                ip: v.pod_ip.clone(),
            });
        }
        Ok(Self {
            client: client.clone(),
            kubectl: kubectl_path(),
            kubeconfig: cluster.kubeconfig.clone(),
            probe_bin: cluster.bin_dir.join("kube-sandbox"),
            sessions: peers.iter().map(|_| Mutex::new(None)).collect(),
            peers,
        })
    }

    /// One round: every pod probes every pod on each `(proto, port)` (one line to each pod's
    /// session); `tables[i][from][to]` = connected on the i-th, and the right pod answered.
    pub async fn observe(&self, on: &[(Proto, u16)]) -> Result<Vec<Vec<Vec<bool>>>> {
        let rows = futures::future::join_all((0..self.peers.len()).map(|i| self.row(i, on))).await;
        let rows: Vec<Vec<bool>> = rows.into_iter().collect::<Result<_>>()?;
        let n = self.peers.len();
        Ok((0..on.len())
            .map(|i| rows.iter().map(|r| r[i * n..(i + 1) * n].to_vec()).collect())
            .collect())
    }

    fn open_session(&self, from: &Peer) -> Result<Session> {
        let mut child = tokio::process::Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["exec", "-i", "-n", &from.ns, &from.name, "--"])
            .arg(&self.probe_bin)
            .args([
                "probe",
                "--stdin",
                "--timeout",
                &format!("{}ms", PROBE_TIMEOUT.as_millis()),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn {
                what: format!("kubectl exec -i {} -- kube-sandbox probe --stdin", from.key()),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(Error::Parse {
                what: format!("kubectl exec {}", from.key()),
                detail: "no stdin/stdout pipes".into(),
            });
        };
        Ok(Session {
            _child: child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
        })
    }

    /// One pod's row: the targets as one line to its session, a line back per target. A session
    /// that fails or stalls is dropped (its exec killed) and opened again next round.
    async fn row(&self, i: usize, on: &[(Proto, u16)]) -> Result<Vec<bool>> {
        let from = &self.peers[i];
        let mut slot = self.sessions[i].lock().await;
        let mut session = match slot.take() {
            Some(s) => s,
            None => self.open_session(from)?,
        };
        let mut line = String::new();
        for (proto, port) in on {
            for to in &self.peers {
                let _ = write!(line, "{}:{}:{port} ", proto.prefix(), to.ip);
            }
        }
        line.push('\n');
        let broken = |detail: String| Error::Parse {
            what: format!("probe session of {}", from.key()),
            detail,
        };
        let answer = tokio::time::timeout(ROUND_WITHIN, async {
            session
                .stdin
                .write_all(line.as_bytes())
                .await
                .map_err(|e| broken(format!("writing: {e}")))?;
            session
                .stdin
                .flush()
                .await
                .map_err(|e| broken(format!("writing: {e}")))?;
            let mut lines = Vec::new();
            loop {
                match session.stdout.next_line().await {
                    Ok(Some(l)) if l == END_OF_ROUND => return Ok(lines),
                    Ok(Some(l)) => lines.push(l),
                    Ok(None) => return Err(broken(format!("the exec ended after {lines:?}"))),
                    Err(e) => return Err(broken(format!("reading: {e}"))),
                }
            }
        })
        .await
        .map_err(|_| broken(format!("no answer in {} s", ROUND_WITHIN.as_secs())))??;
        if answer.len() != self.peers.len() * on.len() {
            return Err(broken(format!("unexpected answer {answer:?}")));
        }
        *slot = Some(session);
        Ok(on
            .iter()
            .flat_map(|_| self.peers.iter())
            .zip(answer)
            .map(|(to, l)| {
                l.split_whitespace().skip(1).collect::<Vec<_>>() == ["connected", to.name.as_str()]
            })
            .collect())
    }

    /// The table `check` expects (loopback always allowed).
    pub fn expected(&self, check: &Check) -> Vec<Vec<bool>> {
        self.peers
            .iter()
            .map(|f| {
                self.peers
                    .iter()
                    .map(|t| f == t || (check.expect)(f, t))
                    .collect()
            })
            .collect()
    }

    /// Probes until every check's table is the expected one twice in a row (all checks in the
    /// same rounds); returns the time from `since` to the end of the first matching round, and
    /// the rounds taken.
    pub async fn converge(
        &self,
        checks: &[Check],
        since: Instant,
        within: Duration,
    ) -> Result<(Duration, u32)> {
        let want: Vec<_> = checks.iter().map(|c| self.expected(c)).collect();
        let on: Vec<(Proto, u16)> = checks.iter().map(|c| (c.proto, c.port)).collect();
        let mut rounds = 0;
        let mut first_match: Option<Duration> = None;
        let mut last = String::new();
        while since.elapsed() < within {
            rounds += 1;
            let pace = tokio::time::sleep(ROUND_EVERY);
            let observed = self.observe(&on).await;
            let at = since.elapsed();
            pace.await;
            match observed {
                Ok(got) if got == want => {
                    if let Some(t) = first_match {
                        return Ok((t, rounds));
                    }
                    first_match = Some(at);
                }
                Ok(got) => {
                    first_match = None;
                    last = checks
                        .iter()
                        .zip(want.iter().zip(&got))
                        .filter(|(_, (w, g))| w != g)
                        .map(|(c, (w, g))| format!("{}:{}", c.label(), self.render(w, g)))
                        .collect();
                }
                Err(e) => {
                    first_match = None;
                    last = format!("probe round failed: {e}");
                }
            }
        }
        let labels: Vec<String> = checks.iter().map(Check::label).collect();
        Err(Error::Parse {
            what: format!("{} did not converge in {} s", labels.join(" "), within.as_secs()),
            detail: last,
        })
    }

    /// The expected and observed tables side by side; `.` allowed, `X` denied, mismatches in
    /// the observed one marked `!` (allowed but should not) or `?` (denied but should not).
    pub fn render(&self, want: &[Vec<bool>], got: &[Vec<bool>]) -> String {
        let mut s = String::from("\nexpected        observed\n");
        let head: String = self
            .peers
            .iter()
            .map(|p| format!("{}{}", p.ns, p.name))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(s, "    {head}        {head}");
        for (i, from) in self.peers.iter().enumerate() {
            let cell = |v: bool| if v { " . " } else { " X " };
            let w: String = want[i].iter().map(|v| cell(*v)).collect();
            let g: String = got[i]
                .iter()
                .zip(&want[i])
                .map(|(g, w)| match (g, w) {
                    (true, false) => " ! ",
                    (false, true) => " ? ",
                    (g, _) => cell(*g),
                })
                .collect();
            let _ = writeln!(s, "{}{} {w}     {g}", from.ns, from.name);
        }
        s
    }

    async fn act(&self, a: &Action) -> Result<()> {
        match a {
            Action::Apply { ns, name, spec } => {
                netpol::apply_policy(&self.client, ns, name, spec.clone()).await
            }
            Action::Delete { ns, name } => netpol::delete_policy(&self.client, ns, name).await,
            Action::LabelPod { ns, pod, key, value } => {
                let who = Labelled::Pod { ns, name: pod };
                netpol::patch_labels(&self.client, who, netpol::one_label(key, *value)).await
            }
            Action::LabelNs { ns, key, value } => {
                let who = Labelled::Namespace(ns);
                netpol::patch_labels(&self.client, who, netpol::one_label(key, *value)).await
            }
        }
    }

    /// Waits until no KuryrNetworkPolicy is left in the suite's namespaces; returns how long
    /// that took from `since`.
    pub async fn wait_no_knps(&self, since: Instant, within: Duration) -> Result<Duration> {
        loop {
            let mut left = 0;
            for ns in NAMESPACES {
                let api: Api<kuryr_types::KuryrNetworkPolicy> = Api::namespaced(self.client.clone(), ns);
                left += api
                    .list(&ListParams::default())
                    .await
                    .map_err(|source| Error::Kube {
                        what: format!("list KuryrNetworkPolicies in {ns}"),
                        source,
                    })?
                    .items
                    .len();
            }
            if left == 0 {
                return Ok(since.elapsed());
            }
            if since.elapsed() > within {
                return Err(Error::Timeout {
                    what: format!("{left} KuryrNetworkPolicies to go after their policies were deleted"),
                    secs: within.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Back to the baseline: no policies, pods labelled only `pod=<name>`, namespaces `ns=<name>`
    /// (plus what Kubernetes sets itself).
    pub async fn reset(&self) -> Result<()> {
        for ns in NAMESPACES {
            let api: Api<NetworkPolicy> = Api::namespaced(self.client.clone(), ns);
            let list = api
                .list(&ListParams::default())
                .await
                .map_err(|source| Error::Kube {
                    what: format!("list NetworkPolicies in {ns}"),
                    source,
                })?;
            for np in list.items {
                let name = np.metadata.name.unwrap_or_default();
                api.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(|source| Error::Kube {
                        what: format!("delete NetworkPolicy {ns}/{name}"),
                        source,
                    })?;
            }
            let nsapi: Api<Namespace> = Api::all(self.client.clone());
            let cur = nsapi.get(ns).await.map_err(|source| Error::Kube {
                what: format!("get namespace {ns}"),
                source,
            })?;
            let mut labels = serde_json::Map::new();
            for k in cur.metadata.labels.unwrap_or_default().into_keys() {
                if k != "ns" && k != "kubernetes.io/metadata.name" {
                    labels.insert(k, Value::Null);
                }
            }
            labels.insert("ns".into(), json!(ns));
            netpol::patch_labels(&self.client, Labelled::Namespace(ns), labels).await?;
            let papi: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(self.client.clone(), ns);
            for pod in PODS {
                let cur = papi.get(pod).await.map_err(|source| Error::Kube {
                    what: format!("get pod {ns}/{pod}"),
                    source,
                })?;
                let mut labels = serde_json::Map::new();
                for k in cur.metadata.labels.unwrap_or_default().into_keys() {
                    labels.insert(k, Value::Null);
                }
                labels.insert("pod".into(), json!(pod));
                netpol::patch_labels(&self.client, Labelled::Pod { ns, name: pod }, labels).await?;
            }
        }
        Ok(())
    }
}

/// One step's checks, converged (or not).
#[derive(Debug, Clone)]
pub struct CheckResult {
    /// `scenario: step [proto/port …]`.
    pub what: String,
    /// 9 × 9 tables it checks.
    pub tables: usize,
    /// Time to converge, or why it did not.
    pub result: std::result::Result<(Duration, u32), String>,
}

/// The whole run.
#[derive(Debug, Default)]
pub struct Report {
    /// Scenarios run.
    pub scenarios: usize,
    /// Every check, in order.
    pub checks: Vec<CheckResult>,
    /// Time of the resets between scenarios (until every KuryrNetworkPolicy is gone).
    pub resets: Vec<Duration>,
    /// Wall time.
    pub elapsed: Duration,
}

impl Report {
    /// Failed checks.
    pub fn failures(&self) -> Vec<&CheckResult> {
        self.checks.iter().filter(|c| c.result.is_err()).collect()
    }

    /// The summary lines (the last one machine-readable).
    pub fn summary(&self) -> String {
        let mut times: Vec<u128> = self
            .checks
            .iter()
            .filter_map(|c| c.result.as_ref().ok().map(|(d, _)| d.as_millis()))
            .collect();
        times.sort_unstable();
        let pct = |p: f64| crate::policy_bench::quantile(&times, p);
        let failed = self.failures().len();
        format!(
            "netpol conformance: scenarios={} steps={} tables={} passed={} failed={} converge_p50_ms={} converge_p99_ms={} converge_max_ms={} elapsed_s={}",
            self.scenarios,
            self.checks.len(),
            self.checks.iter().map(|c| c.tables).sum::<usize>(),
            self.checks.len() - failed,
            failed,
            pct(0.5),
            pct(0.99),
            times.last().copied().unwrap_or(0),
            self.elapsed.as_secs()
        )
    }
}

/// Runs `scenarios` in order, printing one line per check as it converges (to stderr).
pub async fn run(world: &World, scenarios: &[Scenario]) -> Report {
    let started = Instant::now();
    let mut report = Report::default();
    let open = Check::new(Proto::Tcp, 80, |_, _| true);
    for sc in scenarios {
        report.scenarios += 1;
        for step in &sc.steps {
            let since = Instant::now();
            let mut acted = Ok(());
            for a in &step.actions {
                acted = world.act(a).await;
                if acted.is_err() {
                    break;
                }
            }
            let labels: Vec<String> = step.checks.iter().map(Check::label).collect();
            let what = format!("{}: {} [{}]", sc.name, step.what, labels.join(" "));
            let result = match &acted {
                Err(e) => Err(format!("applying the step: {e}")),
                Ok(()) => world
                    .converge(&step.checks, since, WITHIN)
                    .await
                    .map_err(|e| format!("{e}")),
            };
            match &result {
                Ok((d, r)) => eprintln!("PASS {:>6} ms {:>2} rounds  {what}", d.as_millis(), r),
                Err(e) => eprintln!("FAIL {what}: {e}"),
            }
            report.checks.push(CheckResult {
                what,
                tables: step.checks.len(),
                result,
            });
        }
        // Back to the baseline: every KuryrNetworkPolicy gone means every group was taken off
        // the ports and deleted (Neutron refuses to delete a group a port still has), so the
        // next scenario starts from open; the final check below proves it by traffic.
        let since = Instant::now();
        let reset = match world.reset().await {
            Ok(()) => world.wait_no_knps(since, WITHIN).await,
            Err(e) => Err(e),
        };
        match reset {
            Ok(d) => report.resets.push(d),
            Err(e) => {
                // Every later table would be off by what is left: stop here.
                eprintln!(
                    "FAIL reset after {}: {e}; the remaining scenarios are not run",
                    sc.name
                );
                report.checks.push(CheckResult {
                    what: format!(
                        "{}: reset to all-open (the remaining scenarios were not run)",
                        sc.name
                    ),
                    tables: 1,
                    result: Err(e.to_string()),
                });
                break;
            }
        }
    }
    if report.failures().is_empty() {
        let since = Instant::now();
        let result = world
            .converge(std::slice::from_ref(&open), since, WITHIN)
            .await
            .map_err(|e| e.to_string());
        match &result {
            Ok((d, r)) => eprintln!(
                "PASS {:>6} ms {:>2} rounds  all policies gone: every pair open",
                d.as_millis(),
                r
            ),
            Err(e) => eprintln!("FAIL all policies gone: every pair open: {e}"),
        }
        report.checks.push(CheckResult {
            what: "all policies gone: every pair open".into(),
            tables: 1,
            result,
        });
    }
    report.elapsed = started.elapsed();
    report
}
