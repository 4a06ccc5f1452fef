//! Fidelity tests of the emulated API server with the real `kubectl` (installed by
//! `tools/install-kubectl`, or `$KUBECTL`): get (tables, json, yaml, wide, label selectors),
//! watch, create, server-side apply (incl. conflicts), label, annotate, delete, and a
//! KuryrPort-like CRD (plural, short name, printer columns, status subresource, schema errors).

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::{Sandbox, eventually};
use serde_json::Value;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
  labels:
    app: web
    tier: frontend
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    ports:
    - containerPort: 80
"#;

const SERVICE: &str = r#"
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
spec:
  selector:
    app: web
  ports:
  - name: http
    port: 80
    targetPort: 80
"#;

const CONFIGMAP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
  labels:
    app: web
data:
  a: "1"
  b: "2"
"#;

const KP_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kuryrports.openstack.org
spec:
  group: openstack.org
  scope: Namespaced
  names:
    plural: kuryrports
    singular: kuryrport
    kind: KuryrPort
    shortNames:
    - kp
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: PodUID
      type: string
      description: Pod UID
      jsonPath: .spec.podUid
    - name: Node
      type: string
      jsonPath: .spec.podNodeName
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [podUid, podNodeName]
            properties:
              podUid:
                type: string
              podNodeName:
                type: string
          status:
            type: object
            properties:
              vifs:
                type: object
                x-kubernetes-preserve-unknown-fields: true
"#;

const KP: &str = r#"
apiVersion: openstack.org/v1
kind: KuryrPort
metadata:
  name: web
  namespace: default
  finalizers:
  - kuryr.openstack.org/kuryrport-finalizer
spec:
  podUid: 4b0f6c1e-0000-4000-8000-000000000001
  podNodeName: node-1
"#;

/// Rows of a kubectl table: whitespace-separated cells (fine for cells without spaces).
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

fn row<'a>(table: &'a [Vec<String>], name: &str) -> &'a [String] {
    table
        .iter()
        .find(|r| r.first().map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row {name:?} in {table:?}"))
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

#[test]
fn get_namespaces_in_all_formats() {
    let sb = Sandbox::start();
    let out = sb.kubectl_ok(&["get", "namespaces"]);
    let t = rows(&out);
    assert_eq!(t[0], ["NAME", "STATUS", "AGE"], "{out}");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert_eq!(row(&t, ns)[1], "Active", "{out}");
    }
    let list = json(&sb.kubectl_ok(&["get", "ns", "-o", "json"]));
    assert_eq!(list["kind"], "List");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert!(names.contains(&"default"), "{names:?}");
    assert_eq!(list["items"][0]["kind"], "Namespace");
    let yaml: Value =
        serde_yaml::from_str(&sb.kubectl_ok(&["get", "ns", "default", "-o", "yaml"])).expect("yaml");
    assert_eq!(yaml["metadata"]["name"], "default");
    assert_eq!(yaml["status"]["phase"], "Active");
    assert!(yaml["metadata"]["uid"].is_string());
    assert!(yaml["metadata"]["creationTimestamp"].is_string());
    let phase = sb.kubectl_ok(&["get", "ns", "default", "-o", "jsonpath={.status.phase}"]);
    assert_eq!(phase, "Active");
    let err = sb.kubectl_err(&["get", "ns", "nope"]);
    assert!(
        err.contains(r#"Error from server (NotFound): namespaces "nope" not found"#),
        "{err}"
    );
}

#[test]
fn create_and_get_pods_with_selectors_and_wide() {
    let sb = Sandbox::start();
    let f = sb.write("pod.yaml", POD);
    let out = sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    assert_eq!(out.trim(), "pod/web created");
    let out = sb.kubectl_ok(&["get", "pods"]);
    let t = rows(&out);
    assert_eq!(t[0], ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], "{out}");
    let r = row(&t, "web");
    assert_eq!(r[1], "0/1", "{out}");
    assert_eq!(r[2], "Pending", "{out}");
    assert_eq!(r[3], "0", "{out}");
    let wide = sb.kubectl_ok(&["get", "pods", "-o", "wide"]);
    let header = wide.lines().next().unwrap_or("");
    for col in [
        "NAME",
        "READY",
        "STATUS",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ] {
        assert!(header.contains(col), "missing {col} in {wide}");
    }
    let out = sb.kubectl_ok(&["get", "pods", "-l", "app=web,tier in (frontend,backend)"]);
    assert!(rows(&out).iter().any(|r| r[0] == "web"), "{out}");
    let out = sb.kubectl(&["get", "pods", "-l", "app!=web"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No resources found in default namespace."),
        "{out:?}"
    );
    let out = sb.kubectl_ok(&[
        "get",
        "pods",
        "--field-selector",
        "metadata.name=web",
        "-o",
        "name",
    ]);
    assert_eq!(out.trim(), "pod/web");
    let pod = json(&sb.kubectl_ok(&["get", "pod", "web", "-o", "json"]));
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["apiVersion"], "v1");
    assert!(pod["metadata"]["resourceVersion"].is_string());
    assert!(pod["metadata"]["uid"].is_string());
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:1.27");
    let err = sb.kubectl_err(&["get", "pods", "-l", "a=-bad"]);
    assert!(err.contains("invalid") || err.contains("Invalid"), "{err}");
    // All namespaces: NAMESPACE column first.
    let out = sb.kubectl_ok(&["get", "pods", "-A"]);
    assert_eq!(rows(&out)[0][0], "NAMESPACE", "{out}");
}

#[test]
fn create_service_and_configmap() {
    let sb = Sandbox::start();
    let svc = sb.write("svc.yaml", SERVICE);
    let cm = sb.write("cm.yaml", CONFIGMAP);
    let out = sb.kubectl_ok(&[
        "create",
        "-f",
        svc.to_str().expect("path"),
        "-f",
        cm.to_str().expect("path"),
    ]);
    assert!(out.contains("service/web created"), "{out}");
    assert!(out.contains("configmap/settings created"), "{out}");
    let out = sb.kubectl_ok(&["get", "svc", "web"]);
    let t = rows(&out);
    assert_eq!(
        t[0],
        ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
        "{out}"
    );
    let r = row(&t, "web");
    assert_eq!(r[1], "ClusterIP");
    assert!(
        r[2].starts_with("10.96."),
        "cluster IP from the service CIDR: {out}"
    );
    assert_eq!(r[3], "<none>");
    assert_eq!(r[4], "80/TCP");
    let svc = json(&sb.kubectl_ok(&["get", "svc", "web", "-o", "json"]));
    assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP", "defaulted protocol");
    assert_eq!(svc["spec"]["type"], "ClusterIP", "defaulted type");
    let out = sb.kubectl_ok(&["get", "configmaps", "settings"]);
    let t = rows(&out);
    assert_eq!(t[0], ["NAME", "DATA", "AGE"], "{out}");
    assert_eq!(row(&t, "settings")[1], "2");
    // Creating it again is a conflict, as on a real cluster.
    let err = sb.kubectl_err(&["create", "-f", cm.to_str().expect("path")]);
    assert!(
        err.contains(r#"Error from server (AlreadyExists): error when creating"#)
            && err.contains(r#"configmaps "settings" already exists"#),
        "{err}"
    );
}

/// `kubectl create configmap|namespace|secret ...` (typed clients) send protobuf bodies.
#[test]
fn imperative_create_commands() {
    let sb = Sandbox::start();
    let out = sb.kubectl_ok(&["create", "namespace", "team-a"]);
    assert_eq!(out.trim(), "namespace/team-a created");
    let out = sb.kubectl_ok(&["create", "configmap", "lit", "-n", "team-a", "--from-literal=k=v"]);
    assert_eq!(out.trim(), "configmap/lit created");
    assert_eq!(
        sb.kubectl_ok(&["get", "cm", "lit", "-n", "team-a", "-o", "jsonpath={.data.k}"]),
        "v"
    );
    let out = sb.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "-n",
        "team-a",
        "--from-literal=p=q",
    ]);
    assert_eq!(out.trim(), "secret/s created");
    assert_eq!(
        sb.kubectl_ok(&["get", "secret", "s", "-n", "team-a", "-o", "jsonpath={.data.p}"]),
        "cQ=="
    );
}

#[test]
fn default_kubernetes_service_exists() {
    let sb = Sandbox::start();
    let out = sb.kubectl_ok(&["get", "svc", "kubernetes", "-n", "default"]);
    let t = rows(&out);
    let r = row(&t, "kubernetes");
    assert_eq!(r[1], "ClusterIP", "{out}");
    assert_eq!(r[2], "10.96.0.1", "{out}");
    assert_eq!(r[4], "443/TCP", "{out}");
}

#[test]
fn watch_prints_new_objects() {
    let sb = Sandbox::start();
    let mut child = sb
        .kubectl_cmd()
        .args(["get", "configmaps", "--watch", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubectl get -w");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Let the watch start, then create an object.
    std::thread::sleep(Duration::from_millis(1500));
    let f = sb.write(
        "watched.yaml",
        &CONFIGMAP.replace("name: settings", "name: watched"),
    );
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let mut seen = Vec::new();
    let got = loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => {
                let hit = l.contains("watched") && l.contains("ADDED");
                seen.push(l);
                if hit {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    sb.kubectl_ok(&["label", "configmap", "watched", "x=y"]);
    let modified = loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) => {
                let hit = l.contains("watched") && l.contains("MODIFIED");
                seen.push(l);
                if hit {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    let _ = child.kill();
    let out = child.wait_with_output().expect("wait kubectl");
    assert!(
        got && modified,
        "watch lines: {seen:?}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn server_side_apply_twice_and_conflicts() {
    let sb = Sandbox::start();
    let v1 = sb.write("cm1.yaml", CONFIGMAP);
    let out = sb.kubectl_ok(&["apply", "--server-side", "-f", v1.to_str().expect("path")]);
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    let v2 = sb.write(
        "cm2.yaml",
        &CONFIGMAP
            .replace("a: \"1\"", "a: \"10\"")
            .replace("  b: \"2\"\n", ""),
    );
    let out = sb.kubectl_ok(&["apply", "--server-side", "-f", v2.to_str().expect("path")]);
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    let cm = json(&sb.kubectl_ok(&["get", "cm", "settings", "-o", "json", "--show-managed-fields"]));
    assert_eq!(cm["data"]["a"], "10");
    assert!(
        cm["data"].get("b").is_none(),
        "b dropped by the second apply: {cm}"
    );
    let mf = cm["metadata"]["managedFields"].as_array().expect("managedFields");
    let kubectl_entry = mf
        .iter()
        .find(|e| e["manager"] == "kubectl" && e["operation"] == "Apply")
        .unwrap_or_else(|| panic!("no kubectl Apply entry: {mf:?}"));
    assert_eq!(kubectl_entry["fieldsType"], "FieldsV1");
    assert!(kubectl_entry["fieldsV1"]["f:data"]["f:a"].is_object());
    // By default kubectl get hides managedFields.
    let plain = json(&sb.kubectl_ok(&["get", "cm", "settings", "-o", "json"]));
    assert!(plain["metadata"].get("managedFields").is_none());

    let other = sb.write("cm3.yaml", &CONFIGMAP.replace("a: \"1\"", "a: \"99\""));
    let err = sb.kubectl_err(&[
        "apply",
        "--server-side",
        "--field-manager=other-manager",
        "-f",
        other.to_str().expect("path"),
    ]);
    assert!(err.contains("conflict"), "{err}");
    assert!(err.contains(r#"conflict with "kubectl""#), "{err}");
    assert!(err.contains(".data.a"), "{err}");
    let out = sb.kubectl_ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=other-manager",
        "-f",
        other.to_str().expect("path"),
    ]);
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
    let value = sb.kubectl_ok(&["get", "cm", "settings", "-o", "jsonpath={.data.a}"]);
    assert_eq!(value, "99");
}

#[test]
fn label_annotate_and_delete() {
    let sb = Sandbox::start();
    let f = sb.write(
        "c1.yaml",
        &CONFIGMAP
            .replace("name: settings", "name: c1")
            .replace("  labels:\n    app: web\n", ""),
    );
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    assert_eq!(
        sb.kubectl_ok(&["label", "configmap", "c1", "env=prod"]).trim(),
        "configmap/c1 labeled"
    );
    let out = sb.kubectl_ok(&["get", "cm", "-l", "env=prod", "-o", "name"]);
    assert_eq!(out.trim(), "configmap/c1");
    let err = sb.kubectl_err(&["label", "configmap", "c1", "env=dev"]);
    assert!(err.contains("already has a value (prod)"), "{err}");
    sb.kubectl_ok(&["label", "configmap", "c1", "env=dev", "--overwrite"]);
    assert_eq!(
        sb.kubectl_ok(&["get", "cm", "c1", "-o", "jsonpath={.metadata.labels.env}"]),
        "dev"
    );
    sb.kubectl_ok(&["label", "configmap", "c1", "env-"]);
    let labels = sb.kubectl_ok(&["get", "cm", "c1", "-o", "jsonpath={.metadata.labels}"]);
    assert!(!labels.contains("env"), "{labels}");
    assert_eq!(
        sb.kubectl_ok(&["annotate", "configmap", "c1", "owner=kuryr"])
            .trim(),
        "configmap/c1 annotated"
    );
    assert_eq!(
        sb.kubectl_ok(&["get", "cm", "c1", "-o", "jsonpath={.metadata.annotations.owner}"]),
        "kuryr"
    );
    let out = sb.kubectl_ok(&["delete", "configmap", "c1"]);
    // kubectl ≥ 1.33 appends " from default namespace".
    assert!(out.trim().starts_with(r#"configmap "c1" deleted"#), "{out}");
    let err = sb.kubectl_err(&["get", "configmap", "c1"]);
    assert!(err.contains(r#"configmaps "c1" not found"#), "{err}");

    // A pod (not bound to any node) with --wait.
    let f = sb.write("pod.yaml", POD);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let out = sb.kubectl_ok(&["delete", "pod", "web", "--wait=true", "--timeout=30s"]);
    assert!(out.trim().starts_with(r#"pod "web" deleted"#), "{out}");
    let out = sb.kubectl(&["get", "pods", "web"]);
    assert!(!out.status.success());

    // An object held by a finalizer: delete --wait=false marks it, removing the finalizer frees it.
    let held = CONFIGMAP.replace("  labels:\n", "  finalizers:\n  - example.com/hold\n  labels:\n");
    let f = sb.write("held.yaml", &held);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    sb.kubectl_ok(&["delete", "cm", "settings", "--wait=false"]);
    let cm = json(&sb.kubectl_ok(&["get", "cm", "settings", "-o", "json"]));
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "{cm}");
    sb.kubectl_ok(&[
        "patch",
        "cm",
        "settings",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    eventually(
        Duration::from_secs(10),
        "finalized configmap to disappear",
        || (!sb.kubectl(&["get", "cm", "settings"]).status.success()).then_some(()),
    );
}

/// Creates the KuryrPort CRD and waits until it is established.
fn create_crd(sb: &Sandbox) {
    let f = sb.write("crd.yaml", KP_CRD);
    let out = sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    assert_eq!(
        out.trim(),
        "customresourcedefinition.apiextensions.k8s.io/kuryrports.openstack.org created"
    );
    sb.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/kuryrports.openstack.org",
    ]);
}

#[test]
fn crd_plural_short_name_printer_columns_and_status() {
    let sb = Sandbox::start();
    create_crd(&sb);
    let f = sb.write("kp.yaml", KP);
    let out = sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    assert_eq!(out.trim(), "kuryrport.openstack.org/web created");
    for what in [
        "kuryrports",
        "kp",
        "kuryrport",
        "kuryrports.openstack.org",
        "KuryrPort",
    ] {
        let out = sb.kubectl_ok(&["get", what]);
        let t = rows(&out);
        assert_eq!(t[0], ["NAME", "PODUID", "NODE", "AGE"], "get {what}: {out}");
        let r = row(&t, "web");
        assert_eq!(r[1], "4b0f6c1e-0000-4000-8000-000000000001", "{out}");
        assert_eq!(r[2], "node-1", "{out}");
    }
    let kp = json(&sb.kubectl_ok(&["get", "kp", "web", "-o", "json"]));
    assert_eq!(kp["apiVersion"], "openstack.org/v1");
    assert_eq!(kp["kind"], "KuryrPort");
    assert_eq!(
        kp["metadata"]["finalizers"][0],
        "kuryr.openstack.org/kuryrport-finalizer"
    );
    assert_eq!(kp["metadata"]["generation"], 1);

    // Status goes through the subresource; the main resource ignores status changes.
    sb.kubectl_ok(&[
        "patch",
        "kp",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"vifs":{"eth0":{"default":true,"vif":{"active":false}}}}}"#,
    ]);
    let kp = json(&sb.kubectl_ok(&["get", "kp", "web", "-o", "json"]));
    assert_eq!(kp["status"]["vifs"]["eth0"]["default"], true, "{kp}");
    assert_eq!(
        kp["metadata"]["generation"], 1,
        "status writes do not bump generation"
    );
    sb.kubectl_ok(&[
        "patch",
        "kp",
        "web",
        "--type=merge",
        "-p",
        r#"{"status":{"vifs":null},"spec":{"podNodeName":"node-2"}}"#,
    ]);
    let kp = json(&sb.kubectl_ok(&["get", "kp", "web", "-o", "json"]));
    assert_eq!(kp["spec"]["podNodeName"], "node-2");
    assert_eq!(kp["metadata"]["generation"], 2, "spec change bumps generation");
    assert_eq!(
        kp["status"]["vifs"]["eth0"]["default"], true,
        "main resource ignores status"
    );

    // Deleting with a finalizer leaves it Terminating until the finalizer goes.
    sb.kubectl_ok(&["delete", "kp", "web", "--wait=false"]);
    let kp = json(&sb.kubectl_ok(&["get", "kp", "web", "-o", "json"]));
    assert!(kp["metadata"]["deletionTimestamp"].is_string(), "{kp}");
    sb.kubectl_ok(&[
        "patch",
        "kp",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually(Duration::from_secs(10), "kuryrport to disappear", || {
        (!sb.kubectl(&["get", "kp", "web"]).status.success()).then_some(())
    });
}

#[test]
fn crd_schema_errors_and_pruning() {
    let sb = Sandbox::start();
    create_crd(&sb);
    let missing = KP.replace("  podUid: 4b0f6c1e-0000-4000-8000-000000000001\n", "");
    let f = sb.write("missing.yaml", &missing);
    let err = sb.kubectl_err(&["create", "-f", f.to_str().expect("path")]);
    assert!(err.contains(r#"The KuryrPort "web" is invalid"#), "{err}");
    assert!(err.contains("spec.podUid: Required value"), "{err}");

    let wrong_type = KP.replace("podNodeName: node-1", "podNodeName: 42");
    let f = sb.write("wrong.yaml", &wrong_type);
    let err = sb.kubectl_err(&["create", "-f", f.to_str().expect("path")]);
    assert!(
        err.contains(r#"spec.podNodeName: Invalid value: "integer": spec.podNodeName in body must be of type string: "integer""#),
        "{err}"
    );

    // kubectl validates strictly by default (server-side field validation): unknown fields fail.
    let unknown = KP.replace("  podNodeName: node-1\n", "  podNodeName: node-1\n  bogus: 1\n");
    let f = sb.write("unknown.yaml", &unknown);
    let err = sb.kubectl_err(&["create", "-f", f.to_str().expect("path")]);
    assert!(err.contains(r#"unknown field "spec.bogus""#), "{err}");
    // Without validation the unknown field is pruned.
    sb.kubectl_ok(&["create", "--validate=false", "-f", f.to_str().expect("path")]);
    let kp = json(&sb.kubectl_ok(&["get", "kp", "web", "-o", "json"]));
    assert!(kp["spec"].get("bogus").is_none(), "pruned: {kp}");
    assert_eq!(kp["spec"]["podNodeName"], "node-1");
}

#[test]
fn api_discovery_lists_builtins_and_crds() {
    let sb = Sandbox::start();
    create_crd(&sb);
    let out = sb.kubectl_ok(&["api-resources"]);
    let t = rows(&out);
    let kp = row(&t, "kuryrports");
    assert_eq!(kp[1], "kp", "{out}");
    assert_eq!(kp[2], "openstack.org/v1", "{out}");
    assert_eq!(kp[3], "true", "{out}");
    assert_eq!(kp[4], "KuryrPort", "{out}");
    for r in [
        "pods",
        "services",
        "namespaces",
        "configmaps",
        "leases",
        "endpointslices",
    ] {
        assert!(
            t.iter().any(|row| row[0] == r),
            "{r} missing from api-resources:\n{out}"
        );
    }
    // Kinds without a dedicated printer get the generic NAME / CREATED AT table.
    let out = sb.kubectl_ok(&["get", "crd"]);
    let t = rows(&out);
    assert_eq!(t[0], ["NAME", "CREATED", "AT"], "{out}");
    let r = row(&t, "kuryrports.openstack.org");
    assert!(
        r[1].ends_with('Z') && r[1].contains('T'),
        "RFC 3339 timestamp: {out}"
    );
    let out = sb.kubectl_ok(&["version", "-o", "json"]);
    let v = json(&out);
    assert!(v["serverVersion"]["gitVersion"].is_string(), "{v}");
}

#[test]
fn client_side_apply_three_way_merge() {
    let sb = Sandbox::start();
    let f = sb.write("cm.yaml", CONFIGMAP);
    let out = sb.kubectl_ok(&["apply", "-f", f.to_str().expect("path")]);
    assert_eq!(out.trim(), "configmap/settings created");
    let cm = json(&sb.kubectl_ok(&["get", "cm", "settings", "-o", "json"]));
    let last = cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap_or_else(|| panic!("no last-applied annotation: {cm}"));
    assert!(last.contains(r#""name":"settings""#), "{last}");
    let out = sb.kubectl_ok(&["apply", "-f", f.to_str().expect("path")]);
    assert_eq!(out.trim(), "configmap/settings unchanged");
    // A field set by someone else survives; a field dropped from the file is removed.
    sb.kubectl_ok(&["label", "cm", "settings", "extra=kept"]);
    let f2 = sb.write("cm2.yaml", &CONFIGMAP.replace("  b: \"2\"\n", "  c: \"3\"\n"));
    let out = sb.kubectl_ok(&["apply", "-f", f2.to_str().expect("path")]);
    assert_eq!(out.trim(), "configmap/settings configured");
    let cm = json(&sb.kubectl_ok(&["get", "cm", "settings", "-o", "json"]));
    assert_eq!(cm["data"], serde_json::json!({"a": "1", "c": "3"}), "{cm}");
    assert_eq!(cm["metadata"]["labels"]["extra"], "kept", "{cm}");

    // Services go through strategic merge patch (ports merge by port).
    let svc = sb.write("svc.yaml", SERVICE);
    assert_eq!(
        sb.kubectl_ok(&["apply", "-f", svc.to_str().expect("path")])
            .trim(),
        "service/web created"
    );
    let cluster_ip = sb.kubectl_ok(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let svc2 = sb.write(
        "svc2.yaml",
        &SERVICE.replace("targetPort: 80", "targetPort: 8080"),
    );
    assert_eq!(
        sb.kubectl_ok(&["apply", "-f", svc2.to_str().expect("path")])
            .trim(),
        "service/web configured"
    );
    let s = json(&sb.kubectl_ok(&["get", "svc", "web", "-o", "json"]));
    assert_eq!(s["spec"]["ports"][0]["targetPort"], 8080, "{s}");
    assert_eq!(s["spec"]["ports"].as_array().map(Vec::len), Some(1), "{s}");
    assert_eq!(s["spec"]["clusterIP"], cluster_ip.as_str(), "clusterIP kept");
    // delete -f
    let out = sb.kubectl_ok(&["delete", "-f", svc2.to_str().expect("path")]);
    assert!(out.trim().starts_with(r#"service "web" deleted"#), "{out}");
}

#[test]
fn strategic_patch_replace_and_wait_for_delete() {
    let sb = Sandbox::start();
    let f = sb.write("pod.yaml", POD);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let out = sb.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"metadata":{"labels":{"patched":"yes"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}"#,
    ]);
    assert_eq!(out.trim(), "pod/web patched");
    let pod = json(&sb.kubectl_ok(&["get", "pod", "web", "-o", "json"]));
    assert_eq!(pod["spec"]["containers"][0]["image"], "nginx:1.28");
    assert_eq!(
        pod["spec"]["containers"][0]["ports"][0]["containerPort"], 80,
        "merged by name, ports kept: {pod}"
    );
    assert_eq!(pod["metadata"]["labels"]["app"], "web");
    assert_eq!(pod["metadata"]["labels"]["patched"], "yes");
    let out = sb.kubectl_ok(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"metadata":{"labels":{"patched":"yes"}}}"#,
    ]);
    assert_eq!(out.trim(), "pod/web patched (no change)");

    // replace -f with a changed ConfigMap.
    let cm = sb.write("cm.yaml", CONFIGMAP);
    sb.kubectl_ok(&["create", "-f", cm.to_str().expect("path")]);
    let cm2 = sb.write("cm2.yaml", &CONFIGMAP.replace("a: \"1\"", "a: \"replaced\""));
    assert_eq!(
        sb.kubectl_ok(&["replace", "-f", cm2.to_str().expect("path")])
            .trim(),
        "configmap/settings replaced"
    );
    assert_eq!(
        sb.kubectl_ok(&["get", "cm", "settings", "-o", "jsonpath={.data.a}"]),
        "replaced"
    );
    // wait --for=delete returns once the object is gone.
    sb.kubectl_ok(&["delete", "cm", "settings", "--wait=false"]);
    sb.kubectl_ok(&["wait", "--for=delete", "cm/settings", "--timeout=20s"]);
}

#[test]
fn list_pagination_and_describe() {
    let sb = Sandbox::start();
    for i in 0..7 {
        let f = sb.write(
            &format!("cm{i}.yaml"),
            &CONFIGMAP.replace("name: settings", &format!("name: page-{i}")),
        );
        sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    }
    let out = sb.kubectl_ok(&["get", "cm", "-l", "app=web", "--chunk-size=2", "-o", "name"]);
    let names: Vec<&str> = out.lines().collect();
    assert_eq!(names.len(), 7, "{out}");
    for i in 0..7 {
        assert!(names.contains(&format!("configmap/page-{i}").as_str()), "{out}");
    }
    let f = sb.write("pod.yaml", POD);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let out = sb.kubectl_ok(&["describe", "pod", "web"]);
    for needle in [
        "Name:",
        "web",
        "Namespace:",
        "default",
        "Labels:",
        "app=web",
        "Status:",
        "Containers:",
        "nginx:",
        "Image:",
        "nginx:1.27",
        "Events:",
    ] {
        assert!(out.contains(needle), "describe lacks {needle:?}:\n{out}");
    }
    let out = sb.kubectl_ok(&["describe", "cm", "page-1"]);
    assert!(out.contains("Name:") && out.contains("page-1"), "{out}");
}

#[test]
fn explain_crd_fields() {
    let sb = Sandbox::start();
    create_crd(&sb);
    let out = sb.kubectl_ok(&["explain", "kuryrports.spec"]);
    assert!(out.contains("KIND:") && out.contains("KuryrPort"), "{out}");
    assert!(out.contains("podUid"), "{out}");
    assert!(out.contains("podNodeName"), "{out}");
}

#[test]
fn load_balancer_status_and_headless_services() {
    let sb = Sandbox::start();
    let lb = SERVICE
        .replace("name: web\n  namespace", "name: lb\n  namespace")
        .replace("spec:\n  selector", "spec:\n  type: LoadBalancer\n  selector");
    let headless = SERVICE
        .replace("name: web\n  namespace", "name: hl\n  namespace")
        .replace("spec:\n  selector", "spec:\n  clusterIP: None\n  selector");
    let f1 = sb.write("lb.yaml", &lb);
    let f2 = sb.write("hl.yaml", &headless);
    sb.kubectl_ok(&["create", "-f", f1.to_str().expect("path")]);
    sb.kubectl_ok(&["create", "-f", f2.to_str().expect("path")]);
    let out = sb.kubectl_ok(&["get", "svc", "lb", "hl"]);
    let t = rows(&out);
    let lb_row = row(&t, "lb");
    assert_eq!(lb_row[1], "LoadBalancer", "{out}");
    assert_eq!(lb_row[3], "<pending>", "{out}");
    assert!(lb_row[4].starts_with("80:3"), "a node port is allocated: {out}");
    let hl_row = row(&t, "hl");
    assert_eq!(hl_row[2], "None", "{out}");
    // The controller (kuryr) publishes the Octavia VIP through the status subresource.
    sb.kubectl_ok(&[
        "patch",
        "svc",
        "lb",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"172.24.4.10"}]}}}"#,
    ]);
    let out = sb.kubectl_ok(&["get", "svc", "lb"]);
    assert_eq!(row(&rows(&out), "lb")[3], "172.24.4.10", "{out}");
    // Cluster IPs are unique and from the service CIDR.
    let ips = sb.kubectl_ok(&[
        "get",
        "svc",
        "-A",
        "-o",
        "jsonpath={range .items[*]}{.spec.clusterIP}{\"\\n\"}{end}",
    ]);
    let ips: Vec<&str> = ips.lines().filter(|l| *l != "None").collect();
    let mut uniq = ips.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), ips.len(), "duplicate cluster IPs: {ips:?}");
    // An explicit, already taken clusterIP is refused like the real allocator does.
    let taken = SERVICE
        .replace("name: web\n  namespace", "name: dup\n  namespace")
        .replace(
            "spec:\n  selector",
            &format!("spec:\n  clusterIP: {}\n  selector", ips[0]),
        );
    let f3 = sb.write("dup.yaml", &taken);
    let err = sb.kubectl_err(&["create", "-f", f3.to_str().expect("path")]);
    assert!(
        err.contains("provided IP is already allocated") || err.contains("already allocated"),
        "{err}"
    );
}

#[test]
fn namespace_deletion_waits_for_finalized_contents() {
    let sb = Sandbox::start();
    create_crd(&sb);
    sb.kubectl_ok(&["create", "namespace", "team-a"]);
    let kp = KP.replace("namespace: default", "namespace: team-a");
    let f = sb.write("kp.yaml", &kp);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let cm = CONFIGMAP.replace("namespace: default", "namespace: team-a");
    let f = sb.write("cm.yaml", &cm);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    sb.kubectl_ok(&["delete", "namespace", "team-a", "--wait=false"]);
    let out = sb.kubectl_ok(&["get", "ns", "team-a"]);
    assert_eq!(row(&rows(&out), "team-a")[1], "Terminating", "{out}");
    // Contents are deleted; the finalized KuryrPort stays, marked for deletion.
    eventually(
        Duration::from_secs(20),
        "configmap in team-a to be deleted",
        || {
            (!sb.kubectl(&["get", "cm", "settings", "-n", "team-a"])
                .status
                .success())
            .then_some(())
        },
    );
    let kp = json(&sb.kubectl_ok(&["get", "kp", "web", "-n", "team-a", "-o", "json"]));
    assert!(kp["metadata"]["deletionTimestamp"].is_string(), "{kp}");
    // New objects cannot be created in a terminating namespace.
    let err = sb.kubectl_err(&["create", "-f", f.to_str().expect("path")]);
    assert!(err.contains("because it is being terminated"), "{err}");
    sb.kubectl_ok(&[
        "patch",
        "kp",
        "web",
        "-n",
        "team-a",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    eventually(Duration::from_secs(30), "namespace team-a to disappear", || {
        (!sb.kubectl(&["get", "ns", "team-a"]).status.success()).then_some(())
    });
}

/// Fields written by ordinary writes are owned by their manager (`kubectl-create`,
/// `kubectl-label`: kubectl sends `?fieldManager=`), so a later server-side apply changing them
/// conflicts, exactly as on a real cluster.
#[test]
fn update_managers_own_fields_and_conflict_with_apply() {
    let sb = Sandbox::start();
    let f = sb.write("cm.yaml", CONFIGMAP);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    sb.kubectl_ok(&["label", "cm", "settings", "team=a"]);
    let cm = json(&sb.kubectl_ok(&["get", "cm", "settings", "-o", "json", "--show-managed-fields"]));
    let mf = cm["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let create = mf
        .iter()
        .find(|e| e["manager"] == "kubectl-create")
        .unwrap_or_else(|| panic!("no kubectl-create entry: {mf:?}"));
    assert_eq!(create["operation"], "Update");
    assert_eq!(create["apiVersion"], "v1");
    assert!(create["fieldsV1"]["f:data"]["f:a"].is_object(), "{create}");
    let label = mf
        .iter()
        .find(|e| e["manager"] == "kubectl-label")
        .unwrap_or_else(|| panic!("no kubectl-label entry: {mf:?}"));
    assert!(
        label["fieldsV1"]["f:metadata"]["f:labels"]["f:team"].is_object(),
        "{label}"
    );
    let changed = sb.write("cm2.yaml", &CONFIGMAP.replace("a: \"1\"", "a: \"2\""));
    let err = sb.kubectl_err(&["apply", "--server-side", "-f", changed.to_str().expect("path")]);
    assert!(
        err.contains(r#"conflict with "kubectl-create" using v1"#),
        "{err}"
    );
    assert!(err.contains(".data.a"), "{err}");
    let out = sb.kubectl_ok(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        changed.to_str().expect("path"),
    ]);
    assert_eq!(out.trim(), "configmap/settings serverside-applied");
}

#[test]
fn nodes_roles_cordon_and_get_all() {
    let sb = Sandbox::start();
    let node = r#"
apiVersion: v1
kind: Node
metadata:
  name: worker-1
  labels:
    kubernetes.io/hostname: worker-1
    node-role.kubernetes.io/worker: ""
"#;
    let f = sb.write("node.yaml", node);
    assert_eq!(
        sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]).trim(),
        "node/worker-1 created"
    );
    let out = sb.kubectl_ok(&["get", "nodes"]);
    let t = rows(&out);
    assert_eq!(t[0], ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], "{out}");
    let r = row(&t, "worker-1");
    assert_eq!(r[2], "worker", "{out}");
    assert_eq!(
        sb.kubectl_ok(&["cordon", "worker-1"]).trim(),
        "node/worker-1 cordoned"
    );
    let out = sb.kubectl_ok(&["get", "node", "worker-1"]);
    assert!(
        row(&rows(&out), "worker-1")[1].ends_with(",SchedulingDisabled"),
        "{out}"
    );
    assert_eq!(
        sb.kubectl_ok(&["uncordon", "worker-1"]).trim(),
        "node/worker-1 uncordoned"
    );
    let spec = sb.kubectl_ok(&["get", "node", "worker-1", "-o", "jsonpath={.spec.unschedulable}"]);
    assert!(spec.is_empty() || spec == "false", "{spec}");
    // Nodes are cluster-scoped: -n is ignored, not an error.
    sb.kubectl_ok(&["get", "node", "worker-1", "-n", "kube-system"]);

    // `get all` resolves the "all" category through discovery.
    let f = sb.write("svc.yaml", SERVICE);
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let out = sb.kubectl_ok(&["get", "all"]);
    assert!(out.contains("service/web"), "{out}");
    assert!(out.contains("service/kubernetes"), "{out}");
}

/// `--dry-run=server` and `kubectl diff` (server-side dry-run applies): nothing is persisted.
#[test]
fn server_dry_run_and_diff() {
    let sb = Sandbox::start();
    let f = sb.write("cm.yaml", CONFIGMAP);
    let out = sb.kubectl_ok(&[
        "create",
        "--dry-run=server",
        "-f",
        f.to_str().expect("path"),
        "-o",
        "json",
    ]);
    let obj = json(&out);
    assert_eq!(obj["metadata"]["name"], "settings");
    assert!(
        obj["metadata"]["uid"].is_string(),
        "server filled in metadata: {obj}"
    );
    assert!(
        !sb.kubectl(&["get", "cm", "settings"]).status.success(),
        "dry run persisted"
    );

    sb.kubectl_ok(&["apply", "--server-side", "-f", f.to_str().expect("path")]);
    let rv = sb.kubectl_ok(&[
        "get",
        "cm",
        "settings",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let f2 = sb.write("cm2.yaml", &CONFIGMAP.replace("a: \"1\"", "a: \"changed\""));
    let out = sb.kubectl(&["diff", "--server-side", "-f", f2.to_str().expect("path")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "diff exits 1 when there are differences: {out:?}"
    );
    assert!(
        stdout.contains("-  a: \"1\"") && stdout.contains("+  a: changed"),
        "{stdout}"
    );
    let out = sb.kubectl_ok(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        f2.to_str().expect("path"),
    ]);
    assert!(out.contains("serverside-applied (server dry run)"), "{out}");
    assert_eq!(
        sb.kubectl_ok(&["get", "cm", "settings", "-o", "jsonpath={.data.a}"]),
        "1",
        "dry runs changed nothing"
    );
    assert_eq!(
        sb.kubectl_ok(&[
            "get",
            "cm",
            "settings",
            "-o",
            "jsonpath={.metadata.resourceVersion}"
        ]),
        rv
    );
    let out = sb.kubectl(&["diff", "--server-side", "-f", f.to_str().expect("path")]);
    assert_eq!(out.status.code(), Some(0), "no differences: {out:?}");
    // A no-op apply writes nothing: same resourceVersion, as on a real server.
    sb.kubectl_ok(&["apply", "--server-side", "-f", f.to_str().expect("path")]);
    assert_eq!(
        sb.kubectl_ok(&[
            "get",
            "cm",
            "settings",
            "-o",
            "jsonpath={.metadata.resourceVersion}"
        ]),
        rv,
        "no-op apply bumped resourceVersion"
    );
}

/// The garbage collector deletes dependents whose owner is gone (background propagation), and
/// `--cascade=orphan` removes the ownerReference instead.
#[test]
fn owner_references_garbage_collection() {
    let sb = Sandbox::start();
    let f = sb.write("owner.yaml", &CONFIGMAP.replace("name: settings", "name: owner"));
    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let uid = sb.kubectl_ok(&["get", "cm", "owner", "-o", "jsonpath={.metadata.uid}"]);
    for dep in ["dep1", "dep2"] {
        let y = CONFIGMAP.replace("name: settings", &format!("name: {dep}")).replace(
            "  labels:\n",
            &format!(
                "  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: owner\n    uid: {uid}\n  labels:\n"
            ),
        );
        let f = sb.write(&format!("{dep}.yaml"), &y);
        sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    }
    sb.kubectl_ok(&["delete", "cm", "owner"]);
    eventually(Duration::from_secs(20), "dependents garbage-collected", || {
        let a = sb.kubectl(&["get", "cm", "dep1"]).status.success();
        let b = sb.kubectl(&["get", "cm", "dep2"]).status.success();
        (!a && !b).then_some(())
    });

    sb.kubectl_ok(&["create", "-f", f.to_str().expect("path")]);
    let uid = sb.kubectl_ok(&["get", "cm", "owner", "-o", "jsonpath={.metadata.uid}"]);
    let y = CONFIGMAP.replace("name: settings", "name: orphan").replace(
        "  labels:\n",
        &format!(
            "  ownerReferences:\n  - apiVersion: v1\n    kind: ConfigMap\n    name: owner\n    uid: {uid}\n  labels:\n"
        ),
    );
    let fo = sb.write("orphan.yaml", &y);
    sb.kubectl_ok(&["create", "-f", fo.to_str().expect("path")]);
    sb.kubectl_ok(&["delete", "cm", "owner", "--cascade=orphan"]);
    eventually(
        Duration::from_secs(20),
        "ownerReference removed from the orphan",
        || {
            let refs = sb.kubectl_ok(&[
                "get",
                "cm",
                "orphan",
                "-o",
                "jsonpath={.metadata.ownerReferences}",
            ]);
            refs.trim().is_empty().then_some(())
        },
    );
}
