//! Watches over real HTTP: initial events, resume from a resourceVersion, selectors, bookmarks,
//! 410 Expired, and kube-rs watcher/reflector runs.

mod common;

use std::time::Duration;

use common::{env, env_with, raw};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{
    api::{Api, ListParams, PostParams, WatchEvent, WatchParams},
    runtime::{WatchStreamExt, reflector, watcher},
};
use serde_json::json;

fn cm(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": app}}})).expect("cm")
}

async fn next<K>(
    s: &mut (impl futures::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
) -> WatchEvent<K> {
    tokio::time::timeout(Duration::from_secs(5), s.next())
        .await
        .expect("event in time")
        .expect("stream open")
        .expect("event ok")
}

fn name_of(e: &WatchEvent<ConfigMap>) -> (String, String) {
    match e {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Modified(o) => ("MODIFIED".into(), o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Deleted(o) => ("DELETED".into(), o.metadata.name.clone().unwrap_or_default()),
        WatchEvent::Bookmark(b) => ("BOOKMARK".into(), b.metadata.resource_version.clone()),
        WatchEvent::Error(e) => ("ERROR".into(), e.message.clone()),
    }
}

#[tokio::test]
async fn watch_from_rv_selectors_and_initial_events() -> anyhow::Result<()> {
    let e = env().await?;
    let api: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    api.create(&PostParams::default(), &cm("a", "x")).await?;
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .expect("rv");
    api.create(&PostParams::default(), &cm("b", "x")).await?;

    // From the list RV: only b.
    let mut s = api.watch(&WatchParams::default(), &rv).await?.boxed();
    assert_eq!(name_of(&next(&mut s).await), ("ADDED".into(), "b".into()));

    // Selector watch from "0": initial ADDED for matching objects only.
    let wp = WatchParams::default().labels("app=x");
    let mut sel = api.watch(&wp, "0").await?.boxed();
    let mut initial = vec![name_of(&next(&mut sel).await).1, name_of(&next(&mut sel).await).1];
    initial.sort();
    assert_eq!(initial, ["a", "b"]);

    // b leaves the selector → DELETED for the selector watcher, MODIFIED for the other.
    let mut b = api.get("b").await?;
    b.metadata.labels = Some([("app".to_string(), "y".to_string())].into());
    api.replace("b", &PostParams::default(), &b).await?;
    assert_eq!(name_of(&next(&mut s).await), ("MODIFIED".into(), "b".into()));
    assert_eq!(name_of(&next(&mut sel).await), ("DELETED".into(), "b".into()));
    // ... and entering produces ADDED.
    b = api.get("b").await?;
    b.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    api.replace("b", &PostParams::default(), &b).await?;
    assert_eq!(name_of(&next(&mut sel).await), ("ADDED".into(), "b".into()));

    // Streaming list: initial events then a bookmark marking their end.
    let wp = WatchParams::default().initial_events();
    let mut st = api.watch(&wp, "").await?.boxed();
    let mut seen = Vec::new();
    loop {
        match next(&mut st).await {
            WatchEvent::Bookmark(bm) => {
                assert_eq!(
                    bm.metadata
                        .annotations
                        .get("k8s.io/initial-events-end")
                        .map(String::as_str),
                    Some("true")
                );
                break;
            }
            ev => seen.push(name_of(&ev).1),
        }
    }
    // The namespace's kube-root-ca.crt comes first-listed too, as on a real cluster.
    seen.retain(|n| n != "kube-root-ca.crt");
    assert_eq!(seen, ["a", "b"]);

    // Unsupported field label.
    let (code, body) = raw(
        &e.server,
        "GET",
        "/api/v1/pods?watch=true&fieldSelector=spec.foo%3Dx",
        None,
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("field label not supported: spec.foo"), "{body}");
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn periodic_bookmarks_and_timeout() -> anyhow::Result<()> {
    let e = env_with(|c| c.bookmark_interval = Duration::from_millis(200)).await?;
    let api: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    let rv = api
        .list(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .expect("rv");
    let wp = WatchParams {
        bookmarks: true,
        ..Default::default()
    }
    .timeout(2);
    let mut s = api.watch(&wp, &rv).await?.boxed();
    assert_eq!(name_of(&next(&mut s).await).0, "BOOKMARK");
    let started = std::time::Instant::now();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(5), s.next()).await? {
        ev?;
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn too_old_resource_version_is_410() -> anyhow::Result<()> {
    let e = env_with(|c| c.watch_history = 3).await?;
    let api: Api<ConfigMap> = Api::namespaced(e.client.clone(), "default");
    for i in 0..6 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), "x"))
            .await?;
    }
    let (code, body) = raw(
        &e.server,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=2",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert!(body.contains("\"type\":\"ERROR\""), "{body}");
    assert!(
        body.contains("\"code\":410") && body.contains("\"reason\":\"Expired\""),
        "{body}"
    );
    assert!(body.contains("too old resource version: 2 ("), "{body}");
    let mut s = api.watch(&WatchParams::default(), "2").await?.boxed();
    match next(&mut s).await {
        WatchEvent::Error(err) => assert_eq!(err.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    e.server.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn kube_runtime_watcher_and_reflector() -> anyhow::Result<()> {
    let e = env().await?;
    let pods: Api<Pod> = Api::namespaced(e.client.clone(), "default");
    let pod = |n: &str| -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": n}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .expect("pod")
    };
    pods.create(&PostParams::default(), &pod("p0")).await?;
    for streaming in [false, true] {
        let (reader, writer) = reflector::store::<Pod>();
        let cfg = if streaming {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        let stream = reflector(writer, watcher(pods.clone(), cfg)).applied_objects();
        let task = tokio::spawn(async move {
            let mut s = stream.boxed();
            while let Some(r) = s.try_next().await.transpose() {
                if r.is_err() {
                    break;
                }
            }
        });
        reader.wait_until_ready().await?;
        let n = format!("p{}", if streaming { 2 } else { 1 });
        pods.create(&PostParams::default(), &pod(&n)).await?;
        let r = reader.clone();
        common::eventually("reflector sees the new pod", || {
            let r = r.clone();
            let n = n.clone();
            async move { r.state().iter().any(|p| p.metadata.name.as_deref() == Some(&n)) }
        })
        .await;
        task.abort();
    }
    e.server.shutdown().await;
    Ok(())
}

/// Metadata-only reads (`Accept: …;as=PartialObjectMetadata`), as kube-rs
/// `Api<PartialObjectMeta<K>>` and client-go's metadata informers make them: the list, the watch
/// and a get carry each object's metadata and nothing else, and a field-selected watch (plain
/// list then watch, and streaming list) sees its node's pods listed, a new one come and its
/// deletion mark (the finalizer keeps it), and never another node's pod.
#[tokio::test]
async fn metadata_only_list_watch_and_get() -> anyhow::Result<()> {
    let e = env().await?;
    let pods: Api<Pod> = Api::namespaced(e.client.clone(), "default");
    let pod = |n: &str, node: &str| -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": n, "finalizers": ["example.com/hold"]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .expect("pod")
    };
    pods.create(&PostParams::default(), &pod("m0", "n1")).await?;
    pods.create(&PostParams::default(), &pod("other", "n2")).await?;

    // Raw list and get: the kinds a metadata client expects, no spec.
    let get = |path: &str, accept: &str| {
        let req = http::Request::get(path)
            .header("Accept", accept)
            .body(Vec::new())
            .expect("request");
        let client = e.client.clone();
        async move {
            anyhow::Ok(serde_json::from_str::<serde_json::Value>(
                &client.request_text(req).await?,
            )?)
        }
    };
    let list = get(
        "/api/v1/namespaces/default/pods",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await?;
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    assert!(list["items"][0].get("spec").is_none(), "{list}");
    assert!(list["items"][0]["metadata"]["uid"].is_string());
    let one = get(
        "/api/v1/namespaces/default/pods/m0",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await?;
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert!(one.get("spec").is_none() && one.get("status").is_none(), "{one}");

    for streaming in [false, true] {
        let cfg = watcher::Config::default().fields("spec.nodeName=n1");
        let cfg = if streaming { cfg.streaming_lists() } else { cfg };
        let meta: Api<kube::core::PartialObjectMeta<Pod>> = Api::namespaced(e.client.clone(), "default");
        let mut s = watcher(meta, cfg).boxed();
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let name = format!("m{}", if streaming { 2 } else { 1 });
        let mut created = false;
        let mut deleting = false;
        loop {
            let ev = tokio::time::timeout_at(deadline, s.try_next())
                .await
                .expect("events in time")?
                .expect("open");
            match ev {
                watcher::Event::InitDone if !created => {
                    pods.create(&PostParams::default(), &pod(&name, "n1")).await?;
                    created = true;
                }
                watcher::Event::InitApply(m) | watcher::Event::Apply(m) => {
                    let n = m.metadata.name.clone().unwrap_or_default();
                    assert!(m.metadata.uid.is_some(), "metadata carries the uid");
                    assert_ne!(n, "other", "the field selector applies");
                    if n == name && m.metadata.deletion_timestamp.is_none() && !deleting {
                        pods.delete(&name, &Default::default()).await?;
                        deleting = true;
                    }
                    if n == name && m.metadata.deletion_timestamp.is_some() {
                        seen.push(n);
                        break;
                    }
                    seen.push(n);
                }
                _ => {}
            }
        }
        assert!(seen.contains(&"m0".to_string()), "{seen:?}");
        assert_eq!(seen.last(), Some(&name), "{seen:?}");
    }
    e.server.shutdown().await;
    Ok(())
}
