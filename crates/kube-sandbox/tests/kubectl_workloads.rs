//! Workloads with the real `kubectl` against `kube-sandbox apiserver` (which runs the
//! Deployment, ReplicaSet and DaemonSet controllers in-process): discovery, client-side and
//! server-side apply, table columns, validation messages, `kubectl rollout status`, and cascading
//! delete. Nodes are Node objects created by the test; a stand-in kubelet (a thread of this
//! test) marks bound pods Ready and finishes graceful deletions.

mod common;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

use common::{Sandbox, eventually};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions},
};
use serde_json::json;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      hostNetwork: true
      containers:
      - name: web
        image: nginx:1.27
        env:
        - name: A
          value: "1"
"#;

const DAEMONSET: &str = r#"
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: kube-system
spec:
  selector:
    matchLabels:
      app: agent
  template:
    metadata:
      labels:
        app: agent
    spec:
      hostNetwork: true
      nodeSelector:
        kubernetes.io/os: linux
      tolerations:
      - operator: Exists
      containers:
      - name: agent
        image: agent:1
"#;

fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// Creates Node objects and runs a stand-in kubelet until dropped.
struct Cluster {
    stop: Arc<AtomicBool>,
    kubelet: Option<JoinHandle<()>>,
}

impl Cluster {
    fn start(sb: &Sandbox, nodes: &[&str]) -> Self {
        let kubeconfig = sb.kubeconfig.clone();
        let names: Vec<String> = nodes.iter().map(|s| s.to_string()).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let kubelet = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let client = common::client_for(&kubeconfig).await.expect("client");
                let node_api: Api<Node> = Api::all(client.clone());
                for (i, n) in names.iter().enumerate() {
                    let node: Node = serde_json::from_value(json!({
                        "metadata": {"name": n, "labels": {"kubernetes.io/os": "linux", "kubernetes.io/hostname": n}},
                        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                   "addresses": [{"type": "InternalIP", "address": format!("192.168.1.{}", i + 1)}],
                                   "allocatable": {"pods": "110"}}}))
                    .expect("node");
                    node_api.create(&PostParams::default(), &node).await.expect("create node");
                }
                let _ = ready_tx.send(());
                let pods: Api<Pod> = Api::all(client.clone());
                while !flag.load(Ordering::SeqCst) {
                    if let Ok(list) = pods.list(&ListParams::default()).await {
                        for p in list.items {
                            if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() {
                                continue;
                            }
                            let api: Api<Pod> = Api::namespaced(client.clone(), &p.namespace().unwrap_or_default());
                            let ready = p
                                .status
                                .as_ref()
                                .and_then(|s| s.conditions.as_ref())
                                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
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
                            } else if !ready {
                                let body = json!({"status": {"phase": "Running", "conditions": [
                                    {"type": "Ready", "status": "True"},
                                    {"type": "ContainersReady", "status": "True"},
                                    {"type": "PodScheduled", "status": "True"}]}});
                                let _ = api
                                    .patch_status(&p.name_any(), &PatchParams::default(), &Patch::Merge(&body))
                                    .await;
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            });
        });
        ready_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("nodes created");
        Self {
            stop,
            kubelet: Some(kubelet),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.kubelet.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn discovery_lists_workload_policy_and_rbac_resources() {
    let sb = Sandbox::start();
    let out = sb.kubectl_ok(&["api-resources", "--no-headers"]);
    for (name, short, gv, namespaced, kind) in [
        ("deployments", "deploy", "apps/v1", "true", "Deployment"),
        ("replicasets", "rs", "apps/v1", "true", "ReplicaSet"),
        ("daemonsets", "ds", "apps/v1", "true", "DaemonSet"),
        (
            "poddisruptionbudgets",
            "pdb",
            "policy/v1",
            "true",
            "PodDisruptionBudget",
        ),
    ] {
        let want = [name, short, gv, namespaced, kind];
        assert!(rows(&out).iter().any(|r| r == &want), "{want:?} in\n{out}");
    }
    for (name, namespaced, kind) in [
        ("roles", "true", "Role"),
        ("rolebindings", "true", "RoleBinding"),
        ("clusterroles", "false", "ClusterRole"),
        ("clusterrolebindings", "false", "ClusterRoleBinding"),
    ] {
        let want = [name, "rbac.authorization.k8s.io/v1", namespaced, kind];
        assert!(rows(&out).iter().any(|r| r == &want), "{want:?} in\n{out}");
    }
    // RBAC objects are stored and printed (not enforced).
    let f = sb.write(
        "rbac.yaml",
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: default}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-pods, namespace: default}
roleRef: {kind: Role, name: reader}
subjects:
- {kind: User, name: alice}
- {kind: ServiceAccount, name: default, namespace: default}
"#,
    );
    sb.kubectl_ok(&["apply", "-f", f.to_str().expect("path")]);
    let out = sb.kubectl_ok(&["get", "rolebinding", "read-pods", "-o", "wide"]);
    let t = rows(&out);
    assert_eq!(
        t[0],
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        "{out}"
    );
    assert_eq!(t[1][1], "Role/reader", "{out}");
    let f = sb.write(
        "crb.yaml",
        r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: x}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: User, name: bob}]
"#,
    );
    let err = sb.kubectl_err(&["apply", "-f", f.to_str().expect("path")]);
    assert!(
        err.contains(r#"The ClusterRoleBinding "x" is invalid: roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole""#),
        "{err}"
    );
}

#[test]
fn deployment_apply_rollout_and_delete() {
    let sb = Sandbox::start();
    let _cluster = Cluster::start(&sb, &["node-1", "node-2"]);
    let f = sb.write("deploy.yaml", DEPLOYMENT);
    let path = f.to_str().expect("path");
    assert_eq!(
        sb.kubectl_ok(&["apply", "-f", path]).trim(),
        "deployment.apps/web created"
    );
    let out = sb.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(
        out.contains("deployment \"web\" successfully rolled out"),
        "{out}"
    );
    let out = sb.kubectl_ok(&["get", "deploy", "web"]);
    let t = rows(&out);
    assert_eq!(t[0], ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], "{out}");
    assert_eq!(t[1][..4], ["web", "2/2", "2", "2"], "{out}");
    let out = sb.kubectl_ok(&["get", "rs", "-l", "app=web"]);
    let t = rows(&out);
    assert_eq!(t[0], ["NAME", "DESIRED", "CURRENT", "READY", "AGE"], "{out}");
    assert_eq!(t[1][1..4], ["2", "2", "2"], "{out}");
    assert!(t[1][0].starts_with("web-"), "{out}");

    // Client-side apply of a changed manifest: a strategic merge patch (containers by name).
    let changed = DEPLOYMENT.replace("nginx:1.27", "nginx:1.28").replace(
        "  replicas: 2\n",
        "  replicas: 2\n  strategy:\n    type: Recreate\n",
    );
    let f2 = sb.write("deploy2.yaml", &changed);
    assert_eq!(
        sb.kubectl_ok(&["apply", "-f", f2.to_str().expect("path")]).trim(),
        "deployment.apps/web configured"
    );
    let strategy = sb.kubectl_ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.strategy}"]);
    assert_eq!(
        strategy, r#"{"type":"Recreate"}"#,
        "retainKeys dropped rollingUpdate"
    );
    let out = sb.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let out = sb.kubectl_ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision} {.status.observedGeneration}",
    ]);
    assert_eq!(out, "2 2", "{out}");
    let history = sb.kubectl_ok(&["rollout", "history", "deployment/web"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");
    let images = sb.kubectl_ok(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[*].spec.containers[0].image}",
    ]);
    assert_eq!(images, "nginx:1.28 nginx:1.28", "{images}");

    // Server-side apply takes the manifest back (RollingUpdate defaults again).
    sb.kubectl_ok(&["apply", "--server-side", "--force-conflicts", "-f", path]);
    let out = sb.kubectl_ok(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let strategy = sb.kubectl_ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.strategy.type}"]);
    assert_eq!(strategy, "RollingUpdate");

    // Validation as the real server words it.
    let bad = DEPLOYMENT
        .replace("name: web\n  namespace", "name: bad\n  namespace")
        .replace(
            "      labels:\n        app: web",
            "      labels:\n        app: other",
        );
    let f3 = sb.write("bad.yaml", &bad);
    let err = sb.kubectl_err(&["apply", "-f", f3.to_str().expect("path")]);
    assert!(
        err.contains(r#"The Deployment "bad" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{"app":"other"}: `selector` does not match template `labels`"#),
        "{err}"
    );

    // Deleting cascades (background) to the ReplicaSets and their pods.
    sb.kubectl_ok(&["delete", "deployment", "web"]);
    eventually(Duration::from_secs(60), "replica sets and pods gone", || {
        let rs = sb.kubectl_ok(&["get", "rs", "-o", "name"]);
        let pods = sb.kubectl_ok(&["get", "pods", "-l", "app=web", "-o", "name"]);
        (rs.trim().is_empty() && pods.trim().is_empty()).then_some(())
    });
}

#[test]
fn daemonset_server_side_apply_and_rollout() {
    let sb = Sandbox::start();
    let _cluster = Cluster::start(&sb, &["node-1", "node-2"]);
    let f = sb.write("ds.yaml", DAEMONSET);
    let path = f.to_str().expect("path");
    assert_eq!(
        sb.kubectl_ok(&["apply", "--server-side", "-f", path]).trim(),
        "daemonset.apps/agent serverside-applied"
    );
    let out = sb.kubectl_ok(&[
        "rollout",
        "status",
        "ds/agent",
        "-n",
        "kube-system",
        "--timeout=60s",
    ]);
    assert!(
        out.contains("daemon set \"agent\" successfully rolled out"),
        "{out}"
    );
    let out = sb.kubectl_ok(&["get", "ds", "-n", "kube-system"]);
    let t = rows(&out);
    assert_eq!(
        t[0],
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE"
        ],
        "{out}"
    );
    assert_eq!(
        t[1][..7],
        ["agent", "2", "2", "2", "2", "2", "kubernetes.io/os=linux"],
        "{out}"
    );
    let nodes = sb.kubectl_ok(&[
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        "app=agent",
        "-o",
        "jsonpath={.items[*].spec.nodeName}",
    ]);
    let mut nodes: Vec<&str> = nodes.split_whitespace().collect();
    nodes.sort();
    assert_eq!(nodes, ["node-1", "node-2"]);

    let changed = DAEMONSET.replace("agent:1", "agent:2");
    let f2 = sb.write("ds2.yaml", &changed);
    sb.kubectl_ok(&["apply", "--server-side", "-f", f2.to_str().expect("path")]);
    let out = sb.kubectl_ok(&[
        "rollout",
        "status",
        "ds/agent",
        "-n",
        "kube-system",
        "--timeout=60s",
    ]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let images = sb.kubectl_ok(&[
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        "app=agent",
        "-o",
        "jsonpath={.items[*].spec.containers[0].image}",
    ]);
    assert_eq!(images, "agent:2 agent:2");
    let gens = sb.kubectl_ok(&[
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        "app=agent",
        "-o",
        "jsonpath={.items[*].metadata.labels.pod-template-generation}",
    ]);
    assert_eq!(gens, "2 2");
}
