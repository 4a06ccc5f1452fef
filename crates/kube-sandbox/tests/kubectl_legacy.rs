//! The same server with an old client: Debian's kubectl 1.20 (`tools/install-kubectl --debian`),
//! which uses legacy (non-aggregated) discovery, client-side validation against `/openapi/v2`,
//! client-side apply with strategic merge patches, and older table and error formatting.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::Sandbox;

struct Old<'a> {
    sb: &'a Sandbox,
    bin: PathBuf,
}

impl Old<'_> {
    fn run(&self, args: &[&str]) -> Output {
        self.sb
            .kubectl_cmd_with(&self.bin)
            .args(args)
            .output()
            .expect("run kubectl 1.20")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl 1.20 {} failed:\nstdout:\n{}\nstderr:\n{}\n--- server log ---\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            common::tail(&self.sb.log_text(), 30)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

const CM: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: legacy
  labels: {app: legacy}
data: {a: "1"}
"#;

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: kuryrnetworks.openstack.org
spec:
  group: openstack.org
  scope: Namespaced
  names: {plural: kuryrnetworks, singular: kuryrnetwork, kind: KuryrNetwork, shortNames: [kns]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Subnet, type: string, jsonPath: .spec.subnetCIDR}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [nsName]
            properties:
              nsName: {type: string}
              subnetCIDR: {type: string}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const KN: &str = r#"
apiVersion: openstack.org/v1
kind: KuryrNetwork
metadata: {name: team-a}
spec: {nsName: team-a, subnetCIDR: 10.0.1.0/24}
"#;

#[test]
fn kubectl_1_20_basics() {
    let sb = Sandbox::start();
    let old = Old {
        sb: &sb,
        bin: common::legacy_kubectl_path(),
    };
    let out = old.ok(&["get", "namespaces"]);
    assert!(out.contains("default") && out.contains("Active"), "{out}");

    let f = sb.write("cm.yaml", CM);
    // Client-side validation needs /openapi/v2 in protobuf (see kubectl_1_20_validates_with_openapi_v2).
    let out = old.ok(&["apply", "--validate=false", "-f", f.to_str().expect("path")]);
    assert_eq!(out.trim(), "configmap/legacy created");
    let f2 = sb.write("cm2.yaml", &CM.replace("a: \"1\"", "a: \"2\""));
    let out = old.ok(&["apply", "--validate=false", "-f", f2.to_str().expect("path")]);
    assert_eq!(out.trim(), "configmap/legacy configured");
    assert_eq!(old.ok(&["get", "cm", "legacy", "-o", "jsonpath={.data.a}"]), "2");
    assert_eq!(
        old.ok(&["label", "cm", "legacy", "x=y"]).trim(),
        "configmap/legacy labeled"
    );
    let out = old.ok(&["get", "cm", "-l", "x=y"]);
    assert!(out.contains("legacy"), "{out}");

    let crd = sb.write("crd.yaml", CRD);
    old.ok(&["create", "--validate=false", "-f", crd.to_str().expect("path")]);
    old.ok(&[
        "wait",
        "--for=condition=Established",
        "--timeout=30s",
        "crd/kuryrnetworks.openstack.org",
    ]);
    let kn = sb.write("kn.yaml", KN);
    let out = old.ok(&["create", "--validate=false", "-f", kn.to_str().expect("path")]);
    assert_eq!(out.trim(), "kuryrnetwork.openstack.org/team-a created");
    for what in ["kuryrnetworks", "kns"] {
        let out = old.ok(&["get", what]);
        let header: Vec<&str> = out.lines().next().unwrap_or("").split_whitespace().collect();
        assert_eq!(header, ["NAME", "SUBNET"], "{out}");
        assert!(out.contains("team-a") && out.contains("10.0.1.0/24"), "{out}");
    }
    let out = old.ok(&["delete", "cm", "legacy"]);
    assert_eq!(out.trim(), r#"configmap "legacy" deleted"#);
}

// Not tested: kubectl 1.20 validating manifests client-side. It needs `GET /openapi/v2` in protobuf,
// which kube-sandbox does not serve (a documented difference, see the apiserver README); the tests
// above run kubectl 1.20 with `--validate=false`, and current kubectl uses server-side validation.
