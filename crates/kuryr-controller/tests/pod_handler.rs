//! The pod handler against the in-process emulated API server: KuryrPorts for scheduled pods,
//! none for host-network pods, deletion under finalizers (the KuryrPort handler is simulated
//! by removing the KuryrPort finalizer), other controllers' finalizers kept, create-then-delete races, restart convergence, Events
//! on failures, and the health and metrics endpoints.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use kuryr_controller::handlers::pod;
use kuryr_types::{
    KuryrPort,
    constants::{KURYRPORT_FINALIZER, KURYRPORT_LABEL, POD_FINALIZER},
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_pods_get_kuryrports_and_health_answers() {
    let env = sandbox().await;
    let ctx = context(&env.client);
    let health = serve_local(kuryr_controller::health::router(ctx.health.clone())).await;
    let metrics = serve_local(kuryr_controller::metrics::router(ctx.metrics.clone())).await;

    // No CRD yet: not ready, like upstream's 404.
    let (code, body) = http_get(health, "/ready").await;
    assert_eq!(code, 404, "{body}");
    install_crds_and_ns(&env.client).await;
    let handler = start_handler(&ctx);

    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    for i in 0..20 {
        let name = if i % 2 == 0 {
            format!("p{i}a")
        } else {
            format!("p{i}b")
        };
        pods.create(&PostParams::default(), &mk_pod(&name, false))
            .await
            .expect("create pod");
    }
    pods.create(&PostParams::default(), &mk_pod("hostnet", true))
        .await
        .expect("create hostnet pod");

    let all = wait_for("20 KuryrPorts", Duration::from_secs(30), async || {
        let l = ports.list(&ListParams::default()).await.ok()?;
        (l.items.len() >= 20).then_some(l.items)
    })
    .await;
    assert_eq!(all.len(), 20);
    for kp in &all {
        let pod = pods.get(&kp.name_any()).await.expect("pod of port");
        assert_eq!(kp.spec.pod_uid, pod.uid().expect("uid"));
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).expect("node");
        assert_eq!(kp.spec.pod_node_name, node);
        assert_eq!(kp.spec.pod_static, Some(false));
        assert_eq!(kp.labels().get(KURYRPORT_LABEL), Some(&node));
        assert_eq!(kp.finalizers(), [KURYRPORT_FINALIZER.to_owned()]);
        assert_eq!(kp.owner_references()[0].uid, pod.uid().expect("uid"));
        assert!(
            pod.finalizers().iter().any(|f| f == POD_FINALIZER),
            "{:?}",
            pod.finalizers()
        );
    }
    assert!(ports.get_opt("hostnet").await.expect("get").is_none());
    let hostnet = pods.get("hostnet").await.expect("hostnet pod");
    assert!(hostnet.finalizers().is_empty());

    let (code, body) = wait_for("ready", Duration::from_secs(10), async || {
        let r = http_get(health, "/ready").await;
        (r.0 == 200).then_some(r)
    })
    .await;
    assert_eq!((code, body.as_str()), (200, "ok"));
    assert_eq!(http_get(health, "/alive").await, (200, "ok".to_owned()));
    let (code, text) = http_get(metrics, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        text.contains("kuryr_reconcile_total{handler=\"vif\",outcome=\"ok\"}"),
        "{text}"
    );
    assert!(text.contains("kuryr_pod_port_latency_seconds_bucket"), "{text}");

    // A dead handler loop fails liveness.
    handler.abort();
    ctx.health.handler_died(pod::HANDLER);
    assert_eq!(http_get(health, "/alive").await.0, 500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_pod_waits_for_its_port_to_be_released() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let ctx = context(&env.client);
    let _handler = start_handler(&ctx);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    pods.create(&PostParams::default(), &mk_pod("web", false))
        .await
        .expect("create");
    wait_for("KuryrPort web", Duration::from_secs(10), async || {
        ports.get_opt("web").await.ok().flatten()
    })
    .await;
    delete_now(&pods, "web").await;

    let kp = wait_for("KuryrPort being deleted", Duration::from_secs(10), async || {
        let kp = ports.get_opt("web").await.ok().flatten()?;
        kp.metadata.deletion_timestamp.is_some().then_some(kp)
    })
    .await;
    assert_eq!(kp.finalizers(), [KURYRPORT_FINALIZER.to_owned()]);
    // The pod must outlive its port.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pod = pods.get("web").await.expect("pod still there");
    assert!(pod.metadata.deletion_timestamp.is_some());
    assert!(pod.finalizers().iter().any(|f| f == POD_FINALIZER));

    release_port(&ports, "web").await;
    wait_for("pod and port gone", Duration::from_secs(10), async || {
        let pod = pods.get_opt("web").await.ok()?;
        let kp = ports.get_opt("web").await.ok()?;
        (pod.is_none() && kp.is_none()).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_finalizers_are_kept_and_busy_pods_get_ours() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let ctx = context(&env.client);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    const OTHER: &str = "example.com/other";
    let mut pod = mk_pod("busy", false);
    pod.metadata.finalizers = Some(vec![OTHER.to_owned()]);
    pods.create(&PostParams::default(), &pod).await.expect("create");
    // Another writer keeps updating the pod (as the kubelet does with its status) while the
    // handler adds its finalizer: unrelated updates must not make that write fail.
    let writer = {
        let pods = pods.clone();
        tokio::spawn(async move {
            for i in 0..200 {
                let p = json!({"metadata": {"labels": {"tick": i.to_string()}}});
                let _ = pods
                    .patch("busy", &PatchParams::default(), &Patch::Merge(&p))
                    .await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let _handler = start_handler(&ctx);
    wait_for("KuryrPort busy", Duration::from_secs(10), async || {
        ports.get_opt("busy").await.ok().flatten()
    })
    .await;
    writer.abort();
    let pod = pods.get("busy").await.expect("pod");
    assert_eq!(pod.finalizers(), [OTHER.to_owned(), POD_FINALIZER.to_owned()]);

    // Deletion: ours goes once the port is released, the other one stays (and holds the pod).
    delete_now(&pods, "busy").await;
    wait_for("KuryrPort being deleted", Duration::from_secs(10), async || {
        let kp = ports.get_opt("busy").await.ok().flatten()?;
        kp.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    release_port(&ports, "busy").await;
    let pod = wait_for("pod finalizer removed", Duration::from_secs(10), async || {
        let p = pods.get_opt("busy").await.ok().flatten()?;
        (p.finalizers() == [OTHER.to_owned()]).then_some(p)
    })
    .await;
    assert!(pod.metadata.deletion_timestamp.is_some());
    let p = json!({"metadata": {"finalizers": null}});
    pods.patch("busy", &PatchParams::default(), &Patch::Merge(&p))
        .await
        .expect("drop the other finalizer");
    wait_for("pod gone", Duration::from_secs(10), async || {
        pods.get_opt("busy").await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_pod_releases_its_port() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let ctx = context(&env.client);
    let _handler = start_handler(&ctx);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    pods.create(&PostParams::default(), &mk_pod("job", false))
        .await
        .expect("create");
    wait_for("KuryrPort job", Duration::from_secs(10), async || {
        ports.get_opt("job").await.ok().flatten()
    })
    .await;
    let status = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status("job", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("complete pod");
    wait_for(
        "KuryrPort job being deleted",
        Duration::from_secs(10),
        async || {
            let kp = ports.get_opt("job").await.ok().flatten()?;
            kp.metadata.deletion_timestamp.is_some().then_some(())
        },
    )
    .await;
    release_port(&ports, "job").await;
    wait_for(
        "pod finalizer removed, pod kept",
        Duration::from_secs(10),
        async || {
            let pod = pods.get("job").await.ok()?;
            let kp = ports.get_opt("job").await.ok()?;
            (kp.is_none() && pod.finalizers().is_empty()).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_deleted_right_away_leaves_nothing_behind() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let ctx = context(&env.client);
    let _handler = start_handler(&ctx);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    for i in 0..5 {
        let name = format!("short{i}");
        pods.create(&PostParams::default(), &mk_pod(&name, false))
            .await
            .expect("create");
        delete_now(&pods, &name).await;
    }
    wait_for("nothing left", Duration::from_secs(20), async || {
        // Whatever port got created must be on its way out; the test plays the port handler.
        for kp in ports.list(&ListParams::default()).await.ok()?.items {
            if kp.metadata.deletion_timestamp.is_some() {
                release_port(&ports, &kp.name_any()).await;
            }
        }
        let left = pods.list(&ListParams::default()).await.ok()?.items.len()
            + ports.list(&ListParams::default()).await.ok()?.items.len();
        (left == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_controller_converges() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    let first = start_handler(&context(&env.client));
    for i in 0..6 {
        pods.create(&PostParams::default(), &mk_pod(&format!("r{i}"), false))
            .await
            .expect("create");
    }
    wait_for("a first KuryrPort", Duration::from_secs(10), async || {
        let n = ports.list(&ListParams::default()).await.ok()?.items.len();
        (n > 0).then_some(())
    })
    .await;
    first.abort();
    let _ = first.await;
    // While the controller is down: more pods, and deletions.
    for i in 6..10 {
        pods.create(&PostParams::default(), &mk_pod(&format!("r{i}"), false))
            .await
            .expect("create");
    }
    delete_now(&pods, "r0").await;
    delete_now(&pods, "r7").await;

    let _second = start_handler(&context(&env.client));
    wait_for(
        "ports of live pods, deleted pods' ports released",
        Duration::from_secs(30),
        async || {
            for kp in ports.list(&ListParams::default()).await.ok()?.items {
                if kp.metadata.deletion_timestamp.is_some() {
                    release_port(&ports, &kp.name_any()).await;
                }
            }
            let mut pod_names: Vec<String> = pods
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .map(|p| p.name_any())
                .collect();
            let mut port_names: Vec<String> = ports
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .map(|p| p.name_any())
                .collect();
            pod_names.sort();
            port_names.sort();
            let want: Vec<String> = [1, 2, 3, 4, 5, 6, 8, 9].iter().map(|i| format!("r{i}")).collect();
            (pod_names == want && port_names == want).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_already_deleting_gets_no_port_and_no_finalizer() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    let ports: Api<KuryrPort> = Api::namespaced(env.client.clone(), NS);
    // Another controller's finalizer keeps the pod around, deleted, before kuryr saw it.
    let mut held = mk_pod("held", false);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    pods.create(&PostParams::default(), &held).await.expect("create");
    delete_now(&pods, "held").await;

    let ctx = context(&env.client);
    let _handler = start_handler(&ctx);
    wait_for("pod reconciled", Duration::from_secs(10), async || {
        let text = ctx.metrics.render().ok()?;
        text.contains("kuryr_reconcile_total{handler=\"vif\",outcome=\"ok\"}")
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(ports.get_opt("held").await.expect("get").is_none());
    let pod = pods.get("held").await.expect("pod");
    assert_eq!(pod.finalizers(), ["example.com/hold".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_is_recorded_as_event_on_the_pod() {
    let env = sandbox().await;
    // No CRDs: the handler cannot read or create KuryrPorts.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns");
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
    pods.create(&PostParams::default(), &mk_pod("lonely", false))
        .await
        .expect("create");
    let ctx = context(&env.client);
    let _handler = start_handler(&ctx);
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client.clone(), NS);
    let ev = wait_for("Warning event on the pod", Duration::from_secs(20), async || {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("lonely"))
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    // As upstream: the finalizer goes on first, then creating the KuryrPort fails.
    assert_eq!(ev.reason.as_deref(), Some("FailedToCreateKuryrPortCRD"));
    let text = ctx.metrics.render().expect("metrics");
    assert!(text.contains("outcome=\"create_port\""), "{text}");
    let pod = pods.get("lonely").await.expect("pod");
    assert_eq!(pod.finalizers(), [POD_FINALIZER.to_owned()]);
}
