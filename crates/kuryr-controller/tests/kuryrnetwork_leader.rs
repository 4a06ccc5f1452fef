//! Active/passive HA of the `kuryr-controller` binary (`[kubernetes] controller_ha = true`):
//! two real processes against the emulated API server; exactly one holds the Lease, is ready
//! and acts (creates KuryrPorts); the standby is alive but not ready and does nothing;
//! SIGKILL the leader and the standby takes over within the lease duration; a leader stopped
//! with SIGTERM releases the Lease at once.

mod common;

use std::{
    net::SocketAddr,
    time::{Duration, Instant},
};

use common::*;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::api::{Api, PostParams};
use kuryr_types::KuryrPort;
use tokio::process::{Child, Command};

const LEASE_SECS: u64 = 4;

struct Replica {
    id: &'static str,
    child: Child,
    health: SocketAddr,
    metrics: SocketAddr,
}

fn start(env: &Env, conf: &std::path::Path, id: &'static str) -> Replica {
    let (health, metrics) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_kuryr-controller"))
        .arg("--config-file")
        .arg(conf)
        .arg("--kubeconfig")
        .arg(&env.server.kubeconfig)
        .arg("--health-bind")
        .arg(health.to_string())
        .arg("--metrics-bind")
        .arg(metrics.to_string())
        .arg("--ha-lease-namespace")
        .arg("default")
        .arg("--ha-identity")
        .arg(id)
        .arg("--ha-lease-duration")
        .arg(LEASE_SECS.to_string())
        .env("NO_COLOR", "1")
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kuryr-controller");
    Replica {
        id,
        child,
        health,
        metrics,
    }
}

async fn ready(r: &Replica) -> Option<u16> {
    tokio::net::TcpStream::connect(r.health).await.ok()?;
    Some(http_get(r.health, "/ready").await.0)
}

/// Reconciliations of the pod handler this replica made.
async fn acted(r: &Replica) -> f64 {
    let (_, text) = http_get(r.metrics, "/metrics").await;
    text.lines()
        .filter(|l| l.starts_with("kuryr_reconcile_total{") && l.contains("handler=\"vif\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn holder(env: &Env) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), "default");
    leases
        .get_opt(kuryr_controller::leader::LEASE_NAME)
        .await
        .ok()??
        .spec?
        .holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_standby_takes_over() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &conf,
        "[kubernetes]\ncontroller_ha = true\nenabled_handlers = vif\n[neutron_defaults]\nproject = p\n\
         pod_subnet = s\nservice_subnet = s2\npod_security_groups = sg\n",
    )
    .expect("write conf");
    let mut a = start(&env, &conf, "replica-a");
    let mut b = start(&env, &conf, "replica-b");
    let leader_id = wait_for("one leader", Duration::from_secs(30), async || holder(&env).await).await;
    let (leader, standby) = if leader_id == a.id {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    wait_for("leader ready", Duration::from_secs(20), async || {
        (ready(leader).await == Some(200)).then_some(())
    })
    .await;
    // The standby serves health: alive, never ready.
    let st = wait_for("standby serving", Duration::from_secs(20), async || {
        ready(standby).await
    })
    .await;
    assert_eq!(st, 503, "standby must not be ready");
    assert_eq!(http_get(standby.health, "/alive").await.0, 200);

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    pods.create(&PostParams::default(), &mk_pod("ha1", false))
        .await
        .expect("pod");
    wait_for("KuryrPort from the leader", Duration::from_secs(10), async || {
        ports.get_opt("ha1").await.ok().flatten()
    })
    .await;
    assert!(acted(leader).await > 0.0, "leader did not reconcile");
    assert_eq!(acted(standby).await, 0.0, "standby reconciled");
    // Stays that way for more than a lease period (renewals work, no flapping).
    tokio::time::sleep(Duration::from_secs(LEASE_SECS + 2)).await;
    assert_eq!(holder(&env).await.as_deref(), Some(leader.id));
    assert_eq!(ready(standby).await, Some(503));

    // SIGKILL the leader: no release, the Lease has to expire.
    leader.child.start_kill().expect("kill");
    let _ = leader.child.wait().await;
    let t0 = Instant::now();
    let new_id = standby.id;
    wait_for("takeover", Duration::from_secs(LEASE_SECS * 3 + 10), async || {
        (holder(&env).await.as_deref() == Some(new_id) && ready(standby).await == Some(200)).then_some(())
    })
    .await;
    let takeover = t0.elapsed();
    println!(
        "takeover after SIGKILL of the leader: {} ms",
        takeover.as_millis()
    );
    assert!(
        takeover <= Duration::from_secs(LEASE_SECS * 2 + 5),
        "slow takeover: {takeover:?}"
    );
    pods.create(&PostParams::default(), &mk_pod("ha2", false))
        .await
        .expect("pod");
    wait_for(
        "KuryrPort from the new leader",
        Duration::from_secs(10),
        async || ports.get_opt("ha2").await.ok().flatten(),
    )
    .await;
    assert!(acted(standby).await > 0.0, "new leader did not reconcile");

    // SIGTERM: the leader releases the Lease on its way out.
    let pid = standby.child.id().expect("pid");
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .await
        .expect("kill");
    assert!(status.success());
    let out = tokio::time::timeout(Duration::from_secs(10), standby.child.wait())
        .await
        .expect("exit after SIGTERM")
        .expect("wait");
    assert!(out.success(), "exit status after SIGTERM: {out:?}");
    let released = holder(&env).await;
    assert!(
        released.as_deref() != Some(new_id),
        "Lease still held after release: {released:?}"
    );
}
