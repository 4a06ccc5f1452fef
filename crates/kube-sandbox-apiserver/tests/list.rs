//! Lists over HTTP: label and field selectors, limit/continue pagination in namespace/name
//! order, and deletecollection.

mod common;

use common::{env, raw, status};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn selectors_pagination_deletecollection() -> anyhow::Result<()> {
    let e = env().await?;
    let cms: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    for i in 0..7 {
        let tier = if i % 2 == 0 { "even" } else { "odd" };
        let c: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("c{i}"), "labels": {"tier": tier}}}))?;
        cms.create(&PostParams::default(), &c).await?;
    }
    let l = cms.list(&ListParams::default().labels("tier=even")).await?;
    assert_eq!(l.items.len(), 4);
    let l = cms
        .list(&ListParams::default().labels("tier in (odd),tier!=even"))
        .await?;
    assert_eq!(l.items.len(), 3);
    let l = cms
        .list(&ListParams::default().fields("metadata.name=c3"))
        .await?;
    assert_eq!(l.items.len(), 1);
    let s = status(
        cms.list(&ListParams::default().fields("data.x=1"))
            .await
            .expect_err("unsupported"),
    );
    assert_eq!(s.code, 400);
    assert_eq!(s.message, "field label not supported: data.x");

    // Pages of 3, in name order, with one list RV (the `tier` selector leaves out the
    // namespace's kube-root-ca.crt, as on a real cluster).
    let mut names = Vec::new();
    let mut lp = ListParams::default().labels("tier").limit(3);
    let mut rvs = Vec::new();
    loop {
        let page = cms.list(&lp).await?;
        names.extend(page.items.iter().filter_map(|c| c.metadata.name.clone()));
        rvs.push(page.metadata.resource_version.clone());
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(c) => {
                // With a selector the server does not know the remainder (as upstream).
                assert_eq!(page.metadata.remaining_item_count, None);
                lp = lp.continue_token(&c)
            }
            None => break,
        }
    }
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);
    assert!(rvs.windows(2).all(|w| w[0] == w[1]), "{rvs:?}");
    let (code, _) = raw(
        &e.server,
        "GET",
        "/api/v1/namespaces/default/configmaps?limit=2&continue=garbage",
        None,
    )
    .await;
    assert_eq!(code, 400);

    // Across namespaces: /api/v1/configmaps.
    let all: Api<ConfigMap> = Api::all(e.client.clone());
    assert_eq!(
        all.list(&ListParams::default().labels("tier")).await?.items.len(),
        7
    );

    // deletecollection with a selector.
    cms.delete_collection(
        &DeleteParams::default(),
        &ListParams::default().labels("tier=odd"),
    )
    .await?;
    assert_eq!(
        cms.list(&ListParams::default().labels("tier")).await?.items.len(),
        4
    );

    // Nodes: spec.unschedulable defaults to false for field selectors.
    let nodes: Api<Node> = Api::all(e.client.clone());
    let n: Node = serde_json::from_value(
        json!({"metadata": {"name": "n1"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}}),
    )?;
    let created = nodes.create(&PostParams::default(), &n).await?;
    assert!(created.status.is_some(), "node status is kept on create");
    assert_eq!(
        nodes
            .list(&ListParams::default().fields("spec.unschedulable=false"))
            .await?
            .items
            .len(),
        1
    );
    e.server.shutdown().await;
    Ok(())
}
