//! The sandbox's data plane under faults (issue 11): when a node's `ovs-vswitchd` dies, its
//! supervisor starts it again, the node's underlay comes back, and every pod of that node answers
//! again within seconds — with no manual step. Like every test on the sandbox, it fails when a
//! sandbox daemon crashes unannounced while it runs.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kuryr_e2e::{cluster::Cluster, pods, probe};

/// How long every pod of the node may take to answer again after its switch was killed.
const RECOVERY: Duration = Duration::from_secs(10);

fn sandbox_home() -> std::path::PathBuf {
    sandbox_guard::sandbox_home()
}

/// The pid of a sandbox component's program (its supervisor writes it to run/NAME.child; a
/// supervisor of an older `sandbox/up` rewrote it in place, so an empty read is retried).
fn component_pid(name: &str) -> u32 {
    let path = sandbox_home().join("run").join(format!("{name}.child"));
    let mut text = String::new();
    for _ in 0..50 {
        text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (is the sandbox up?)", path.display()));
        if !text.trim().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: not a pid ({e}): {text:?}", path.display()))
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

/// Probes every pair once (1 s per probe); the failed pairs as `from -> to: why`.
async fn failed_pairs(views: &[pods::PodView]) -> Vec<String> {
    probe::matrix(views, Duration::from_secs(1), 8)
        .await
        .into_iter()
        .filter(|p| !p.ok)
        .map(|p| format!("{} -> {}: {}", views[p.from].name, views[p.to].name, p.detail))
        .collect()
}

/// SIGKILL of node-1's `ovs-vswitchd` while its pods carry traffic: the supervisor restarts it
/// (announced kill: not a crash), br-phy gets its underlay address back, OVN reinstalls the flows,
/// and every pod — on node-1 and talking to node-1 — answers again within [`RECOVERY`]; a pod
/// created afterwards on node-1 is wired and reachable too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_vswitchd_recovers_every_pod_of_its_node_within_10s() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.namespace_subnets = true);
    let client = check(&cluster, "client", cluster.client().await);
    let mut keys = create_spread(&client, &cluster, &["dp-a", "dp-b"], "web").await;
    for ns in ["dp-a", "dp-b"] {
        check(
            &cluster,
            "create pod",
            pods::create_pod(&client, ns, "extra-node-1", Some("node-1")).await,
        );
        keys.push((ns.to_string(), "extra-node-1".to_string()));
    }
    let views = ready_and_connected(&cluster, &client, &keys).await;

    let component = "ovs-vswitchd-node-1";
    let old = component_pid(component);
    check_sandbox(&cluster, sandbox_guard::expect_exit(&sandbox_home(), component));
    let killed_at = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &old.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {old} failed");
    // Wait for the restart (a new pid), then for every pair to answer.
    let deadline = killed_at + Duration::from_secs(60);
    let restarted = loop {
        let now = component_pid(component);
        if now != old && alive(now) {
            break killed_at.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "{component} was not restarted within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (recovered, last_failures) = loop {
        let failed = failed_pairs(&views).await;
        if failed.is_empty() {
            break (killed_at.elapsed(), failed);
        }
        if Instant::now() >= deadline {
            break (killed_at.elapsed(), failed);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!(
        "{component}: killed; restarted after {:.1} s; every pod answered again after {:.1} s",
        restarted.as_secs_f64(),
        recovered.as_secs_f64()
    );
    assert_or_logs(
        &cluster,
        last_failures.is_empty(),
        format!(
            "pods still unreachable 60 s after the kill:\n  {}",
            last_failures.join("\n  ")
        ),
    );
    assert_or_logs(
        &cluster,
        recovered <= RECOVERY,
        format!(
            "every pod answered again only {:.1} s after {component} was killed (limit {} s)",
            recovered.as_secs_f64(),
            RECOVERY.as_secs()
        ),
    );

    // A pod wired after the restart works too (the daemon's OVSDB session and the switch agree).
    check(
        &cluster,
        "create pod",
        pods::create_pod(&client, "dp-a", "after-restart", Some("node-1")).await,
    );
    keys.push(("dp-a".to_string(), "after-restart".to_string()));
    ready_and_connected(&cluster, &client, &keys).await;
}

fn check_sandbox<T>(cluster: &Cluster, r: Result<T, sandbox_guard::Error>) -> T {
    r.unwrap_or_else(|e| panic!("{e}\n{}", cluster.log_tails(20)))
}

/// The soak command, short: `sandbox/soak --seconds 60` (9 pods, 3 namespaces, 2 nodes, every
/// pod probing every other one over TCP and UDP each second) ends with
/// `unanswered=0 daemon_crashes=0` and exit status 0, and cleans up its cluster.
#[test]
fn short_soak_answers_every_probe_and_no_daemon_crashes() {
    let _crashes = sandbox_guard::CrashGuard::new();
    init();
    let dir = tempfile::Builder::new()
        .prefix("kuryr-soak-")
        .tempdir()
        .expect("tempdir");
    let state = dir.path().join("soak");
    let seconds = std::env::var("KURYR_SHORT_SOAK_SECONDS").unwrap_or_else(|_| "60".into());
    let out = std::process::Command::new(kuryr_e2e::cluster::repo_root().join("sandbox/soak"))
        .args(["--seconds", &seconds, "--bin-dir"])
        .arg(kuryr_e2e::cluster::dev_bin_dir())
        .arg("--state-dir")
        .arg(&state)
        .args(["--port", &kuryr_e2e::cluster::free_port().to_string()])
        .args(["--health-port", &kuryr_e2e::cluster::free_port().to_string()])
        .args(["--metrics-port", &kuryr_e2e::cluster::free_port().to_string()])
        .output()
        .expect("run sandbox/soak");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        out.status.success()
            && last.starts_with("soak ")
            && last.contains(" unanswered=0 ")
            && last.ends_with(" daemon_crashes=0"),
        "sandbox/soak failed ({}); last line {last:?}\n--- stdout\n{stdout}\n--- stderr (tail)\n{}",
        out.status,
        stderr
            .lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    );
    let field = |k: &str| -> u64 {
        last.split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    assert!(
        field("probes=") > 0 && field("rounds=") > 0,
        "no probes ran: {last}"
    );
    assert!(
        !state.join("run/apiserver.pid").exists(),
        "the soak left its cluster running in {}",
        state.display()
    );
}
