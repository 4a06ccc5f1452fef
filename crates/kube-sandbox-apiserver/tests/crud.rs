//! CRUD through kube-rs: create/get/list/replace/delete and the Status errors clients see.

mod common;

use common::{env, status};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "x"}}, "data": {"k": "v"}}))
        .expect("configmap")
}

#[tokio::test]
async fn crud_and_errors() -> anyhow::Result<()> {
    let e = env().await?;
    let api: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    let created = api.create(&PostParams::default(), &cm("a")).await?;
    let md = &created.metadata;
    assert!(md.uid.is_some() && md.resource_version.is_some() && md.creation_timestamp.is_some());
    assert_eq!(md.namespace.as_deref(), Some("default"));

    // AlreadyExists.
    let s = status(
        api.create(&PostParams::default(), &cm("a"))
            .await
            .expect_err("dup"),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(s.message, "configmaps \"a\" already exists");

    // NotFound.
    let s = status(api.get("nope").await.expect_err("missing"));
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "configmaps \"nope\" not found");

    // Replace, then a stale replace conflicts.
    let mut c2 = created.clone();
    c2.data = Some([("k".to_string(), "v2".to_string())].into());
    let replaced = api.replace("a", &PostParams::default(), &c2).await?;
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    let s = status(
        api.replace("a", &PostParams::default(), &c2)
            .await
            .expect_err("stale"),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // A no-op replace does not bump the resourceVersion.
    let same = api.replace("a", &PostParams::default(), &replaced).await?;
    assert_eq!(same.metadata.resource_version, replaced.metadata.resource_version);

    // Invalid name.
    let s = status(
        api.create(&PostParams::default(), &cm("Bad_Name"))
            .await
            .expect_err("invalid"),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message
            .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"),
        "{}",
        s.message
    );

    // Missing namespace.
    let other: Api<ConfigMap> = Api::namespaced(e.client.clone(), "missing");
    let s = status(
        other
            .create(&PostParams::default(), &cm("a"))
            .await
            .expect_err("no ns"),
    );
    assert_eq!(
        (s.code, s.message.as_str()),
        (404, "namespaces \"missing\" not found")
    );

    // generateName.
    let mut g = cm("");
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let gc = api.create(&PostParams::default(), &g).await?;
    let n = gc.metadata.name.expect("name");
    assert!(n.starts_with("gen-") && n.len() == 9, "{n}");

    // dryRun writes nothing.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&dry, &cm("dry")).await?;
    assert!(api.get_opt("dry").await?.is_none());

    // List and delete.
    // Every namespace also holds kube-root-ca.crt, as on a real cluster.
    let l = api.list(&ListParams::default()).await?;
    assert_eq!(
        l.items
            .iter()
            .filter(|c| c.metadata.name.as_deref() != Some("kube-root-ca.crt"))
            .count(),
        2
    );
    assert!(l.metadata.resource_version.is_some());
    api.delete("a", &DeleteParams::default()).await?;
    assert!(api.get_opt("a").await?.is_none());

    // Built-ins exist.
    let ns: Api<Namespace> = Api::all(e.client.clone());
    let names: Vec<_> = ns
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );

    // Invalid pod.
    let pods: Api<Pod> = Api::namespaced(e.client.clone(), "default");
    let p: Pod =
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}))?;
    let s = status(
        pods.create(&PostParams::default(), &p)
            .await
            .expect_err("no image"),
    );
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "Pod \"p\" is invalid: spec.containers[0].image: Required value"
    );
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn discovery_and_health() -> anyhow::Result<()> {
    let e = env().await?;
    let (code, body) = common::raw(&e.server, "GET", "/api/v1", None).await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body)?;
    let pods = v["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "pods")
        .expect("pods")
        .clone();
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["singularName"], "pod");
    assert!(
        v["resources"]
            .as_array()
            .expect("r")
            .iter()
            .any(|r| r["name"] == "pods/binding")
    );
    let (code, body) = common::raw(&e.server, "GET", "/apis", None).await;
    assert_eq!(code, 200);
    assert!(body.contains("coordination.k8s.io"));
    assert_eq!(
        common::raw(&e.server, "GET", "/healthz", None).await,
        (200, "ok".to_string())
    );
    let (code, body) = common::raw(&e.server, "GET", "/api/v1/nothings", None).await;
    assert_eq!(code, 404, "{body}");
    let (code, body) = common::raw(&e.server, "GET", "/openapi/v3", None).await;
    assert_eq!(code, 200);
    let idx: serde_json::Value = serde_json::from_str(&body)?;
    let url = idx["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .expect("api/v1 doc")
        .to_string();
    let (code, body) = common::raw(&e.server, "GET", &url, None).await;
    assert_eq!(code, 200);
    let doc: serde_json::Value = serde_json::from_str(&body)?;
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "ConfigMap");
    assert!(
        patch["parameters"]
            .as_array()
            .expect("params")
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    // The ServiceAccount controller's work: every namespace has "default".
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(e.client.clone(), "kube-system");
    assert!(sas.get_opt("default").await?.is_some());
    let disc = kube::Discovery::new(e.client.clone()).run().await?;
    assert!(disc.has_group("networking.k8s.io"));
    e.server.shutdown().await;
    Ok(())
}
