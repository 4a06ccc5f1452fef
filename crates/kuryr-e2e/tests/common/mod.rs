//! Helpers shared by the end-to-end test binaries: a cluster per test (its own temp state dir),
//! pods spread over namespaces and nodes, connectivity assertions that print the cluster's logs.

#![allow(dead_code)]

pub mod kept_logs;

use std::{collections::BTreeSet, time::Duration};

use kuryr_e2e::{
    cluster::{Cluster, ClusterOptions},
    error::Result,
    pods, probe, report,
};

pub const READY: Duration = Duration::from_secs(180);

pub fn init() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
    kuryr_e2e::init_crypto();
}

/// Starts a cluster in a fresh temp state dir with `tweak` applied to the test options.
pub fn start(tweak: impl FnOnce(&mut ClusterOptions)) -> (tempfile::TempDir, Cluster) {
    init();
    let dir = tempfile::Builder::new()
        .prefix("kuryr-e2e-")
        .tempdir()
        .expect("tempdir");
    let mut opts = ClusterOptions::for_test(&dir.path().join("cluster"));
    tweak(&mut opts);
    let cluster = Cluster::up(&opts).unwrap_or_else(|e| panic!("sandbox/cluster up failed: {e}"));
    (dir, cluster)
}

/// Unwraps, or panics with the error and the tail of every log of the cluster.
pub fn check<T>(cluster: &Cluster, what: &str, r: Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}\n{}", cluster.log_tails(40)))
}

pub fn assert_or_logs(cluster: &Cluster, cond: bool, msg: String) {
    if !cond {
        panic!("{msg}\n{}", cluster.log_tails(40));
    }
}

pub async fn create_spread(
    client: &kube::Client,
    cluster: &Cluster,
    namespaces: &[&str],
    prefix: &str,
) -> Vec<(String, String)> {
    let mut keys = Vec::new();
    for ns in namespaces {
        check(cluster, "namespace", pods::ensure_namespace(client, ns).await);
        for node in &cluster.nodes {
            let name = format!("{prefix}-{}", node.name);
            check(
                cluster,
                "create pod",
                pods::create_pod(client, ns, &name, Some(&node.name)).await,
            );
            keys.push((ns.to_string(), name));
        }
    }
    keys
}

/// Probes every pair; panics with the matrix when a connection fails.
pub async fn assert_full_connectivity(cluster: &Cluster, views: &[pods::PodView]) {
    let probes = probe::matrix(views, Duration::from_secs(5), 6).await;
    let table = report::matrix_table(views, &probes);
    eprintln!("{table}");
    assert_or_logs(
        cluster,
        probes.iter().all(|p| p.ok),
        format!("connectivity failures:\n{table}"),
    );
}

pub fn ns_list(keys: &[(String, String)]) -> Vec<String> {
    keys.iter()
        .map(|k| k.0.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Waits for `keys` to be Ready, collects their views and proves every pair connects.
pub async fn ready_and_connected(
    cluster: &Cluster,
    client: &kube::Client,
    keys: &[(String, String)],
) -> Vec<pods::PodView> {
    check(cluster, "pods Ready", pods::wait_ready(client, keys, READY).await);
    let views = check(
        cluster,
        "collect",
        pods::collect(cluster, client, &ns_list(keys)).await,
    );
    assert_full_connectivity(cluster, &views).await;
    views
}

/// `kuryrctl ARGS` against the cluster (its kubeconfig and kuryr.conf): exit code, stdout,
/// stderr.
pub fn kuryrctl_run(cluster: &Cluster, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(cluster.bin_dir.join("kuryrctl"))
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .arg("--config-file")
        .arg(&cluster.conf)
        .args(args)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("kuryrctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `kuryrctl ARGS -o json` against the cluster (its kubeconfig and kuryr.conf): exit code, the
/// JSON document, stderr. Panics when stdout is not JSON.
pub fn kuryrctl_json(cluster: &Cluster, args: &[&str]) -> (i32, serde_json::Value, String) {
    let args: Vec<&str> = args.iter().copied().chain(["-o", "json"]).collect();
    let (code, text, stderr) = kuryrctl_run(cluster, &args);
    let doc = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("kuryrctl {} -o json: {e}: {text} {stderr}", args.join(" ")));
    (code, doc, stderr)
}

/// Brings back whatever a test stopped in the sandbox cloud (`sandbox/up --nodes 2` starts the
/// missing components) when dropped, even when the test fails.
pub struct RestoreCloud;

impl Drop for RestoreCloud {
    fn drop(&mut self) {
        let _ = std::process::Command::new(kuryr_e2e::cluster::repo_root().join("sandbox/up"))
            .args(["--nodes", "2"])
            .output();
    }
}
