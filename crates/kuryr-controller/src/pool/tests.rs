//! Unit tests of the executor with the in-memory FakeNeutron: what the pure state does not
//! cover — tickets executed as one bulk request, the hot path without Neutron calls, failure
//! back-off surfaced to the caller, the noop driver, release and reuse, network freeing,
//! recovery from tagged ports.

use std::{sync::Arc, time::Duration};

use kuryr_core::{PoolConfig, TagPolicy, activation::ActivationConfig, pool::PodKey};
use kuryr_openstack::{
    Neutron,
    fake::{FakeNeutron, FaultKind},
    ops,
};

use super::*;
use crate::{drivers::PodTarget, metrics::Metrics};

pub(super) const TAG: &str = "kuryr-cluster=unit";

pub(crate) fn settings(mode: PoolMode) -> PoolSettings {
    PoolSettings {
        mode,
        pool: PoolConfig {
            min: 1,
            max: 0,
            batch: 3,
            cooldown: Duration::ZERO,
            ..PoolConfig::default()
        },
        tags: TagPolicy::new(vec!["kuryr".into()], Some(TAG.into())).expect("tags"),
        project: None,
        ovs_bridge: Some("br-int".into()),
        janitor_interval: Duration::ZERO,
        janitor_min_age: Duration::ZERO,
        nested: None,
        multi: None,
        activation: ActivationConfig::default(),
        vif_driver: "neutron-vif".into(),
        pair_update_attempts: 3,
    }
}

struct Fixture {
    fake: FakeNeutron,
    pool: Arc<VifPool>,
    target: PodTarget,
}

fn fixture(mode: PoolMode) -> Fixture {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let pool = VifPool::new(settings(mode), neutron, Arc::new(Metrics::default()));
    let target = PodTarget {
        project_id: "proj".into(),
        network_id: net.id,
        subnet_ids: vec![subnet.id],
        security_groups: vec!["sg-1".into()],
    };
    Fixture { fake, pool, target }
}

impl Fixture {
    /// A port of this cluster on node-1 the pool does not know (behind its back).
    async fn create_tagged_port(&self) {
        let p = super::port_create(
            &settings(PoolMode::Neutron),
            &kuryr_core::pool::PoolKey::new("node-1", "proj", &self.target.network_id),
            &["sg-1".to_string()],
            Vec::new(),
            None,
            None,
        );
        self.fake
            .create_ports_bulk(std::slice::from_ref(&p))
            .await
            .expect("create");
    }

    async fn acquire(&self, pod: &str) -> Result<Option<Acquired>, Error> {
        let req = PortRequest {
            pod: PodKey::new("ns", pod),
            pod_uid: "uid",
            host: "node-1",
            target: &self.target,
        };
        self.pool.acquire(&req, Duration::from_secs(5)).await
    }
}

#[tokio::test]
async fn empty_pool_populates_once_then_serves_without_neutron_calls() {
    let f = fixture(PoolMode::Neutron);
    let a = f.acquire("a").await.expect("acquire").expect("port");
    assert_eq!(f.fake.calls(ops::PORT_BULK_CREATE), 1, "one bulk request");
    let ports = f.fake.ports();
    assert_eq!(ports.len(), 3, "ports_pool_batch ports");
    for p in &ports {
        assert_eq!(p.binding_host_id, "node-1");
        assert_eq!(p.device_owner, "compute:kuryr");
        assert_eq!(p.security_groups, ["sg-1"]);
        assert_eq!(p.name, "kuryr-pool-port");
        assert!(p.tags.contains(&TAG.to_string()) && p.tags.contains(&"kuryr".to_string()));
    }
    assert_eq!(a.vif.id.as_deref(), Some(a.port.id.as_str()));
    assert_eq!(a.vif.active, Some(false));
    assert_eq!(a.vif.address.as_deref(), Some(a.port.mac_address.as_str()));
    let calls_before: u64 = [
        ops::PORT_BULK_CREATE,
        ops::PORT_UPDATE,
        ops::PORT_GET,
        ops::PORT_LIST,
        ops::NETWORK_GET,
        ops::SUBNET_LIST,
    ]
    .iter()
    .map(|op| f.fake.calls(op))
    .sum();
    let b = f.acquire("b").await.expect("acquire").expect("port");
    let calls_after: u64 = [
        ops::PORT_BULK_CREATE,
        ops::PORT_UPDATE,
        ops::PORT_GET,
        ops::PORT_LIST,
        ops::NETWORK_GET,
        ops::SUBNET_LIST,
    ]
    .iter()
    .map(|op| f.fake.calls(op))
    .sum();
    assert_eq!(calls_after, calls_before, "hot path: no Neutron request");
    assert_ne!(a.port.id, b.port.id);
    // Idempotent: the same pod gets the same port again.
    let again = f.acquire("a").await.expect("acquire").expect("port");
    assert_eq!(again.port.id, a.port.id);
    let pools = f.pool.pools();
    assert_eq!(pools.len(), 1);
    assert_eq!((pools[0].in_use, pools[0].available), (2, 1));
}

#[tokio::test]
async fn failed_population_backs_off_and_is_reported_then_recovers() {
    let f = fixture(PoolMode::Neutron);
    f.fake
        .fail_next(ops::PORT_BULK_CREATE, 1, FaultKind::ServerError(503));
    // The population fails; the waiting request sees the back-off with its cause.
    let err = f.acquire("a").await.expect_err("back-off");
    match &err {
        Error::PopulationBackoff { cause, retry_in, .. } => {
            assert!(
                cause.contains("port_bulk_create") || cause.contains("creating ports"),
                "{cause}"
            );
            assert!(*retry_in <= Duration::from_secs(2));
        }
        e => panic!("unexpected {e:?}"),
    }
    assert!(err.is_retryable());
    let text = f.pool.metrics.render().expect("metrics");
    assert!(
        text.contains("kuryr_pool_populations_total{outcome=\"failed\"} 1"),
        "{text}"
    );
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let a = f.acquire("a").await.expect("acquire").expect("port");
    assert_eq!(f.fake.calls(ops::PORT_BULK_CREATE), 2);
    assert!(f.fake.port(&a.port.id).is_some());
}

#[tokio::test]
async fn a_taken_port_with_other_security_groups_is_updated() {
    let f = fixture(PoolMode::Neutron);
    f.acquire("a").await.expect("acquire").expect("port");
    let other = PodTarget {
        security_groups: vec!["sg-2".into()],
        ..f.target.clone()
    };
    let req = PortRequest {
        pod: PodKey::new("ns", "b"),
        pod_uid: "uid-b",
        host: "node-1",
        target: &other,
    };
    let b = f
        .pool
        .acquire(&req, Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("port");
    assert_eq!(f.fake.calls(ops::PORT_UPDATE), 1);
    assert_eq!(f.fake.port(&b.port.id).expect("port").security_groups, ["sg-2"]);
}

#[tokio::test]
async fn released_ports_return_to_the_pool_and_are_reused() {
    let f = fixture(PoolMode::Neutron);
    let a = f.acquire("a").await.expect("acquire").expect("port");
    f.pool
        .release(&PodKey::new("ns", "a"), std::slice::from_ref(&a.port.id))
        .await
        .expect("release");
    assert!(f.fake.port(&a.port.id).is_some(), "pooled, not deleted");
    f.pool.tick_now();
    // FIFO: the two never-used ports first, then the released one.
    let mut got = Vec::new();
    for pod in ["b", "c", "d"] {
        got.push(f.acquire(pod).await.expect("acquire").expect("port").port.id);
    }
    assert!(got.contains(&a.port.id), "released port not reused: {got:?}");
    assert_eq!(f.fake.calls(ops::PORT_DELETE), 0);
}

#[tokio::test]
async fn noop_driver_creates_one_port_per_pod_and_deletes_on_release() {
    let f = fixture(PoolMode::Noop);
    let direct = super::direct::Direct::new(settings(PoolMode::Noop), Arc::new(f.fake.clone()));
    let req = |pod: &'static str| PortRequest {
        pod: PodKey::new("ns", pod),
        pod_uid: "uid",
        host: "node-1",
        target: &f.target,
    };
    let wait = Duration::from_secs(1);
    let a = direct
        .acquire(&req("a"), wait)
        .await
        .expect("acquire")
        .expect("port");
    assert_eq!(f.fake.ports().len(), 1);
    assert_eq!(f.fake.calls(ops::PORT_BULK_CREATE), 1);
    // A retry before the KuryrPort references it gets the same port.
    let again = direct
        .acquire(&req("a"), wait)
        .await
        .expect("acquire")
        .expect("port");
    assert_eq!(again.port.id, a.port.id);
    assert_eq!(f.fake.calls(ops::PORT_BULK_CREATE), 1);
    direct.committed(&PodKey::new("ns", "a"));
    direct
        .release(&PodKey::new("ns", "a"), std::slice::from_ref(&a.port.id))
        .await
        .expect("release");
    assert!(f.fake.ports().is_empty());
    // A port created for a pod whose KuryrPort never referenced it is deleted too.
    direct
        .acquire(&req("b"), wait)
        .await
        .expect("acquire")
        .expect("port");
    direct
        .release(&PodKey::new("ns", "b"), &[])
        .await
        .expect("release");
    assert!(f.fake.ports().is_empty());
    // No pools: nothing to populate, free or rebuild, no pool manager.
    assert_eq!(
        direct
            .populate("node-1", &f.target, Some(3))
            .await
            .expect("populate"),
        0
    );
    assert_eq!(direct.free_network(&f.target.network_id).await.expect("free"), 0);
    assert!(direct.pools().is_empty());
    assert!(f.fake.ports().is_empty());
}

/// The noop driver's janitor deletes this cluster's ports nothing owns (no pools to adopt them
/// into) and spares the one a pod is about to get.
#[tokio::test]
async fn noop_janitor_deletes_what_nothing_owns_and_spares_pending_ports() {
    let f = fixture(PoolMode::Noop);
    let direct = super::direct::Direct::new(settings(PoolMode::Noop), Arc::new(f.fake.clone()));
    let req = PortRequest {
        pod: PodKey::new("ns", "pending"),
        pod_uid: "uid",
        host: "node-1",
        target: &f.target,
    };
    let pending = direct
        .acquire(&req, Duration::from_secs(1))
        .await
        .expect("acquire")
        .expect("port");
    // A tagged port of this cluster that nothing references (a crash after a create).
    let leaked = super::port_create(
        &settings(PoolMode::Noop),
        &kuryr_core::pool::PoolKey::new("node-1", "proj", &f.target.network_id),
        &["sg-1".to_string()],
        Vec::new(),
        None,
        None,
    );
    let leaked = f
        .fake
        .create_ports_bulk(std::slice::from_ref(&leaked))
        .await
        .expect("create")[0]
        .id
        .clone();
    let deleted = direct
        .janitor_pass(&std::collections::HashSet::new())
        .await
        .expect("janitor pass");
    assert_eq!(deleted, vec![leaked]);
    assert!(
        f.fake.port(&pending.port.id).is_some(),
        "the pending port was deleted"
    );
}

#[tokio::test]
async fn free_network_deletes_pooled_ports_and_closes_the_network() {
    let f = fixture(PoolMode::Neutron);
    let a = f.acquire("a").await.expect("acquire").expect("port");
    let freed = f.pool.free_network(&f.target.network_id).await.expect("free");
    assert_eq!(freed, 2, "the two available ports");
    assert_eq!(f.fake.ports().len(), 1, "the port in use stays");
    let err = f.acquire("b").await.expect_err("closed");
    assert!(matches!(err, Error::NetworkClosed { .. }), "{err:?}");
    // Released later: deleted, not pooled.
    f.pool
        .release(&PodKey::new("ns", "a"), std::slice::from_ref(&a.port.id))
        .await
        .expect("release");
    assert!(f.fake.ports().is_empty());
}

#[tokio::test]
async fn populate_and_recover_from_tagged_ports() {
    let f = fixture(PoolMode::Neutron);
    let created = f
        .pool
        .populate("node-2", &f.target, Some(4))
        .await
        .expect("populate");
    assert_eq!(created, 4);
    assert_eq!(
        f.pool
            .populate("node-2", &f.target, None)
            .await
            .expect("populate"),
        0,
        "above min"
    );
    let a = f.acquire("a").await.expect("acquire").expect("port");
    // A new executor (restart) rebuilds the pools from Neutron and the KuryrPort references.
    let neutron: Arc<dyn Neutron> = Arc::new(f.fake.clone());
    let fresh = VifPool::new(settings(PoolMode::Neutron), neutron, Arc::new(Metrics::default()));
    let refs = vec![kuryr_core::pool::InUseRef {
        port_id: a.port.id.clone(),
        pod: PodKey::new("ns", "a"),
        host: "node-1".into(),
    }];
    let report = fresh.recover(refs).await.expect("recover");
    assert!(fresh.is_recovered());
    assert_eq!(report.in_use, vec![a.port.id.clone()]);
    assert_eq!(
        report.available.len() + report.cooling.len(),
        6,
        "4 on node-2, 2 on node-1"
    );
    let mut pools = fresh.pools();
    pools.sort_by(|x, y| x.host.cmp(&y.host));
    assert_eq!((pools[0].host.as_str(), pools[0].in_use), ("node-1", 1));
    assert_eq!(pools[1].available + pools[1].cooling, 4);
}

#[tokio::test]
async fn port_debug_renames_on_take_and_back_on_release() {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    let mut s = settings(PoolMode::Neutron);
    s.pool.port_debug = true;
    let pool = VifPool::new(s, Arc::new(fake.clone()), Arc::new(Metrics::default()));
    let target = PodTarget {
        project_id: "proj".into(),
        network_id: net.id,
        subnet_ids: vec![subnet.id],
        security_groups: vec!["sg-1".into()],
    };
    let req = PortRequest {
        pod: PodKey::new("ns", "web"),
        pod_uid: "uid-web",
        host: "node-1",
        target: &target,
    };
    let a = pool
        .acquire(&req, Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("port");
    let p = fake.port(&a.port.id).expect("port");
    assert_eq!((p.name.as_str(), p.device_id.as_str()), ("ns/web", "uid-web"));
    assert_eq!(fake.calls(ops::PORT_UPDATE), 1, "one write with port_debug");
    pool.release(&PodKey::new("ns", "web"), std::slice::from_ref(&a.port.id))
        .await
        .expect("release");
    let p = fake.port(&a.port.id).expect("port");
    assert_eq!((p.name.as_str(), p.device_id.as_str()), ("kuryr-pool-port", ""));
}

#[tokio::test]
async fn maintenance_never_returns_even_with_the_noop_driver() {
    // The KuryrPort handler selects over it: returning would end the handler.
    for mode in [PoolMode::Noop, PoolMode::Neutron] {
        let f = fixture(mode);
        let r = tokio::time::timeout(Duration::from_millis(100), f.pool.clone().run_maintenance()).await;
        assert!(r.is_err(), "{mode:?}: maintenance returned");
    }
}

/// ML2/OVS with the iptables hybrid firewall binds ports with `ovs_hybrid_plug`: they would
/// need os-vif's VIFBridge (a `qbr` bridge), which the daemon does not wire. The pool refuses
/// to hand such a port to a pod with an error naming why (the handler records it as an
/// `UnsupportedVIFBinding` Event), instead of a VIF whose every CNI ADD fails.
#[tokio::test]
async fn hybrid_plug_ports_are_refused_with_the_reason() {
    let f = fixture(PoolMode::Noop);
    let mut details = serde_json::Map::new();
    details.insert("ovs_hybrid_plug".into(), serde_json::json!(true));
    f.fake.bind_with_vif_details(details);
    let e = f.acquire("hybrid").await.expect_err("refused");
    assert!(matches!(e, Error::UnsupportedBinding { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("ovs_hybrid_plug") && msg.contains("VIFBridge"),
        "{msg}"
    );
    assert!(!e.is_retryable());
}

#[tokio::test]
async fn uninstall_deletes_pooled_and_unknown_ports_but_not_ports_in_use() {
    let f = fixture(PoolMode::Neutron);
    // Before recovery the state knows no pod's port: nothing may be deleted (every tagged port
    // would look unused, those of running pods included).
    f.create_tagged_port().await;
    assert_eq!(f.pool.release_for_uninstall().await.expect("release"), 0);
    assert_eq!(
        f.fake.ports().len(),
        1,
        "a port a pod may use stays before recovery"
    );
    for p in f.fake.ports() {
        f.fake.delete_port(&p.id).await.expect("clean");
    }
    f.pool.recover(Vec::new()).await.expect("recover");
    let a = f.acquire("a").await.expect("acquire").expect("port");
    // A tagged port of this cluster nobody knows (a bulk creation cut off by a crash).
    f.create_tagged_port().await;
    assert_eq!(f.fake.ports().len(), 4, "3 of the batch + 1 unknown");
    assert_eq!(
        f.pool.quiesce(Duration::from_secs(1)).await,
        0,
        "nothing in flight"
    );
    let deleted = f.pool.release_for_uninstall().await.expect("release");
    assert_eq!(deleted, 3, "2 available + 1 unknown");
    let left: Vec<String> = f.fake.ports().into_iter().map(|p| p.id).collect();
    assert_eq!(left, vec![a.port.id.clone()], "the port in use stays");
    // Closing: no new population starts, so a pod finds no port (its caller requeues).
    let calls = f.fake.calls(ops::PORT_BULK_CREATE);
    let r = f
        .pool
        .acquire(
            &PortRequest {
                pod: PodKey::new("ns", "b"),
                pod_uid: "uid",
                host: "node-1",
                target: &f.target,
            },
            Duration::from_millis(200),
        )
        .await
        .expect("acquire");
    assert!(r.is_none(), "{r:?}");
    assert_eq!(
        f.fake.calls(ops::PORT_BULK_CREATE),
        calls,
        "no bulk request once closing"
    );
}
