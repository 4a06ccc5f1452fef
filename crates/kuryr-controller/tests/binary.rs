//! The `kuryr-controller` binary: refuses a bad kuryr.conf listing every error, and runs
//! against the emulated API server through `--kubeconfig` or `[kubernetes] api_root`.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kuryr_types::KuryrPort;

#[test]
fn binary_rejects_bad_config_listing_every_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &conf,
        "[kubernetes]\nwatch_retry_timeout = soon\n[health_server]\nport = notaport\n",
    )
    .expect("write conf");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kuryr-controller"))
        .arg("--config-file")
        .arg(&conf)
        .output()
        .expect("run kuryr-controller");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for needle in ["watch_retry_timeout", "port", "project"] {
        assert!(stderr.contains(needle), "missing {needle} in: {stderr}");
    }
    assert!(stderr.contains("kuryr.conf:2"), "no file:line in: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_with_kubeconfig_serves_health_and_creates_ports() {
    binary_roundtrip(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_with_api_root_from_kuryr_conf_creates_ports() {
    binary_roundtrip(false).await;
}

/// Runs the built binary against the sandbox, connected through `--kubeconfig` or through
/// `[kubernetes] api_root`.
async fn binary_roundtrip(with_kubeconfig: bool) {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("kuryr.conf");
    let api_root = if with_kubeconfig {
        String::new()
    } else {
        format!("api_root = {}\n", env.server.url)
    };
    std::fs::write(
        &conf,
        format!(
            // Only the pod handler: the KuryrPort handler needs Neutron (tests/kuryrport_*.rs).
            "[kubernetes]\nbogus_option = 1\nenabled_handlers = vif\n{api_root}[neutron_defaults]\nproject = p\npod_subnet = s\n\
             service_subnet = s2\npod_security_groups = sg\n"
        ),
    )
    .expect("write conf");
    let (health, metrics) = (free_port(), free_port());
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_kuryr-controller"));
    cmd.arg("--config-file").arg(&conf).env_remove("KUBECONFIG");
    if with_kubeconfig {
        cmd.arg("--kubeconfig").arg(&env.server.kubeconfig);
    }
    let child = cmd
        .arg("--health-bind")
        .arg(health.to_string())
        .arg("--metrics-bind")
        .arg(metrics.to_string())
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kuryr-controller");
    wait_for("binary ready", Duration::from_secs(20), async || {
        let c = tokio::net::TcpStream::connect(health).await.ok()?;
        drop(c);
        (http_get(health, "/ready").await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(http_get(health, "/alive").await.0, 200);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    pods.create(&PostParams::default(), &mk_pod("fromproc", false))
        .await
        .expect("create");
    wait_for("KuryrPort from the binary", Duration::from_secs(10), async || {
        ports.get_opt("fromproc").await.ok().flatten()
    })
    .await;
    let (code, text) = http_get(metrics, "/metrics").await;
    assert_eq!(code, 200);
    assert!(text.contains("kuryr_reconcile_total"), "{text}");

    let mut child = child;
    child.start_kill().expect("kill");
    let out = child.wait_with_output().await.expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bogus_option"), "warning not logged: {stderr}");
    assert!(
        stderr.contains("kuryr.conf"),
        "warning without its file: {stderr}"
    );
}
