//! The short run of `bench/scale` in CI: two small steps (100 pods on 10 hollow nodes with 10
//! Services, 200 on 20 with 20), each component in its own process from the debug binaries
//! `.ci/run` builds beside this test; every pod Ready, every Service's load balancer converged
//! in the model's Octavia, fail-over served, the table and the last line printed.

use std::{path::PathBuf, time::Duration};

use kuryr_scale::{
    procs::Bins,
    report::{StepSpec, render, run_step},
};

/// The directory of this test's binaries' siblings (`target/<profile>`).
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    // target/<profile>/deps/short-<hash>
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .expect("target/<profile>")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_scale_run() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows = Vec::new();
    for (pods, nodes, services) in [(100, 10, 10), (200, 20, 20)] {
        let row = run_step(&StepSpec {
            pods,
            nodes,
            bins: Bins(bin_dir()),
            dir: dir.path().to_path_buf(),
            time_scale: 0.01,
            concurrency: 16,
            per_namespace: 100,
            services,
            model: None,
            timeout: Duration::from_secs(300),
        })
        .await
        .unwrap_or_else(|e| {
            panic!(
                "{pods} pods on {nodes} nodes: {e} (logs in {})",
                dir.path().display()
            )
        });
        assert!(row.vifs_ms.1 > 0 && row.ready_ms.1 >= row.vifs_ms.0, "{row:?}");
        assert!(row.failover_s > 0.0 && row.max_object_kib > 0.0, "{row:?}");
        assert!(row.cpu_s[0] > 0.0 && row.hwm_mib[1] > 0.0, "{row:?}");
        assert!(row.services == services && row.lb_ms.1 > 0, "{row:?}");
        assert!(row.octavia_requests_per_service >= 1.0, "{row:?}");
        rows.push(row);
    }
    let table = render(&rows, 0.01);
    println!("{table}");
    assert!(
        table
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("scale pods=200 nodes=20 services=20 policies=0 ")),
        "{table}"
    );
}
