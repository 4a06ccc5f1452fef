//! Events written through `events.k8s.io/v1` are the same objects as core `v1` Events (converted
//! per version), and ordinary writes record `managedFields`.

mod common;

use common::env;
use k8s_openapi::api::{core::v1::ConfigMap, core::v1::Event as CoreEvent, events::v1::Event};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn events_are_one_resource() -> anyhow::Result<()> {
    let e = env().await?;
    let v1: Api<Event> = Api::namespaced(e.client.clone(), "default");
    let core: Api<CoreEvent> = Api::namespaced(e.client.clone(), "default");
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"name": "p.1"},
        "eventTime": "2026-11-22T06:00:00.000000Z",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u1"},
        "note": "wired", "reason": "Wired", "type": "Normal", "action": "Wire",
        "reportingController": "kuryr-controller", "reportingInstance": "kuryr-controller-0"
    }))?;
    let created = v1.create(&PostParams::default(), &ev).await?;
    assert_eq!(created.note.as_deref(), Some("wired"));
    let c = core.get("p.1").await?;
    assert_eq!(c.message.as_deref(), Some("wired"));
    assert_eq!(c.involved_object.name.as_deref(), Some("p"));
    assert_eq!(c.reporting_component.as_deref(), Some("kuryr-controller"));
    // The Recorder's repeat: a merge patch through events.k8s.io adds a series.
    let p = v1
        .patch(
            "p.1",
            &PatchParams::default(),
            &Patch::Merge(json!({"series": {"count": 2, "lastObservedTime": "2026-11-22T06:00:05.000000Z"}})),
        )
        .await?;
    assert_eq!(p.series.map(|s| s.count), Some(2));
    let l = core
        .list(&ListParams::default().fields("involvedObject.name=p,involvedObject.uid=u1"))
        .await?;
    assert_eq!(l.items.len(), 1);
    let l = v1.list(&ListParams::default().fields("regarding.name=p")).await?;
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].note.as_deref(), Some("wired"));
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn writes_record_managed_fields() -> anyhow::Result<()> {
    let e = env().await?;
    let cms: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    let c: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "m"}, "data": {"a": "1"}}))?;
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..Default::default()
    };
    let created = cms.create(&pp, &c).await?;
    let mf = created.metadata.managed_fields.clone().unwrap_or_default();
    assert!(
        mf.iter()
            .any(|m| m.manager.as_deref() == Some("creator") && m.operation.as_deref() == Some("Update")),
        "{mf:?}"
    );
    // Apply by another manager conflicts on the field the creator owns.
    let applied =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m"}, "data": {"a": "2"}});
    let err = cms
        .patch("m", &PatchParams::apply("applier"), &Patch::Apply(&applied))
        .await
        .expect_err("conflict");
    assert_eq!(common::status(err).code, 409);
    e.server.shutdown().await;
    Ok(())
}
