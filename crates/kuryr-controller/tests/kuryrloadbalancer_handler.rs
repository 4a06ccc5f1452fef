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
    klbs.delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    wait_for("KLB gone", Duration::from_secs(30), async || {
        klbs.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(fake.load_balancers().is_empty(), "{:?}", fake.load_balancers());
    let lb_list = fake.list_load_balancers(&Default::default()).await.expect("list");
    assert!(lb_list.is_empty());
    handler.abort();
}
