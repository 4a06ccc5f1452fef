//! PATCH over HTTP: merge, JSON, strategic merge, server-side apply (create, conflicts,
//! missing fieldManager), `/status` patches and unsupported media types.

mod common;

use common::{env, raw, status};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn patch_flavours() -> anyhow::Result<()> {
    let e = env().await?;
    let cms: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    let c: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "c"}, "data": {"a": "1"}}))?;
    cms.create(&PostParams::default(), &c).await?;

    // Merge.
    let p = cms
        .patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"b": "2"}})),
        )
        .await?;
    assert_eq!(p.data.as_ref().map(|d| d.len()), Some(2));
    // JSON patch.
    let jp = serde_json::from_value(json!([{"op": "remove", "path": "/data/a"}]))?;
    let p = cms
        .patch("c", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await?;
    assert_eq!(p.data.as_ref().and_then(|d| d.get("a")), None);
    // Missing object.
    let s = status(
        cms.patch("nope", &PatchParams::default(), &Patch::Merge(json!({})))
            .await
            .expect_err("404"),
    );
    assert_eq!(s.code, 404);
    // Stale resourceVersion in a patch.
    let s = status(
        cms.patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"z": "z"}})),
        )
        .await
        .expect_err("conflict"),
    );
    assert_eq!(s.code, 409);

    // Server-side apply creates, then conflicts with another manager, then force wins.
    let applied =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "mine"}});
    let created = cms
        .patch("ssa", &PatchParams::apply("mgr-a"), &Patch::Apply(&applied))
        .await?;
    assert_eq!(
        created.data.as_ref().and_then(|d| d.get("k")).map(String::as_str),
        Some("mine")
    );
    assert!(created.metadata.managed_fields.is_some());
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"k": "theirs"}});
    let s = status(
        cms.patch("ssa", &PatchParams::apply("mgr-b"), &Patch::Apply(&other))
            .await
            .expect_err("conflict"),
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    let forced = cms
        .patch("ssa", &PatchParams::apply("mgr-b").force(), &Patch::Apply(&other))
        .await?;
    assert_eq!(
        forced.data.as_ref().and_then(|d| d.get("k")).map(String::as_str),
        Some("theirs")
    );

    // Apply without fieldManager, unsupported content type.
    let (code, body) = raw(
        &e.server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/ssa",
        Some(("application/apply-patch+yaml", "{}")),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("fieldManager"), "{body}");
    let (code, _) = raw(
        &e.server,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/ssa",
        Some(("text/plain", "{}")),
    )
    .await;
    assert_eq!(code, 415);

    // Strategic merge on pods merges containers by name; /status patches only touch status.
    let pods: Api<Pod> = Api::namespaced(e.client.clone(), "default");
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"containers": [{"name": "c", "image": "img:1"}]}}),
    )?;
    pods.create(&PostParams::default(), &pod).await?;
    let p = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"containers": [{"name": "c", "image": "img:2"}]}})),
        )
        .await?;
    let cs = p.spec.expect("spec").containers;
    assert_eq!((cs.len(), cs[0].image.as_deref()), (1, Some("img:2")));
    let p = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "10.0.0.5"}, "metadata": {"labels": {"b": "2"}}})))
        .await?;
    assert_eq!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert!(!p.metadata.labels.unwrap_or_default().contains_key("b"));
    // Status-only changes do not bump generation; the field selector sees the new phase.
    assert_eq!(
        p.metadata.generation,
        Some(2),
        "image change bumped it once, status did not"
    );
    let l = pods
        .list(&kube::api::ListParams::default().fields("status.phase=Running"))
        .await?;
    assert_eq!(l.items.len(), 1);
    let l = pods
        .list(&kube::api::ListParams::default().fields("status.podIP=10.0.0.9"))
        .await?;
    assert_eq!(l.items.len(), 0);
    e.server.shutdown().await;
    Ok(())
}
