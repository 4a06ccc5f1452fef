//! Host-network pods run as real processes: the real `kube-sandbox apiserver` (HTTPS, token)
//! and `kube-sandbox node` binaries, an image table entry pointing at a directory with a test
//! tool, and the real kubectl. Proves init containers, ConfigMap/Secret/emptyDir/projected
//! ServiceAccount volumes in a private mount namespace, env from fieldRef and secretKeyRef, the
//! in-cluster API endpoint and CA, RBAC for the pod's ServiceAccount token (allowed and
//! Forbidden with the real message), readiness probes, `kubectl logs` (also `--previous`),
//! restarts with back-off, SIGTERM on deletion, and that a deleted pod's token stops working;
//! and securityContexts applied (user, capabilities, read-only root, no_new_privs).

#![allow(clippy::unwrap_used)]

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::Sandbox;
use sandbox_guard::free_port;
use serde_json::{Value, json};

const TOOL: &str = r#"#!/bin/bash
SA=/var/run/secrets/kubernetes.io/serviceaccount
case "$1" in
init)
  echo "init ran" > /@WORK@/data/marker
  echo "init done"
  ;;
main)
  echo $$ > @WORK@/pid
  cp $SA/token @WORK@/token
  echo "greeting=$(cat /@WORK@/cfg/greeting)"
  echo "namespace=$(cat $SA/namespace)"
  echo "node=$NODE pass=$PASS marker=$(cat /@WORK@/data/marker)"
  api="https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"
  tok=$(cat $SA/token)
  echo "cm=$(curl -s -o /dev/null -w '%{http_code}' --cacert $SA/ca.crt -H "Authorization: Bearer $tok" $api/api/v1/namespaces/default/configmaps/cfg)"
  echo "secret=$(curl -s --cacert $SA/ca.crt -H "Authorization: Bearer $tok" $api/api/v1/namespaces/default/secrets/sec | tr -d '\n')"
  trap 'echo "got TERM"; kill %1; exit 0' TERM
  python3 -m http.server "$PORT" --bind 127.0.0.1 >/dev/null 2>&1 &
  wait
  ;;
crash)
  echo "crashing"
  exit 3
  ;;
confined)
  echo "uid=$(id -u) gid=$(id -g)"
  grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -d ' \t'
  touch "$2" 2>&1 | grep -q 'Read-only' && echo "root=ro"
  touch "$3/x" && echo "emptydir=rw"
  test -r $SA/token && echo "token=readable"
  echo "end"
  exec sleep 600
  ;;
esac
"#;

struct Node {
    child: Child,
    log: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- node log ---\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
        }
    }
}

fn start_node(sb: &Sandbox, images: &Path) -> Node {
    let state = sb.dir.path().join("node-state");
    let conf = sb.dir.path().join("net.d");
    std::fs::create_dir_all(&conf).unwrap();
    let log = sb.dir.path().join("node.log");
    let child = Command::new(env!("CARGO_BIN_EXE_kube-sandbox"))
        .args(["node", "--name", "node-h", "--kubeconfig"])
        .arg(&sb.kubeconfig)
        .arg("--cni-conf-dir")
        .arg(&conf)
        .arg("--state-dir")
        .arg(&state)
        .arg("--image")
        .arg(format!("example.test/tools={}", images.display()))
        .arg("--sandbox-backoff-base=300ms")
        .arg("--sandbox-backoff-cap=2s")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(sb.dir.path().join("node.err")).unwrap())
        .env("RUST_LOG", "info")
        .spawn()
        .unwrap();
    Node { child, log }
}

/// A fresh work directory `/tmp/ksb-<what>-<pid>`, the test tool in an image directory of the
/// sandbox, and a node running it.
fn work_and_node(sb: &Sandbox, what: &str) -> (PathBuf, Node) {
    let work = PathBuf::from(format!("/tmp/ksb-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let images = sb.dir.path().join("image");
    std::fs::create_dir_all(&images).unwrap();
    let tool = images.join("tool");
    let w = work.display().to_string();
    std::fs::write(&tool, TOOL.replace("/@WORK@", &w).replace("@WORK@", &w)).unwrap();
    Command::new("chmod").arg("+x").arg(&tool).status().unwrap();
    let node = start_node(sb, &images);
    (work, node)
}

fn get_pod(sb: &Sandbox, name: &str) -> Option<Value> {
    let out = sb.kubectl(&["get", "pod", name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn host_network_pods_run_as_processes_with_volumes_tokens_rbac_probes_logs_and_restarts() {
    let sb = Sandbox::start();
    let (work, _node) = work_and_node(&sb, "host-pods");
    let w = work.display().to_string();
    wait_for("node Ready", Duration::from_secs(30), || {
        let out = sb.kubectl(&[
            "get",
            "node",
            "node-h",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        (String::from_utf8_lossy(&out.stdout) == "True").then_some(())
    });

    let port = free_port();
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tester"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"greeting": "hello"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec"}, "stringData": {"password": "pw"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm-reader"},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "tester-reads"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"},
         "subjects": [{"kind": "ServiceAccount", "name": "tester", "namespace": "default"}]},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tester"}, "spec": {
            "nodeName": "node-h", "hostNetwork": true, "serviceAccountName": "tester",
            "terminationGracePeriodSeconds": 5,
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "cfg"}}],
            "initContainers": [{"name": "init", "image": "example.test/tools:1.0", "command": ["/usr/local/bin/tool", "init"],
                "volumeMounts": [{"name": "data", "mountPath": format!("{w}/data")}]}],
            "containers": [{"name": "main", "image": "example.test/tools:1.0", "command": ["tool"], "args": ["main"],
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
                        {"name": "PORT", "value": port.to_string()}],
                "volumeMounts": [{"name": "data", "mountPath": format!("{w}/data")},
                                 {"name": "cfg", "mountPath": format!("{w}/cfg"), "readOnly": true}],
                "readinessProbe": {"httpGet": {"path": "/", "port": port}, "periodSeconds": 1}}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher"}, "spec": {
            "nodeName": "node-h", "hostNetwork": true, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "example.test/tools", "command": ["tool", "crash"]}]}},
    ]});
    let docs: Vec<String> = objects["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(Value::to_string)
        .collect();
    let file = sb.write("objects.yaml", &docs.join("\n---\n"));
    sb.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);

    // Ready through its readiness probe, after its init container completed.
    let pod = wait_for("tester Ready", Duration::from_secs(60), || {
        let p = get_pod(&sb, "tester")?;
        let ready = p["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(p)
    });
    assert_eq!(pod["status"]["phase"], "Running");
    assert_eq!(
        pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"],
        "Completed"
    );
    assert_eq!(pod["status"]["containerStatuses"][0]["ready"], true);
    // The ServiceAccount admission plugin mounted the projected token volume.
    let mounts = pod["spec"]["containers"][0]["volumeMounts"].to_string();
    assert!(
        mounts.contains("/var/run/secrets/kubernetes.io/serviceaccount"),
        "{mounts}"
    );

    let logs = wait_for("main's output", Duration::from_secs(20), || {
        let out = sb.kubectl(&["logs", "tester", "-c", "main"]);
        let s = String::from_utf8_lossy(&out.stdout).into_owned();
        s.contains("secret=").then_some(s)
    });
    assert!(logs.contains("greeting=hello"), "{logs}");
    assert!(logs.contains("namespace=default"), "{logs}");
    assert!(logs.contains("node=node-h pass=pw marker=init ran"), "{logs}");
    assert!(logs.contains("cm=200"), "{logs}");
    assert!(
        logs.contains(r#"secrets \"sec\" is forbidden: User \"system:serviceaccount:default:tester\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""#),
        "{logs}"
    );
    assert_eq!(
        sb.kubectl_ok(&["logs", "tester", "-c", "init"]).trim(),
        "init done"
    );
    assert_eq!(
        sb.kubectl_ok(&["logs", "tester", "-c", "main", "--tail=1"])
            .lines()
            .count(),
        1
    );

    // The pod's token, used by the real kubectl: RBAC allows and denies as bound.
    let token = std::fs::read_to_string(work.join("token")).unwrap();
    let token_arg = format!("--token={}", token.trim());
    sb.kubectl_ok(&[&token_arg, "get", "configmap", "cfg"]);
    let err = sb.kubectl_err(&[&token_arg, "get", "secrets"]);
    assert!(
        err.contains(r#"secrets is forbidden: User "system:serviceaccount:default:tester" cannot list resource "secrets" in API group "" in the namespace "default""#),
        "{err}"
    );

    // A crashing container is restarted with back-off; its previous run's log is kept.
    let crasher = wait_for("two restarts", Duration::from_secs(60), || {
        let p = get_pod(&sb, "crasher")?;
        (p["status"]["containerStatuses"][0]["restartCount"].as_u64()? >= 2).then_some(p)
    });
    let cs = &crasher["status"]["containerStatuses"][0];
    assert_eq!(cs["lastState"]["terminated"]["exitCode"], 3, "{cs}");
    assert_eq!(cs["lastState"]["terminated"]["reason"], "Error", "{cs}");
    assert_eq!(
        sb.kubectl_ok(&["logs", "crasher", "--previous"]).trim(),
        "crashing"
    );

    // Deleting the pod sends SIGTERM (the trap answers), the process ends, the token dies.
    let pid: i32 = std::fs::read_to_string(work.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    sb.kubectl_ok(&[
        "delete",
        "pod",
        "tester",
        "crasher",
        "--wait=true",
        "--timeout=60s",
    ]);
    wait_for("process gone", Duration::from_secs(10), || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    let err = sb.kubectl_err(&[&token_arg, "get", "configmap", "cfg"]);
    assert!(
        err.contains("Unauthorized") || err.contains("provide credentials"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn security_contexts_confine_container_processes() {
    let sb = Sandbox::start();
    // The image directory is private (a 0700 tempdir): a non-root container still starts.
    let (work, _node) = work_and_node(&sb, "confined");
    let w = work.display().to_string();
    let pod = |name: &str, pod_sc: Value, sc: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
            "nodeName": "node-h", "hostNetwork": true, "terminationGracePeriodSeconds": 1,
            "securityContext": pod_sc,
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "example.test/tools", "securityContext": sc,
                "command": ["tool", "confined", format!("{w}/{name}-probe"), format!("{w}/{name}-scratch")],
                "volumeMounts": [{"name": "scratch", "mountPath": format!("{w}/{name}-scratch")}]}]}})
    };
    let objects = [
        // The controller's shape: not root, nothing kept, a read-only root.
        pod(
            "nonroot",
            json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532}),
            json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                   "capabilities": {"drop": ["ALL"]}}),
        ),
        // The daemon's shape: root with a named set of capabilities.
        pod(
            "capped",
            json!({}),
            json!({"readOnlyRootFilesystem": true,
                   "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"]}}),
        ),
        pod("privileged", json!({}), json!({"privileged": true})),
        pod("refused", json!({"runAsNonRoot": true}), json!({})),
    ];
    let docs: Vec<String> = objects.iter().map(Value::to_string).collect();
    let file = sb.write("objects.yaml", &docs.join("\n---\n"));
    sb.kubectl_ok(&["apply", "-f", file.to_str().unwrap()]);
    let logs = |name: &str| {
        wait_for(&format!("{name}'s output"), Duration::from_secs(60), || {
            let out = sb.kubectl(&["logs", name]);
            let s = String::from_utf8_lossy(&out.stdout).into_owned();
            s.contains("end").then_some(s)
        })
    };
    let nonroot = logs("nonroot");
    for want in [
        "uid=65532 gid=65532",
        "CapEff:0000000000000000",
        "CapBnd:0000000000000000",
        "NoNewPrivs:1",
        "emptydir=rw",
        "token=readable",
    ] {
        assert!(nonroot.contains(want), "{want} in {nonroot}");
    }
    let capped = logs("capped");
    // NET_ADMIN (12), SYS_PTRACE (19), SYS_ADMIN (21).
    let mask = format!("{:016x}", (1u64 << 12) | (1 << 19) | (1 << 21));
    for want in [
        "uid=0 gid=0".to_string(),
        format!("CapEff:{mask}"),
        format!("CapBnd:{mask}"),
        "NoNewPrivs:0".into(),
        "root=ro".into(),
        "emptydir=rw".into(),
    ] {
        assert!(capped.contains(&want), "{want} in {capped}");
    }
    let privileged = logs("privileged");
    assert!(!privileged.contains("root=ro"), "{privileged}");
    assert!(
        !privileged.contains("CapBnd:0000000000000000") && !privileged.contains(&format!("CapBnd:{mask}")),
        "{privileged}"
    );
    // runAsNonRoot without a user: refused with kubelet's words, never started.
    let refused = wait_for("refused's waiting reason", Duration::from_secs(30), || {
        let p = get_pod(&sb, "refused")?;
        let w = p["status"]["containerStatuses"][0]["state"]["waiting"].clone();
        (w["reason"] == "CreateContainerConfigError").then_some(w)
    });
    assert_eq!(
        refused["message"], "container has runAsNonRoot and image will run as root",
        "{refused}"
    );
    assert!(
        !work.join("capped-probe").exists(),
        "a read-only root was written"
    );
    assert!(
        work.join("privileged-probe").exists(),
        "a writable root was not written"
    );
    sb.kubectl_ok(&["delete", "pod", "--all", "--wait=true", "--timeout=60s"]);
    let _ = std::fs::remove_dir_all(&work);
}
