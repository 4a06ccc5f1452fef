//! The NetworkPolicy conformance suite (issue 14) on the sandbox: namespaces x, y, z × pods a, b,
//! c, every pod pair probed from inside the pods with `kubectl exec` after every change, until
//! the table is the one the specification calls for. Prints one line per check (convergence
//! time and rounds) and the summary; fails listing every check that did not converge.
//!
//! `KURYR_NETPOL_SCENARIOS=<text>` runs only the scenarios whose name contains `<text>` (when
//! chasing one case by hand; CI runs them all); `KURYR_E2E_SAVE_LOG=<file>` keeps a copy of the
//! controller's log there.

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
    let mut scenarios = tt::scenarios::all(&world.peers);
    if let Ok(only) = std::env::var("KURYR_NETPOL_SCENARIOS") {
        scenarios.retain(|s| s.name.contains(only.as_str()));
        eprintln!("KURYR_NETPOL_SCENARIOS={only}: {} scenarios", scenarios.len());
    }
    let report = tt::run(&world, &scenarios).await;
    let summary = report.summary();
    eprintln!("{summary}");
    let failures = report.failures();
    if let Ok(to) = std::env::var("KURYR_E2E_SAVE_LOG") {
        let _ = std::fs::copy(cluster.log("controller"), to);
    }
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
