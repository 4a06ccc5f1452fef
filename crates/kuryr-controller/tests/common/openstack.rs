//! Helpers of the tests that run against the REAL sandbox cloud (`sandbox/up`): its topology,
//! a kuryr.conf layered over the sandbox's with a unique cluster tag, a Neutron client for
//! checks and cleanup, the controller in-process or as the binary, pods on the sandbox nodes,
//! metrics scraping. They fail — never skip — when the sandbox is down.
#![allow(dead_code)]

use std::{
    collections::HashMap,
    future::Future,
    panic::AssertUnwindSafe,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use futures::FutureExt;
use k8s_openapi::api::{
    core::v1::{Namespace, Pod},
    events::v1::Event,
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
};
use kuryr_controller::{Context, cli, metrics::Metrics, pool::PoolSettings};
use kuryr_openstack::{CountingObserver, Neutron, OpenStackNeutron, PortFilter};
use serde_json::json;
use tokio::task::JoinHandle;

pub const HINT: &str = "the sandbox cloud is not up: run `sandbox/up --nodes 2` (and check `sandbox/status`)";

/// `topology.env` of the running sandbox (`$KURYR_SANDBOX_TOPOLOGY` or the default path).
pub struct Topology(HashMap<String, String>);

impl Topology {
    pub fn load() -> Topology {
        let path = std::env::var("KURYR_SANDBOX_TOPOLOGY")
            .unwrap_or_else(|_| "/var/lib/kuryr-sandbox/topology.env".into());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{HINT} ({path}: {e})"));
        Topology(
            text.lines()
                .filter(|l| !l.trim_start().starts_with('#'))
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
                .collect(),
        )
    }

    pub fn get(&self, k: &str) -> &str {
        self.0
            .get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{HINT} (topology.env lacks {k})"))
    }

    /// The node names (binding hosts).
    pub fn nodes(&self) -> Vec<String> {
        self.get("NODES").split_whitespace().map(str::to_string).collect()
    }
}

pub fn unique_tag(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("kuryr-cluster=test-{test}-{}-{nanos}", std::process::id())
}

/// Writes `extra.conf` next to the sandbox's kuryr.conf layering: the cluster tag, the
/// handlers, neutron pools and `extra` (more `[group]` lines). Returns both paths.
pub fn write_conf(dir: &Path, topo: &Topology, tag: &str, extra: &str) -> Vec<PathBuf> {
    let base = PathBuf::from(topo.get("KURYR_CONF"));
    let path = dir.join("test.conf");
    std::fs::write(
        &path,
        format!(
            "[kubernetes]\nenabled_handlers = vif,kuryrport\nvif_pool_driver = neutron\n\
             [neutron_defaults]\ncluster_tag = {tag}\n{extra}\n"
        ),
    )
    .expect("write test.conf");
    vec![base, path]
}

pub fn load_config(files: &[PathBuf]) -> kuryr_config::Config {
    let sources = kuryr_config::ConfigSources {
        config_files: files.to_vec(),
        config_dirs: Vec::new(),
    };
    let (config, _) = kuryr_config::load_for(&sources, kuryr_config::Role::Controller, &|k| {
        std::env::var(k).ok()
    })
    .unwrap_or_else(|e| panic!("{HINT}: config: {e}"));
    config
}

/// A Neutron client with the controller's credentials, for checks and cleanup.
pub async fn neutron(config: &kuryr_config::Config) -> (OpenStackNeutron, Arc<CountingObserver>) {
    let auth = kuryr_config::resolve_cloud_auth(config, &|k| std::env::var(k).ok()).expect("auth");
    let obs = Arc::new(CountingObserver::default());
    let n = OpenStackNeutron::connect(&auth, &kuryr_openstack::ConnectOptions::default(), obs.clone())
        .await
        .unwrap_or_else(|e| panic!("{HINT}: {e}"));
    (n, obs)
}

/// Deletes every port tagged `tag`; returns how many there were. Waits first (bounded) until
/// no young tagged port is unbound: a bulk creation still in flight (a killed controller's, or
/// one whose answer timed out) shows its ports unbound while Neutron binds them, and deleting
/// them then makes Neutron roll the bulk back — on the sandbox that can leave an address
/// allocated without its IPAM record, which stalls later creations for minutes.
pub async fn cleanup_ports(n: &OpenStackNeutron, tag: &str) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    let ports = loop {
        let ports = match n.list_ports(&PortFilter::tagged([tag])).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("cleanup: listing ports tagged {tag}: {e}");
                return 0;
            }
        };
        let now = jiff::Timestamp::now();
        let binding = ports
            .iter()
            .filter(|p| {
                !p.is_bound()
                    && p.created()
                        .is_none_or(|c| now.duration_since(c) < jiff::SignedDuration::from_secs(300))
            })
            .count();
        if binding == 0 || std::time::Instant::now() >= deadline {
            break ports;
        }
        println!("cleanup: waiting for {binding} port(s) still being bound");
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let count = ports.len();
    for p in ports {
        if let Err(e) = n.delete_port(&p.id).await {
            eprintln!("cleanup: deleting {}: {e}", p.id);
        }
    }
    count
}

/// Runs `body`; then, whatever happened, runs `cleanup` (which must not panic); re-raises.
/// Prints the last `max` lines of the log at `path` that contain one of `words`.
pub fn print_log_lines(path: &Path, words: &[&str], max: usize) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| words.iter().any(|w| l.contains(w)))
        .collect();
    let skip = lines.len().saturating_sub(max);
    println!(
        "controller log ({} lines kept):\n{}",
        lines.len() - skip,
        lines[skip..].join("\n")
    );
}

pub async fn guarded<F, C>(body: F, cleanup: C)
where
    F: Future<Output = ()>,
    C: Future<Output = ()>,
{
    let outcome = AssertUnwindSafe(body).catch_unwind().await;
    cleanup.await;
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}

/// The controller's handlers running in this process against `client`.
pub struct InProcess {
    pub ctx: Arc<Context>,
    pub tasks: Vec<JoinHandle<()>>,
}

impl InProcess {
    pub async fn start(client: &Client, config: kuryr_config::Config) -> InProcess {
        let settings = PoolSettings::from_config(&config).expect("pool settings");
        let metrics = Arc::new(Metrics::default());
        let os = cli::connect_openstack(&config, client.clone(), metrics.clone(), settings)
            .await
            .unwrap_or_else(|e| panic!("{HINT}: {}", kuryr_controller::error_chain(&e)));
        let watchers = cli::watcher_count(&config);
        let ctx = Arc::new(
            Context::new(client.clone(), Arc::new(config), watchers)
                .with_metrics(metrics)
                .with_openstack(os),
        );
        let tasks = cli::spawn_handlers(&ctx);
        InProcess { ctx, tasks }
    }

    pub fn stop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

pub async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

pub fn pod_on(ns: &str, name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }))
    .expect("pod")
}

/// Sum of a metric's samples whose line contains every one of `filters` (text format).
pub fn metric_sum(text: &str, name: &str, filters: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter(|l| filters.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Quantile `q` of durations (nearest rank).
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Resident set size of a process in KiB (`/proc/<pid>/status` VmRSS / VmHWM).
pub fn rss_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `GET path` over the unix socket `sock` (HTTP/1.0); returns status and body.
pub async fn unix_get(sock: &Path, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(sock)
        .await
        .expect("connect socket");
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.expect("read");
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let body = buf.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (code, body)
}

/// The controller binary against the emulated API server (`kubeconfig`) with `files`, health
/// and metrics on the given addresses; its stderr goes to `log`. Killed when dropped.
pub fn spawn_controller(
    kubeconfig: &Path,
    files: &[PathBuf],
    health: std::net::SocketAddr,
    metrics: std::net::SocketAddr,
    log: &Path,
) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kuryr-controller"));
    for f in files {
        cmd.arg("--config-file").arg(f);
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    cmd.arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--health-bind")
        .arg(health.to_string())
        .arg("--metrics-bind")
        .arg(metrics.to_string())
        .env_remove("KUBECONFIG")
        .env("NO_COLOR", "1")
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kuryr-controller")
}

/// `POST path` with a JSON `body` over the unix socket `sock`; returns status and body.
pub async fn unix_post(sock: &Path, path: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::UnixStream::connect(sock)
        .await
        .expect("connect socket");
    s.write_all(
        format!(
            "POST {path} HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .expect("write");
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.expect("read");
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let body = buf.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (code, body)
}

impl Topology {
    /// The OVS database socket of `node`'s chassis.
    pub fn ovs_db(&self, node: &str) -> String {
        for i in 1..=16 {
            if self.0.get(&format!("NODE_{i}_NAME")).map(String::as_str) == Some(node) {
                return format!("unix:{}/db.sock", self.get(&format!("NODE_{i}_OVS_RUNDIR")));
            }
        }
        panic!("{HINT} (no node {node} in topology.env)");
    }
}

/// Plugs Neutron port `port_id` into `node`'s br-int as an OVS internal interface claimed by
/// ovn-controller (what the daemon does with a veth): Neutron then reports it ACTIVE.
/// Returns the interface name (for [`unplug`]).
pub fn plug(topo: &Topology, node: &str, port_id: &str, mac: &str) -> String {
    let name = format!("kpt{}", &port_id[..11.min(port_id.len())]);
    let out = std::process::Command::new("ovs-vsctl")
        .arg(format!("--db={}", topo.ovs_db(node)))
        .args([
            "--may-exist",
            "add-port",
            "br-int",
            &name,
            "--",
            "set",
            "Interface",
            &name,
            "type=internal",
        ])
        .arg(format!("external_ids:iface-id={port_id}"))
        .arg(format!("external_ids:attached-mac={mac}"))
        .arg("external_ids:iface-status=active")
        .output()
        .expect("run ovs-vsctl");
    assert!(
        out.status.success(),
        "ovs-vsctl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    name
}

/// Removes an interface [`plug`] added (never fails).
pub fn unplug(topo: &Topology, node: &str, name: &str) {
    let _ = std::process::Command::new("ovs-vsctl")
        .arg(format!("--db={}", topo.ovs_db(node)))
        .args(["--if-exists", "del-port", "br-int", name])
        .output();
}

/// The Warning Events (`events.k8s.io/v1`, what the controller records) with `reason` in `ns`.
pub async fn warning_events(client: &Client, ns: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason) && e.type_.as_deref() == Some("Warning"))
        .collect()
}

/// Runs `script` (Python, openstacksdk connected as the sandbox's admin as `conn`) with `args`
/// and returns its standard output. The harness's outside view of the cloud: it does not use
/// the code under test.
fn admin_python(topo: &Topology, script: &str, args: &[&str]) -> String {
    let prelude = "import os, sys, openstack\nconn = openstack.connect(cloud=os.environ['OS_CLOUD_ADMIN'])\n";
    let out = std::process::Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(format!("{prelude}{script}"))
        .args(args)
        .env("OS_CLIENT_CONFIG_FILE", topo.get("OS_CLIENT_CONFIG_FILE"))
        .env("OS_CLOUD_ADMIN", topo.get("OS_CLOUD_ADMIN"))
        .output()
        .unwrap_or_else(|e| panic!("{HINT}: python3: {e}"));
    assert!(
        out.status.success(),
        "{HINT}: openstacksdk script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Neutron's port quota of `project`: (limit, in use).
pub fn port_quota(topo: &Topology, project: &str) -> (i64, i64) {
    let out = admin_python(
        topo,
        "q = conn.network.get_quota(sys.argv[1], details=True).ports\nprint(q['limit'], q['used'])",
        &[project],
    );
    let mut it = out
        .split_whitespace()
        .map(|v| v.parse::<i64>().expect("quota number"));
    (it.next().expect("limit"), it.next().expect("used"))
}

/// Sets Neutron's port quota of `project` to `limit` (-1: unlimited).
pub fn set_port_quota(topo: &Topology, project: &str, limit: i64) {
    admin_python(
        topo,
        "conn.network.update_quota(sys.argv[1], port=int(sys.argv[2]))",
        &[project, &limit.to_string()],
    );
}
