//! Unit tests of the fake: it must behave like Neutron where the controller can notice.

use super::*;
use crate::observe::CountingObserver;

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn pod_port(net: &str, subnet: &str, tag: &str) -> PortCreate {
    PortCreate {
        network_id: net.into(),
        subnet_ids: vec![subnet.into()],
        security_groups: Some(vec!["sg".into()]),
        device_owner: Some("compute:kuryr".into()),
        binding_host_id: Some("node-1".into()),
        tags: vec![tag.into(), "cluster=c".into()],
        ..Default::default()
    }
}

#[test]
fn bulk_create_list_activate_delete() {
    let obs = Arc::new(CountingObserver::default());
    let fake = FakeNeutron::new().with_observer(obs.clone());
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    block(async {
        let reqs = vec![pod_port(&net.id, &subnet.id, "kuryr"); 3];
        let ports = neutron.create_ports_bulk(&reqs).await.unwrap();
        assert_eq!(ports.len(), 3);
        let ips: Vec<&str> = ports.iter().map(|p| p.fixed_ips[0].ip_address.as_str()).collect();
        assert_eq!(ips, ["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
        assert!(
            ports
                .iter()
                .all(|p| p.status == "DOWN" && p.binding_vif_type == "ovs")
        );
        assert_ne!(ports[0].mac_address, ports[1].mac_address);

        assert!(fake.activate(&ports[1].id));
        let f = PortFilter {
            ids: ports.iter().map(|p| p.id.clone()).collect(),
            fields: vec!["id".into(), "status".into()],
            ..Default::default()
        };
        let st = neutron.list_ports(&f).await.unwrap();
        assert_eq!(st.len(), 3);
        assert!(st.iter().all(|p| p.mac_address.is_empty()), "fields projection");
        assert_eq!(st.iter().filter(|p| p.status == "ACTIVE").count(), 1);
        let active = PortFilter {
            status: Some("ACTIVE".into()),
            tags: vec!["kuryr".into(), "cluster=c".into()],
            ..Default::default()
        };
        assert_eq!(neutron.list_ports(&active).await.unwrap().len(), 1);
        let none = PortFilter {
            tags: vec!["kuryr".into(), "other".into()],
            ..Default::default()
        };
        assert!(neutron.list_ports(&none).await.unwrap().is_empty());

        let up = PortUpdate {
            name: Some("ns/pod".into()),
            security_groups: Some(vec![]),
            ..Default::default()
        };
        let p = neutron.update_port(&ports[0].id, &up).await.unwrap();
        assert_eq!(p.name, "ns/pod");
        assert!(p.security_groups.is_empty());
        neutron.set_port_tags(&ports[0].id, &["x".into()]).await.unwrap();
        assert_eq!(fake.port(&ports[0].id).unwrap().tags, ["x"]);

        for p in &ports {
            neutron.delete_port(&p.id).await.unwrap();
        }
        neutron.delete_port(&ports[0].id).await.unwrap();
        assert!(fake.ports().is_empty());
        let e = neutron.get_port(&ports[0].id).await.unwrap_err();
        assert_eq!(e.neutron_kind(), "PortNotFound");
    });
    assert_eq!(obs.count(ops::PORT_BULK_CREATE, "ok"), 1);
    assert_eq!(obs.count(ops::PORT_GET, "not_found"), 1);
    assert_eq!(fake.calls(ops::PORT_DELETE), 4);
}

#[test]
fn bulk_create_is_all_or_nothing_and_runs_out_of_ips() {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("tiny", "10.0.0.0/29");
    block(async {
        let reqs = vec![pod_port(&net.id, &subnet.id, "t"); 6];
        let e = fake.create_ports_bulk(&reqs).await.unwrap_err();
        assert_eq!(e.neutron_kind(), "IpAddressGenerationFailure");
        assert!(fake.ports().is_empty());
        assert_eq!(fake.create_ports_bulk(&reqs[..5]).await.unwrap().len(), 5);
        let missing = PortCreate {
            network_id: "nope".into(),
            ..Default::default()
        };
        let e = fake.create_ports_bulk(&[missing]).await.unwrap_err();
        assert!(e.is_not_found() && e.neutron_kind() == "NetworkNotFound");
    });
}

#[test]
fn injected_faults_hit_the_next_calls_only() {
    let obs = Arc::new(CountingObserver::default());
    let fake = FakeNeutron::new().with_observer(obs.clone());
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    fake.fail_next(ops::PORT_BULK_CREATE, 2, FaultKind::OverQuota);
    fake.fail_next(ops::PORT_LIST, 1, FaultKind::ServerError(503));
    block(async {
        let reqs = [pod_port(&net.id, &subnet.id, "t")];
        for _ in 0..2 {
            let e = fake.create_ports_bulk(&reqs).await.unwrap_err();
            assert!(matches!(e, Error::OverQuota { .. }) && e.is_retryable());
        }
        assert_eq!(fake.create_ports_bulk(&reqs).await.unwrap().len(), 1);
        let e = fake.list_ports(&PortFilter::default()).await.unwrap_err();
        assert_eq!(e.metric_label(), "server_error");
        assert_eq!(fake.list_ports(&PortFilter::default()).await.unwrap().len(), 1);
    });
    assert_eq!(obs.count(ops::PORT_BULK_CREATE, "over_quota"), 2);
    assert_eq!(obs.count(ops::PORT_BULK_CREATE, "ok"), 1);
    assert_eq!(fake.calls(ops::PORT_BULK_CREATE), 3);
}

#[test]
fn namespace_network_lifecycle() {
    let fake = FakeNeutron::new();
    let (_, pod_subnet) = fake.add_network("pods", "10.10.0.0/24");
    fake.add_subnet_pool("pool", "10.10.0.0/16", 24);
    block(async {
        let net = fake
            .create_network(&NetworkCreate {
                name: "ns/a-net".into(),
                tags: vec!["cluster=c".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        let subnet = fake
            .create_subnet(&SubnetCreate {
                network_id: net.id.clone(),
                name: "ns/a-subnet".into(),
                subnetpool_id: Some("pool".into()),
                tags: vec!["cluster=c".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            subnet.cidr, "10.10.1.0/24",
            "does not overlap {}",
            pod_subnet.cidr
        );
        assert_eq!(subnet.gateway_ip.as_deref(), Some("10.10.1.1"));
        fake.add_router_interface("r", &subnet.id).await.unwrap();
        assert!(fake.add_router_interface("r", &subnet.id).await.is_err());
        let e = fake.delete_subnet(&subnet.id).await.unwrap_err();
        assert_eq!(e.neutron_kind(), "SubnetInUse");
        let tagged = fake
            .list_networks(&ResourceFilter::tagged(["cluster=c"]))
            .await
            .unwrap();
        assert_eq!(tagged.len(), 1);
        let by_net = ResourceFilter {
            network_id: Some(net.id.clone()),
            ..Default::default()
        };
        assert_eq!(fake.list_subnets(&by_net).await.unwrap().len(), 1);
        fake.remove_router_interface("r", &subnet.id).await.unwrap();
        fake.remove_router_interface("r", &subnet.id).await.unwrap();
        fake.delete_subnet(&subnet.id).await.unwrap();
        fake.delete_network(&net.id).await.unwrap();
        assert!(fake.get_network(&net.id).await.unwrap_err().is_not_found());
        assert_eq!(fake.networks().len(), 1);
    });
}

#[test]
fn security_groups_like_neutron() {
    use crate::security_group::{
        SecurityGroupCreate, SecurityGroupFilter, SecurityGroupRuleCreate, SecurityGroupRuleFilter,
    };
    let fake = FakeNeutron::new();
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let (net, subnet) = fake.add_network("pods", "10.0.0.0/24");
    block(async {
        let sg = neutron
            .create_security_group(&SecurityGroupCreate {
                name: "sg/x-np".into(),
                tags: vec!["k".into()],
                ..Default::default()
            })
            .await
            .expect("create");
        let only = SecurityGroupRuleFilter {
            security_group_ids: vec![sg.id.clone()],
        };
        assert!(
            neutron
                .list_security_group_rules(&only)
                .await
                .expect("list")
                .is_empty(),
            "starts empty"
        );
        let rule = SecurityGroupRuleCreate {
            security_group_id: sg.id.clone(),
            direction: "ingress".into(),
            ethertype: "IPv4".into(),
            protocol: Some("tcp".into()),
            port_range_min: Some(80),
            port_range_max: Some(80),
            remote_ip_prefix: Some("10.0.0.5/32".into()),
            ..Default::default()
        };
        let created = neutron
            .create_security_group_rules(std::slice::from_ref(&rule))
            .await
            .expect("rules");
        let again = neutron
            .create_security_group_rules(std::slice::from_ref(&rule))
            .await;
        assert!(
            matches!(again, Err(Error::Conflict { ref kind, .. }) if kind == "SecurityGroupRuleExists"),
            "{again:?}"
        );
        let missing = SecurityGroupRuleCreate {
            security_group_id: "nope".into(),
            ..rule.clone()
        };
        let nf = neutron.create_security_group_rules(&[missing]).await;
        assert!(matches!(nf, Err(Error::NotFound { .. })), "{nf:?}");
        let mut port = pod_port(&net.id, &subnet.id, "kuryr");
        port.security_groups = Some(vec![sg.id.clone()]);
        let p = neutron.create_ports_bulk(&[port]).await.expect("port");
        let busy = neutron.delete_security_group(&sg.id).await;
        assert!(
            matches!(busy, Err(Error::Conflict { ref kind, .. }) if kind == "SecurityGroupInUse"),
            "{busy:?}"
        );
        neutron.delete_port(&p[0].id).await.expect("port delete");
        neutron
            .delete_security_group_rule(&created[0].id)
            .await
            .expect("rule delete");
        assert!(fake.security_group_rules(&sg.id).is_empty());
        let by_tag = SecurityGroupFilter {
            tags: vec!["k".into()],
            ..Default::default()
        };
        assert_eq!(
            neutron.list_security_groups(&by_tag).await.expect("list").len(),
            1
        );
        neutron.delete_security_group(&sg.id).await.expect("delete");
        assert!(fake.security_groups().is_empty());
    });
}

#[test]
fn trunks_behave_like_neutrons_trunk_plugin() {
    use crate::trunk::{SubPort, TrunkCreate};
    use kuryr_core::nested::trunk_of;
    let fake = FakeNeutron::new();
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let (net, subnet) = fake.add_network("nodes", "10.1.0.0/24");
    block(async {
        let ports = neutron
            .create_ports_bulk(&vec![pod_port(&net.id, &subnet.id, "t"); 4])
            .await
            .unwrap();
        let (parent, subs) = (&ports[0], &ports[1..]);
        let trunk = neutron
            .create_trunk(&TrunkCreate {
                port_id: parent.id.clone(),
                ..TrunkCreate::default()
            })
            .await
            .unwrap();
        let again = neutron
            .create_trunk(&TrunkCreate {
                port_id: parent.id.clone(),
                ..TrunkCreate::default()
            })
            .await;
        assert!(
            matches!(again, Err(Error::Conflict { .. })),
            "one trunk per parent"
        );
        let t = neutron
            .add_subports(
                &trunk.id,
                &[SubPort::vlan(&subs[0].id, 1), SubPort::vlan(&subs[1].id, 2)],
            )
            .await
            .unwrap();
        assert_eq!(t.sub_ports.len(), 2);
        // All or nothing: one bad subport (a VLAN ID taken) adds none.
        let dup = neutron
            .add_subports(
                &trunk.id,
                &[SubPort::vlan(&subs[2].id, 3), SubPort::vlan(&subs[2].id, 2)],
            )
            .await;
        assert!(matches!(dup, Err(Error::Conflict { .. })), "{dup:?}");
        assert_eq!(neutron.get_trunk(&trunk.id).await.unwrap().sub_ports.len(), 2);
        // The parent shows the trunk, and cannot be deleted.
        let shown = trunk_of(&neutron.get_port(&parent.id).await.unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(shown.trunk_id, trunk.id);
        assert_eq!(shown.subports.len(), 2);
        assert!(matches!(neutron.delete_port(&parent.id).await,
            Err(Error::Conflict { kind, .. }) if kind == "PortInUseAsTrunkParent"));
        assert!(matches!(neutron.delete_port(&subs[0].id).await,
            Err(Error::Conflict { kind, .. }) if kind == "PortInUseAsSubPort"));
        let t = neutron
            .remove_subports(&trunk.id, &[subs[0].id.clone()])
            .await
            .unwrap();
        assert_eq!(t.sub_ports, vec![SubPort::vlan(&subs[1].id, 2)]);
        neutron.delete_trunk(&trunk.id).await.unwrap();
        assert!(
            trunk_of(&neutron.get_port(&parent.id).await.unwrap())
                .unwrap()
                .is_none()
        );
        neutron.delete_port(&parent.id).await.unwrap();
    });
}
