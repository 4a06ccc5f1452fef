//! The Helm chart and the plain manifests: `deploy/kuryr-rs.yaml` is the chart rendered with its
//! defaults (so `kubectl apply -f deploy/` and `helm install` install the same objects), the
//! chart lints, and the controller's RBAC follows the handlers the values enable.

use std::{path::PathBuf, process::Command};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn helm() -> PathBuf {
    let out = Command::new(repo().join("tools/install-helm"))
        .output()
        .expect("tools/install-helm");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn render(set: &[&str]) -> String {
    let mut cmd = Command::new(helm());
    cmd.args(["template", "kuryr-rs"])
        .arg(repo().join("charts/kuryr-rs"))
        .args(["--namespace", "kube-system"]);
    for s in set {
        cmd.args(["--set-string", s]);
    }
    let out = cmd.output().expect("helm template");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn plain_manifests_are_the_chart_rendered_with_its_defaults() {
    let out = Command::new(repo().join("tools/render-manifests"))
        .arg("--check")
        .env("HELM", helm())
        .output()
        .expect("tools/render-manifests");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lint = Command::new(helm())
        .arg("lint")
        .arg(repo().join("charts/kuryr-rs"))
        .output()
        .expect("helm lint");
    assert!(lint.status.success(), "{}", String::from_utf8_lossy(&lint.stdout));
}

/// The rules of the ClusterRole `kuryr-controller` in a rendering, as `group resource verbs` lines.
fn controller_rules(rendered: &str) -> Vec<String> {
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(rendered)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .collect();
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "kuryr-controller")
        .expect("ClusterRole kuryr-controller");
    let mut out = Vec::new();
    for r in role["rules"].as_sequence().into_iter().flatten() {
        let list = |k: &str| -> Vec<String> {
            r[k].as_sequence()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        };
        for g in list("apiGroups") {
            for res in list("resources") {
                out.push(format!("{g} {res} {}", list("verbs").join(",")));
            }
        }
    }
    out
}

#[test]
fn controller_rbac_follows_the_enabled_handlers() {
    let pods_only = controller_rules(&render(&[
        "config.kubernetes.enabled_handlers=vif\\,kuryrport",
        "config.kubernetes.pod_security_groups_driver=default",
    ]));
    assert!(
        pods_only.iter().any(|r| r == " pods get,list,watch,patch"),
        "{pods_only:?}"
    );
    assert!(!pods_only.iter().any(|r| r.contains("services")), "{pods_only:?}");
    assert!(
        !pods_only.iter().any(|r| r.contains("networkpolicies")),
        "{pods_only:?}"
    );
    assert!(!pods_only.iter().any(|r| r.contains("secrets")), "{pods_only:?}");
    let defaults = controller_rules(&render(&[]));
    assert!(
        defaults.iter().any(|r| r == " services/status patch"),
        "{defaults:?}"
    );
    assert!(
        defaults
            .iter()
            .any(|r| r == "networking.k8s.io networkpolicies get,list,watch,patch"),
        "{defaults:?}"
    );
    assert!(
        !defaults.iter().any(|r| r.contains("secrets") || r.contains('*')),
        "{defaults:?}"
    );
}

/// The document of `kind`/`name` in a rendering.
fn object(rendered: &str, kind: &str, name: &str) -> serde_yaml::Value {
    serde_yaml::Deserializer::from_str(rendered)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .find(|d: &serde_yaml::Value| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the rendering"))
}

#[test]
fn least_privilege_and_the_node_api_socket_are_rendered() {
    for rendered in [
        render(&[]),
        render(&["config.cni_daemon.bind_address=unix:/var/run/k/api.sock"]),
    ] {
        // The controller: not root, no capability, no escalation, read-only image, seccomp;
        // its one writable place is an emptyDir for the pool manager socket.
        let c = object(&rendered, "Deployment", "kuryr-controller");
        let pod = &c["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_ne!(pod["securityContext"]["runAsUser"], 0);
        assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        let ctr = &pod["containers"][0]["securityContext"];
        assert_eq!(ctr["allowPrivilegeEscalation"], false);
        assert_eq!(ctr["readOnlyRootFilesystem"], true);
        assert_eq!(ctr["capabilities"]["drop"][0], "ALL");
        assert!(ctr["privileged"].is_null() && ctr["capabilities"]["add"].is_null());
        // The daemon: never the OpenStack credentials (it never talks to OpenStack).
        let d = object(&rendered, "DaemonSet", "kuryr-daemon");
        // Not privileged: the named capabilities its binding needs, nothing else.
        let dctr = &d["spec"]["template"]["spec"]["containers"][0]["securityContext"];
        let names = |v: &serde_yaml::Value| -> Vec<String> {
            v.as_sequence()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        };
        assert_eq!(dctr["privileged"].as_bool(), Some(false), "{dctr:?}");
        assert_eq!(names(&dctr["capabilities"]["drop"]), ["ALL"], "{dctr:?}");
        assert_eq!(
            names(&dctr["capabilities"]["add"]),
            ["NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE"],
            "{dctr:?}"
        );
        let dpod = &d["spec"]["template"]["spec"];
        let volumes = dpod["volumes"].as_sequence().expect("volumes");
        assert!(
            volumes.iter().all(|v| v["secret"].is_null()),
            "the daemon mounts a Secret: {volumes:?}"
        );
        // Its API on a unix socket whose directory is the same path on the host and in the
        // daemon, and the plugin told that address.
        let api = if rendered.contains("/var/run/k/api.sock") {
            "/var/run/k"
        } else {
            "/run/kuryr"
        };
        let sock = volumes
            .iter()
            .find(|v| v["name"] == "api-socket")
            .expect("api-socket volume");
        assert_eq!(sock["hostPath"]["path"], api);
        let mounts = dpod["containers"][0]["volumeMounts"]
            .as_sequence()
            .expect("mounts");
        assert!(
            mounts
                .iter()
                .any(|m| m["name"] == "api-socket" && m["mountPath"] == api)
        );
        let init = dpod["initContainers"][0]["command"]
            .as_sequence()
            .expect("install");
        assert!(
            init.iter().any(|a| a
                .as_str()
                .is_some_and(|a| a.starts_with(&format!("--daemon-address=unix:{api}/")))),
            "{init:?}"
        );
    }
    // Upstream's TCP address: no socket directory is mounted.
    let tcp = render(&["config.cni_daemon.bind_address=127.0.0.1:5036"]);
    let d = object(&tcp, "DaemonSet", "kuryr-daemon");
    let volumes = d["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .expect("volumes");
    assert!(volumes.iter().all(|v| v["name"] != "api-socket"));
}
