//! Fidelity tests of the emulated API server for the kube-rs API calls a controller makes:
//! typed custom resources with a status subresource (server-side apply of status with
//! `force`), optimistic concurrency (409 on a stale resourceVersion), paginated lists,
//! events through `kube::runtime::events::Recorder`, and error statuses.

mod common;

use std::time::Duration;

use common::Sandbox;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::wait::{await_condition, conditions};
use kube::{CustomResource, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The KuryrPort spec (subset of upstream Kuryr's CRD).
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "openstack.org",
    version = "v1",
    kind = "KuryrPort",
    plural = "kuryrports",
    shortname = "kp",
    namespaced,
    status = "KuryrPortStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct KuryrPortSpec {
    pod_uid: String,
    pod_node_name: String,
}

/// The KuryrPort status.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct KuryrPortStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vifs: Option<serde_json::Value>,
}

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kuryrports.openstack.org
spec:
  group: openstack.org
  scope: Namespaced
  names: {plural: kuryrports, singular: kuryrport, kind: KuryrPort, shortNames: [kp]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [podUid, podNodeName]
            properties:
              podUid: {type: string}
              podNodeName: {type: string}
          status:
            type: object
            properties:
              vifs:
                type: object
                x-kubernetes-preserve-unknown-fields: true
"#;

async fn install_crd(client: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_yaml::from_str(CRD).expect("crd yaml");
    crds.create(&PostParams::default(), &crd)
        .await
        .expect("create crd");
    tokio::time::timeout(
        Duration::from_secs(20),
        await_condition(crds, "kuryrports.openstack.org", conditions::is_crd_established()),
    )
    .await
    .expect("CRD established in time")
    .expect("await condition");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_crd_status_subresource_with_server_side_apply() {
    let sb = Sandbox::start();
    let client = sb.client().await;
    install_crd(&client).await;
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), "default");
    let kp = KuryrPort::new(
        "web",
        KuryrPortSpec {
            pod_uid: "uid-1".into(),
            pod_node_name: "node-1".into(),
        },
    );
    let created = kps.create(&PostParams::default(), &kp).await.expect("create kp");
    assert_eq!(created.spec, kp.spec);
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.generation, Some(1));

    // Status through the subresource with SSA, as the controller does.
    let status = json!({
        "apiVersion": "openstack.org/v1",
        "kind": "KuryrPort",
        "status": {"vifs": {"eth0": {"default": true, "vif": {"active": false}}}}
    });
    let pp = PatchParams::apply("kuryr-controller").force();
    let patched = kps
        .patch_status("web", &pp, &Patch::Apply(&status))
        .await
        .expect("patch_status apply");
    let vifs = patched
        .status
        .as_ref()
        .and_then(|s| s.vifs.clone())
        .expect("vifs");
    assert_eq!(vifs["eth0"]["default"], true);
    assert_eq!(
        patched.metadata.generation,
        Some(1),
        "status does not bump generation"
    );
    // get_status and the main resource agree.
    let got = kps.get_status("web").await.expect("get_status");
    assert_eq!(got.status, patched.status);
    // A spec change through the main resource bumps generation and keeps status.
    let spec_patch = json!({"spec": {"podNodeName": "node-2"}});
    let after = kps
        .patch("web", &PatchParams::default(), &Patch::Merge(&spec_patch))
        .await
        .expect("merge patch spec");
    assert_eq!(after.spec.pod_node_name, "node-2");
    assert_eq!(after.metadata.generation, Some(2));
    assert_eq!(after.status, patched.status);

    // Optimistic concurrency: replacing with a stale resourceVersion is a 409 Conflict.
    let mut stale = created.clone();
    stale.spec.pod_node_name = "node-3".into();
    let err = kps
        .replace("web", &PostParams::default(), &stale)
        .await
        .expect_err("stale replace");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 409, "{s:?}");
            assert_eq!(s.reason, "Conflict", "{s:?}");
            assert!(
                s.message.contains("the object has been modified; please apply your changes to the latest version and try again"),
                "{s:?}"
            );
        }
        e => panic!("expected a 409, got {e:?}"),
    }
    // Not found and already exists, as statuses.
    match kps.get("nope").await.expect_err("missing") {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
            assert_eq!(s.message, r#"kuryrports.openstack.org "nope" not found"#);
        }
        e => panic!("{e:?}"),
    }
    match kps.create(&PostParams::default(), &kp).await.expect_err("dup") {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
            assert_eq!(s.message, r#"kuryrports.openstack.org "web" already exists"#);
        }
        e => panic!("{e:?}"),
    }
    // Ownership of the status applied through the subresource.
    let mf = patched.metadata.managed_fields.clone().unwrap_or_default();
    let entry = mf
        .iter()
        .find(|e| e.manager.as_deref() == Some("kuryr-controller"))
        .unwrap_or_else(|| panic!("no managedFields entry for kuryr-controller: {mf:?}"));
    assert_eq!(entry.operation.as_deref(), Some("Apply"));
    assert_eq!(entry.subresource.as_deref(), Some("status"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paginated_list_and_continue() {
    let sb = Sandbox::start();
    let client = sb.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    for i in 0..5 {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": format!("p{i}"), "labels": {"page": "yes"}},
            "data": {"i": i.to_string()}
        }))
        .expect("cm");
        cms.create(&PostParams::default(), &cm).await.expect("create");
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().labels("page=yes").limit(2);
    let mut pages = 0;
    loop {
        let page = cms.list(&lp).await.expect("list page");
        pages += 1;
        assert!(page.items.len() <= 2, "limit honoured");
        names.extend(page.items.iter().map(|c| c.name_any()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => break,
        }
        assert!(pages < 10, "pagination does not terminate");
    }
    names.sort();
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    assert_eq!(pages, 3);
    // remainingItemCount is set only without label/field selectors (ListMeta docs).
    let total = cms.list(&ListParams::default()).await.expect("list").items.len();
    let page = cms
        .list(&ListParams::default().limit(2))
        .await
        .expect("first page");
    assert_eq!(page.metadata.remaining_item_count, Some((total - 2) as i64));
    let page = cms
        .list(&ListParams::default().labels("page=yes").limit(2))
        .await
        .expect("first page");
    assert_eq!(page.metadata.remaining_item_count, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_recorder_publishes_visible_events() {
    let sb = Sandbox::start();
    let client = sb.client().await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "evented"}})).expect("cm");
    let cm = cms.create(&PostParams::default(), &cm).await.expect("create");
    let reference: ObjectReference = cm.object_ref(&());
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "kuryr-controller".into(),
            instance: Some("kuryr-controller-0".into()),
        },
    );
    let ev = Event {
        type_: EventType::Normal,
        reason: "Wired".into(),
        note: Some("port ACTIVE".into()),
        action: "Wire".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.expect("publish");
    // A repeat of the same event becomes a series (patch of the existing event).
    recorder.publish(&ev, &reference).await.expect("publish again");
    let out = sb.kubectl_ok(&["get", "events", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&out).expect("json");
    let items = list["items"].as_array().cloned().unwrap_or_default();
    let ours: Vec<_> = items.iter().filter(|e| e["reason"] == "Wired").collect();
    assert_eq!(ours.len(), 1, "one event (a series), got {items:?}");
    assert_eq!(ours[0]["involvedObject"]["name"], "evented");
    assert_eq!(ours[0]["message"], "port ACTIVE");
    let out = sb.kubectl_ok(&["get", "events"]);
    let header: Vec<&str> = out.lines().next().unwrap_or("").split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.contains("Wired"))
        .unwrap_or_else(|| panic!("no Wired row: {out}"));
    assert!(
        line.contains("Normal") && line.contains("configmap/evented") && line.contains("port ACTIVE"),
        "{line}"
    );
    let out = sb.kubectl_ok(&["describe", "cm", "evented"]);
    assert!(out.contains("Wired") && out.contains("port ACTIVE"), "{out}");
}

/// The daemon's view: pods of one node through `fieldSelector=spec.nodeName=...`, and watch
/// bookmarks (kube-rs asks for them) keeping an idle watch's resourceVersion fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_field_selector_watch_and_bookmarks() {
    use futures::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{WatchEvent, WatchParams};

    let sb = Sandbox::start_with(common::Opts {
        bookmark_interval: Some(1),
        ..common::Opts::default()
    });
    let client = sb.client().await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod = |name: &str, node: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}
        }))
        .expect("pod")
    };
    pods.create(&PostParams::default(), &pod("a1", "n1"))
        .await
        .expect("a1");
    pods.create(&PostParams::default(), &pod("b1", "n2"))
        .await
        .expect("b1");
    let list = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .expect("list by node");
    let names: Vec<String> = list.items.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["a1"]);
    let rv = list.metadata.resource_version.clone().expect("list rv");
    // Bookmarks are on by default in kube-rs WatchParams.
    let wp = WatchParams::default().fields("spec.nodeName=n1").timeout(20);
    let mut stream = pods.watch(&wp, &rv).await.expect("watch").boxed();
    pods.create(&PostParams::default(), &pod("b2", "n2"))
        .await
        .expect("b2");
    pods.create(&PostParams::default(), &pod("a2", "n1"))
        .await
        .expect("a2");
    let mut added = Vec::new();
    let mut bookmark_rv = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while (added.is_empty() || bookmark_rv.is_none()) && tokio::time::Instant::now() < deadline {
        let next = tokio::time::timeout_at(deadline, stream.try_next()).await;
        match next {
            Ok(Ok(Some(WatchEvent::Added(p)))) => added.push(p.name_any()),
            Ok(Ok(Some(WatchEvent::Bookmark(b)))) => bookmark_rv = Some(b.metadata.resource_version),
            Ok(Ok(Some(WatchEvent::Error(e)))) => panic!("watch error {e:?}"),
            Ok(Ok(Some(_))) => {}
            Ok(Ok(None)) | Err(_) => break,
            Ok(Err(e)) => panic!("watch stream error {e:?}"),
        }
    }
    assert_eq!(added, ["a2"], "only pods of n1");
    let brv = bookmark_rv.expect("a BOOKMARK within 10 s with --bookmark-interval 1");
    assert!(
        brv.parse::<u64>().expect("numeric rv") >= rv.parse::<u64>().expect("numeric rv"),
        "bookmark rv {brv} moves forward from {rv}"
    );
    // Unsupported field selectors are rejected like the real server.
    match pods.list(&ListParams::default().fields("spec.bogus=x")).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 400, "{s:?}");
            assert!(
                s.message.contains("field label not supported: spec.bogus"),
                "{s:?}"
            );
        }
        r => panic!("expected 400, got {r:?}"),
    }
}
