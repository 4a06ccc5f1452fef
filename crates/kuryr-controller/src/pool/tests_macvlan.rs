//! Unit tests of nested-macvlan (the noop driver with [`AddressPairs`]) on the in-memory
//! FakeNeutron: a pod's port is created unbound, naming its VM's port, its pairs allowed on the
//! VM's port; concurrent pods lose no pair; a revision conflict is read again; a release takes
//! exactly its pairs away; failures leave no port behind; other drivers' pools leave its ports
//! alone.

use std::{collections::HashMap, sync::Arc, time::Duration};

use kuryr_core::pool::{InUseRef, PodKey};
use kuryr_openstack::{
    Neutron, PortCreate, PortUpdate,
    fake::{FakeNeutron, FaultKind},
    ops,
};
use kuryr_types::vif::VifKind;

use super::{
    attach::{
        Attachment, Bound,
        macvlan::AddressPairs,
        nested::{NodeAddresses, TrunkSubports},
    },
    direct::Direct,
    source::Pooled,
    source::PortSource,
    *,
};
use crate::drivers::PodTarget;

struct Cloud {
    fake: FakeNeutron,
    target: PodTarget,
    vm_port: String,
    workers: String,
    nodes: HashMap<String, String>,
}

/// A workers' network holding the VM port of `vm-1` and, as upstream's macvlan needs, the
/// pods' addresses too (the pods' traffic leaves the VM untagged, on the VM's network).
async fn cloud() -> Cloud {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("workers", "10.20.0.0/24");
    let vm = fake
        .create_ports_bulk(&[PortCreate {
            network_id: net.id.clone(),
            subnet_ids: vec![subnet.id.clone()],
            name: Some("vm-1".into()),
            device_owner: Some("compute:nova".into()),
            binding_host_id: Some("hypervisor-1".into()),
            ..PortCreate::default()
        }])
        .await
        .expect("VM port")
        .remove(0);
    // The operator's own pair: never touched.
    fake.update_port(
        &vm.id,
        &PortUpdate {
            allowed_address_pairs: Some(vec![kuryr_core::pairs::AddressPair::new(
                "192.168.7.0/24",
                &vm.mac_address,
            )]),
            ..PortUpdate::default()
        },
    )
    .await
    .expect("operator's pair");
    let nodes = HashMap::from([("vm-1".to_string(), vm.fixed_ips[0].ip_address.clone())]);
    Cloud {
        fake,
        target: PodTarget {
            project_id: "proj".into(),
            network_id: net.id,
            subnet_ids: vec![subnet.id.clone()],
            security_groups: vec!["sg-1".into()],
        },
        vm_port: vm.id,
        workers: subnet.id,
        nodes,
    }
}

impl Cloud {
    fn attach(&self) -> Arc<AddressPairs> {
        let neutron: Arc<dyn Neutron> = Arc::new(self.fake.clone());
        let nodes: Arc<dyn NodeAddresses> = Arc::new(self.nodes.clone());
        AddressPairs::new(neutron, nodes, vec![self.workers.clone()], 3)
    }

    fn direct(&self) -> Arc<Direct> {
        let settings = PoolSettings {
            nested: Some(vec![self.workers.clone()]),
            vif_driver: "nested-macvlan".into(),
            ..super::tests::settings(PoolMode::Noop)
        };
        Direct::with_attachment(settings, Arc::new(self.fake.clone()), self.attach())
    }

    async fn acquire(&self, d: &Direct, pod: &str, host: &str) -> Result<Acquired, Error> {
        let req = PortRequest {
            pod: PodKey::new("ns", pod),
            pod_uid: "uid",
            host,
            target: &self.target,
        };
        Ok(d.acquire(&req, Duration::from_secs(1)).await?.expect("a port"))
    }

    /// The VM port's pairs, `(ip, mac)`.
    fn pairs(&self) -> Vec<(String, String)> {
        let p = self.fake.port(&self.vm_port).expect("VM port");
        let mut v: Vec<(String, String)> = kuryr_core::pairs::pairs_of(&p)
            .expect("pairs")
            .into_iter()
            .map(|a| (a.ip_address, a.mac_address))
            .collect();
        v.sort();
        v
    }

    /// The pair of a pod port as the VM port carries it (a host prefix: see kuryr_core::pairs).
    fn pod_pair(&self, port_id: &str) -> (String, String) {
        let p = self.fake.port(port_id).expect("pod port");
        (format!("{}/32", p.fixed_ips[0].ip_address), p.mac_address)
    }
}

#[tokio::test]
async fn pods_ports_are_unbound_name_their_vm_and_are_allowed_on_its_port() {
    let c = cloud().await;
    let d = c.direct();
    let names: Vec<String> = (0..4).map(|i| format!("p{i}")).collect();
    let got = futures::future::join_all(names.iter().map(|n| c.acquire(&d, n, "vm-1"))).await;
    let got: Vec<Acquired> = got.into_iter().map(|r| r.expect("acquire")).collect();
    for a in &got {
        let port = c.fake.port(&a.port.id).expect("in Neutron");
        assert!(port.binding_host_id.is_empty(), "never bound");
        assert_eq!(port.device_id, c.vm_port, "names its VM's port");
        assert_eq!(
            a.port.extra.get("port_security_enabled"),
            Some(&serde_json::json!(false)),
            "no port security: over ML2/OVN its logical port would take the pod's frames"
        );
        assert!(a.port.security_groups.is_empty());
        assert_eq!(a.vif.kind, VifKind::MacvlanNested);
        assert_eq!(a.vif.active, Some(true), "nothing to wait for in Neutron");
        assert_eq!(a.vif.address.as_deref(), Some(a.port.mac_address.as_str()));
    }
    let pairs = c.pairs();
    assert_eq!(pairs.len(), 5, "4 pods and the operator's: {pairs:?}");
    for a in &got {
        assert!(pairs.contains(&c.pod_pair(&a.port.id)), "{pairs:?}");
    }
    assert!(
        c.fake.calls(ops::PORT_UPDATE) <= 5,
        "one update per change at most"
    );

    // A retry of the same pod gets the same port, with no new write.
    let updates = c.fake.calls(ops::PORT_UPDATE);
    let again = c.acquire(&d, "p0", "vm-1").await.expect("again");
    assert_eq!(again.port.id, got[0].port.id);
    assert_eq!(c.fake.calls(ops::PORT_UPDATE), updates);

    // Release: exactly its pair leaves, then its port.
    d.committed(&PodKey::new("ns", "p0"));
    d.release(&PodKey::new("ns", "p0"), std::slice::from_ref(&got[0].port.id))
        .await
        .expect("release");
    assert!(c.fake.port(&got[0].port.id).is_none(), "port deleted");
    let pairs = c.pairs();
    assert_eq!(pairs.len(), 4, "{pairs:?}");
    assert!(
        pairs.iter().any(|(ip, _)| ip == "192.168.7.0/24"),
        "the operator's stays"
    );
}

#[tokio::test]
async fn a_revision_conflict_is_read_again_and_a_lost_race_loses_nothing() {
    let c = cloud().await;
    let d = c.direct();
    c.fake.fail_next(
        ops::PORT_UPDATE,
        2,
        FaultKind::Conflict("RevisionNumberConstraintFailed".into()),
    );
    let a = c.acquire(&d, "p", "vm-1").await.expect("the third try wins");
    assert!(c.pairs().contains(&c.pod_pair(&a.port.id)));

    // Three conflicts in a row: the pod gets a retryable error and no port is left.
    let before = c.fake.ports().len();
    c.fake.fail_next(
        ops::PORT_UPDATE,
        3,
        FaultKind::Conflict("RevisionNumberConstraintFailed".into()),
    );
    let e = c.acquire(&d, "q", "vm-1").await.expect_err("gives up");
    assert!(e.is_retryable(), "{e}");
    assert!(e.to_string().contains(&c.vm_port), "{e}");
    assert_eq!(c.fake.ports().len(), before, "the unattached port was deleted");
}

#[tokio::test]
async fn a_full_vm_port_says_which_neutron_limit_to_raise() {
    let c = cloud().await;
    let d = c.direct();
    // The operator's pair plus 9 pods fill Neutron's default limit of 10.
    for i in 0..9 {
        c.acquire(&d, &format!("p{i}"), "vm-1").await.expect("fits");
    }
    let before = c.fake.ports().len();
    let e = c.acquire(&d, "p9", "vm-1").await.expect_err("11th pair");
    let msg = crate::error_chain(&e);
    assert!(msg.contains("max_allowed_address_pair"), "{msg}");
    assert!(!e.is_retryable(), "{msg}");
    assert_eq!(c.fake.ports().len(), before, "no port left behind");
}

#[tokio::test]
async fn a_node_without_a_vm_port_is_refused_before_any_port_is_created() {
    let c = cloud().await;
    let d = c.direct();
    let mut nodes = c.nodes.clone();
    nodes.insert("bare".into(), "10.99.0.1".into());
    let neutron: Arc<dyn Neutron> = Arc::new(c.fake.clone());
    let attach = AddressPairs::new(neutron.clone(), Arc::new(nodes), vec![c.workers.clone()], 3);
    let d2 = Direct::with_attachment(d.settings().clone(), neutron, attach);
    let before = c.fake.ports().len();
    let e = c.acquire(&d2, "x", "bare").await.expect_err("no VM port");
    assert!(e.to_string().contains("nested mode: node bare"), "{e}");
    assert_eq!(c.fake.ports().len(), before);
}

#[tokio::test]
async fn after_a_restart_a_release_finds_the_pairs_again_and_the_janitor_cleans_orphans() {
    let c = cloud().await;
    let d = c.direct();
    let a = c.acquire(&d, "p", "vm-1").await.expect("acquire");
    let orphan = c.acquire(&d, "gone", "vm-1").await.expect("acquire");
    d.committed(&PodKey::new("ns", "p"));
    d.committed(&PodKey::new("ns", "gone"));
    // A new controller: nothing in memory.
    let d = c.direct();
    let deleted = d
        .janitor_pass(&std::collections::HashSet::from([a.port.id.clone()]))
        .await
        .expect("janitor");
    assert_eq!(deleted, vec![orphan.port.id.clone()]);
    assert_eq!(
        c.pairs().len(),
        2,
        "the owned pod's and the operator's: {:?}",
        c.pairs()
    );
    let pair = c.pod_pair(&a.port.id);
    d.release(&PodKey::new("ns", "p"), std::slice::from_ref(&a.port.id))
        .await
        .expect("release");
    let pairs = c.pairs();
    assert!(!pairs.contains(&pair), "{pairs:?}");
    assert_eq!(pairs.len(), 1, "the operator's only: {pairs:?}");
}

#[tokio::test]
async fn other_drivers_pools_leave_macvlan_ports_alone() {
    let c = cloud().await;
    let d = c.direct();
    let a = c.acquire(&d, "p", "vm-1").await.expect("acquire");
    let port = c.fake.port(&a.port.id).expect("port");
    assert!(Bound.pool_view(port.clone()).is_none(), "not a bound pool's");
    let neutron: Arc<dyn Neutron> = Arc::new(c.fake.clone());
    let vlan = TrunkSubports::new(neutron, Arc::new(c.nodes.clone()), vec![c.workers.clone()]);
    assert!(vlan.pool_view(port.clone()).is_none(), "not a nested-vlan pool's");
    assert!(c.attach().pool_view(port).is_some());
}

#[tokio::test]
async fn a_macvlan_pod_is_placed_on_its_vms_subnet_whatever_the_subnet_driver_says() {
    let mut c = cloud().await;
    let (pods, pods_subnet) = c.fake.add_network("pods", "10.0.0.0/24");
    c.target.network_id = pods.id;
    c.target.subnet_ids = vec![pods_subnet.id];
    let d = c.direct();
    let a = c.acquire(&d, "p", "vm-1").await.expect("acquire");
    assert_eq!(a.port.fixed_ips[0].subnet_id, c.workers, "on the VM's subnet");
    assert!(a.port.fixed_ips[0].ip_address.starts_with("10.20.0."));
    assert!(c.pairs().contains(&c.pod_pair(&a.port.id)));
}

impl Cloud {
    /// The pooled variant (`vif_pool_driver = nested`, a kuryr-rs addition).
    fn pool(&self) -> Arc<VifPool> {
        let settings = PoolSettings {
            nested: Some(vec![self.workers.clone()]),
            vif_driver: "nested-macvlan".into(),
            ..super::tests::settings(PoolMode::Neutron)
        };
        VifPool::with_attachment(
            settings,
            Arc::new(self.fake.clone()),
            Arc::new(crate::metrics::Metrics::default()),
            self.attach(),
        )
    }
}

#[tokio::test]
async fn pooled_macvlan_ports_are_allowed_per_bulk_and_taken_without_a_write() {
    let c = cloud().await;
    let pool = Arc::new(Pooled(c.pool()));
    let (bulks, updates) = (
        c.fake.calls(ops::PORT_BULK_CREATE),
        c.fake.calls(ops::PORT_UPDATE),
    );
    let a = c.acquire_from(&pool, "a").await;
    assert_eq!(c.fake.calls(ops::PORT_BULK_CREATE), bulks + 1, "one bulk");
    assert_eq!(
        c.fake.calls(ops::PORT_UPDATE),
        updates + 1,
        "one pair update per bulk"
    );
    assert_eq!(
        c.pairs().len(),
        4,
        "3 pooled ports and the operator's: {:?}",
        c.pairs()
    );
    assert_eq!(a.vif.kind, VifKind::MacvlanNested);
    assert_eq!(a.vif.active, Some(true), "nothing to wait for");
    let writes = c.fake.calls(ops::PORT_UPDATE) + c.fake.calls(ops::PORT_BULK_CREATE);
    let b = c.acquire_from(&pool, "b").await;
    assert_eq!(
        c.fake.calls(ops::PORT_UPDATE) + c.fake.calls(ops::PORT_BULK_CREATE),
        writes,
        "the hot path writes nothing"
    );
    assert_ne!(a.port.id, b.port.id);
    // Released: back to the pool, its pair stays.
    pool.release(&PodKey::new("ns", "a"), std::slice::from_ref(&a.port.id))
        .await
        .expect("release");
    assert!(c.fake.port(&a.port.id).is_some());
    assert!(c.pairs().contains(&c.pod_pair(&a.port.id)));

    // A new controller finds the pooled ports on their VM's node again, without a write.
    let writes = c.fake.calls(ops::PORT_UPDATE) + c.fake.calls(ops::PORT_BULK_CREATE);
    let pool2 = Arc::new(Pooled(c.pool()));
    let refs = vec![InUseRef {
        pod: PodKey::new("ns", "b"),
        host: "vm-1".into(),
        port_id: b.port.id.clone(),
    }];
    let report = pool2.recover(refs).await.expect("recover");
    assert_eq!(report.in_use.len(), 1, "{report:?}");
    assert_eq!(report.available.len(), 2, "{report:?}");
    assert!(report.to_delete.is_empty(), "{report:?}");
    let again = c.acquire_from(&pool2, "c").await;
    assert_ne!(again.port.id, b.port.id);
    assert_eq!(
        c.fake.calls(ops::PORT_UPDATE) + c.fake.calls(ops::PORT_BULK_CREATE),
        writes,
        "recovered and served without a write"
    );
}

impl Cloud {
    async fn acquire_from(&self, source: &Pooled, pod: &str) -> Acquired {
        let req = PortRequest {
            pod: PodKey::new("ns", pod),
            pod_uid: "uid",
            host: "vm-1",
            target: &self.target,
        };
        source
            .acquire(&req, Duration::from_secs(5))
            .await
            .expect("acquire")
            .expect("a port")
    }
}

#[tokio::test]
async fn pods_going_away_still_make_room_on_a_full_vm_port() {
    let c = cloud().await;
    let attach = c.attach();
    let create = PortCreate {
        network_id: c.target.network_id.clone(),
        subnet_ids: c.target.subnet_ids.clone(),
        ..PortCreate::default()
    };
    let mut ports = c.fake.create_ports_bulk(&vec![create; 12]).await.expect("ports");
    // The operator's pair and 9 pods: Neutron's limit of 10.
    attach.attach("vm-1", &mut ports[..9]).await.expect("9 fit");
    assert_eq!(c.pairs().len(), 10);
    let ids: Vec<String> = ports.iter().map(|p| p.id.clone()).collect();
    attach
        .refresh()
        .await
        .expect("the VM ports read (as the janitor does)");
    // Slow Neutron: while pod 1's removal is written, pod 0's removal and three new pods queue
    // behind it and meet in one batch, which does not fit (9 - 1 + 3 > 10).
    c.fake.set_latency(Duration::from_millis(40));
    let (mut a, mut b, mut d) = (
        vec![ports[9].clone()],
        vec![ports[10].clone()],
        vec![ports[11].clone()],
    );
    let first = attach.detach(std::slice::from_ref(&ids[1]));
    let later = async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        tokio::join!(
            attach.detach(std::slice::from_ref(&ids[0])),
            attach.attach("vm-1", &mut a),
            attach.attach("vm-1", &mut b),
            attach.attach("vm-1", &mut d),
        )
    };
    let (r1, (r0, ra, rb, rd)) = tokio::join!(first, later);
    r1.expect("pod 1 went");
    r0.expect("pod 0 went too: its removal was written without the adds");
    for r in [ra, rb, rd] {
        let e = r.expect_err("the new pods did not fit together");
        assert!(crate::error_chain(&e).contains("max_allowed_address_pair"), "{e}");
    }
    let pairs = c.pairs();
    assert_eq!(pairs.len(), 8, "the operator's and 7 pods: {pairs:?}");
    assert!(!pairs.contains(&c.pod_pair(&ids[0])) && !pairs.contains(&c.pod_pair(&ids[1])));
}
