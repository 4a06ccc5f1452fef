//! End-to-end workload controllers: in-process API server + every control-plane loop
//! (`controllers::run_with_client`), Node objects created directly and a stand-in kubelet (this
//! test's own task) that marks bound pods Running/Ready and finishes graceful deletions, as a
//! kubelet would. No network namespaces: the pods are host-network ones.

#![allow(clippy::unwrap_used)]

mod support;

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use anyhow::Result;
use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, Deployment, ReplicaSet},
    core::v1::{Node, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::{WatchStreamExt, watcher, watcher::Event},
};
use serde_json::json;
use support::{pod_ready, wait_for, world};
use tokio::{sync::oneshot, task::JoinHandle};

const WAIT: Duration = Duration::from_secs(60);

fn now() -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", jiff::Timestamp::now()).unwrap()
}

async fn create_node(client: &Client, name: &str, ip: &str) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
                   "addresses": [{"type": "InternalIP", "address": ip}],
                   "allocatable": {"pods": "110"}, "capacity": {"pods": "110"}}}))?;
    nodes.create(&PostParams::default(), &node).await?;
    Ok(())
}

/// What a kubelet does for these tests: bound pods become Running and Ready; pods being deleted
/// are finished with grace period 0.
fn stand_in_kubelet(client: Client) -> JoinHandle<()> {
    tokio::spawn(async move {
        let all: Api<Pod> = Api::all(client.clone());
        loop {
            let Ok(list) = all.list(&ListParams::default()).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            for p in list.items {
                let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                    continue;
                };
                let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace().unwrap());
                if p.metadata.deletion_timestamp.is_some() {
                    let dp = DeleteParams {
                        grace_period_seconds: Some(0),
                        preconditions: Some(Preconditions {
                            uid: p.uid(),
                            resource_version: None,
                        }),
                        ..Default::default()
                    };
                    let _ = api.delete(&p.name_any(), &dp).await;
                } else if !pod_ready(&p) {
                    let ip = format!("192.168.0.{}", node.bytes().last().unwrap_or(b'0') % 100);
                    let t = now();
                    let status = json!({"status": {"phase": "Running", "hostIP": ip, "podIP": ip,
                        "startTime": t,
                        "conditions": [
                            {"type": "Initialized", "status": "True", "lastTransitionTime": t},
                            {"type": "Ready", "status": "True", "lastTransitionTime": t},
                            {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
                            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t}]}});
                    let _ = api
                        .patch_status(&p.name_any(), &PatchParams::default(), &Patch::Merge(&status))
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

fn start_controllers(client: Client) -> oneshot::Sender<()> {
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        kube_sandbox_node::controllers::run_with_client(client, async move {
            let _ = rx.await;
        })
        .await
    });
    tx
}

/// Pods of a label selector, as seen by one watch: every state the server went through.
struct PodHistory {
    pods: Arc<Mutex<BTreeMap<String, Pod>>>,
    violations: Arc<Mutex<Vec<String>>>,
    checking: Arc<AtomicBool>,
    max_total: Arc<Mutex<usize>>,
    _task: JoinHandle<()>,
}

impl Drop for PodHistory {
    fn drop(&mut self) {
        self._task.abort();
    }
}

fn active(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
}

impl PodHistory {
    /// Watches pods matching `labels`; once `check` is on, `invariant(pods)` must hold after
    /// every event.
    fn start(
        client: Client,
        ns: &str,
        labels: &str,
        invariant: impl Fn(&BTreeMap<String, Pod>) -> Option<String> + Send + 'static,
    ) -> Self {
        let pods = Arc::new(Mutex::new(BTreeMap::new()));
        let violations = Arc::new(Mutex::new(Vec::new()));
        let checking = Arc::new(AtomicBool::new(false));
        let max_total = Arc::new(Mutex::new(0));
        let api: Api<Pod> = Api::namespaced(client, ns);
        // With back-off: once the test's API server is gone the watch fails at once, forever,
        // and without a pause that loop would never yield (and hold the runtime's shutdown).
        let stream = watcher(api, watcher::Config::default().labels(labels)).default_backoff();
        let (p, v, c, m) = (
            pods.clone(),
            violations.clone(),
            checking.clone(),
            max_total.clone(),
        );
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(ev) = stream.next().await {
                let mut state = p.lock().unwrap();
                match ev {
                    Ok(Event::Apply(pod) | Event::InitApply(pod)) => {
                        state.insert(pod.uid().unwrap(), pod);
                    }
                    Ok(Event::Delete(pod)) => {
                        state.remove(&pod.uid().unwrap());
                    }
                    Ok(Event::Init | Event::InitDone) | Err(_) => continue,
                }
                if c.load(Ordering::SeqCst) {
                    let total = state.values().filter(|p| active(p)).count();
                    let mut max = m.lock().unwrap();
                    *max = (*max).max(total);
                    if let Some(msg) = invariant(&state) {
                        v.lock().unwrap().push(msg);
                    }
                }
            }
        });
        Self {
            pods,
            violations,
            checking,
            max_total,
            _task: task,
        }
    }

    fn ready_active(&self) -> usize {
        self.pods
            .lock()
            .unwrap()
            .values()
            .filter(|p| active(p) && pod_ready(p))
            .count()
    }
}

fn condition_reason(d: &Deployment, t: &str) -> Option<String> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .and_then(|c| c.reason.clone())
}

async fn rolled_out(deps: &Api<Deployment>, name: &str, replicas: i32) -> Result<Deployment> {
    wait_for("deployment rolled out", WAIT, || async {
        let d = deps.get(name).await.ok()?;
        let st = d.status.as_ref()?;
        let done = st.observed_generation >= d.metadata.generation
            && st.updated_replicas == Some(replicas)
            && st.replicas == Some(replicas)
            && st.available_replicas == Some(replicas)
            && condition_reason(&d, "Progressing").as_deref() == Some("NewReplicaSetAvailable")
            && condition_reason(&d, "Available").as_deref() == Some("MinimumReplicasAvailable");
        done.then_some(d)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_rolls_out_within_budgets_and_is_collected() -> Result<()> {
    let w = world().await?;
    let client = w.client.clone();
    create_node(&client, "node-a", "192.168.0.1").await?;
    create_node(&client, "node-b", "192.168.0.2").await?;
    let _stop = start_controllers(client.clone());
    let _kubelet = stand_in_kubelet(client.clone());
    let deps: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"hostNetwork": true,
                                       "containers": [{"name": "web", "image": "busybox:1"}]}}}}))?;
    deps.create(&PostParams::default(), &deploy).await?;

    let d = rolled_out(&deps, "web", 2).await?;
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );
    let rs_list = sets.list(&ListParams::default()).await?.items;
    assert_eq!(rs_list.len(), 1);
    let rs = &rs_list[0];
    let hash = rs.labels()["pod-template-hash"].clone();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert_eq!(
        rs.spec.as_ref().unwrap().selector.match_labels.as_ref().unwrap()["pod-template-hash"],
        hash
    );
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller, owner.block_owner_deletion),
        ("Deployment", Some(true), Some(true))
    );
    let list = pods.list(&ListParams::default().labels("app=web")).await?.items;
    assert_eq!(list.len(), 2);
    let mut nodes: Vec<String> = Vec::new();
    for p in &list {
        let name = p.name_any();
        let suffix = name.strip_prefix(&format!("web-{hash}-")).unwrap();
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(
            suffix
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
            "{name}"
        );
        assert_eq!(p.labels()["pod-template-hash"], hash);
        let r = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (r.kind.as_str(), r.name.as_str()),
            ("ReplicaSet", rs.name_any().as_str())
        );
        assert_eq!((r.controller, r.block_owner_deletion), (Some(true), Some(true)));
        nodes.push(p.spec.as_ref().unwrap().node_name.clone().unwrap());
    }
    nodes.sort();
    assert_eq!(nodes, ["node-a", "node-b"], "spread by the scheduler");

    // Rolling update with the defaults (25%/25% of 2: surge 1, unavailable 0): never more than
    // 3 pods, never fewer than 2 ready ones.
    let history = PodHistory::start(client.clone(), "default", "app=web", |pods| {
        let total = pods.values().filter(|p| active(p)).count();
        let ready = pods.values().filter(|p| active(p) && pod_ready(p)).count();
        (total > 3 || ready < 2).then(|| format!("{total} pods, {ready} ready"))
    });
    wait_for("watch sees both ready pods", WAIT, || async {
        (history.ready_active() == 2).then_some(())
    })
    .await?;
    history.checking.store(true, Ordering::SeqCst);
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "busybox:2"}]}}}});
    deps.patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let d = rolled_out(&deps, "web", 2).await?;
    assert_eq!(d.metadata.generation, Some(2));
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    let violations = history.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "budgets broken: {violations:?}");
    assert_eq!(*history.max_total.lock().unwrap(), 3, "the surge pod was used");
    let rs_list = sets.list(&ListParams::default()).await?.items;
    assert_eq!(rs_list.len(), 2);
    for rs in &rs_list {
        let rev = rs.annotations()["deployment.kubernetes.io/revision"].clone();
        let replicas = rs.spec.as_ref().unwrap().replicas;
        let image = rs
            .spec
            .as_ref()
            .unwrap()
            .template
            .as_ref()
            .unwrap()
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .image
            .clone();
        match rev.as_str() {
            "1" => assert_eq!((replicas, image.as_deref()), (Some(0), Some("busybox:1"))),
            "2" => assert_eq!((replicas, image.as_deref()), (Some(2), Some("busybox:2"))),
            other => panic!("unexpected revision {other}"),
        }
    }
    let list = pods.list(&ListParams::default().labels("app=web")).await?.items;
    assert!(
        list.iter()
            .all(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some("busybox:2"))
    );

    // Deleting the Deployment (background propagation) collects its ReplicaSets and pods.
    deps.delete("web", &DeleteParams::default()).await?;
    wait_for("replica sets and pods collected", WAIT, || async {
        let rs = sets.list(&ListParams::default()).await.ok()?.items;
        let ps = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?
            .items;
        (rs.is_empty() && ps.is_empty()).then_some(())
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemonset_follows_nodes_and_rolls_within_max_unavailable() -> Result<()> {
    let w = world().await?;
    let client = w.client.clone();
    create_node(&client, "node-a", "192.168.0.1").await?;
    create_node(&client, "node-b", "192.168.0.2").await?;
    let _stop = start_controllers(client.clone());
    let _kubelet = stand_in_kubelet(client.clone());
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let nodes: Api<Node> = Api::all(client.clone());
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"hostNetwork": true, "nodeSelector": {"kubernetes.io/os": "linux"},
                                       "containers": [{"name": "agent", "image": "agent:1"}]}}}}))?;
    dss.create(&PostParams::default(), &ds).await?;

    let by_node = |list: &[Pod]| -> BTreeMap<String, Vec<String>> {
        let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for p in list.iter().filter(|p| active(p)) {
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            m.entry(node).or_default().push(p.name_any());
        }
        m
    };
    let settled = |n: i32, image: &'static str| {
        let dss = dss.clone();
        async move {
            wait_for("daemon set settled", WAIT, || async {
                let d = dss.get("agent").await.ok()?;
                let st = d.status.clone()?;
                let image_ok = d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
                    .image
                    .as_deref()
                    == Some(image);
                (image_ok
                    && st.observed_generation >= d.metadata.generation
                    && st.desired_number_scheduled == n
                    && st.current_number_scheduled == n
                    && st.number_ready == n
                    && st.number_available == Some(n)
                    && st.updated_number_scheduled == Some(n)
                    && st.number_misscheduled == 0)
                    .then_some(d)
            })
            .await
        }
    };
    settled(2, "agent:1").await?;
    let list = pods.list(&ListParams::default().labels("app=agent")).await?.items;
    let placed = by_node(&list);
    assert_eq!(
        placed.keys().collect::<Vec<_>>(),
        ["node-a", "node-b"],
        "{placed:?}"
    );
    assert!(placed.values().all(|v| v.len() == 1));
    for p in &list {
        let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
        let spec = serde_json::to_value(p.spec.as_ref().unwrap())?;
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}])
        );
        let tolerations: Vec<String> = spec["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| format!("{}:{}", t["key"].as_str().unwrap(), t["effect"].as_str().unwrap()))
            .collect();
        for want in [
            "node.kubernetes.io/not-ready:NoExecute",
            "node.kubernetes.io/unreachable:NoExecute",
            "node.kubernetes.io/disk-pressure:NoSchedule",
            "node.kubernetes.io/memory-pressure:NoSchedule",
            "node.kubernetes.io/pid-pressure:NoSchedule",
            "node.kubernetes.io/unschedulable:NoSchedule",
            "node.kubernetes.io/network-unavailable:NoSchedule",
        ] {
            assert!(tolerations.iter().any(|t| t == want), "{want} in {tolerations:?}");
        }
        assert_eq!(p.labels()["pod-template-generation"], "1");
        assert!(!p.labels()["controller-revision-hash"].is_empty());
        let r = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((r.kind.as_str(), r.controller), ("DaemonSet", Some(true)));
        assert!(p.name_any().starts_with("agent-"));
    }

    // A third node gets its pod.
    create_node(&client, "node-c", "192.168.0.3").await?;
    settled(3, "agent:1").await?;
    let placed = by_node(&pods.list(&ListParams::default().labels("app=agent")).await?.items);
    assert_eq!(placed.keys().collect::<Vec<_>>(), ["node-a", "node-b", "node-c"]);

    // A node that goes away takes its pod with it (pod garbage collection).
    let doomed = placed["node-b"][0].clone();
    nodes.delete("node-b", &DeleteParams::default()).await?;
    wait_for("node-b's pod deleted", WAIT, || async {
        pods.get_opt(&doomed).await.ok()?.is_none().then_some(())
    })
    .await?;
    settled(2, "agent:1").await?;

    // Rolling update, maxUnavailable 1 (the default): at every moment at least one of the two
    // nodes has an available pod, and never two pods on a node.
    let history = PodHistory::start(client.clone(), "kube-system", "app=agent", |pods| {
        let placed: BTreeMap<String, usize> =
            pods.values()
                .filter(|p| active(p))
                .fold(BTreeMap::new(), |mut m, p| {
                    let node = p
                        .spec
                        .as_ref()
                        .and_then(|s| s.node_name.clone())
                        .unwrap_or_default();
                    *m.entry(node).or_default() += 1;
                    m
                });
        let ready = pods.values().filter(|p| active(p) && pod_ready(p)).count();
        if placed.values().any(|n| *n > 1) {
            Some(format!("two pods on a node: {placed:?}"))
        } else if ready < 1 {
            Some("no ready pod left".into())
        } else {
            None
        }
    });
    wait_for("watch sees both ready pods", WAIT, || async {
        (history.ready_active() == 2).then_some(())
    })
    .await?;
    history.checking.store(true, Ordering::SeqCst);
    let patch =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}});
    dss.patch("agent", &PatchParams::default(), &Patch::Strategic(&patch))
        .await?;
    let d = settled(2, "agent:2").await?;
    assert_eq!(
        d.annotations()
            .get("deprecated.daemonset.template.generation")
            .map(String::as_str),
        Some("2")
    );
    let violations = history.violations.lock().unwrap().clone();
    assert!(
        violations.is_empty(),
        "rolling update broke maxUnavailable: {violations:?}"
    );
    let list = pods.list(&ListParams::default().labels("app=agent")).await?.items;
    let live: Vec<&Pod> = list.iter().filter(|p| active(p)).collect();
    assert_eq!(live.len(), 2);
    for p in live {
        assert_eq!(p.labels()["pod-template-generation"], "2");
        assert_eq!(
            p.spec.as_ref().unwrap().containers[0].image.as_deref(),
            Some("agent:2")
        );
    }
    Ok(())
}
