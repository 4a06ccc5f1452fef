//! Unit tests of nested-vlan pools with the in-memory FakeNeutron (its trunks behave as
//! ML2/OVN's trunk plugin): a bulk of ports becomes subports in one call with distinct VLAN IDs,
//! the VIF is `VIFVlanNested` with the subport's ID, ports leave the trunk before deletion,
//! recovery reads the trunks back without a write, failures leave no port behind.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

use kuryr_core::pool::{InUseRef, PodKey};
use kuryr_openstack::{
    Neutron, PortCreate, TrunkCreate,
    fake::{FakeNeutron, FaultKind},
    ops,
};
use kuryr_types::vif::VifKind;

use super::{
    attach::nested::{NodeAddresses, TrunkSubports},
    *,
};
use crate::{drivers::PodTarget, metrics::Metrics};

/// Every VLAN ID once.
fn assert_distinct(subs: &[(String, u16)]) {
    let ids: std::collections::BTreeSet<u16> = subs.iter().map(|(_, v)| *v).collect();
    assert_eq!(ids.len(), subs.len(), "VLAN IDs collide: {subs:?}");
}

struct Nested {
    fake: FakeNeutron,
    target: PodTarget,
    trunk_id: String,
    workers: String,
    nodes: HashMap<String, String>,
}

fn settings(workers: &str) -> PoolSettings {
    PoolSettings {
        nested: Some(vec![workers.to_string()]),
        ..super::tests::settings(PoolMode::Neutron)
    }
}

/// A pod network, a workers' network with one VM port (`vm-1`) that is a trunk's parent, and
/// a second VM port (`vm-2`) that is not.
async fn cloud() -> Nested {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    let (wnet, wsubnet) = fake.add_network("workers", "10.20.0.0/24");
    let vm_port = |name: &str| PortCreate {
        network_id: wnet.id.clone(),
        subnet_ids: vec![wsubnet.id.clone()],
        name: Some(name.into()),
        binding_host_id: Some("hypervisor-1".into()),
        ..PortCreate::default()
    };
    let vms = fake
        .create_ports_bulk(&[vm_port("vm-1"), vm_port("vm-2")])
        .await
        .expect("VM ports");
    let trunk = fake
        .create_trunk(&TrunkCreate {
            port_id: vms[0].id.clone(),
            ..TrunkCreate::default()
        })
        .await
        .expect("trunk");
    let nodes = HashMap::from([
        ("vm-1".to_string(), vms[0].fixed_ips[0].ip_address.clone()),
        ("vm-2".to_string(), vms[1].fixed_ips[0].ip_address.clone()),
    ]);
    Nested {
        fake,
        target: PodTarget {
            project_id: "proj".into(),
            network_id: net.id,
            subnet_ids: vec![subnet.id],
            security_groups: vec!["sg-1".into()],
        },
        trunk_id: trunk.id,
        workers: wsubnet.id,
        nodes,
    }
}

impl Nested {
    fn pool(&self) -> Arc<VifPool> {
        let neutron: Arc<dyn Neutron> = Arc::new(self.fake.clone());
        let nodes: Arc<dyn NodeAddresses> = Arc::new(self.nodes.clone());
        VifPool::with_attachment(
            settings(&self.workers),
            neutron.clone(),
            Arc::new(Metrics::default()),
            TrunkSubports::new(neutron, nodes, vec![self.workers.clone()]),
        )
    }

    async fn acquire(&self, pool: &Arc<VifPool>, pod: &str, host: &str) -> Result<Option<Acquired>, Error> {
        let req = PortRequest {
            pod: PodKey::new("ns", pod),
            pod_uid: "uid",
            host,
            target: &self.target,
        };
        pool.acquire(&req, Duration::from_secs(5)).await
    }

    async fn subports(&self) -> Vec<(String, u16)> {
        let t = self.fake.get_trunk(&self.trunk_id).await.expect("trunk");
        t.sub_ports
            .iter()
            .map(|s| (s.port_id.clone(), s.segmentation_id))
            .collect()
    }

    /// The ports left on `network_id`.
    fn left_on(&self, network_id: &str) -> Vec<kuryr_openstack::Port> {
        self.fake
            .ports()
            .into_iter()
            .filter(|p| p.network_id == network_id)
            .collect()
    }

    fn writes(&self) -> u64 {
        [
            ops::PORT_BULK_CREATE,
            ops::PORT_UPDATE,
            ops::PORT_DELETE,
            ops::TRUNK_ADD_SUBPORTS,
            ops::TRUNK_REMOVE_SUBPORTS,
        ]
        .iter()
        .map(|op| self.fake.calls(op))
        .sum()
    }
}

#[tokio::test]
async fn a_bulk_becomes_subports_in_one_call_and_pods_get_vlan_vifs() {
    let n = cloud().await;
    let pool = n.pool();
    let bulks = n.fake.calls(ops::PORT_BULK_CREATE);
    let a = n
        .acquire(&pool, "a", "vm-1")
        .await
        .expect("acquire")
        .expect("port");
    assert_eq!(
        n.fake.calls(ops::PORT_BULK_CREATE),
        bulks + 1,
        "one bulk creation"
    );
    assert_eq!(
        n.fake.calls(ops::TRUNK_ADD_SUBPORTS),
        1,
        "one add_subports per bulk"
    );
    let subs = n.subports().await;
    assert_eq!(subs.len(), 3, "the whole batch is on the trunk");
    assert_distinct(&subs);
    for (id, _) in &subs {
        let p = n.fake.get_port(id).await.expect("port");
        assert!(p.binding_host_id.is_empty(), "Neutron binds subports itself");
        assert_eq!(p.device_owner, "trunk:subport");
    }
    assert_eq!(a.vif.kind, VifKind::VlanNested);
    let vlan = subs
        .iter()
        .find(|(p, _)| *p == a.port.id)
        .map(|(_, v)| i64::from(*v));
    assert_eq!(a.vif.vlan_id, vlan);
    // The hot path: no Neutron request at all.
    let before = n.writes() + n.fake.calls(ops::PORT_LIST) + n.fake.calls(ops::TRUNK_GET);
    let b = n
        .acquire(&pool, "b", "vm-1")
        .await
        .expect("acquire")
        .expect("port");
    assert_eq!(
        before,
        n.writes() + n.fake.calls(ops::PORT_LIST) + n.fake.calls(ops::TRUNK_GET)
    );
    assert_ne!(a.vif.vlan_id, b.vif.vlan_id);
}

#[tokio::test]
async fn ports_leave_the_trunk_before_they_are_deleted() {
    let n = cloud().await;
    let pool = n.pool();
    let a = n
        .acquire(&pool, "a", "vm-1")
        .await
        .expect("acquire")
        .expect("port");
    pool.release(&PodKey::new("ns", "a"), std::slice::from_ref(&a.port.id))
        .await
        .expect("release");
    let freed = pool.free_network(&n.target.network_id).await.expect("free");
    assert_eq!(freed, 3);
    assert!(n.subports().await.is_empty(), "{:?}", n.subports().await);
    assert_eq!(n.fake.calls(ops::TRUNK_REMOVE_SUBPORTS), 1, "one call per trunk");
    let left = n.left_on(&n.target.network_id);
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn recovery_reads_the_trunks_back_without_a_write() {
    let n = cloud().await;
    let first = n.pool();
    let a = n
        .acquire(&first, "a", "vm-1")
        .await
        .expect("acquire")
        .expect("port");
    let writes = n.writes();
    // A new controller: the pools from the KuryrPorts and the trunks.
    let pool = n.pool();
    let report = pool
        .recover(vec![InUseRef {
            port_id: a.port.id.clone(),
            pod: PodKey::new("ns", "a"),
            host: "vm-1".into(),
        }])
        .await
        .expect("recover");
    assert_eq!(report.in_use, std::slice::from_ref(&a.port.id));
    assert_eq!(report.available.len(), 2, "{report:?}");
    assert!(report.to_delete.is_empty(), "{report:?}");
    let b = n
        .acquire(&pool, "b", "vm-1")
        .await
        .expect("acquire")
        .expect("port");
    assert_eq!(n.writes(), writes, "no Neutron write");
    let subs = n.subports().await;
    let vlan = subs
        .iter()
        .find(|(p, _)| *p == b.port.id)
        .map(|(_, v)| i64::from(*v));
    assert_eq!(b.vif.vlan_id, vlan, "the VLAN ID read back from the trunk");
    // New subports after recovery never reuse an ID in use.
    for pod in ["c", "d", "e"] {
        n.acquire(&pool, pod, "vm-1")
            .await
            .expect("acquire")
            .expect("port");
    }
    let subs = n.subports().await;
    assert_distinct(&subs);
}

#[tokio::test]
async fn a_node_without_a_trunk_is_told_and_leaves_no_port() {
    let n = cloud().await;
    let pool = n.pool();
    let err = n.acquire(&pool, "a", "vm-2").await.expect_err("no trunk");
    let text = crate::error_chain(&err);
    assert!(text.contains("not the parent of a trunk"), "{text}");
    assert!(
        !err.is_retryable() || matches!(err, Error::PopulationBackoff { .. }),
        "{text}"
    );
    let left = n.left_on(&n.target.network_id);
    assert!(left.is_empty(), "the bulk was deleted: {left:?}");
}

#[tokio::test]
async fn a_conflict_rereads_the_trunk_and_a_failure_deletes_the_bulk() {
    let n = cloud().await;
    let pool = n.pool();
    n.fake.fail_next(
        ops::TRUNK_ADD_SUBPORTS,
        1,
        FaultKind::Conflict("DuplicateSubPort".into()),
    );
    let a = n
        .acquire(&pool, "a", "vm-1")
        .await
        .expect("acquire")
        .expect("port");
    assert_eq!(n.fake.calls(ops::TRUNK_ADD_SUBPORTS), 2, "tried again once");
    assert!(n.fake.calls(ops::TRUNK_GET) >= 1, "after reading the trunk");
    assert_eq!(a.vif.kind, VifKind::VlanNested);
    // Another network's pool whose add fails for good: its ports are deleted.
    let (net2, subnet2) = n.fake.add_network("pods-2", "10.1.0.0/24");
    let target2 = PodTarget {
        network_id: net2.id.clone(),
        subnet_ids: vec![subnet2.id],
        ..n.target.clone()
    };
    n.fake
        .fail_next(ops::TRUNK_ADD_SUBPORTS, 1, FaultKind::ServerError(500));
    let req = PortRequest {
        pod: PodKey::new("ns", "b"),
        pod_uid: "uid",
        host: "vm-1",
        target: &target2,
    };
    let err = pool
        .acquire(&req, Duration::from_secs(5))
        .await
        .expect_err("fails");
    assert!(
        crate::error_chain(&err).contains("add subports"),
        "{}",
        crate::error_chain(&err)
    );
    let left = n.left_on(&net2.id);
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn recovery_leaves_the_bare_metal_pools_ports_alone() {
    let n = cloud().await;
    // A port of a neutron-vif pool of the same cluster (a mixed cluster): bound to its node.
    let bare = n
        .fake
        .create_ports_bulk(&[PortCreate {
            network_id: n.target.network_id.clone(),
            subnet_ids: n.target.subnet_ids.clone(),
            device_owner: Some(kuryr_types::constants::DEVICE_OWNER.into()),
            binding_host_id: Some("node-1".into()),
            tags: vec!["kuryr".into(), super::tests::TAG.into()],
            ..PortCreate::default()
        }])
        .await
        .expect("bare port")
        .remove(0);
    let pool = n.pool();
    let report = pool.recover(Vec::new()).await.expect("recover");
    assert!(
        !report.to_delete.iter().any(|(id, _)| *id == bare.id) && !report.available.contains(&bare.id),
        "{report:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(n.fake.get_port(&bare.id).await.is_ok(), "not deleted");
}

/// A mixed cluster: `node-1` bare-metal-style (no label: `neutron-vif`), `vm-1` a VM node.
fn multi(n: &Nested) -> Arc<multi::Multi> {
    let neutron: Arc<dyn Neutron> = Arc::new(n.fake.clone());
    let bare: Arc<dyn PortSource> = Arc::new(source::Pooled(VifPool::new(
        super::tests::settings(PoolMode::Neutron),
        neutron,
        Arc::new(Metrics::default()),
    )));
    let nested: Arc<dyn PortSource> = Arc::new(source::Pooled(n.pool()));
    let labels: HashMap<String, String> = HashMap::from([("vm-1".into(), "nested-vlan".into())]);
    multi::Multi::new(
        "neutron-vif",
        [
            ("neutron-vif".to_string(), bare),
            ("nested-vlan".to_string(), nested),
        ]
        .into_iter()
        .collect(),
        Arc::new(labels),
        Duration::from_secs(3600),
    )
}

#[tokio::test]
async fn the_multi_pool_routes_each_node_to_its_drivers_pools() {
    let n = cloud().await;
    let m = multi(&n);
    let req = |pod: &'static str, host: &'static str| PortRequest {
        pod: PodKey::new("ns", pod),
        pod_uid: "uid",
        host,
        target: &n.target,
    };
    let wait = Duration::from_secs(5);
    let bare = m
        .acquire(&req("a", "node-1"), wait)
        .await
        .expect("a")
        .expect("port");
    let vm = m
        .acquire(&req("b", "vm-1"), wait)
        .await
        .expect("b")
        .expect("port");
    assert_eq!(bare.vif.kind, VifKind::OpenVSwitch);
    assert_eq!(bare.port.binding_host_id, "node-1");
    assert_eq!(vm.vif.kind, VifKind::VlanNested);
    assert!(n.subports().await.iter().any(|(p, _)| *p == vm.port.id));
    // A node whose label names an unmapped driver is told, not served by another driver.
    let labels: HashMap<String, String> = HashMap::from([("x".into(), "nested-macvlan".into())]);
    let odd = multi::Multi::new(
        "neutron-vif",
        BTreeMap::from([(
            "neutron-vif".to_string(),
            Arc::new(source::Pooled(n.pool())) as Arc<dyn PortSource>,
        )]),
        Arc::new(labels),
        Duration::from_secs(1),
    );
    let err = odd.acquire(&req("c", "x"), wait).await.expect_err("unmapped");
    assert!(err.to_string().contains("nested-macvlan"), "{err}");
    // Releases go back to the pools that handed the ports out.
    m.release(&PodKey::new("ns", "a"), std::slice::from_ref(&bare.port.id))
        .await
        .expect("release a");
    m.release(&PodKey::new("ns", "b"), std::slice::from_ref(&vm.port.id))
        .await
        .expect("release b");
    assert!(
        n.subports().await.iter().any(|(p, _)| *p == vm.port.id),
        "still pooled on the trunk"
    );
    // A new controller: each pool recovers its own ports, neither deletes the other's.
    let writes = n.writes();
    let again = multi(&n);
    let report = again.recover(Vec::new()).await.expect("recover");
    assert!(report.to_delete.is_empty(), "{report:?}");
    assert!(
        report.available.contains(&bare.port.id) || report.cooling.contains(&bare.port.id),
        "{report:?}"
    );
    assert!(
        report.available.contains(&vm.port.id) || report.cooling.contains(&vm.port.id),
        "{report:?}"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(n.writes(), writes, "recovery wrote to Neutron");
}

#[tokio::test]
async fn a_trunk_recreated_under_the_node_is_found_again() {
    let n = cloud().await;
    let pool = n.pool();
    n.acquire(&pool, "a", "vm-1")
        .await
        .expect("acquire")
        .expect("port");
    // The operator replaces the VM's trunk (its subports go with the old one).
    let old = n.fake.get_trunk(&n.trunk_id).await.expect("trunk");
    let ids: Vec<String> = old.sub_ports.iter().map(|s| s.port_id.clone()).collect();
    n.fake.remove_subports(&n.trunk_id, &ids).await.expect("remove");
    n.fake.delete_trunk(&n.trunk_id).await.expect("delete");
    let new = n
        .fake
        .create_trunk(&TrunkCreate {
            port_id: old.port_id.clone(),
            ..TrunkCreate::default()
        })
        .await
        .expect("new trunk");
    // Another network's pool needs ports: the first try hits the old trunk (gone) and fails...
    let (net2, subnet2) = n.fake.add_network("pods-2", "10.1.0.0/24");
    let target2 = PodTarget {
        network_id: net2.id.clone(),
        subnet_ids: vec![subnet2.id],
        ..n.target.clone()
    };
    let _ = pool.populate("vm-1", &target2, Some(2)).await;
    // ...and the next one, after the pool's back-off, finds the new trunk.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut created = 0;
    while created == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        created = pool.populate("vm-1", &target2, Some(2)).await.unwrap_or(0);
    }
    assert_eq!(created, 2);
    let t = n.fake.get_trunk(&new.id).await.expect("trunk");
    assert_eq!(t.sub_ports.len(), 2, "{t:?}");
}
