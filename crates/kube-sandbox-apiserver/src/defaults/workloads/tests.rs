//! Unit tests of workload defaulting and validation.

use super::*;

fn deploy(labels: Value, selector: Value) -> Value {
    json!({"metadata": {"name": "web"}, "spec": {"selector": selector,
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}})
}

#[test]
fn deployment_defaults_like_upstream() {
    let mut d = deploy(json!({"app": "web"}), json!({"matchLabels": {"app": "web"}}));
    prepare(Kind::Deployment, &mut d, None).expect("valid");
    let s = &d["spec"];
    assert_eq!(s["replicas"], 1);
    assert_eq!(
        s["strategy"],
        json!({"type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(s["revisionHistoryLimit"], 10);
    assert_eq!(s["progressDeadlineSeconds"], 600);
    let t = &s["template"]["spec"];
    assert_eq!(t["restartPolicy"], "Always");
    assert_eq!(t["dnsPolicy"], "ClusterFirst");
    assert_eq!(t["terminationGracePeriodSeconds"], 30);
    assert_eq!(t["schedulerName"], "default-scheduler");
    assert_eq!(t["containers"][0]["imagePullPolicy"], "IfNotPresent");
    // Pod-only defaults stay off templates.
    assert!(t.get("serviceAccountName").is_none());
    assert!(t.get("enableServiceLinks").is_none());
    assert_eq!(d["status"], json!({}));
}

#[test]
fn recreate_keeps_no_rolling_parameters() {
    let mut d = deploy(json!({"app": "web"}), json!({"matchLabels": {"app": "web"}}));
    d["spec"]["strategy"] = json!({"type": "Recreate"});
    prepare(Kind::Deployment, &mut d, None).expect("valid");
    assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    d["spec"]["strategy"]["rollingUpdate"] = json!({"maxSurge": 1});
    let e = prepare(Kind::Deployment, &mut d, None).expect_err("forbidden");
    assert_eq!(e[0].field, "spec.strategy.rollingUpdate");
}

#[test]
fn selector_must_match_template_labels() {
    let mut d = deploy(json!({"app": "other"}), json!({"matchLabels": {"app": "web"}}));
    let e = prepare(Kind::Deployment, &mut d, None).expect_err("mismatch");
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].field, "spec.template.metadata.labels");
    assert_eq!(
        e[0].message,
        "Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`"
    );
    let mut d = deploy(json!({"app": "web"}), json!({}));
    let e = prepare(Kind::DaemonSet, &mut d, None).expect_err("empty");
    assert!(
        e[0].message.ends_with("empty selector is invalid for daemonset"),
        "{e:?}"
    );
    let mut d = deploy(json!({"app": "web"}), Value::Null);
    let e = prepare(Kind::ReplicaSet, &mut d, None).expect_err("required");
    assert_eq!(
        (e[0].field.as_str(), e[0].message.as_str()),
        ("spec.selector", "Required value")
    );
    let mut d = deploy(
        json!({"app": "web", "tier": "a"}),
        json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}),
    );
    prepare(Kind::ReplicaSet, &mut d, None).expect("expressions match");
}

#[test]
fn selector_is_immutable() {
    let mut old = deploy(json!({"app": "web"}), json!({"matchLabels": {"app": "web"}}));
    prepare(Kind::Deployment, &mut old, None).expect("valid");
    let mut new = old.clone();
    new["spec"]["replicas"] = json!(3);
    prepare(Kind::Deployment, &mut new, Some(&old)).expect("scale is fine");
    let mut new = deploy(
        json!({"app": "web", "v": "2"}),
        json!({"matchLabels": {"app": "web", "v": "2"}}),
    );
    let e = prepare(Kind::Deployment, &mut new, Some(&old)).expect_err("immutable");
    assert_eq!(e[0].field, "spec.selector");
    assert!(e[0].message.ends_with("field is immutable"), "{e:?}");
}

#[test]
fn template_and_strategy_rules() {
    let mut d = deploy(json!({"app": "web"}), json!({"matchLabels": {"app": "web"}}));
    d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    d["spec"]["strategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}});
    d["spec"]["replicas"] = json!(-1);
    let e = prepare(Kind::Deployment, &mut d, None).expect_err("invalid");
    let fields: Vec<&str> = e.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.replicas",
            "spec.template.spec.restartPolicy",
            "spec.strategy.rollingUpdate.maxUnavailable"
        ]
    );
    assert_eq!(
        e[2].message,
        "Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0"
    );
    let mut d = deploy(json!({"app": "web"}), json!({"matchLabels": {"app": "web"}}));
    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
    let e = prepare(Kind::Deployment, &mut d, None).expect_err("no image");
    assert_eq!(e[0].field, "spec.template.spec.containers[0].image");
}

#[test]
fn daemonset_defaults_and_template_generation() {
    let mut ds = deploy(json!({"app": "agent"}), json!({"matchLabels": {"app": "agent"}}));
    prepare(Kind::DaemonSet, &mut ds, None).expect("valid");
    assert_eq!(
        ds["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(ds["metadata"]["annotations"][DS_TEMPLATE_GENERATION], "1");
    assert_eq!(ds["status"]["desiredNumberScheduled"], 0);
    // Spec change outside the template: same template generation.
    let mut new = ds.clone();
    new["spec"]["minReadySeconds"] = json!(5);
    prepare(Kind::DaemonSet, &mut new, Some(&ds)).expect("valid");
    assert_eq!(new["metadata"]["annotations"][DS_TEMPLATE_GENERATION], "1");
    // Template change (clients cannot pick the value).
    let mut newer = new.clone();
    newer["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    newer["metadata"]["annotations"][DS_TEMPLATE_GENERATION] = json!("9");
    prepare(Kind::DaemonSet, &mut newer, Some(&new)).expect("valid");
    assert_eq!(newer["metadata"]["annotations"][DS_TEMPLATE_GENERATION], "2");
    let mut bad = ds.clone();
    bad["spec"]["updateStrategy"]["rollingUpdate"] = json!({"maxUnavailable": 1, "maxSurge": 1});
    let e = prepare(Kind::DaemonSet, &mut bad, Some(&ds)).expect_err("both set");
    assert_eq!(e[0].field, "spec.updateStrategy.rollingUpdate.maxSurge");
}

#[test]
fn percent_validation() {
    let mut errs = Vec::new();
    validate_int_or_percent(Some(&json!("150%")), "x", &mut errs);
    validate_int_or_percent(Some(&json!("abc")), "y", &mut errs);
    validate_int_or_percent(Some(&json!(-2)), "z", &mut errs);
    validate_int_or_percent(Some(&json!("30%")), "ok", &mut errs);
    let fields: Vec<&str> = errs.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["x", "y", "z"]);
    assert!(errs[0].message.ends_with("must not be greater than 100%"));
}
