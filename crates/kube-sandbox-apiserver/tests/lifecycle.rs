//! Deletion semantics over HTTP: finalizers, pod grace and binding, ownerReference GC with
//! propagation policies, namespace termination, and Service ClusterIP allocation.

mod common;

use common::{env, eventually, status};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use serde_json::json;

fn pod(name: &str) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}}),
    )
    .expect("pod")
}

async fn bind(client: &kube::Client, ns: &str, pod: &str, node: &str) -> kube::Result<serde_json::Value> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}});
    api.create_subresource("binding", pod, &PostParams::default(), &binding)
        .await
}

#[tokio::test]
async fn finalizers_hold_objects() -> anyhow::Result<()> {
    let e = env().await?;
    let api: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    let c: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}))?;
    api.create(&PostParams::default(), &c).await?;
    let r = api.delete("f", &DeleteParams::default()).await?;
    let held = r.left().expect("object returned while held");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.metadata.deletion_grace_period_seconds, Some(0));
    // No new finalizers.
    let mut cur = api.get("f").await?;
    cur.metadata.finalizers = Some(vec!["example.com/hold".into(), "example.com/new".into()]);
    let s = status(
        api.replace("f", &PostParams::default(), &cur)
            .await
            .expect_err("new finalizer"),
    );
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .contains("Forbidden: no new finalizers can be added if the object is being deleted"),
        "{}",
        s.message
    );
    // Removing the last finalizer deletes it.
    let mut cur = api.get("f").await?;
    cur.metadata.finalizers = None;
    api.replace("f", &PostParams::default(), &cur).await?;
    assert!(api.get_opt("f").await?.is_none());
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn pod_binding_and_grace() -> anyhow::Result<()> {
    let e = env().await?;
    let pods: Api<Pod> = Api::namespaced(e.client.clone(), "default");
    let created = pods.create(&PostParams::default(), &pod("p")).await?;
    let spec = created.spec.clone().expect("spec");
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(
        created.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    assert_eq!(created.metadata.generation, Some(1));

    bind(&e.client, "default", "p", "node-1").await?;
    let bound = pods.get("p").await?;
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("node-1")
    );
    let conds = bound
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    assert!(
        conds
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );
    let s = status(
        bind(&e.client, "default", "p", "node-2")
            .await
            .expect_err("already bound"),
    );
    assert_eq!(s.code, 409);
    assert!(
        s.message.contains("is already assigned to node \"node-1\""),
        "{}",
        s.message
    );

    // Status writes go through /status only.
    let mut st = pods.get("p").await?;
    st.status.as_mut().expect("status").phase = Some("Running".into());
    pods.replace("p", &PostParams::default(), &st).await?;
    assert_eq!(
        pods.get("p").await?.status.and_then(|s| s.phase).as_deref(),
        Some("Pending")
    );
    let st = pods.get("p").await?;
    let mut body = st.clone();
    body.status.as_mut().expect("status").phase = Some("Running".into());
    pods.replace_status("p", &PostParams::default(), &body).await?;
    assert_eq!(
        pods.get("p").await?.status.and_then(|s| s.phase).as_deref(),
        Some("Running")
    );

    // Bound pod: graceful.
    let r = pods.delete("p", &DeleteParams::default()).await?;
    let p = r.left().expect("pod returned");
    assert!(p.metadata.deletion_timestamp.is_some());
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get_opt("p").await?.is_some());
    let uid = p.metadata.uid.clone().expect("uid");
    let s = status(
        pods.delete(
            "p",
            &DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(kube::api::Preconditions {
                    uid: Some("wrong".into()),
                    resource_version: None,
                }),
                ..Default::default()
            },
        )
        .await
        .expect_err("uid precondition"),
    );
    assert_eq!(s.code, 409);
    pods.delete(
        "p",
        &DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        },
    )
    .await?;
    assert!(pods.get_opt("p").await?.is_none());

    // Unbound pod: immediate.
    pods.create(&PostParams::default(), &pod("q")).await?;
    pods.delete("q", &DeleteParams::default()).await?;
    assert!(pods.get_opt("q").await?.is_none());
    e.server.shutdown().await;
    Ok(())
}

fn owned(name: &str, owner: &ConfigMap, block: bool) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name, "uid": owner.metadata.uid,
        "blockOwnerDeletion": block}]}}))
    .expect("cm")
}

#[tokio::test]
async fn garbage_collection_and_propagation() -> anyhow::Result<()> {
    let e = env().await?;
    let api: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    let pp = PostParams::default();
    let mk = |n: &str| -> ConfigMap { serde_json::from_value(json!({"metadata": {"name": n}})).expect("cm") };

    // Background: dependents go after the owner.
    let o = api.create(&pp, &mk("owner-bg")).await?;
    api.create(&pp, &owned("dep-bg", &o, false)).await?;
    api.delete("owner-bg", &DeleteParams::default()).await?;
    let a = api.clone();
    eventually("background GC", || {
        let a = a.clone();
        async move { a.get_opt("dep-bg").await.ok().flatten().is_none() }
    })
    .await;

    // Orphan: dependents stay, without the reference.
    let o = api.create(&pp, &mk("owner-or")).await?;
    api.create(&pp, &owned("dep-or", &o, false)).await?;
    api.delete(
        "owner-or",
        &DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Default::default()
        },
    )
    .await?;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let d = api.get("dep-or").await?;
    assert!(d.metadata.owner_references.unwrap_or_default().is_empty());

    // Foreground: the owner waits (with the finalizer) for blocking dependents.
    let o = api.create(&pp, &mk("owner-fg")).await?;
    let mut dep = owned("dep-fg", &o, true);
    dep.metadata.finalizers = Some(vec!["example.com/slow".into()]);
    api.create(&pp, &dep).await?;
    let r = api.delete("owner-fg", &DeleteParams::foreground()).await?;
    let held = r.left().expect("owner held");
    assert!(
        held.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"foregroundDeletion".to_string())
    );
    let a = api.clone();
    eventually("dependent marked", || {
        let a = a.clone();
        async move {
            a.get("dep-fg")
                .await
                .map(|d| d.metadata.deletion_timestamp.is_some())
                .unwrap_or(false)
        }
    })
    .await;
    assert!(api.get_opt("owner-fg").await?.is_some());
    let mut d = api.get("dep-fg").await?;
    d.metadata.finalizers = None;
    api.replace("dep-fg", &pp, &d).await?;
    let a = api.clone();
    eventually("owner gone", || {
        let a = a.clone();
        async move { a.get_opt("owner-fg").await.ok().flatten().is_none() }
    })
    .await;
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn namespace_termination() -> anyhow::Result<()> {
    let e = env().await?;
    let nss: Api<Namespace> = Api::all(e.client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "t1"}}))?;
    let created = nss.create(&PostParams::default(), &ns).await?;
    assert_eq!(created.status.and_then(|s| s.phase).as_deref(), Some("Active"));
    let cms: Api<ConfigMap> = Api::namespaced(e.client.clone(), "t1");
    let held: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "held", "finalizers": ["example.com/x"]}}))?;
    cms.create(&PostParams::default(), &held).await?;
    let r = nss.delete("t1", &DeleteParams::default()).await?;
    assert_eq!(
        r.left().and_then(|n| n.status).and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    let free: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "new"}}))?;
    let s = status(
        cms.create(&PostParams::default(), &free)
            .await
            .expect_err("terminating"),
    );
    assert_eq!(s.code, 403);
    assert!(
        s.message
            .contains("unable to create new content in namespace t1 because it is being terminated"),
        "{}",
        s.message
    );
    let c = cms.clone();
    eventually("content marked", || {
        let c = c.clone();
        async move {
            c.get("held")
                .await
                .map(|o| o.metadata.deletion_timestamp.is_some())
                .unwrap_or(false)
        }
    })
    .await;
    assert!(nss.get_opt("t1").await?.is_some());
    let mut h = cms.get("held").await?;
    h.metadata.finalizers = None;
    cms.replace("held", &PostParams::default(), &h).await?;
    let n = nss.clone();
    eventually("namespace gone", || {
        let n = n.clone();
        async move { n.get_opt("t1").await.ok().flatten().is_none() }
    })
    .await;
    let s = status(
        nss.delete("default", &DeleteParams::default())
            .await
            .expect_err("protected"),
    );
    assert_eq!(s.code, 403);
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn service_cluster_ips() -> anyhow::Result<()> {
    let e = env().await?;
    let svcs: Api<Service> = Api::namespaced(e.client.clone(), "default");
    let k = svcs.get("kubernetes").await?;
    assert_eq!(k.spec.and_then(|s| s.cluster_ip).as_deref(), Some("10.96.0.1"));
    let mk = |n: &str, ip: Option<&str>, ty: &str| -> Service {
        let mut v = json!({"metadata": {"name": n}, "spec": {"type": ty, "ports": [{"port": 80}]}});
        if let Some(ip) = ip {
            v["spec"]["clusterIP"] = json!(ip);
        }
        serde_json::from_value(v).expect("svc")
    };
    let a = svcs
        .create(&PostParams::default(), &mk("a", None, "ClusterIP"))
        .await?;
    let spec = a.spec.expect("spec");
    let ip = spec.cluster_ip.clone().expect("ip");
    assert!(ip.starts_with("10.96."), "{ip}");
    assert_eq!(spec.cluster_ips, Some(vec![ip.clone()]));
    assert_eq!(
        spec.ports.as_ref().expect("ports")[0].protocol.as_deref(),
        Some("TCP")
    );
    assert_eq!(spec.ip_families, Some(vec!["IPv4".to_string()]));
    let h = svcs
        .create(&PostParams::default(), &mk("h", Some("None"), "ClusterIP"))
        .await?;
    assert_eq!(h.spec.and_then(|s| s.cluster_ip).as_deref(), Some("None"));
    let s = status(
        svcs.create(&PostParams::default(), &mk("dup", Some(&ip), "ClusterIP"))
            .await
            .expect_err("taken"),
    );
    assert_eq!(s.code, 422);
    let s = status(
        svcs.create(
            &PostParams::default(),
            &mk("out", Some("192.168.0.1"), "ClusterIP"),
        )
        .await
        .expect_err("range"),
    );
    assert_eq!(s.code, 422);
    let np = svcs
        .create(&PostParams::default(), &mk("np", None, "NodePort"))
        .await?;
    let port = np.spec.and_then(|s| s.ports).expect("ports")[0]
        .node_port
        .expect("nodePort");
    assert!((30000..=32767).contains(&port));
    svcs.delete("a", &DeleteParams::default()).await?;
    let again = svcs
        .create(&PostParams::default(), &mk("again", Some(&ip), "ClusterIP"))
        .await?;
    assert_eq!(again.spec.and_then(|s| s.cluster_ip), Some(ip));
    e.server.shutdown().await;
    Ok(())
}
