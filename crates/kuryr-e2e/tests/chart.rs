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
