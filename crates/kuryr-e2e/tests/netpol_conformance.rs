//! The NetworkPolicy conformance suite (issue 14) on the sandbox: namespaces x, y, z × pods a, b,
//! c, every pod pair probed from inside the pods with `kubectl exec` after every change, until
//! the table is the one the specification calls for. Prints one line per check (convergence
//! time and rounds) and the summary; fails listing every check that did not converge.

mod common;

use std::time::{Duration, Instant};

use common::*;
use kuryr_e2e::truth_table::{self as tt, Check, Proto};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netpol_truth_tables() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.policies = true);
    let client = check(&cluster, "client", cluster.client().await);
    let world = check(&cluster, "world", tt::World::setup(&cluster, &client).await);
    // Open before any policy (the first packets between pods may need a moment).
    let baseline = world
        .converge(
            &[Check::new(Proto::Tcp, 80, |_, _| true)],
            Instant::now(),
            Duration::from_secs(60),
        )
        .await;
    check(&cluster, "baseline: every pair open", baseline);
    let scenarios = tt::scenarios::all(&world.peers);
    let report = tt::run(&world, &scenarios).await;
    let summary = report.summary();
    eprintln!("{summary}");
    let failures = report.failures();
    assert_or_logs(
        &cluster,
        failures.is_empty(),
        format!(
            "{} of {} checks failed:\n{}\n{summary}",
            failures.len(),
            report.checks.len(),
            failures
                .iter()
                .map(|f| format!(
                    "- {}: {}",
                    f.what,
                    f.result.as_ref().err().map(String::as_str).unwrap_or("")
                ))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    );
}
