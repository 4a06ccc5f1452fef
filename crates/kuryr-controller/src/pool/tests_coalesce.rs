//! Unit tests of the noop driver's coalesced creations (a slow fake Neutron lets concurrent
//! pods meet): a burst is two bulk requests, not one per pod; a bulk Neutron refuses is sent
//! again port by port, so every valid pod still gets its port.

use std::{sync::Arc, time::Duration};

use kuryr_core::pool::PodKey;
use kuryr_openstack::{fake::FaultKind, ops};

use super::{direct::Direct, source::PortSource, tests::settings, *};
use crate::drivers::PodTarget;

async fn acquire_all(
    direct: &Arc<Direct>,
    target: &PodTarget,
    pods: &[String],
) -> Vec<Result<Acquired, Error>> {
    futures::future::join_all(pods.iter().map(|pod| async move {
        let req = PortRequest {
            pod: PodKey::new("ns", pod),
            pod_uid: "uid",
            host: "node-1",
            target,
        };
        direct
            .acquire(&req, Duration::from_secs(5))
            .await
            .map(|a| a.expect("noop always answers"))
    }))
    .await
}

fn cloud() -> (kuryr_openstack::fake::FakeNeutron, Arc<Direct>, PodTarget) {
    let fake = kuryr_openstack::fake::FakeNeutron::new();
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    let direct = Direct::new(settings(PoolMode::Noop), Arc::new(fake.clone()));
    let target = PodTarget {
        project_id: "proj".into(),
        network_id: net.id,
        subnet_ids: vec![subnet.id],
        security_groups: vec!["sg-1".into()],
    };
    (fake, direct, target)
}

#[tokio::test]
async fn a_burst_of_noop_pods_is_two_bulk_requests() {
    let (fake, direct, target) = cloud();
    fake.set_latency(Duration::from_millis(30));
    let pods: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
    let got = acquire_all(&direct, &target, &pods).await;
    let ports: Vec<Acquired> = got.into_iter().map(|r| r.expect("a port")).collect();
    let ids: std::collections::BTreeSet<&str> = ports.iter().map(|a| a.port.id.as_str()).collect();
    assert_eq!(ids.len(), 8, "a port each");
    assert_eq!(
        fake.calls(ops::PORT_BULK_CREATE),
        2,
        "the first pod's request, then one for the seven queued behind it"
    );
}

#[tokio::test]
async fn a_refused_bulk_is_sent_again_port_by_port() {
    let (fake, direct, target) = cloud();
    fake.set_latency(Duration::from_millis(40));
    let f2 = fake.clone();
    // The first pod's request passes the fault check at 40 ms; the bulk of the three queued
    // behind it reaches it at 80 ms, after this fault is armed.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(55)).await;
        f2.fail_next(ops::PORT_BULK_CREATE, 1, FaultKind::BadRequest);
    });
    let pods: Vec<String> = (0..4).map(|i| format!("p{i}")).collect();
    let got = acquire_all(&direct, &target, &pods).await;
    for r in &got {
        assert!(r.is_ok(), "{:?}", r.as_ref().err());
    }
    assert_eq!(
        fake.calls(ops::PORT_BULK_CREATE),
        5,
        "1 + the refused bulk + 3 on their own"
    );
    assert_eq!(fake.ports().len(), 4, "no port left over");
}
