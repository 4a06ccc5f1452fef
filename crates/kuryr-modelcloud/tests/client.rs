//! kuryr-openstack's real client against the model cloud: Keystone authentication and the
//! catalog, Neutron discovery and extensions, bulk port creation with tags, filtered lists with
//! `fields`, revision-checked updates (412), ACTIVE after the plug, trunks, security-group rules
//! in bulk, Neutron's error bodies, pagination links and the model's queueing and counts.

use std::{sync::Arc, time::Duration};

use kuryr_modelcloud::{Cloud, Model, serve};
use kuryr_openstack::{
    ConnectOptions, Error, Neutron, NoopObserver, OpenStackNeutron, PortCreate, PortFilter, PortUpdate,
    SubPort, TrunkCreate,
    fake::FakeNeutron,
    ops,
    security_group::{SecurityGroupCreate, SecurityGroupRuleCreate, SecurityGroupRuleFilter},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn connect(running: &kuryr_modelcloud::Running) -> OpenStackNeutron {
    kuryr_openstack::install_crypto_provider();
    let auth = running.cloud_auth();
    let opts = ConnectOptions {
        connect_timeout: Duration::from_secs(10),
        request_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    OpenStackNeutron::connect(&auth, &opts, Arc::new(NoopObserver))
        .await
        .expect("the real client connects to the model through Keystone")
}

/// One plain HTTP GET (the client does not page yet).
async fn get(url: &str) -> serde_json::Value {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest.split_once('/').expect("a path");
    let mut s = tokio::net::TcpStream::connect(host).await.expect("connects");
    let req = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("writes");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("reads");
    let text = String::from_utf8_lossy(&out);
    let (_, body) = text.split_once("\r\n\r\n").expect("a body");
    serde_json::from_str(body).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_client_works_against_the_model() {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("pods", "10.10.0.0/24");
    // The sandbox's costs at 1 %: what is measured here is behaviour, not time.
    let running = serve(
        Cloud::new(fake, Model::default().scaled(0.01)),
        "127.0.0.1:0".parse().expect("addr"),
    )
    .await
    .expect("serves");
    let n = connect(&running).await;
    assert!(n.known_extensions().iter().any(|e| e == "trunk"));

    // A bulk of bound, tagged ports.
    let reqs: Vec<PortCreate> = (0..5)
        .map(|i| PortCreate {
            network_id: net.id.clone(),
            subnet_ids: vec![subnet.id.clone()],
            binding_host_id: Some("node-1".into()),
            device_owner: Some("compute:kuryr".into()),
            name: Some(format!("p{i}")),
            tags: vec!["kuryr".into(), "cluster=c1".into()],
            ..Default::default()
        })
        .collect();
    let ports = n.create_ports_bulk(&reqs).await.expect("bulk create");
    assert_eq!(ports.len(), 5);
    assert!(
        ports
            .iter()
            .all(|p| p.status == "DOWN" && p.tags.contains(&"cluster=c1".to_string()))
    );
    let ips: std::collections::BTreeSet<_> =
        ports.iter().map(|p| p.fixed_ips[0].ip_address.clone()).collect();
    assert_eq!(ips.len(), 5, "each port its own address");
    // Past Neutron's max_request_body_size (112 KiB): 413, as oslo.service answers it.
    let many: Vec<PortCreate> = (0..1000).map(|_| reqs[0].clone()).collect();
    let err = n.create_ports_bulk(&many).await.expect_err("too large a body");
    assert!(err.to_string().contains("413"), "{err}");

    // Filtered lists with fields.
    let listed = n
        .list_ports(&PortFilter {
            tags: vec!["cluster=c1".into()],
            binding_host_id: Some("node-1".into()),
            fields: vec!["id".into(), "status".into()],
            ..Default::default()
        })
        .await
        .expect("list");
    assert_eq!(listed.len(), 5);
    assert!(
        listed.iter().all(|p| p.name.is_empty() && !p.id.is_empty()),
        "only the fields asked for"
    );
    let other = n
        .list_ports(&PortFilter::tagged(["cluster=c2"]))
        .await
        .expect("list");
    assert!(other.is_empty());
    let by_ids = n
        .list_ports(&PortFilter::ids([ports[0].id.clone(), ports[1].id.clone()]))
        .await
        .expect("list by ids");
    assert_eq!(by_ids.len(), 2);

    // A revision-checked update: the right revision passes, a stale one is a 412 conflict.
    let p0 = n.get_port(&ports[0].id).await.expect("get");
    let rev = p0
        .extra
        .get("revision_number")
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let upd = PortUpdate {
        device_id: Some("pod-uid".into()),
        if_revision: Some(rev),
        ..Default::default()
    };
    let p0 = n.update_port(&ports[0].id, &upd).await.expect("update");
    assert_eq!(p0.device_id, "pod-uid");
    let stale = n
        .update_port(&ports[0].id, &upd)
        .await
        .expect_err("stale revision");
    assert!(matches!(stale, Error::Conflict { .. }), "{stale:?}");

    // ACTIVE a while after the node's plug.
    assert!(running.cloud.plugged(&ports[0].id));
    let mut active = false;
    for _ in 0..100 {
        if n.get_port(&ports[0].id).await.expect("get").status == "ACTIVE" {
            active = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(active, "the plugged port went ACTIVE");

    // Trunks.
    let parent = n.create_ports_bulk(&reqs[..1]).await.expect("parent").remove(0);
    let trunk = n
        .create_trunk(&TrunkCreate {
            port_id: parent.id.clone(),
            name: Some("vm-trunk".into()),
            ..Default::default()
        })
        .await
        .expect("trunk");
    let t = n
        .add_subports(&trunk.id, &[SubPort::vlan(ports[1].id.clone(), 101)])
        .await
        .expect("add subports");
    assert_eq!(t.sub_ports.len(), 1);
    let t = n
        .remove_subports(&trunk.id, &[ports[1].id.clone()])
        .await
        .expect("remove");
    assert!(t.sub_ports.is_empty());

    // Security groups and a bulk of rules.
    let sg = n
        .create_security_group(&SecurityGroupCreate {
            name: "sg/ns-policy".into(),
            tags: vec!["kuryr".into()],
            ..Default::default()
        })
        .await
        .expect("group");
    let rules: Vec<SecurityGroupRuleCreate> = (0..3)
        .map(|i| SecurityGroupRuleCreate {
            security_group_id: sg.id.clone(),
            direction: "ingress".into(),
            ethertype: "IPv4".into(),
            protocol: Some("tcp".into()),
            port_range_min: Some(8000 + i),
            port_range_max: Some(8000 + i),
            ..Default::default()
        })
        .collect();
    let made = n.create_security_group_rules(&rules).await.expect("rules");
    assert_eq!(made.len(), 3);
    let listed = n
        .list_security_group_rules(&SecurityGroupRuleFilter {
            security_group_ids: vec![sg.id.clone()],
        })
        .await
        .expect("rules list");
    assert!(listed.len() >= 3);

    // Neutron's errors, as the client maps them.
    let gone = n.get_port("no-such-port").await.expect_err("404");
    assert!(gone.is_not_found(), "{gone:?}");
    n.delete_port(&ports[4].id).await.expect("delete");
    assert!(
        n.get_port(&ports[4].id)
            .await
            .expect_err("deleted")
            .is_not_found()
    );

    // Pagination as Neutron pages: limit, then the next link's marker.
    let first = get(&format!("{}/network/v2.0/ports?limit=2&fields=id", running.url)).await;
    assert_eq!(first["ports"].as_array().map(Vec::len), Some(2));
    let next = first["ports_links"][0]["href"]
        .as_str()
        .expect("a next link")
        .to_string();
    let second = get(&next).await;
    assert_eq!(second["ports"].as_array().map(Vec::len), Some(2));
    assert_ne!(first["ports"][0]["id"], second["ports"][0]["id"]);

    // What the model counted.
    let stats = running.cloud.stats();
    assert_eq!(stats.ops[ops::PORT_BULK_CREATE].requests, 2);
    assert_eq!(stats.ops[ops::PORT_BULK_CREATE].items, 6);
    assert_eq!(stats.ops[ops::PORT_UPDATE].errors, 1);
    assert_eq!(stats.ops[ops::SG_RULE_BULK_CREATE].items, 3);
    assert_eq!(
        stats.plugged, 0,
        "plugged() called directly is not an HTTP report"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_queues_concurrent_requests_and_bulks_on_one_network_collide() {
    let fake = FakeNeutron::new();
    let (net, subnet) = fake.add_network("pods", "10.20.0.0/22");
    let mut model = Model::default();
    model.neutron.insert(
        ops::PORT_BULK_CREATE.into(),
        kuryr_modelcloud::Cost {
            fixed_ms: 0.0,
            per_item_ms: 10.0,
        },
    );
    let running = serve(Cloud::new(fake, model), "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("serves");
    let n = Arc::new(connect(&running).await);
    let reqs: Vec<PortCreate> = (0..10)
        .map(|_| PortCreate {
            network_id: net.id.clone(),
            subnet_ids: vec![subnet.id.clone()],
            ..Default::default()
        })
        .collect();
    let started = std::time::Instant::now();
    let a = {
        let (n, r) = (n.clone(), reqs.clone());
        tokio::spawn(async move { n.create_ports_bulk(&r).await })
    };
    let b = {
        let (n, r) = (n.clone(), reqs.clone());
        tokio::spawn(async move { n.create_ports_bulk(&r).await })
    };
    a.await.expect("joins").expect("bulk a");
    b.await.expect("joins").expect("bulk b");
    let took = started.elapsed();
    // One worker: 100 ms, then the second bulk, which started beside the first, costs double.
    assert!(took >= Duration::from_millis(290), "{took:?}");
    let s = running.cloud.stats();
    let o = &s.ops[ops::PORT_BULK_CREATE];
    assert_eq!((o.requests, o.items), (2, 20));
    assert!(o.wait_ms >= 90.0, "the second waited for the first: {o:?}");
    assert!(o.service_ms >= 290.0, "100 + 200 ms of service: {o:?}");

    // A client that gives up while its request waits for the worker is counted as abandoned.
    let slow = {
        let (n, r) = (n.clone(), reqs.clone());
        tokio::spawn(async move { n.create_ports_bulk(&r).await })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let host = running.url.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&host).await.expect("connects");
    let req = format!("GET /network/v2.0/ports HTTP/1.1\r\nHost: {host}\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("writes");
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(s);
    slow.await.expect("joins").expect("bulk");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lists = &running.cloud.stats().ops[ops::PORT_LIST];
    assert_eq!((lists.abandoned, lists.requests), (1, 0), "{lists:?}");
}

/// kuryr-openstack's real Octavia client against the model: version discovery, a fully
/// populated create answered `PENDING_CREATE` and `ACTIVE` after the model's provisioning, a
/// write refused with 409 while pending, batch members, the status tree, a listener and pool
/// added and removed, lists by tag paged at Octavia's 1 000 (the client follows the pages),
/// cascade delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_octavia_client_works_against_the_model() {
    use kuryr_openstack::octavia::{
        FullListener, LbCreate, LbFilter, ListenerCreate, MemberSpec, Octavia, OpenStackOctavia, PoolCreate,
        status,
    };
    let fake = FakeNeutron::new();
    let (_, subnet) = fake.add_network("services", "10.96.0.0/16");
    let mut model = Model::default().scaled(0.01);
    // Provisioning long enough to see PENDING_* (fixed 200 ms), by provisioners of its own:
    // this test is about what the client is answered, not about the queueing (on the API's
    // one server, as the ovn provider runs, a read waits out the provisioning before it).
    model.provision_in_api = false;
    for op in [ops::LB_CREATE, ops::MEMBER_BATCH_UPDATE] {
        model.provisioning.insert(
            op.into(),
            kuryr_modelcloud::Cost {
                fixed_ms: 200.0,
                per_item_ms: 0.0,
            },
        );
    }
    let running = serve(Cloud::new(fake, model), "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("serves");
    let n = connect(&running).await;
    let o = OpenStackOctavia::from_session(
        n.session().clone(),
        Duration::from_secs(10),
        Arc::new(NoopObserver),
    )
    .await
    .expect("Octavia's version document through the catalog");
    assert_eq!(o.version().minor, 26);
    let member = |ip: &str| MemberSpec {
        address: ip.into(),
        protocol_port: 8080,
        name: format!("d/{ip}:8080"),
        subnet_id: None,
    };
    let create = LbCreate {
        name: "d/web".into(),
        project_id: "p".into(),
        vip_subnet_id: subnet.id.clone(),
        vip_address: Some("10.96.0.10".into()),
        provider: Some("ovn".into()),
        tags: vec!["kuryr".into(), "cluster=c1".into()],
        listeners: vec![FullListener {
            listener: ListenerCreate {
                name: "d/web:TCP:80".into(),
                protocol: "TCP".into(),
                protocol_port: 80,
                ..Default::default()
            },
            pool: PoolCreate {
                name: "d/web:TCP:80".into(),
                protocol: "TCP".into(),
                lb_algorithm: "SOURCE_IP_PORT".into(),
                ..Default::default()
            },
            members: vec![member("10.10.0.5"), member("10.10.0.6")],
        }],
        ..Default::default()
    };
    let lb = o.create_load_balancer(&create).await.expect("create");
    assert_eq!(lb.provisioning_status, "PENDING_CREATE");
    assert_eq!(
        (lb.vip_address.as_str(), lb.provider.as_str()),
        ("10.96.0.10", "ovn")
    );
    let pools = o.list_pools(&lb.id).await.expect("pools");
    assert_eq!(pools.len(), 1);
    let err = o
        .replace_members(&pools[0].id, &[member("10.10.0.7")])
        .await
        .expect_err("locked while pending");
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
    let active = async {
        loop {
            let t = o.status_tree(&lb.id).await.expect("status tree");
            if t.provisioning_status == status::ACTIVE {
                return t;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let tree = tokio::time::timeout(Duration::from_secs(5), active)
        .await
        .expect("ACTIVE after provisioning");
    assert_eq!(tree.listeners[0].pools[0].members.len(), 2);
    o.replace_members(&pools[0].id, &[member("10.10.0.7")])
        .await
        .expect("batch update");
    let tree = o.status_tree(&lb.id).await.expect("status tree");
    assert_eq!(tree.provisioning_status, "PENDING_UPDATE");
    assert_eq!(tree.listeners[0].pools[0].members[0].address, "10.10.0.7");
    let listeners = o.list_listeners(&lb.id).await.expect("listeners");
    assert_eq!(listeners[0].protocol_port, 80);
    tokio::time::timeout(Duration::from_secs(5), async {
        while o
            .get_load_balancer(&lb.id)
            .await
            .expect("get")
            .provisioning_status
            != status::ACTIVE
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("ACTIVE after the update");

    // 1 001 more load balancers: a list answers Octavia's page of 1 000 with a next link.
    let tagged = |i: usize| LbCreate {
        name: format!("d/s{i}"),
        vip_subnet_id: subnet.id.clone(),
        tags: vec!["cluster=c1".into()],
        ..Default::default()
    };
    // Put straight into the model's state: through the API each would wait out its
    // provisioning on the API's one server (200 ms here), 200 s for nothing this test reads.
    for i in 0..1001 {
        running
            .cloud
            .octavia
            .create_load_balancer(&tagged(i))
            .await
            .expect("create");
    }
    let filter = LbFilter {
        tags: vec!["cluster=c1".into()],
        ..Default::default()
    };
    let all = o.list_load_balancers(&filter).await.expect("list");
    assert_eq!(all.len(), 1002, "every page followed");
    let raw = get(&format!(
        "{}/load-balancer/v2/lbaas/loadbalancers?tags=cluster%3Dc1",
        running.url
    ))
    .await;
    assert_eq!(
        raw["loadbalancers"].as_array().map(Vec::len),
        Some(1000),
        "Octavia's pagination_max_limit"
    );
    let next = raw["loadbalancers_links"][0]["href"]
        .as_str()
        .expect("a next link")
        .to_string();
    let rest = get(&next).await;
    assert_eq!(rest["loadbalancers"].as_array().map(Vec::len), Some(2));
    let by_name = o
        .list_load_balancers(&LbFilter {
            name: Some("d/web".into()),
            ..Default::default()
        })
        .await
        .expect("by name");
    assert_eq!(by_name.len(), 1);

    // Cascade delete; an unknown ID is gone already.
    o.delete_load_balancer(&lb.id).await.expect("delete");
    o.delete_load_balancer(&lb.id).await.expect("gone is success");
    let err = o.get_load_balancer(&lb.id).await.expect_err("404");
    assert!(err.is_not_found(), "{err:?}");
    let s = running.cloud.stats();
    assert_eq!(s.ops[ops::LB_CREATE].requests, 1);
    assert!(s.ops.contains_key("provision:lb_create"), "{:?}", s.ops.keys());
}
