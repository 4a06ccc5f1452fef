//! Driver selection against the in-process emulated API server: the `annotation` project driver
//! reads the namespace's `openstack.org/kuryr-project` (else `[neutron_defaults] project`), the
//! `namespace` subnets driver answers from the namespace's KuryrNetwork status — both from
//! watch-fed caches, `NotReady` until the KuryrNetwork has its subnet. Unknown driver names are
//! configuration errors.

mod common;

use std::{sync::Arc, time::Duration};

use common::*;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kuryr_controller::drivers::{DriverError, Drivers};
use kuryr_openstack::{Neutron, fake::FakeNeutron};
use kuryr_types::{KuryrNetwork, KuryrNetworkSpec, constants::ANNOTATION_PROJECT};
use serde_json::json;

fn config(project_driver: &str, subnets_driver: &str) -> kuryr_config::Config {
    let text = format!(
        "[kubernetes]\npod_project_driver = {project_driver}\npod_subnets_driver = {subnets_driver}\n\
         [neutron_defaults]\nproject = default-project\npod_subnet = s0\npod_security_groups = sg2,sg1\n"
    );
    kuryr_config::from_strs(&[("test.conf", text.as_str())], kuryr_config::Role::Any, &|_| {
        None
    })
    .expect("config")
    .0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotation_project_and_namespace_subnets_from_caches() {
    let env = sandbox().await;
    install_crds_and_ns(&env.client).await;
    let client = env.client.clone();
    let neutron: Arc<dyn Neutron> = Arc::new(FakeNeutron::new());
    let drivers = Drivers::from_config(
        &config("annotation", "namespace"),
        client.clone(),
        neutron.clone(),
    )
    .expect("drivers");

    for (name, project) in [("annotated", Some("p-annotated")), ("plain", None)] {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {
            "name": name,
            "annotations": project.map(|p| json!({ANNOTATION_PROJECT: p})).unwrap_or(json!({})),
        }}))
        .expect("ns");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace");
    }
    let pod = |ns: &str| -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": ns}, "spec": {"containers": []}}),
        )
        .expect("pod")
    };
    // No KuryrNetwork yet: not ready (the caller requeues).
    let err = wait_for(
        "namespace cached",
        Duration::from_secs(10),
        async || match drivers.pod_target(&pod("annotated")).await {
            Err(DriverError::NotReady(m)) if m.contains("KuryrNetwork") => Some(m),
            _ => None,
        },
    )
    .await;
    println!("before the KuryrNetwork: {err}");

    for ns in ["annotated", "plain"] {
        let mut kn = KuryrNetwork::new(
            ns,
            KuryrNetworkSpec {
                ns_name: ns.into(),
                project_id: "x".into(),
                ns_labels: Default::default(),
            },
        );
        kn.metadata.namespace = Some(ns.into());
        let api: Api<KuryrNetwork> = Api::namespaced(client.clone(), ns);
        api.create(&PostParams::default(), &kn).await.expect("kn");
        // Network but no subnet yet: still not ready.
        let st = json!({"status": {"netId": format!("net-{ns}")}});
        api.patch(ns, &PatchParams::default(), &Patch::Merge(&st))
            .await
            .expect("status");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(matches!(
        drivers.pod_target(&pod("plain")).await,
        Err(DriverError::NotReady(m)) if m.contains("no subnet")
    ));
    for ns in ["annotated", "plain"] {
        let api: Api<KuryrNetwork> = Api::namespaced(client.clone(), ns);
        let st = json!({"status": {"subnetId": format!("sub-{ns}")}});
        api.patch(ns, &PatchParams::default(), &Patch::Merge(&st))
            .await
            .expect("status");
    }
    let t = wait_for("targets", Duration::from_secs(10), async || {
        drivers.pod_target(&pod("annotated")).await.ok()
    })
    .await;
    assert_eq!(t.project_id, "p-annotated");
    assert_eq!(t.network_id, "net-annotated");
    assert_eq!(t.subnet_ids, ["sub-annotated"]);
    assert_eq!(t.security_groups, ["sg1", "sg2"]);
    let t = wait_for("plain target", Duration::from_secs(10), async || {
        drivers.pod_target(&pod("plain")).await.ok()
    })
    .await;
    assert_eq!(t.project_id, "default-project");
    assert_eq!(t.network_id, "net-plain");

    // Unknown names are configuration errors, not retried.
    for (p, s) in [("bogus", "default"), ("default", "bogus")] {
        match Drivers::from_config(&config(p, s), client.clone(), neutron.clone()) {
            Err(e @ DriverError::UnknownDriver { .. }) => {
                assert!(!e.is_transient());
                println!("{e}");
            }
            other => panic!("expected UnknownDriver, got {:?}", other.err()),
        }
    }
}
