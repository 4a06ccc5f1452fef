//! The ownership rule on every destructive or reusing path of the pools, on the fake Neutron:
//! another cluster's ports (pooled on a node named like ours, unbound), untagged
//! `compute:kuryr` ports (bound elsewhere, unbound), a user's port and one of ours in another
//! project are never adopted, pooled, handed out or deleted — by recovery (also when a
//! KuryrPort names them), the janitor, the settle looks, the pools of missing nodes, a release
//! or the uninstall sweep — with a configured cluster tag and with the derived identity.

use std::{collections::HashSet, sync::Arc, time::Duration, time::Instant};

use kuryr_core::{TagPolicy, ownership::Refusal, pool::InUseRef, pool::PodKey};
use kuryr_openstack::{Neutron, PortCreate, fake::FakeNeutron};

use super::tests::settings;
use super::*;
use crate::{drivers::PodTarget, metrics::Metrics};

/// The ports that are not ours, by what they are.
struct Theirs {
    bound: String,
    unbound: String,
    upstream_elsewhere: String,
    upstream_unbound: String,
    user: String,
    other_project: String,
}

impl Theirs {
    fn all(&self) -> Vec<&str> {
        vec![
            &self.bound,
            &self.unbound,
            &self.upstream_elsewhere,
            &self.upstream_unbound,
            &self.user,
            &self.other_project,
        ]
    }
}

async fn create(
    fake: &FakeNeutron,
    net: &str,
    host: &str,
    owner: &str,
    tags: &[&str],
    project: &str,
) -> String {
    let p = PortCreate {
        network_id: net.into(),
        project_id: Some(project.into()),
        device_owner: Some(owner.into()),
        binding_host_id: Some(host.into()),
        security_groups: Some(vec!["sg-1".into()]),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    };
    fake.create_ports_bulk(std::slice::from_ref(&p))
        .await
        .expect("create")
        .remove(0)
        .id
}

async fn theirs(fake: &FakeNeutron, net: &str, our_tags: &[String]) -> Theirs {
    let ours: Vec<&str> = our_tags.iter().map(String::as_str).collect();
    Theirs {
        // Another cluster in the same project and network, with a node named like ours.
        bound: create(
            fake,
            net,
            "node-1",
            "compute:kuryr",
            &["kuryr-cluster=other"],
            "proj",
        )
        .await,
        unbound: create(fake, net, "", "compute:kuryr", &["kuryr-cluster=other"], "proj").await,
        // Upstream Kuryr without tags beside us.
        upstream_elsewhere: create(fake, net, "their-node", "compute:kuryr", &[], "proj").await,
        upstream_unbound: create(fake, net, "", "compute:kuryr", &[], "proj").await,
        // A user's port.
        user: create(fake, net, "", "", &[], "proj").await,
        // Tagged like ours, but outside [neutron_defaults] project.
        other_project: create(fake, net, "node-1", "compute:kuryr", &ours, "other-proj").await,
    }
}

fn assert_untouched(fake: &FakeNeutron, pool: &VifPool, t: &Theirs) {
    for id in t.all() {
        assert!(fake.port(id).is_some(), "port {id} that is not ours was deleted");
        assert!(
            pool.state().port(id).is_none(),
            "port {id} that is not ours is in a pool"
        );
    }
}

async fn every_path_leaves_them_alone(settings: PoolSettings) {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    let t = theirs(&fake, &net.id, &settings.tags.tags()).await;
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let pool = VifPool::new(settings.clone(), neutron.clone(), Arc::new(Metrics::default()));
    // Recovery, with KuryrPorts (forged, or stale) naming the other cluster's and the user's port.
    let forged = |id: &str, pod: &str| InUseRef {
        port_id: id.into(),
        pod: PodKey::new("ns", pod),
        host: "node-1".into(),
    };
    let report = pool
        .recover(vec![
            forged(&t.bound, "x"),
            forged(&t.user, "y"),
            forged(&t.other_project, "z"),
        ])
        .await
        .expect("recover");
    let refused: Vec<(&str, Refusal)> = report
        .refused
        .iter()
        .map(|(r, w)| (r.port_id.as_str(), *w))
        .collect();
    assert_eq!(
        refused,
        vec![
            (t.bound.as_str(), Refusal::Foreign),
            (t.user.as_str(), Refusal::NotKuryrOwner),
            (t.other_project.as_str(), Refusal::OtherProject),
        ]
    );
    assert!(report.in_use.is_empty() && report.available.is_empty() && report.cooling.is_empty());
    assert!(report.to_delete.is_empty(), "{:?}", report.to_delete);
    assert_untouched(&fake, &pool, &t);
    // The pools of hosts that are not nodes: "their-node" is none of ours.
    *lock(&pool.live_nodes) = Some(HashSet::from(["node-1".to_string()]));
    pool.free_pools_of_missing_nodes().await;
    assert_untouched(&fake, &pool, &t);
    // The janitor (minimum age zero here) and two settle looks.
    let deleted = pool.janitor_pass(&HashSet::new()).await.expect("janitor");
    assert!(deleted.is_empty(), "{deleted:?}");
    let ports = fake.ports();
    for _ in 0..2 {
        let (d, a) = pool.state().settle_look(
            &ports,
            settings.ownership(),
            Duration::ZERO,
            (Instant::now(), jiff::Timestamp::now()),
        );
        assert!(d.is_empty() && a.is_empty(), "{d:?} {a:?}");
    }
    assert_untouched(&fake, &pool, &t);
    // A release of the forged KuryrPort: the port it names is left alone.
    pool.release(&PodKey::new("ns", "x"), std::slice::from_ref(&t.bound))
        .await
        .expect("release");
    pool.release(&PodKey::new("ns", "y"), std::slice::from_ref(&t.user))
        .await
        .expect("release");
    assert_untouched(&fake, &pool, &t);
    // A pod on node-1 gets a port of ours, never theirs.
    let target = PodTarget {
        project_id: "proj".into(),
        network_id: net.id.clone(),
        subnet_ids: vec![subnet.id],
        security_groups: vec!["sg-1".into()],
    };
    let req = PortRequest {
        pod: PodKey::new("ns", "a"),
        pod_uid: "uid",
        host: "node-1",
        target: &target,
    };
    let got = pool
        .acquire(&req, Duration::from_secs(5))
        .await
        .expect("acquire")
        .expect("port");
    assert!(!t.all().contains(&got.port.id.as_str()));
    assert!(
        settings
            .tags
            .matches(&fake.port(&got.port.id).expect("ours").tags)
    );
    // The uninstall sweep deletes the pools' ports and ours nothing owns, nothing else.
    let n = pool.release_for_uninstall().await.expect("uninstall");
    assert!(n >= 2, "the pool's available ports: {n}");
    for id in t.all() {
        assert!(
            fake.port(id).is_some(),
            "the uninstall deleted {id}, which is not ours"
        );
    }
}

#[tokio::test]
async fn with_a_configured_cluster_tag_nothing_of_theirs_is_touched() {
    let mut s = settings(PoolMode::Neutron);
    s.project = Some("proj".into());
    every_path_leaves_them_alone(s).await;
}

#[tokio::test]
async fn with_the_derived_identity_nothing_of_theirs_is_touched() {
    // What a controller without cluster_tag/resource_tags runs with (kuryr_runtime::identity).
    let mut s = settings(PoolMode::Neutron);
    s.project = Some("proj".into());
    s.tags = TagPolicy::new(
        Vec::new(),
        Some(kuryr_runtime::identity::derived_tag(
            "0c8a2a57-5e0d-4b4e-9a0b-6f7cf3b1a2d4",
        )),
    )
    .expect("tags");
    every_path_leaves_them_alone(s).await;
}

#[tokio::test]
async fn without_any_identity_nothing_is_listed_adopted_or_deleted() {
    let fake = FakeNeutron::new();
    let (net, _) = fake.add_network("pods", "10.0.0.0/24");
    let mut s = settings(PoolMode::Neutron);
    s.tags = TagPolicy::default();
    let t = theirs(&fake, &net.id, &[]).await;
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let pool = VifPool::new(s, neutron, Arc::new(Metrics::default()));
    let report = pool.recover(Vec::new()).await.expect("recover");
    assert!(report.available.is_empty() && report.cooling.is_empty() && report.to_delete.is_empty());
    assert!(
        pool.janitor_pass(&HashSet::new())
            .await
            .expect("janitor")
            .is_empty()
    );
    assert_eq!(pool.release_for_uninstall().await.expect("uninstall"), 0);
    assert_untouched(&fake, &pool, &t);
}

#[tokio::test]
async fn the_noop_driver_deletes_only_what_is_ours_on_release() {
    let fake = FakeNeutron::new();
    let (net, _) = fake.add_network("pods", "10.0.0.0/24");
    let mut s = settings(PoolMode::Noop);
    s.project = Some("proj".into());
    let ours = create(
        &fake,
        &net.id,
        "node-1",
        "compute:kuryr",
        &["kuryr", super::tests::TAG],
        "proj",
    )
    .await;
    let t = theirs(&fake, &net.id, &s.tags.tags()).await;
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let direct = direct::Direct::new(s, neutron);
    // A KuryrPort naming the other cluster's ports, a user's and one in another project, beside
    // ours: only ours goes.
    let named: Vec<String> = [&t.bound, &t.unbound, &t.user, &t.other_project, &ours]
        .into_iter()
        .cloned()
        .collect();
    direct
        .release(&PodKey::new("ns", "x"), &named)
        .await
        .expect("release");
    assert!(fake.port(&ours).is_none(), "ours is deleted");
    for id in t.all() {
        assert!(fake.port(id).is_some(), "{id} is not ours and must stay");
    }
    // An untagged compute:kuryr port a KuryrPort names is upstream's, switched over: released
    // like ours.
    direct
        .release(&PodKey::new("ns", "u"), std::slice::from_ref(&t.upstream_unbound))
        .await
        .expect("release");
    assert!(fake.port(&t.upstream_unbound).is_none());
    // The janitor (minimum age zero) does not take the others either.
    assert!(
        direct
            .janitor_pass(&HashSet::new())
            .await
            .expect("janitor")
            .is_empty()
    );
    for id in t.all().into_iter().filter(|id| *id != t.upstream_unbound) {
        assert!(fake.port(id).is_some(), "{id} is not ours and must stay");
    }
}
