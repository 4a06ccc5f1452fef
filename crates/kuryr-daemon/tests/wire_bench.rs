//! Measures the daemon-side wiring time of N CNI ADDs on the real sandbox (node-1: real
//! namespaces, veths and the node's Open vSwitch), ADDs over the daemon socket (one at a time by default).
//! The KuryrPorts carry VIFs already active (so ADD does not wait for activation) on the real
//! pod network and subnet, with generated port IDs and MACs: wiring never talks to Neutron, and
//! creating N real ports on the shared one-worker Neutron of the sandbox can take minutes, which
//! would measure Neutron rather than the daemon. Real ports are covered by `tests/sandbox.rs`. Prints p50/p99 of the daemon-side wiring
//! (`wire_ms` of the daemon's log, the same span `kuryr_cni_wire_duration_seconds` observes)
//! and of the whole ADD request as the plugin sees it. N: `KURYR_DAEMON_BENCH_N` (default 20); ADDs in
//! flight at once: `KURYR_DAEMON_BENCH_CONCURRENCY` (default 1).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiring_time_of_n_adds() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let n: usize = std::env::var("KURYR_DAEMON_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let concurrency: usize = std::env::var("KURYR_DAEMON_BENCH_CONCURRENCY")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|c| *c > 0)
        .unwrap_or(1);
    let topo = topology();
    {
        let cluster = cluster(&topo).await;
        let state = tempfile::tempdir().unwrap();
        let mut d = DaemonProc::start(&cluster, &topo, 1, state.path(), "");
        d.wait_ready().await;
        let mut pods = Vec::new();
        for i in 0..n {
            let vif = synthetic_vif(&topo, i);
            let name = unique("bench-");
            let uid = uuid::Uuid::new_v4().to_string();
            put_kuryrport(&cluster.client, &name, &d.node, &uid, &vif).await;
            pods.push((name, uid, PodNs::new(), unique("ctr-")));
        }
        // Let the watcher see every KuryrPort first: we measure wiring, not the watch.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let shim = d.shim();
        let mut add_ms = Vec::new();
        for chunk in pods.chunks(concurrency) {
            let calls = chunk.iter().map(|(name, uid, ns, ctr)| {
                let body = json!({"CNI_COMMAND": "ADD", "CNI_CONTAINERID": ctr, "CNI_NETNS": ns.path, "CNI_IFNAME": "eth0",
                    "CNI_ARGS": format!("K8S_POD_NAMESPACE={NS};K8S_POD_NAME={name};K8S_POD_UID={uid}"),
                    "CNI_PATH": "", "config_kuryr": {"cniVersion": "1.0.0"}})
                .to_string();
                let s = shim.clone();
                tokio::task::spawn_blocking(move || {
                    let t = Instant::now();
                    let out = s.raw("POST", "/addNetwork", body.as_bytes());
                    (t.elapsed().as_secs_f64() * 1000.0, out)
                })
            });
            for (ms, (st, resp)) in futures::future::join_all(calls)
                .await
                .into_iter()
                .map(Result::unwrap)
            {
                add_ms.push(ms);
                assert_eq!(st, 202, "{resp}");
            }
        }
        let log = d.log_text();
        let mut wire_ms: Vec<f64> = log
            .lines()
            .filter_map(|l| l.split("wire_ms=").nth(1))
            .filter_map(|r| r.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(wire_ms.len(), n, "wire_ms lines in the log");
        let m = d.metrics();
        assert!(
            m.contains(&format!("kuryr_cni_wire_duration_seconds_count {n}")),
            "{m}"
        );
        println!(
            "kuryr-daemon wiring over {n} ADDs, {concurrency} at a time: wire_p50_ms={:.2} wire_p99_ms={:.2} add_p50_ms={:.2} add_p99_ms={:.2}",
            pct(&mut wire_ms, 0.5),
            pct(&mut wire_ms, 0.99),
            pct(&mut add_ms, 0.5),
            pct(&mut add_ms, 0.99)
        );
        // Phases of the OVS binding, when the daemon logs at debug level
        // (KURYR_DAEMON_TEST_LOG=info,kuryr_daemon=debug).
        for phase in ["bridge_ms=", "links_ms=", "ovsdb_ms="] {
            let mut v: Vec<f64> = log
                .lines()
                .filter_map(|l| l.split(phase).nth(1))
                .filter_map(|r| r.split_whitespace().next()?.parse().ok())
                .collect();
            if !v.is_empty() {
                println!(
                    "  phase {phase} p50={:.2} p99={:.2}",
                    pct(&mut v, 0.5),
                    pct(&mut v, 0.99)
                );
            }
        }
        // Clean up through GC (nothing is valid any more): every veth and OVS port goes.
        let gc = json!({"CNI_COMMAND": "GC", "config_kuryr": {"cniVersion": "1.1.0", "cni.dev/valid-attachments": []}});
        let t = Instant::now();
        assert_eq!(d.raw("POST", "/gcNetworks", gc.to_string().as_bytes()).0, 204);
        println!("GC of {n} attachments: {} ms", t.elapsed().as_millis());
        assert!(
            state.path().read_dir().unwrap().next().is_none(),
            "state left behind"
        );
        for (_, _, ns, _) in &pods {
            assert!(!netns_exec(&ns.name, &["ip", "link"]).contains("eth0"));
        }
        d.stop();
    }
}
