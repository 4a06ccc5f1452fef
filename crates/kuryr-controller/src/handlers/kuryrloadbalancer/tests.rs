//! Unit tests of the KuryrLoadBalancer plan: spec → desired load balancer, and every partial
//! Octavia state → the next step (no I/O). A small loop applies the steps to `FakeOctavia` to
//! show that any partial state converges without duplicates.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kuryr_openstack::octavia::fake::FakeOctavia;
use kuryr_openstack::octavia::{
    ApiVersion, LbCreate, LbFilter, ListenerCreate, Octavia, PoolCreate, StatusTree, status,
};
use kuryr_types::kuryrloadbalancer::{self as k, KuryrLoadBalancerSpec};
use kuryr_types::{KuryrLoadBalancer, constants::KURYRLB_FINALIZER};

use super::desired::{LbSettings, SubnetMap, create_body, desired, listener_name};
use super::plan::{LbObserved, Step, plan, status_of};

fn slice(pod_ips: &[(&str, &str, Option<bool>)], ports: &[(Option<&str>, i32, &str)]) -> k::EndpointSlice {
    k::EndpointSlice {
        endpoints: Some(
            pod_ips
                .iter()
                .map(|(pod, ip, ready)| k::Endpoint {
                    addresses: Some(vec![ip.to_string()]),
                    conditions: Some(k::EndpointConditions { ready: *ready }),
                    target_ref: Some(k::TargetRef {
                        kind: Some("Pod".into()),
                        name: Some(pod.to_string()),
                        namespace: Some("ns".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
        ),
        ports: Some(
            ports
                .iter()
                .map(|(n, p, proto)| k::EndpointPort {
                    name: n.map(str::to_string),
                    port: Some(*p),
                    protocol: Some(proto.to_string()),
                })
                .collect(),
        ),
    }
}

fn klb(ports: &[(Option<&str>, i32, &str)], slices: Vec<k::EndpointSlice>) -> KuryrLoadBalancer {
    let mut klb = KuryrLoadBalancer::new(
        "svc",
        KuryrLoadBalancerSpec {
            ip: Some("10.96.0.10".into()),
            subnet_id: Some("svc-subnet".into()),
            project_id: Some("proj".into()),
            provider: Some("ovn".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p, proto)| k::LbPort {
                        name: n.map(str::to_string),
                        port: *p,
                        protocol: proto.to_string(),
                        target_port: "8080".into(),
                    })
                    .collect(),
            ),
            endpoint_slices: Some(slices),
            ..Default::default()
        },
    );
    klb.metadata.namespace = Some("ns".into());
    klb.metadata.finalizers = Some(vec![KURYRLB_FINALIZER.into()]);
    klb
}

fn settings() -> LbSettings {
    LbSettings {
        lb_algorithm: "ROUND_ROBIN".into(),
        member_mode_l2: true,
        tags: vec!["k8s-cluster".into()],
        timeout_client_data: 0,
        timeout_member_data: 0,
        external_net: None,
        external_subnet: None,
    }
}

fn subnets() -> SubnetMap {
    let mut m = SubnetMap::default();
    m.add("10.0.0.0/16", "wide");
    m.add("10.0.1.0/24", "ns-subnet");
    m.add("garbage", "x");
    m
}

const V: ApiVersion = ApiVersion { minor: 26 };

#[test]
fn desired_names_members_and_ovn_constraints() {
    let k = klb(
        &[(Some("http"), 80, "TCP"), (Some("dns"), 53, "UDP")],
        vec![slice(
            &[
                ("a", "10.0.1.5", Some(true)),
                ("b", "10.0.2.6", None),
                ("c", "10.0.1.7", Some(false)),
            ],
            &[(Some("http"), 8080, "TCP"), (Some("dns"), 5353, "UDP")],
        )],
    );
    let mut s = settings();
    s.timeout_client_data = 50_000;
    let d = desired(&k, &s, V, &subnets()).expect("complete spec");
    assert_eq!(d.name, "ns/svc");
    assert_eq!(d.lb_algorithm, "SOURCE_IP_PORT", "ovn only knows SOURCE_IP_PORT");
    assert_eq!(d.timeout_client_data, None, "ovn has no listener timeouts");
    assert_eq!(d.unsupported.len(), 1);
    let names: Vec<&str> = d.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ns/svc:TCP:80", "ns/svc:UDP:53"]);
    let http = &d.listeners[0];
    // Not-ready endpoints are left out; unknown readiness counts as ready.
    let got: Vec<(&str, i32, &str, Option<&str>)> = http
        .members
        .iter()
        .map(|m| {
            (
                m.address.as_str(),
                m.protocol_port,
                m.name.as_str(),
                m.subnet_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("10.0.1.5", 8080, "ns/a:8080", Some("ns-subnet")),
            ("10.0.2.6", 8080, "ns/b:8080", Some("wide"))
        ]
    );
    assert_eq!(d.listeners[1].members[0].protocol_port, 5353);
}

#[test]
fn unnamed_ports_sctp_and_same_port_gating() {
    let k = klb(
        &[(None, 80, "TCP"), (None, 80, "UDP"), (None, 99, "SCTP")],
        vec![slice(&[("a", "10.0.1.5", Some(true))], &[(None, 8080, "TCP")])],
    );
    let d = desired(&k, &settings(), V, &subnets()).expect("spec");
    assert_eq!(d.listeners.len(), 3);
    let by = |n: &str| d.listeners.iter().find(|l| l.name == n).map(|l| l.members.len());
    assert_eq!(
        by("ns/svc:TCP:80"),
        Some(1),
        "unnamed slice port matches the unnamed Service port"
    );
    assert_eq!(by("ns/svc:UDP:80"), Some(0), "no UDP port in the slice");
    let old = desired(&k, &settings(), ApiVersion { minor: 10 }, &subnets()).expect("spec");
    assert_eq!(old.listeners.len(), 1);
    assert_eq!(old.unsupported.len(), 2);
    let mut incomplete = k.clone();
    incomplete.spec.ip = None;
    assert!(desired(&incomplete, &settings(), V, &subnets()).is_err());
}

fn observed(
    k: &KuryrLoadBalancer,
    lb: Option<kuryr_openstack::octavia::LoadBalancer>,
    tree: Option<StatusTree>,
) -> LbObserved {
    LbObserved {
        klb: Arc::new(k.clone()),
        deleting: k.metadata.deletion_timestamp.is_some(),
        has_finalizer: true,
        lb,
        tree,
        desired: desired(k, &settings(), V, &subnets()),
        status: k.status.clone().unwrap_or_default(),
        options: None,
        warned: Vec::new(),
        health_monitors: Default::default(),
        fip: Default::default(),
        tags: settings().tags.into(),
    }
}

fn lb(ps: &str) -> kuryr_openstack::octavia::LoadBalancer {
    kuryr_openstack::octavia::LoadBalancer {
        id: "lb1".into(),
        name: "ns/svc".into(),
        provider: "ovn".into(),
        provisioning_status: ps.into(),
        ..Default::default()
    }
}

#[test]
fn every_partial_state_has_one_next_step() {
    let k = klb(
        &[(None, 80, "TCP")],
        vec![slice(&[("a", "10.0.1.5", Some(true))], &[(None, 8080, "TCP")])],
    );
    let mut o = observed(&k, None, None);
    o.has_finalizer = false;
    assert_eq!(plan(&o).steps, [Step::AddFinalizer]);
    assert_eq!(plan(&observed(&k, None, None)).steps, [Step::CreateLb]);
    for busy in ["PENDING_CREATE", "PENDING_UPDATE", "PENDING_DELETE"] {
        assert!(
            plan(&observed(&k, Some(lb(busy)), None)).steps.is_empty(),
            "{busy}"
        );
    }
    assert!(matches!(
        plan(&observed(&k, Some(lb("ERROR")), None)).steps[..],
        [Step::DeleteLb { .. }]
    ));
    let mut amphora = lb("ACTIVE");
    amphora.provider = "amphora".into();
    assert!(matches!(
        plan(&observed(&k, Some(amphora), Some(StatusTree::default()))).steps[..],
        [Step::DeleteLb { .. }]
    ));
    // ACTIVE, empty: the listener.
    let empty = StatusTree::default();
    assert!(matches!(
        plan(&observed(&k, Some(lb("ACTIVE")), Some(empty))).steps[..],
        [Step::CreateListener(_)]
    ));
    // A listener nothing asks for goes first, with its pool.
    let stale = StatusTree {
        listeners: vec![kuryr_openstack::octavia::TreeListener {
            id: "l-old".into(),
            name: listener_name("ns/svc", "TCP", 81),
            pools: vec![kuryr_openstack::octavia::TreePool {
                id: "p-old".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(
        plan(&observed(&k, Some(lb("ACTIVE")), Some(stale))).steps,
        [Step::DeleteListener {
            id: "l-old".into(),
            pool_id: Some("p-old".into()),
            name: "ns/svc:TCP:81".into()
        }]
    );
}

#[test]
fn deletion_releases_after_the_load_balancer_is_gone() {
    let mut k = klb(&[(None, 80, "TCP")], vec![]);
    k.metadata.deletion_timestamp = Some(Time(Default::default()));
    assert!(matches!(
        plan(&observed(&k, Some(lb("ACTIVE")), None)).steps[..],
        [Step::DeleteLb { .. }]
    ));
    assert!(
        plan(&observed(&k, Some(lb("PENDING_UPDATE")), None))
            .steps
            .is_empty()
    );
    assert_eq!(
        plan(&observed(&k, Some(lb("PENDING_DELETE")), None)).steps,
        [Step::ReleaseFinalizers]
    );
    assert_eq!(plan(&observed(&k, None, None)).steps, [Step::ReleaseFinalizers]);
    let mut o = observed(&k, None, None);
    o.has_finalizer = false;
    assert!(plan(&o).steps.is_empty());
}

/// Applies plan steps straight to the fake (the Octavia half of the handler's `execute`).
async fn converge(fake: &FakeOctavia, k: &mut KuryrLoadBalancer, full: bool) -> usize {
    for round in 0..30 {
        let name = "ns/svc".to_string();
        let lb = fake
            .list_load_balancers(&LbFilter {
                name: Some(name.clone()),
                ..Default::default()
            })
            .await
            .expect("list")
            .into_iter()
            .next();
        let tree = match &lb {
            Some(l) => Some(fake.status_tree(&l.id).await.expect("tree"))
                .filter(|t| t.provisioning_status == status::ACTIVE),
            None => None,
        };
        let mut o = observed(k, lb.clone(), tree);
        // Warnings are the handler's (once per change of the list); here: already told.
        if let (Ok(d), Some(t)) = (&o.desired, &o.tree) {
            o.warned = super::plan::notes(d, t);
            for hm in t
                .listeners
                .iter()
                .flat_map(|l| &l.pools)
                .filter_map(|p| p.health_monitor.as_ref())
            {
                if let Ok(s) = fake.get_health_monitor(&hm.id).await {
                    o.health_monitors.insert(hm.id.clone(), s);
                }
            }
        }
        if let (Some(l), Ok(d)) = (&lb, &o.desired)
            && d.options_apply
            && l.provisioning_status == status::ACTIVE
        {
            o.options = Some(super::plan::LbOptions {
                listeners: fake.list_listeners(&l.id).await.expect("listeners"),
                pools: fake.list_pools(&l.id).await.expect("pools"),
            });
        }
        let p = plan(&o);
        let Some(step) = p.steps.into_iter().next() else {
            if lb
                .as_ref()
                .is_some_and(|l| status::is_pending(&l.provisioning_status))
            {
                continue;
            }
            return round;
        };
        let lb_id = lb.map(|l| l.id).unwrap_or_default();
        match step {
            Step::CreateLb => {
                let d = o.desired.as_ref().expect("desired");
                fake.create_load_balancer(&create_body(d, &[], full))
                    .await
                    .expect("create");
            }
            Step::DeleteLb { id, .. } => fake.delete_load_balancer(&id).await.expect("delete"),
            Step::DeleteListener { id, pool_id, .. } => match pool_id {
                Some(p) => fake.delete_pool(&p).await.expect("pool delete"),
                None => fake.delete_listener(&id).await.expect("listener delete"),
            },
            Step::CreateListener(d) => {
                fake.create_listener(&ListenerCreate {
                    loadbalancer_id: lb_id,
                    name: d.name.clone(),
                    protocol: d.protocol.clone(),
                    protocol_port: d.port,
                    allowed_cidrs: d.allowed_cidrs.clone(),
                    ..Default::default()
                })
                .await
                .expect("listener");
            }
            Step::CreatePool {
                listener_id,
                listener,
            } => {
                fake.create_pool(&PoolCreate {
                    listener_id,
                    name: listener.name,
                    protocol: listener.protocol,
                    lb_algorithm: "SOURCE_IP_PORT".into(),
                    source_ip_persistence: listener.source_ip_persistence,
                    ..Default::default()
                })
                .await
                .expect("pool");
            }
            Step::ReplaceMembers { pool_id, members, .. } => {
                fake.replace_members(&pool_id, &members).await.expect("members")
            }
            Step::UpdateListenerCidrs { id, cidrs, .. } => fake
                .update_listener_allowed_cidrs(&id, cidrs.as_deref())
                .await
                .expect("listener update"),
            Step::UpdatePoolPersistence { id, source_ip, .. } => fake
                .update_pool_persistence(&id, source_ip)
                .await
                .expect("pool update"),
            Step::WriteStatus(st) => k.status = Some(*st),
            Step::CreateHealthMonitor {
                pool_id,
                name,
                settings,
            } => {
                fake.create_health_monitor(&kuryr_openstack::octavia::HealthMonitorCreate {
                    pool_id,
                    name,
                    settings,
                    tags: Vec::new(),
                })
                .await
                .expect("hm create");
            }
            Step::DeleteHealthMonitor { id, .. } => fake.delete_health_monitor(&id).await.expect("hm delete"),
            Step::WarnUnsupported(_) | Step::AddFinalizer | Step::ReleaseFinalizers | Step::PublicIp(_) => {}
        }
    }
    panic!("did not converge in 30 rounds");
}

#[tokio::test]
async fn converges_from_scratch_and_after_changes_with_one_batch_per_pool() {
    let fake = FakeOctavia::new().with_settle_reads(2);
    let mut k = klb(
        &[(None, 80, "TCP"), (Some("dns"), 53, "UDP")],
        vec![slice(
            &[("a", "10.0.1.5", Some(true)), ("b", "10.0.1.6", Some(true))],
            &[(None, 8080, "TCP"), (Some("dns"), 5353, "UDP")],
        )],
    );
    converge(&fake, &mut k, false).await;
    assert_eq!(fake.load_balancers().len(), 1);
    assert_eq!(fake.members_of("ns/svc:TCP:80").len(), 2);
    assert_eq!(
        fake.calls(kuryr_openstack::ops::MEMBER_BATCH_UPDATE),
        2,
        "one batch per pool"
    );
    let st = k.status.clone().expect("status written");
    assert_eq!(st.listeners.as_ref().map(Vec::len), Some(2));
    assert_eq!(st.members.as_ref().map(Vec::len), Some(4));
    // Converged: no Octavia write.
    let writes = fake.writes();
    converge(&fake, &mut k, false).await;
    assert_eq!(fake.writes(), writes);
    // A backend leaves: one batch call, no other write.
    k.spec.endpoint_slices = Some(vec![slice(
        &[("a", "10.0.1.5", Some(true))],
        &[(None, 8080, "TCP"), (Some("dns"), 5353, "UDP")],
    )]);
    converge(&fake, &mut k, false).await;
    assert_eq!(fake.writes(), writes + 2);
    assert_eq!(fake.members_of("ns/svc:TCP:80"), [("10.0.1.5".to_string(), 8080)]);
    // A port change: the old listener goes (pool first), the new one comes.
    k.spec.ports = Some(vec![k::LbPort {
        name: None,
        port: 81,
        protocol: "TCP".into(),
        target_port: "8080".into(),
    }]);
    converge(&fake, &mut k, false).await;
    assert_eq!(fake.load_balancers().len(), 1);
    let tree = fake
        .status_tree(&fake.load_balancers()[0].id)
        .await
        .expect("tree");
    let names: Vec<&str> = tree.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["ns/svc:TCP:81"]);
}

#[tokio::test]
async fn error_state_is_recreated_and_partial_trees_are_completed() {
    let fake = FakeOctavia::new();
    let mut k = klb(
        &[(None, 80, "TCP")],
        vec![slice(&[("a", "10.0.1.5", Some(true))], &[(None, 8080, "TCP")])],
    );
    // A controller killed after the listener: the tree is completed, not duplicated.
    let lb = fake
        .create_load_balancer(&LbCreate {
            name: "ns/svc".into(),
            provider: Some("ovn".into()),
            ..Default::default()
        })
        .await
        .expect("lb");
    fake.create_listener(&ListenerCreate {
        loadbalancer_id: lb.id.clone(),
        name: "ns/svc:TCP:80".into(),
        protocol: "TCP".into(),
        protocol_port: 80,
        ..Default::default()
    })
    .await
    .expect("listener");
    converge(&fake, &mut k, false).await;
    assert_eq!(fake.load_balancers().len(), 1);
    assert_eq!(fake.calls(kuryr_openstack::ops::LISTENER_CREATE), 1);
    assert_eq!(fake.members_of("ns/svc:TCP:80").len(), 1);
    // ERROR: deleted and recreated, complete again.
    fake.set_status(&lb.id, status::ERROR);
    converge(&fake, &mut k, false).await;
    let lbs = fake.load_balancers();
    assert_eq!(lbs.len(), 1);
    assert_ne!(lbs[0].id, lb.id);
    assert_eq!(fake.members_of("ns/svc:TCP:80").len(), 1);
    let st = k.status.expect("status");
    assert_eq!(st.loadbalancer.map(|l| l.id), Some(lbs[0].id.clone()));
}

#[test]
fn status_records_the_tree() {
    let k = klb(
        &[(None, 80, "TCP")],
        vec![slice(&[("a", "10.0.1.5", Some(true))], &[(None, 8080, "TCP")])],
    );
    let d = desired(&k, &settings(), V, &subnets()).expect("spec");
    let tree = StatusTree {
        listeners: vec![kuryr_openstack::octavia::TreeListener {
            id: "l".into(),
            name: "ns/svc:TCP:80".into(),
            pools: vec![kuryr_openstack::octavia::TreePool {
                id: "p".into(),
                members: vec![kuryr_openstack::octavia::TreeMember {
                    id: "m".into(),
                    name: "ns/a:8080".into(),
                    address: "10.0.1.5".into(),
                    protocol_port: 8080,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let st = status_of(&lb("ACTIVE"), &tree, &d, &Default::default());
    let m = &st.members.expect("members")[0];
    assert_eq!(
        (m.ip.as_str(), m.port, m.subnet_id.as_str()),
        ("10.0.1.5", 8080, "ns-subnet")
    );
    assert_eq!(st.pools.expect("pools")[0].listener_id, "l");
    assert_eq!(st.listeners.expect("listeners")[0].port, 80);
}

#[tokio::test]
async fn a_new_service_is_one_octavia_write() {
    let fake = FakeOctavia::new().with_settle_reads(1);
    let mut k = klb(
        &[(None, 80, "TCP"), (Some("dns"), 53, "UDP")],
        vec![slice(
            &[("a", "10.0.1.5", Some(true)), ("b", "10.0.1.6", Some(true))],
            &[(None, 8080, "TCP"), (Some("dns"), 5353, "UDP")],
        )],
    );
    converge(&fake, &mut k, true).await;
    assert_eq!(fake.writes(), 1, "the whole tree in the create");
    assert_eq!(fake.members_of("ns/svc:UDP:53").len(), 2);
    let st = k.status.expect("status");
    assert_eq!(st.members.map(|m| m.len()), Some(4));
}

#[test]
fn load_balancer_type_gets_its_floating_ip_after_the_load_balancer_and_releases_it_before() {
    use super::public_ip::{FipStep, PublicIp};
    let mut k = klb(&[(None, 80, "TCP")], vec![]);
    k.spec.type_ = Some("LoadBalancer".into());
    // No external network configured: a Warning, no floating IP.
    let d = desired(&k, &settings(), V, &subnets()).expect("desired");
    assert_eq!(d.public_ip, None);
    assert!(
        d.unsupported.iter().any(|u| u.contains("external_svc_net")),
        "{:?}",
        d.unsupported
    );
    let mut s = settings();
    s.external_net = Some("ext".into());
    let d = desired(&k, &s, V, &subnets()).expect("desired");
    assert_eq!(d.public_ip, Some(PublicIp::Pool));
    k.spec.lb_ip = Some("172.24.4.50".into());
    assert_eq!(
        desired(&k, &s, V, &subnets()).expect("desired").public_ip,
        Some(PublicIp::User("172.24.4.50".into()))
    );
    k.spec.lb_ip = None;

    // Converged load balancer, no floating IP yet: allocate one.
    let mut lb_active = lb(status::ACTIVE);
    lb_active.vip_port_id = "vip".into();
    let tree = StatusTree {
        provisioning_status: status::ACTIVE.into(),
        listeners: vec![kuryr_openstack::octavia::TreeListener {
            id: "l1".into(),
            name: "ns/svc:TCP:80".into(),
            pools: vec![kuryr_openstack::octavia::TreePool {
                id: "p1".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut o = observed(&k, Some(lb_active.clone()), Some(tree));
    o.desired = desired(&k, &s, V, &subnets());
    o.fip.ingress = Some(vec![]);
    assert_eq!(plan(&o).steps, vec![Step::PublicIp(FipStep::Create)]);
    // Being deleted with a recorded pool address: the address goes before the load balancer.
    o.deleting = true;
    o.status.service_pub_ip_info = Some(k::ServicePubIpInfo {
        ip_id: "f1".into(),
        ip_addr: "172.24.4.11".into(),
        alloc_method: "pool".into(),
    });
    o.fip.recorded = Some(kuryr_openstack::FloatingIp {
        id: "f1".into(),
        floating_ip_address: "172.24.4.11".into(),
        port_id: Some("vip".into()),
        tags: vec!["other-cluster".into()],
        ..Default::default()
    });
    // The status says "pool", but the address carries another cluster's tags: it is only
    // taken off the VIP, never deleted.
    assert_eq!(
        plan(&o).steps,
        vec![Step::PublicIp(FipStep::Disassociate("f1".into()))]
    );
    if let Some(f) = o.fip.recorded.as_mut() {
        f.tags = o.tags.to_vec();
    }
    assert_eq!(plan(&o).steps, vec![Step::PublicIp(FipStep::Delete("f1".into()))]);
    o.fip.recorded = None;
    assert_eq!(plan(&o).steps, vec![Step::PublicIp(FipStep::Record(None))]);
    o.status.service_pub_ip_info = None;
    assert!(matches!(plan(&o).steps.as_slice(), [Step::DeleteLb { .. }]));
}

#[tokio::test]
async fn source_ranges_and_client_ip_affinity_are_applied_where_the_provider_has_them() {
    let fake = FakeOctavia::new().with_settle_reads(1);
    let mut k = klb(
        &[(None, 80, "TCP")],
        vec![slice(&[("a", "10.0.1.5", Some(true))], &[(None, 8080, "TCP")])],
    );
    k.spec.provider = Some("amphora".into());
    k.spec.type_ = Some("LoadBalancer".into());
    k.spec.source_ranges = Some(vec!["192.0.2.0/24".into(), "not-a-cidr".into()]);
    k.spec.session_affinity = Some("ClientIP".into());
    let d = desired(&k, &settings(), V, &subnets()).expect("desired");
    assert_eq!(
        d.listeners[0].allowed_cidrs.as_deref(),
        Some(
            &[
                "10.0.0.0/16".to_string(),
                "10.0.1.0/24".into(),
                "192.0.2.0/24".into()
            ][..]
        ),
        "the ranges plus the pod subnets (in-cluster clients keep the ClusterIP)"
    );
    assert!(d.listeners[0].source_ip_persistence);
    assert!(
        d.unsupported.iter().any(|u| u.contains("not-a-cidr")),
        "{:?}",
        d.unsupported
    );

    // Created with both in one write (fully populated), nothing more to change.
    converge(&fake, &mut k, true).await;
    let lb = fake.load_balancers()[0].id.clone();
    let listeners = fake.list_listeners(&lb).await.expect("listeners");
    assert!(
        listeners[0]
            .allowed_cidrs
            .as_ref()
            .is_some_and(|c| c.contains(&"192.0.2.0/24".to_string()))
    );
    assert!(fake.list_pools(&lb).await.expect("pools")[0].source_ip_persistence());
    let writes = fake.writes();
    converge(&fake, &mut k, true).await;
    assert_eq!(fake.writes(), writes, "converged: no write");

    // Ranges changed: one listener update; affinity dropped: one pool update.
    k.spec.source_ranges = Some(vec!["198.51.100.0/24".into()]);
    k.spec.session_affinity = None;
    converge(&fake, &mut k, true).await;
    assert_eq!(fake.writes(), writes + 2);
    assert_eq!(fake.calls(kuryr_openstack::ops::LISTENER_UPDATE), 1);
    assert_eq!(fake.calls(kuryr_openstack::ops::POOL_UPDATE), 1);
    assert!(!fake.list_pools(&lb).await.expect("pools")[0].source_ip_persistence());
    // Ranges removed: every source again.
    k.spec.source_ranges = None;
    converge(&fake, &mut k, true).await;
    assert_eq!(
        fake.list_listeners(&lb).await.expect("listeners")[0].allowed_cidrs,
        None
    );

    // The ovn provider has neither: Warnings, nothing read or applied.
    k.spec.provider = Some("ovn".into());
    k.spec.source_ranges = Some(vec!["192.0.2.0/24".into()]);
    k.spec.session_affinity = Some("ClientIP".into());
    let d = desired(&k, &settings(), V, &subnets()).expect("desired");
    assert!(!d.options_apply);
    assert_eq!(d.listeners[0].allowed_cidrs, None);
    assert!(!d.listeners[0].source_ip_persistence);
    assert!(
        d.unsupported
            .iter()
            .any(|u| u.starts_with("loadBalancerSourceRanges: the ovn provider"))
    );
    assert!(
        d.unsupported
            .iter()
            .any(|u| u.starts_with("sessionAffinity ClientIP: the ovn provider"))
    );
    // Octavia before 2.12: no allowed_cidrs, said so.
    k.spec.provider = Some("amphora".into());
    let old = desired(&k, &settings(), ApiVersion { minor: 11 }, &subnets()).expect("desired");
    assert_eq!(old.listeners[0].allowed_cidrs, None);
    assert!(old.unsupported.iter().any(|u| u.contains("< v2.12")));
}

#[test]
fn what_the_provider_cannot_do_is_warned_once_per_change_not_every_pass() {
    use kuryr_openstack::octavia::{TreeListener, TreePool};
    let mut k = klb(&[(None, 80, "TCP")], vec![]);
    k.spec.session_affinity = Some("ClientIP".into()); // the ovn provider has none
    let mut active = lb(status::ACTIVE);
    active.vip_port_id = "vip".into();
    let tree = StatusTree {
        provisioning_status: status::ACTIVE.into(),
        listeners: vec![TreeListener {
            id: "l1".into(),
            name: "ns/svc:TCP:80".into(),
            pools: vec![TreePool {
                id: "p1".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut o = observed(&k, Some(active), Some(tree));
    let d = o.desired.clone().expect("desired");
    o.status = super::plan::status_of(
        o.lb.as_ref().expect("lb"),
        o.tree.as_ref().expect("tree"),
        &d,
        &o.status,
    );
    // Status already recorded, list not yet told: the Warning alone.
    assert!(
        matches!(plan(&o).steps.as_slice(), [Step::WarnUnsupported(w)] if w[0].starts_with("sessionAffinity"))
    );
    o.warned = super::plan::notes(&d, o.tree.as_ref().expect("tree"));
    assert!(plan(&o).steps.is_empty());
}

#[tokio::test]
async fn health_monitors_follow_the_spec_and_one_in_error_is_told_not_retried() {
    use kuryr_types::kuryrloadbalancer::KlbHealthMonitor;
    let fake = FakeOctavia::new().with_settle_reads(1);
    let mut k = klb(
        &[(None, 80, "TCP"), (Some("dns"), 53, "UDP")],
        vec![slice(
            &[("a", "10.0.1.5", Some(true))],
            &[(None, 8080, "TCP"), (Some("dns"), 5353, "UDP")],
        )],
    );
    k.spec.health_monitor = Some(KlbHealthMonitor {
        delay: 5,
        timeout: 9,
        max_retries: 1,
        max_retries_down: 3,
    });
    let d = desired(&k, &settings(), V, &subnets()).expect("desired");
    assert!(
        d.unsupported
            .iter()
            .any(|u| u.contains("timeout 9 s > delay 5 s")),
        "{:?}",
        d.unsupported
    );
    converge(&fake, &mut k, true).await;
    let tcp = fake
        .health_monitor_of("ns/svc:TCP:80")
        .expect("TCP pool monitored");
    assert_eq!((tcp.type_.as_str(), tcp.delay, tcp.timeout), ("TCP", 5, 5));
    let udp = fake
        .health_monitor_of("ns/svc:UDP:53")
        .expect("UDP pool monitored");
    assert_eq!(udp.type_, "UDP-CONNECT");
    let writes = fake.writes();
    converge(&fake, &mut k, true).await;
    assert_eq!(fake.writes(), writes, "converged: no write");
    // Settings changed: deleted and created again (per pool).
    if let Some(h) = k.spec.health_monitor.as_mut() {
        h.timeout = 2;
    }
    converge(&fake, &mut k, true).await;
    assert_eq!(
        fake.health_monitor_of("ns/svc:TCP:80").map(|h| h.timeout),
        Some(2)
    );
    assert_eq!(fake.writes(), writes + 4);
    // The provider leaves one in ERROR: no retry loop; the Service is told.
    fake.set_health_monitor_status("ns/svc:TCP:80", status::ERROR);
    let writes = fake.writes();
    converge(&fake, &mut k, true).await;
    assert_eq!(fake.writes(), writes);
    let lb = fake.load_balancers()[0].clone();
    let tree = fake.status_tree(&lb.id).await.expect("tree");
    let d = desired(&k, &settings(), V, &subnets()).expect("desired");
    assert!(
        super::plan::notes(&d, &tree)
            .iter()
            .any(|n| n.starts_with("health monitor of ns/svc:TCP:80"))
    );
    // Annotation removed: both go.
    k.spec.health_monitor = None;
    converge(&fake, &mut k, true).await;
    assert_eq!(fake.health_monitor_of("ns/svc:TCP:80"), None);
    assert_eq!(fake.health_monitor_of("ns/svc:UDP:53"), None);
}

#[test]
fn the_port_holding_a_vip_is_named_with_its_owner() {
    use super::execute::{lb_of_vip_port, vip_holder};
    use kuryr_openstack::Port;
    let ovn = Port {
        id: "p1".into(),
        name: "ovn-lb-vip-62b0eb82".into(),
        tags: vec!["kuryr-cluster-1".into()],
        ..Port::default()
    };
    assert_eq!(lb_of_vip_port(&ovn), Some("62b0eb82"));
    assert_eq!(
        vip_holder(&ovn),
        "the VIP port p1 of load balancer 62b0eb82, tags kuryr-cluster-1"
    );
    let amphora = Port {
        id: "p2".into(),
        name: "octavia-lb-9".into(),
        device_owner: "Octavia".into(),
        device_id: "lb-9".into(),
        ..Port::default()
    };
    assert_eq!(lb_of_vip_port(&amphora), Some("9"));
    assert_eq!(vip_holder(&amphora), "the VIP port p2 of load balancer 9");
    let vm = Port {
        id: "p3".into(),
        name: "db-0".into(),
        device_owner: "compute:nova".into(),
        ..Port::default()
    };
    assert_eq!(lb_of_vip_port(&vm), None);
    assert_eq!(vip_holder(&vm), "port p3 (db-0), device_owner compute:nova");
    let bare = Port {
        id: "p4".into(),
        name: "ovn-lb-vip-".into(),
        ..Port::default()
    };
    assert_eq!(lb_of_vip_port(&bare), None);
    assert_eq!(vip_holder(&bare), "port p4 (ovn-lb-vip-)");
}
