//! A server with `--data-dir`, stopped and started again on the same address: objects, custom
//! resources, the resourceVersion counter, ClusterIPs, the CA and minted tokens survive; a watch
//! from before the restart gets 410 and a kube-rs watcher lists again and goes on.

mod common;

use std::time::Duration;

use common::client_for;
use futures::StreamExt;
use k8s_openapi::api::{
    authentication::v1::TokenRequest,
    core::v1::{ConfigMap, Service, ServiceAccount},
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Client,
    api::{
        Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent, WatchParams,
    },
    runtime::{WatchStreamExt, watcher},
};
use kube_sandbox_apiserver::{Config, start};
// Below the ephemeral range: the API server restarts on this port ([`sandbox_guard::ports`]).
use sandbox_guard::free_addr;
use serde_json::json;

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .expect("crd")
}

fn widgets(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    Api::namespaced_with(client.clone(), "default", &ar)
}

fn rv_of(meta: &kube::core::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
        .expect("rv")
}

#[tokio::test]
async fn state_survives_a_restart_and_watchers_list_again() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut cfg = Config::local(dir.path().join("kubeconfig"));
    cfg.listen = free_addr();
    cfg.tls = true;
    cfg.token = Some("admin-token".into());
    cfg.data_dir = Some(dir.path().join("data"));

    let server = start(cfg.clone()).await?;
    let client = client_for(&server.kubeconfig).await?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let first = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "before"}}))?,
        )
        .await?;
    let first_rv = rv_of(&first.metadata);
    let gone: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "gone"}}))?;
    cms.create(&PostParams::default(), &gone).await?;
    cms.delete("gone", &Default::default()).await?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &widget_crd())
        .await?;
    let w: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}}),
    )?;
    // The CRD is served as soon as it is created.
    let mut created = None;
    for _ in 0..50 {
        match widgets(&client).create(&PostParams::default(), &w).await {
            Ok(o) => {
                created = Some(o);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert!(created.is_some(), "the widget was not created");
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}], "type": "NodePort"}}),
    )?;
    let svc = Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &svc)
        .await?;
    let cluster_ip = svc
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .expect("clusterIP");
    Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "robot"}}))?,
        )
        .await?;
    let tr: TokenRequest = serde_json::from_value(json!({"spec": {"audiences": []}}))?;
    let minted = Api::<ServiceAccount>::namespaced(client.clone(), "default")
        .create_subresource::<TokenRequest, TokenRequest>("token", "robot", &PostParams::default(), &tr)
        .await?;
    let sa_token = minted.status.expect("status").token;
    let before_rv: u64 = cms
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()?;

    // A kube-rs watcher running across the restart.
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let watch_task = {
        let (cms, seen) = (cms.clone(), seen.clone());
        tokio::spawn(async move {
            let mut s = watcher(cms, watcher::Config::default()).applied_objects().boxed();
            while let Some(ev) = s.next().await {
                if let Ok(cm) = ev {
                    seen.lock().push(cm.metadata.name.unwrap_or_default());
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.shutdown().await;
    let server = start(cfg.clone()).await?;
    // The kubeconfig written again carries the same CA: the old client keeps working.
    let names: Vec<String> = cms
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(
        names.contains(&"before".to_string()) && !names.contains(&"gone".to_string()),
        "{names:?}"
    );
    let w1 = widgets(&client).get("w1").await?;
    assert_eq!(w1.data["spec"]["size"], 3);
    // The counter goes on from where it was.
    let after = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "after"}}))?,
        )
        .await?;
    assert!(
        rv_of(&after.metadata) > before_rv,
        "{} <= {before_rv}",
        rv_of(&after.metadata)
    );
    // The ClusterIP is still held.
    let clash: Service = serde_json::from_value(
        json!({"metadata": {"name": "clash"}, "spec": {"clusterIP": cluster_ip, "ports": [{"port": 80}]}}),
    )?;
    let e = Api::<Service>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &clash)
        .await
        .expect_err("a held ClusterIP");
    assert!(e.to_string().contains("already allocated"), "{e}");
    // A watch from a version older than the restart is told it is gone (from the last version
    // before the restart it may resume: nothing after it was lost).
    let mut w = cms
        .watch(&WatchParams::default(), &first_rv.to_string())
        .await?
        .boxed();
    match tokio::time::timeout(Duration::from_secs(5), w.next()).await? {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!(e.code, 410, "{e:?}"),
        other => panic!("expected 410 Gone, got {other:?}"),
    }
    // The token minted before still authenticates.
    let mut sa_cfg = kube::Config::new(server.url.parse()?);
    sa_cfg.root_cert = Some(vec![rustls_pemfile_first(server.ca_pem.as_deref().expect("ca"))?]);
    sa_cfg.auth_info.token = Some(sa_token.into());
    let sa_client = Client::try_from(sa_cfg)?;
    let e = Api::<ConfigMap>::namespaced(sa_client, "default")
        .list(&ListParams::default())
        .await
        .expect_err("no RBAC for robot");
    assert!(
        e.to_string().contains("forbidden"),
        "authenticated, then refused by RBAC: {e}"
    );
    // The watcher listed again and saw the object created after the restart.
    for _ in 0..100 {
        if seen.lock().iter().any(|n| n == "after") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen.lock().iter().any(|n| n == "after"), "{:?}", seen.lock());
    watch_task.abort();
    server.shutdown().await;
    Ok(())
}

/// The DER bytes of the first certificate of a PEM text.
fn rustls_pemfile_first(pem: &str) -> anyhow::Result<Vec<u8>> {
    use base64::Engine as _;
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN CERTIFICATE"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    Ok(base64::engine::general_purpose::STANDARD.decode(body)?)
}
