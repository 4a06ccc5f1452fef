//! The KuryrLoadBalancer handler against the in-process emulated API server and a fake Octavia
//! that fails: Octavia unreachable → Warning Events and retries with back-off (no crash, the
//! handler stays alive), convergence once it answers (status written, one load balancer), ERROR
//! → recreated, and deletion releasing the load balancer and the finalizer.

mod common;

use std::{sync::Arc, time::Duration};

use common::*;
use k8s_openapi::api::core::v1::Event;
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use kuryr_controller::handlers::kuryrloadbalancer;
use kuryr_openstack::{
    fake::FaultKind,
    octavia::{Octavia, fake::FakeOctavia, status},
    ops,
};
use kuryr_types::{
    KuryrLoadBalancer,
    constants::KURYRLB_FINALIZER,
    kuryrloadbalancer::{self as k, KuryrLoadBalancerSpec},
};

fn klb() -> KuryrLoadBalancer {
    let mut klb = KuryrLoadBalancer::new(
        "web",
        KuryrLoadBalancerSpec {
            ip: Some("10.96.0.10".into()),
            subnet_id: Some("svc-subnet".into()),
            project_id: Some("proj".into()),
            provider: Some("ovn".into()),
            ports: Some(vec![k::LbPort {
                name: None,
                port: 80,
                protocol: "TCP".into(),
                target_port: "8080".into(),
            }]),
            endpoint_slices: Some(vec![k::EndpointSlice {
                endpoints: Some(vec![k::Endpoint {
                    addresses: Some(vec!["10.0.0.5".into()]),
                    ..Default::default()
                }]),
                ports: Some(vec![k::EndpointPort {
                    name: None,
                    port: Some(8080),
                    protocol: Some("TCP".into()),
                }]),
            }]),
            ..Default::default()
        },
    );
    klb.metadata.namespace = Some(NS.into());
    klb.metadata.finalizers = Some(vec![KURYRLB_FINALIZER.into()]);
    klb
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn octavia_down_is_retried_with_events_then_converges_and_error_is_recreated() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let ctx = context(&env.client);
    let fake = Arc::new(FakeOctavia::new().with_settle_reads(2));
    // Octavia unreachable for the first 3 attempts.
    fake.fail_next(ops::LB_LIST, 3, FaultKind::Transport);
    let neutron = Arc::new(kuryr_openstack::fake::FakeNeutron::new());
    let handler = tokio::spawn(kuryrloadbalancer::run_with(
        ctx.clone(),
        fake.clone(),
        neutron,
        None,
    ));
    let klbs: Api<KuryrLoadBalancer> = Api::namespaced(env.client.clone(), NS);
    klbs.create(&PostParams::default(), &klb())
        .await
        .expect("create KLB");

    let events: Api<Event> = Api::namespaced(env.client.clone(), NS);
    let warned = wait_for("a Warning Event", Duration::from_secs(20), async || {
        let l = events.list(&ListParams::default()).await.ok()?;
        l.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("KuryrEnsureLBError"))
    })
    .await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    assert!(
        warned
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("transport"),
        "{warned:?}"
    );
    assert_eq!(
        warned.involved_object.kind.as_deref(),
        Some("Service"),
        "Events go to the Service"
    );

    // Octavia answers again: converged, status written, one load balancer with its member.
    let st = wait_for("status written", Duration::from_secs(30), async || {
        let k = klbs.get("web").await.ok()?;
        k.status
            .filter(|s| s.members.as_ref().is_some_and(|m| m.len() == 1))
    })
    .await;
    let lbs = fake.load_balancers();
    assert_eq!(lbs.len(), 1);
    assert_eq!(
        st.loadbalancer.as_ref().map(|l| l.id.clone()),
        Some(lbs[0].id.clone())
    );
    assert_eq!(fake.calls(ops::LB_CREATE), 1, "one create, whatever the retries");
    assert!(!handler.is_finished(), "the handler survived the outage");

    // ERROR: deleted and recreated.
    fake.set_status(&lbs[0].id, status::ERROR);
    let old = lbs[0].id.clone();
    // A status change alone triggers nothing; the periodic pass or any change does: touch it.
    let touch = serde_json::json!({"metadata": {"annotations": {"touch": "1"}}});
    klbs.patch("web", &Default::default(), &kube::api::Patch::Merge(&touch))
        .await
        .expect("touch");
    wait_for("recreated", Duration::from_secs(30), async || {
        let k = klbs.get("web").await.ok()?;
        let id = k.status?.loadbalancer?.id;
        (id != old && fake.load_balancers().iter().all(|l| l.id != old)).then_some(())
    })
    .await;
    assert_eq!(fake.load_balancers().len(), 1);

    // Deletion: the load balancer goes, then the finalizer.
    delete_and_wait(&klbs).await;
    assert!(fake.load_balancers().is_empty(), "{:?}", fake.load_balancers());
    let lb_list = fake.list_load_balancers(&Default::default()).await.expect("list");
    assert!(lb_list.is_empty());
    handler.abort();
}

/// A KuryrLoadBalancer whose status names another cluster's load balancer (a CR copied from
/// another cluster, or written by hand): that load balancer is never used, changed or deleted,
/// and the Service gets one of its own, tagged as ours; also when another cluster's load
/// balancer has the name ours would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_clusters_load_balancer_named_by_a_status_is_never_used_or_deleted() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let (cfg, _) = kuryr_config::from_strs(
        &[("t.conf", "[neutron_defaults]\ncluster_tag = kuryr-cluster=ours\n")],
        kuryr_config::Role::Any,
        &|_| None,
    )
    .expect("config");
    let ctx = Arc::new(kuryr_controller::Context::new(
        env.client.clone(),
        Arc::new(cfg),
        1,
    ));
    let fake = Arc::new(FakeOctavia::new());
    let theirs = |name: &str| kuryr_openstack::octavia::LbCreate {
        name: name.into(),
        description: "another cluster's".into(),
        project_id: "proj".into(),
        vip_subnet_id: "svc-subnet".into(),
        vip_address: Some("10.96.0.10".into()),
        provider: Some("ovn".into()),
        tags: vec!["kuryr-cluster=theirs".into()],
        listeners: vec![],
    };
    let recorded = fake
        .create_load_balancer(&theirs("theirs/web"))
        .await
        .expect("theirs");
    // Named as ours would be (same namespace and Service name in the other cluster).
    let same_name = fake
        .create_load_balancer(&theirs(&format!("{NS}/web")))
        .await
        .expect("same name");
    let klbs: Api<KuryrLoadBalancer> = Api::namespaced(env.client.clone(), NS);
    klbs.create(&PostParams::default(), &klb())
        .await
        .expect("create KLB");
    // The status names theirs before the handler first sees the KLB.
    let st = serde_json::json!({"status": {"loadbalancer": {
        "id": recorded.id, "name": recorded.name, "ip": "10.96.0.10", "subnet_id": "svc-subnet",
        "project_id": "proj", "provider": "ovn", "port_id": "vip-port", "security_groups": []}}});
    // (No status subresource on this CRD, as upstream's.)
    klbs.patch("web", &Default::default(), &kube::api::Patch::Merge(&st))
        .await
        .expect("status");
    assert_eq!(
        klbs.get("web")
            .await
            .expect("klb")
            .status
            .and_then(|s| s.loadbalancer)
            .map(|l| l.id),
        Some(recorded.id.clone())
    );
    let neutron = Arc::new(kuryr_openstack::fake::FakeNeutron::new());
    let handler = tokio::spawn(kuryrloadbalancer::run_with(ctx, fake.clone(), neutron, None));
    let ours = wait_for(
        "a load balancer of our own",
        Duration::from_secs(30),
        async || {
            let k = klbs.get("web").await.ok()?;
            let id = k.status?.loadbalancer?.id;
            (id != recorded.id && id != same_name.id && !id.is_empty()).then_some(id)
        },
    )
    .await;
    let lbs = fake.load_balancers();
    let mine = lbs.iter().find(|l| l.id == ours).expect("ours exists");
    assert!(mine.tags.contains(&"kuryr-cluster=ours".to_string()), "{mine:?}");
    for id in [&recorded.id, &same_name.id] {
        let l = lbs.iter().find(|l| &l.id == id).expect("theirs still there");
        assert_eq!(l.tags, ["kuryr-cluster=theirs"], "{l:?}");
    }
    // Deleting ours deletes ours only.
    delete_and_wait(&klbs).await;
    let left: Vec<String> = fake.load_balancers().into_iter().map(|l| l.id).collect();
    assert!(
        left.contains(&recorded.id) && left.contains(&same_name.id),
        "{left:?}"
    );
    assert!(!left.contains(&ours), "{left:?}");
    handler.abort();
}

/// Deletes KLB `web` and waits until it is gone (its finalizer released).
async fn delete_and_wait(klbs: &Api<KuryrLoadBalancer>) {
    klbs.delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("KLB gone", Duration::from_secs(30), async || {
        klbs.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
}
