//! Nested mode's controller side against the REAL sandbox cloud (issue 16): with
//! `pod_vif_driver = nested-vlan` and `vif_pool_driver = nested`, pods of a node that is a VM
//! (a Node whose InternalIP is a trunk parent's address on `[pod_vif_nested]
//! worker_nodes_subnets`) get VLAN subports of that trunk from warm subport pools: one bulk
//! creation and one `add_subports` per batch, `VIFVlanNested` with the subport's VLAN ID in
//! `status.vifs`; a restarted controller reads the pools back from the trunk and serves new pods
//! from them without a new port; released ports stay pooled on the trunk; a burst of 50 pods
//! gets 50 distinct subports whose VLAN IDs never collide; a namespace's KuryrNetwork has its
//! pool pre-populated on the VM as subports on its network. Everything the test made
//! (subports, ports, trunk, network) is removed at the end, also on failure.

mod common;

use std::{
    collections::{BTreeMap, HashSet},
    time::Duration,
};

use common::{openstack::*, *};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use kuryr_openstack::{
    NetworkCreate, Neutron, OpenStackNeutron, PortCreate, PortFilter, SubnetCreate, TrunkCreate,
};
use kuryr_types::{KuryrNetwork, KuryrPort, vif::VifKind};
use serde_json::json;

const NS: &str = "nested-a";
const NODE: &str = "vm-nested-1";

/// What the test made in Neutron, for the cleanup.
#[derive(Default)]
struct Made {
    network: Option<String>,
    subnet: Option<String>,
    /// A namespace's network (the KuryrNetwork population phase): network, subnet.
    ns_network: Option<(String, String)>,
    parent: Option<String>,
    trunk: Option<String>,
}

/// The trunk's subports, port → VLAN ID.
async fn subports(n: &OpenStackNeutron, trunk: &str) -> BTreeMap<String, u16> {
    n.get_trunk(trunk)
        .await
        .expect("trunk")
        .sub_ports
        .into_iter()
        .map(|s| (s.port_id, s.segmentation_id))
        .collect()
}

/// The default VIF of every KuryrPort of [`NS`] that has one, by pod name.
async fn vifs(client: &Client) -> BTreeMap<String, kuryr_types::vif::Vif> {
    let api: Api<KuryrPort> = Api::namespaced(client.clone(), NS);
    let mut out = BTreeMap::new();
    for kp in api.list(&ListParams::default()).await.expect("kuryrports").items {
        if let Some((_, v)) = kp.status.as_ref().and_then(|s| s.default_vif()) {
            out.insert(kp.name_any(), v.clone());
        }
    }
    out
}

async fn create_pods(client: &Client, names: &[&str]) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for name in names {
        pods.create(&PostParams::default(), &pod_on(NS, name, NODE))
            .await
            .expect("create pod");
    }
}

async fn wait_vifs(client: &Client, names: &[&str]) -> BTreeMap<String, kuryr_types::vif::Vif> {
    wait_for("VIFs of the nested pods", Duration::from_secs(180), async || {
        let v = vifs(client).await;
        names.iter().all(|n| v.contains_key(*n)).then_some(v)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nested_pods_get_vlan_subports_from_warm_subport_pools() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = Topology::load();
    let tag = unique_tag("nested");
    let dir = tempfile::tempdir().expect("tempdir");
    // The worker VMs' network comes first: its subnet goes into kuryr.conf.
    let base = load_config(&[std::path::PathBuf::from(topo.get("KURYR_CONF"))]);
    let (neutron, _) = neutron(&base).await;
    let made = std::sync::Mutex::new(Made::default());
    let body = async {
        let net = neutron
            .create_network(&NetworkCreate {
                name: format!("nested-workers-{}", std::process::id()),
                tags: vec![tag.clone()],
                ..NetworkCreate::default()
            })
            .await
            .expect("workers' network");
        made.lock().expect("lock").network = Some(net.id.clone());
        let subnet = neutron
            .create_subnet(&SubnetCreate {
                network_id: net.id.clone(),
                name: "nested-workers".into(),
                cidr: Some("10.29.0.0/24".into()),
                ip_version: Some(4),
                enable_dhcp: Some(false),
                tags: vec![tag.clone()],
                ..SubnetCreate::default()
            })
            .await
            .expect("workers' subnet");
        made.lock().expect("lock").subnet = Some(subnet.id.clone());
        // The VM's port, parent of its trunk (as Nova and the operator set a worker VM up).
        let parent = neutron
            .create_ports_bulk(&[PortCreate {
                network_id: net.id.clone(),
                subnet_ids: vec![subnet.id.clone()],
                name: Some(NODE.into()),
                tags: vec![tag.clone()],
                ..PortCreate::default()
            }])
            .await
            .expect("the VM's port")
            .remove(0);
        made.lock().expect("lock").parent = Some(parent.id.clone());
        let trunk = neutron
            .create_trunk(&TrunkCreate {
                port_id: parent.id.clone(),
                name: Some(format!("{NODE}-trunk")),
                ..TrunkCreate::default()
            })
            .await
            .expect("trunk");
        made.lock().expect("lock").trunk = Some(trunk.id.clone());
        let node_ip = parent.fixed_ips[0].ip_address.clone();

        let conf = dir.path().join("test.conf");
        let sock = dir.path().join("pool-manager.sock");
        std::fs::write(
            &conf,
            format!(
                "[kubernetes]\nenabled_handlers = vif,kuryrport,kuryrnetwork_population\npod_vif_driver = nested-vlan\n\
                 vif_pool_driver = nested\nwatch_reconcile_period = 0\nenable_manager = true\n\
                 [pool_manager]\nsock_file = {}\n\
                 [neutron_defaults]\ncluster_tag = {tag}\n[pod_vif_nested]\nworker_nodes_subnets = {}\n\
                 [vif_pool]\nports_pool_min = 1\nports_pool_batch = 5\nports_pool_cooldown = 1\n\
                 ports_pool_update_frequency = 1\n[neutron]\ntimeout = 120\n",
                sock.display(),
                subnet.id
            ),
        )
        .expect("test.conf");
        let config = load_config(&[std::path::PathBuf::from(topo.get("KURYR_CONF")), conf]);

        let env = sandbox().await;
        install_crds_and_ns(&env.client).await;
        create_namespace(&env.client, NS).await;
        ready_node(&env.client, NODE).await;
        let status = json!({"status": {"addresses": [{"type": "InternalIP", "address": node_ip}],
                           "conditions": [{"type": "Ready", "status": "True"}]}});
        Api::<Node>::all(env.client.clone())
            .patch_status(
                NODE,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&status),
            )
            .await
            .expect("node address");

        // (a) Three pods on the VM node: subports of its trunk, VLAN VIFs.
        let ctrl = InProcess::start(&env.client, config.clone()).await;
        create_pods(&env.client, &["a", "b", "c"]).await;
        let got = wait_vifs(&env.client, &["a", "b", "c"]).await;
        let subs = subports(&neutron, &trunk.id).await;
        assert_eq!(subs.len(), 5, "one batch of subports: {subs:?}");
        let vlans: HashSet<u16> = subs.values().copied().collect();
        assert_eq!(vlans.len(), subs.len(), "VLAN IDs collide: {subs:?}");
        for (pod, vif) in &got {
            assert_eq!(vif.kind, VifKind::VlanNested, "{pod}: {vif:?}");
            let id = vif.id.clone().expect("port id");
            let vlan = subs
                .get(&id)
                .unwrap_or_else(|| panic!("{pod}: {id} is not a subport"));
            assert_eq!(vif.vlan_id, Some(i64::from(*vlan)), "{pod}");
            assert!(vif.bridge_name.is_none(), "no bridge inside a VM");
        }
        let ports = neutron
            .list_ports(&PortFilter::ids(subs.keys().cloned()))
            .await
            .expect("ports");
        for p in &ports {
            assert_eq!(p.device_owner, "trunk:subport", "{}", p.id);
            assert_eq!(p.network_id, topo.get("POD_NETWORK_ID"));
            assert!(p.tags.contains(&tag), "{}: {:?}", p.id, p.tags);
        }
        println!("3 nested pods: subports {subs:?}");

        // The pool manager, with upstream's body (a trunk named by its node's IP): 3 more
        // subports on the VM's trunk, pooled; listPools shows the node's pool.
        let manager = kuryr_controller::cli::start_pool_manager(&ctrl.ctx)
            .expect("pool manager")
            .expect("served");
        let (code, body) = unix_post(
            &sock,
            "/populatePool",
            &format!(r#"{{"trunks": ["{node_ip}"], "num_ports": 3}}"#),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        let more = subports(&neutron, &trunk.id).await;
        assert_eq!(more.len(), subs.len() + 3, "{body}: {more:?}");
        let (code, body) = unix_get(&sock, "/listPools").await;
        assert_eq!(code, 200, "{body}");
        assert!(body.contains(NODE), "{body}");
        // The VM's own port (tagged here for the cleanup) is no pool's.
        assert!(!body.contains("\"host\":\"\""), "{body}");
        println!("pool manager: {body}");
        manager.abort();
        let subs = more;
        drop(ctrl);

        // (b) A new controller: the pools come back from the trunk; new pods take pooled
        // subports, no port is created.
        let ctrl = InProcess::start(&env.client, config.clone()).await;
        create_pods(&env.client, &["d", "e"]).await;
        let got2 = wait_vifs(&env.client, &["d", "e"]).await;
        for pod in ["d", "e"] {
            let vif = &got2[pod];
            let id = vif.id.clone().expect("port id");
            assert_eq!(
                vif.vlan_id,
                subs.get(&id).map(|v| i64::from(*v)),
                "{pod}: a recovered subport with its VLAN ID"
            );
        }
        let tagged = neutron
            .list_ports(&PortFilter::tagged([tag.as_str()]))
            .await
            .expect("ports");
        let pod_ports = tagged
            .iter()
            .filter(|p| p.network_id == topo.get("POD_NETWORK_ID"))
            .count();
        assert!(
            pod_ports <= 5 + 5,
            "at most one more batch after the restart (the pool refills below its minimum): {pod_ports}"
        );

        // (c) Pods deleted: their subports go back to the pool, still on the trunk.
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
        for name in ["a", "b", "c", "d", "e"] {
            let _ = pods.delete(name, &DeleteParams::default()).await;
        }
        wait_for("KuryrPorts released", Duration::from_secs(120), async || {
            vifs(&env.client).await.is_empty().then_some(())
        })
        .await;
        let after = subports(&neutron, &trunk.id).await;
        for id in subs.keys() {
            assert!(after.contains_key(id), "{id} left the trunk: {after:?}");
        }

        // (d) A burst of 50 pods at once on the VM: the pool has a few subports, the rest come
        // from bulks sized to the waiting pods, each added to the trunk with VLAN IDs reserved
        // while others are in flight. Every pod gets its own subport, and no two subports of
        // the trunk share a VLAN ID (Neutron refuses a duplicate; a reservation bug would show
        // as a failed creation, a pod without a VIF or a VIF whose VLAN is not its port's).
        let burst: Vec<String> = (0..50).map(|i| format!("burst-{i:02}")).collect();
        let names: Vec<&str> = burst.iter().map(String::as_str).collect();
        let pods_api: Api<Pod> = Api::namespaced(env.client.clone(), NS);
        futures::future::join_all(names.iter().map(|n| {
            let pods_api = pods_api.clone();
            async move {
                pods_api
                    .create(&PostParams::default(), &pod_on(NS, n, NODE))
                    .await
                    .expect("create pod")
            }
        }))
        .await;
        let got = wait_vifs(&env.client, &names).await;
        let on_trunk = subports(&neutron, &trunk.id).await;
        let vlans: HashSet<u16> = on_trunk.values().copied().collect();
        assert_eq!(vlans.len(), on_trunk.len(), "VLAN IDs collide: {on_trunk:?}");
        let mut ports = HashSet::new();
        for n in &names {
            let vif = &got[*n];
            assert_eq!(vif.kind, VifKind::VlanNested, "{n}: {vif:?}");
            let id = vif.id.clone().expect("port id");
            assert!(ports.insert(id.clone()), "{n}: port {id} given to two pods");
            let vlan = on_trunk
                .get(&id)
                .unwrap_or_else(|| panic!("{n}: {id} is not a subport of the trunk"));
            assert_eq!(vif.vlan_id, Some(i64::from(*vlan)), "{n}");
        }
        println!(
            "50-pod burst: 50 distinct subports, {} subports on the trunk with distinct VLAN IDs",
            on_trunk.len()
        );
        for n in &names {
            let _ = pods_api.delete(n, &DeleteParams::default()).await;
        }
        wait_for(
            "burst KuryrPorts released",
            Duration::from_secs(180),
            async || vifs(&env.client).await.is_empty().then_some(()),
        )
        .await;

        // (e) KuryrNetwork population for nested pools: a namespace's own network (as the
        // namespace subnet driver makes it) is pre-populated on the VM node too, as subports of
        // its trunk on that network.
        let ns_net = neutron
            .create_network(&NetworkCreate {
                name: format!("nested-ns-{}", std::process::id()),
                tags: vec![tag.clone()],
                ..NetworkCreate::default()
            })
            .await
            .expect("namespace network");
        let ns_subnet = neutron
            .create_subnet(&SubnetCreate {
                network_id: ns_net.id.clone(),
                name: "nested-ns".into(),
                cidr: Some("10.31.0.0/24".into()),
                ip_version: Some(4),
                enable_dhcp: Some(false),
                tags: vec![tag.clone()],
                ..SubnetCreate::default()
            })
            .await
            .expect("namespace subnet");
        made.lock().expect("lock").ns_network = Some((ns_net.id.clone(), ns_subnet.id.clone()));
        let kn: KuryrNetwork = serde_json::from_value(json!({
            "apiVersion": "openstack.org/v1", "kind": "KuryrNetwork",
            "metadata": {"name": NS, "namespace": NS},
            "spec": {"nsName": NS, "projectId": topo.get("KURYR_SANDBOX_PROJECT_ID"), "nsLabels": {}},
            "status": {"netId": ns_net.id, "subnetId": ns_subnet.id, "subnetCIDR": "10.31.0.0/24",
                       "routerId": topo.get("ROUTER_ID"), "populated": false},
        }))
        .expect("KuryrNetwork");
        let kns: Api<KuryrNetwork> = Api::namespaced(env.client.clone(), NS);
        kns.create(&PostParams::default(), &kn)
            .await
            .expect("create KuryrNetwork");
        let populated = wait_for(
            "the namespace network's pool on the VM",
            Duration::from_secs(120),
            async || {
                let marked = kns
                    .get(NS)
                    .await
                    .ok()
                    .and_then(|k| k.status.and_then(|s| s.populated))
                    == Some(true);
                let on_trunk = subports(&neutron, &trunk.id).await;
                let ports = neutron
                    .list_ports(&PortFilter {
                        network_id: Some(ns_net.id.clone()),
                        tags: vec![tag.clone()],
                        ..Default::default()
                    })
                    .await
                    .expect("namespace network ports");
                let subs: Vec<String> = ports
                    .iter()
                    .filter(|p| on_trunk.contains_key(&p.id))
                    .map(|p| p.id.clone())
                    .collect();
                (marked && !subs.is_empty() && subs.len() == ports.len()).then_some(subs)
            },
        )
        .await;
        println!(
            "KuryrNetwork population: {} subports of the VM's trunk on the namespace network",
            populated.len()
        );
        drop(ctrl);
    };
    let cleanup = async {
        let m = std::mem::take(&mut *made.lock().expect("lock"));
        if let Some(t) = &m.trunk {
            if let Ok(tr) = neutron.get_trunk(t).await {
                let ids: Vec<String> = tr.sub_ports.iter().map(|s| s.port_id.clone()).collect();
                if !ids.is_empty()
                    && let Err(e) = neutron.remove_subports(t, &ids).await
                {
                    eprintln!("cleanup: removing subports: {e}");
                }
            }
            if let Err(e) = neutron.delete_trunk(t).await {
                eprintln!("cleanup: deleting trunk {t}: {e}");
            }
        }
        // The controller is stopped: no bulk creation is in flight (`cleanup_ports` would wait
        // for ports just taken off the trunk, unbound, to be bound).
        match neutron.list_ports(&PortFilter::tagged([tag.as_str()])).await {
            Ok(ports) => {
                for p in ports {
                    if let Err(e) = neutron.delete_port(&p.id).await {
                        eprintln!("cleanup: deleting port {}: {e}", p.id);
                    }
                }
            }
            Err(e) => eprintln!("cleanup: listing ports tagged {tag}: {e}"),
        }
        if let Some((net, sub)) = &m.ns_network {
            if let Err(e) = neutron.delete_subnet(sub).await {
                eprintln!("cleanup: deleting subnet {sub}: {e}");
            }
            if let Err(e) = neutron.delete_network(net).await {
                eprintln!("cleanup: deleting network {net}: {e}");
            }
        }
        if let Some(s) = &m.subnet
            && let Err(e) = neutron.delete_subnet(s).await
        {
            eprintln!("cleanup: deleting subnet {s}: {e}");
        }
        if let Some(n) = &m.network
            && let Err(e) = neutron.delete_network(n).await
        {
            eprintln!("cleanup: deleting network {n}: {e}");
        }
    };
    guarded(body, cleanup).await;
}
