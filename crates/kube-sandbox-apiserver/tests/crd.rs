//! CustomResourceDefinitions over HTTP: establishment, discovery, schema enforcement, the
//! status subresource, generation, and cleanup of objects when the CRD goes.

mod common;

use common::{env, eventually, status};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams},
    discovery::Discovery,
};
use serde_json::json;

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["size"], "properties": {
                        "size": {"type": "integer"}, "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}
            }]
        }
    }))
    .expect("crd")
}

#[tokio::test]
async fn crd_lifecycle() -> anyhow::Result<()> {
    let e = env().await?;
    let crds: Api<CustomResourceDefinition> = Api::all(e.client.clone());
    crds.create(&PostParams::default(), &crd()).await?;
    let c = crds.clone();
    eventually("Established", || {
        let c = c.clone();
        async move {
            c.get("widgets.example.com")
                .await
                .ok()
                .and_then(|d| d.status)
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
        }
    })
    .await;
    let st = crds.get("widgets.example.com").await?.status.expect("status");
    assert_eq!(st.accepted_names.map(|n| n.kind), Some("Widget".into()));

    let disc = Discovery::new(e.client.clone()).run().await?;
    let (ar, caps) = disc
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(ar, _)| ar.kind == "Widget")
        .expect("Widget discovered");
    assert!(
        caps.subresources
            .iter()
            .any(|(s, _)| s.plural == "widgets/status" || s.plural == "status"),
        "{:?}",
        caps.subresources
    );
    let (code, body) = common::raw(&e.server, "GET", "/apis/example.com/v1", None).await;
    assert_eq!(code, 200);
    assert!(body.contains("\"shortNames\":[\"wd\"]"), "{body}");

    let api: Api<DynamicObject> = Api::namespaced_with(e.client.clone(), "default", &ar);
    let w = |size: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"size": size}, "status": {"ready": true}}))
        .expect("widget")
    };
    // Schema: wrong type → 422 with causes.
    let s = status(
        api.create(&PostParams::default(), &w(json!("big")))
            .await
            .expect_err("type"),
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message.starts_with("Widget.example.com \"w1\" is invalid"),
        "{}",
        s.message
    );
    assert!(s.details.map(|d| !d.causes.is_empty()).unwrap_or(false));
    // Missing required field → 422.
    let mut missing = w(json!(1));
    missing.data["spec"] = json!({"color": "red"});
    let s = status(
        api.create(&PostParams::default(), &missing)
            .await
            .expect_err("required"),
    );
    assert_eq!(s.code, 422, "{}", s.message);

    // fieldValidation=Strict rejects unknown fields; the default prunes them.
    let mut bogus = w(json!(2));
    bogus.data["spec"]["bogus"] = json!(1);
    let (code, body) = common::raw(
        &e.server,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets?fieldValidation=Strict",
        Some(("application/json", &serde_json::to_string(&bogus)?)),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("Widget in version \\\"v1\\\" cannot be handled as a Widget: strict decoding error: unknown field \\\"spec.bogus\\\""),
        "{body}"
    );
    // Default (Warn): created, pruned, with a Warning header.
    bogus.metadata.name = Some("warned".into());
    let (code, body) = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let payload = serde_json::to_string(&bogus)?;
        let mut sock = tokio::net::TcpStream::connect(e.server.addr).await?;
        let req = format!(
            "POST /apis/example.com/v1/namespaces/default/widgets HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{payload}",
            payload.len()
        );
        sock.write_all(req.as_bytes()).await?;
        let mut out = String::new();
        sock.read_to_string(&mut out).await?;
        (out[9..12].to_string(), out)
    };
    assert_eq!(code, "201", "{body}");
    assert!(
        body.to_lowercase()
            .contains("warning: 299 - \"unknown field \\\"spec.bogus\\\"\""),
        "{body}"
    );
    assert!(!body.contains("\"bogus\""), "pruned: {body}");
    api.delete("warned", &Default::default()).await?;
    // Valid; status dropped on create (status subresource).
    let created = api.create(&PostParams::default(), &w(json!(3))).await?;
    assert!(created.data.get("status").is_none(), "{:?}", created.data);
    assert_eq!(created.metadata.generation, Some(1));
    // Spec change bumps generation; status change via main resource ignored.
    let mut upd = created.clone();
    upd.data["spec"]["size"] = json!(4);
    upd.data["status"] = json!({"ready": true});
    let upd = api.replace("w1", &PostParams::default(), &upd).await?;
    assert_eq!(upd.metadata.generation, Some(2));
    assert!(upd.data.get("status").is_none());
    // Status via /status; generation unchanged.
    let mut st = upd.clone();
    st.data["status"] = json!({"ready": true});
    let st = api.replace_status("w1", &PostParams::default(), &st).await?;
    assert_eq!(st.data["status"]["ready"], json!(true));
    assert_eq!(st.metadata.generation, Some(2));
    // Custom resources need a resourceVersion on update.
    let mut norv = st.clone();
    norv.metadata.resource_version = None;
    norv.data["spec"]["size"] = json!(9);
    let s = status(
        api.replace("w1", &PostParams::default(), &norv)
            .await
            .expect_err("no rv"),
    );
    assert_eq!(s.code, 422);

    // Deleting the CRD removes its objects and stops serving it.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await?;
    let c = crds.clone();
    eventually("CRD gone", || {
        let c = c.clone();
        async move { c.get_opt("widgets.example.com").await.ok().flatten().is_none() }
    })
    .await;
    let (code, _) = common::raw(
        &e.server,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        None,
    )
    .await;
    assert_eq!(code, 404);
    // Re-created: empty.
    crds.create(&PostParams::default(), &crd()).await?;
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let api: Api<DynamicObject> =
        Api::namespaced_with(e.client.clone(), "default", &ApiResource::from_gvk(&gvk));
    let a = api.clone();
    eventually("served again", || {
        let a = a.clone();
        async move {
            a.list(&Default::default())
                .await
                .map(|l| l.items.is_empty())
                .unwrap_or(false)
        }
    })
    .await;
    e.server.shutdown().await;
    Ok(())
}
