//! Unit tests of label and field selectors.

use super::*;
use serde_json::json;

fn pod(labels: Value) -> Value {
    json!({"metadata": {"name": "p", "labels": labels}, "spec": {"nodeName": "n1"}})
}

fn m(sel: &str, obj: &Value) -> bool {
    LabelSelector::parse(sel).unwrap().matches(obj)
}

#[test]
fn empty_selects_all() {
    let s = LabelSelector::parse("").unwrap();
    assert!(s.is_empty());
    assert!(s.matches(&json!({})));
    assert!(LabelSelector::parse("   ").unwrap().is_empty());
}

#[test]
fn equality_forms() {
    let p = pod(json!({"app": "web", "tier": "fe"}));
    assert!(m("app=web", &p));
    assert!(m("app==web", &p));
    assert!(m(" app = web , tier==fe ", &p));
    assert!(!m("app=db", &p));
    assert!(!m("app=web,tier=be", &p));
    assert!(m("app!=db", &p));
    assert!(!m("app!=web", &p));
}

#[test]
fn not_equal_and_notin_match_absent() {
    let p = pod(json!({"app": "web"}));
    assert!(m("missing!=x", &p));
    assert!(m("missing notin (x,y)", &p));
    assert!(m("x!=y", &json!({"metadata": {}})));
    assert!(!m("missing=x", &p));
    assert!(!m("missing in (x)", &p));
}

#[test]
fn set_forms() {
    let p = pod(json!({"env": "prod"}));
    assert!(m("env in (prod, qa)", &p));
    assert!(m("env in(prod)", &p));
    assert!(!m("env in (qa,dev)", &p));
    assert!(m("env notin (qa,dev)", &p));
    assert!(!m("env notin (prod)", &p));
    let r = LabelSelector::parse("env in (a,b,c)").unwrap();
    assert_eq!(
        r.requirements()[0].op,
        LabelOp::In(["a", "b", "c"].iter().map(|s| s.to_string()).collect())
    );
}

#[test]
fn exists_and_not_exists() {
    let p = pod(json!({"app": "web"}));
    assert!(m("app", &p));
    assert!(!m("!app", &p));
    assert!(m("!db", &p));
    assert!(!m("db", &p));
    assert!(m("app,!db", &p));
    assert!(m("! db", &p));
}

#[test]
fn empty_values() {
    let p = pod(json!({"a": ""}));
    assert!(m("a=", &p));
    assert!(m("a in ()", &p));
    assert!(!m("a=x", &p));
    assert!(m("a=,b!=", &pod(json!({"a": ""}))));
}

#[test]
fn gt_lt() {
    let p = pod(json!({"n": "5"}));
    assert!(m("n>3", &p));
    assert!(!m("n>5", &p));
    assert!(m("n<6", &p));
    assert!(!m("x<6", &p));
    assert!(LabelSelector::parse("n>abc").is_err());
}

#[test]
fn prefixed_keys() {
    let p = pod(json!({"app.kubernetes.io/name": "kuryr"}));
    assert!(m("app.kubernetes.io/name=kuryr", &p));
    assert!(m("app.kubernetes.io/name in (kuryr)", &p));
}

#[test]
fn invalid_selectors_are_rejected() {
    for bad in [
        "=x",
        "a=b=c",
        "a in x",
        "a in (x",
        "a notin",
        "a,",
        ",a",
        "a b",
        "!a=b",
        "-a=b",
        "a=-b",
        "Foo.Com/a=b",
        "/a=b",
        "a/b/c=d",
        "a==(",
        &format!("{}=b", "k".repeat(64)),
        &format!("a={}", "v".repeat(64)),
    ] {
        let e = LabelSelector::parse(bad);
        assert!(e.is_err(), "{bad:?} should fail, got {e:?}");
    }
    let e = LabelSelector::parse("a=-b").unwrap_err().to_string();
    assert!(e.contains("a valid label must be an empty string"), "{e}");
    assert!(e.contains("\"-b\""), "{e}");
    let e = LabelSelector::parse(&format!("{}=b", "k".repeat(64)))
        .unwrap_err()
        .to_string();
    assert!(e.contains("name part must be no more than 63 characters"), "{e}");
}

#[test]
fn accepts_63_char_key_and_value() {
    let k = "k".repeat(63);
    let v = "v".repeat(63);
    let p = pod(json!({k.clone(): v.clone()}));
    assert!(m(&format!("{k}={v}"), &p));
}

#[test]
fn labels_absent_entirely() {
    let obj = json!({"metadata": {"name": "x"}});
    assert!(!m("a", &obj));
    assert!(m("!a", &obj));
}

#[test]
fn field_selector_basic() {
    let p = pod(json!({}));
    let f = FieldSelector::parse("metadata.name=p,spec.nodeName==n1").unwrap();
    assert!(f.matches(&p));
    assert_eq!(f.fields(), vec!["metadata.name", "spec.nodeName"]);
    assert_eq!(f.equals_value("spec.nodeName"), Some("n1"));
    assert!(!FieldSelector::parse("spec.nodeName!=n1").unwrap().matches(&p));
    assert!(FieldSelector::parse("spec.nodeName!=n2").unwrap().matches(&p));
    assert!(FieldSelector::parse("").unwrap().matches(&p));
    assert!(FieldSelector::parse("").unwrap().is_empty());
}

#[test]
fn field_selector_missing_is_empty_string() {
    let p = json!({"metadata": {"name": "p"}, "spec": {}});
    assert!(FieldSelector::parse("spec.nodeName=").unwrap().matches(&p));
    assert!(
        FieldSelector::parse("spec.nodeName!=")
            .unwrap()
            .matches(&pod(json!({})))
    );
    assert!(!FieldSelector::parse("spec.nodeName!=").unwrap().matches(&p));
}

#[test]
fn field_selector_scalars_as_strings() {
    let o = json!({"spec": {"unschedulable": true, "replicas": 3}});
    assert!(
        FieldSelector::parse("spec.unschedulable=true")
            .unwrap()
            .matches(&o)
    );
    assert!(FieldSelector::parse("spec.replicas=3").unwrap().matches(&o));
    assert!(
        !FieldSelector::parse("spec.unschedulable=false")
            .unwrap()
            .matches(&o)
    );
}

#[test]
fn field_selector_escapes() {
    let o = json!({"metadata": {"name": "a,b=c"}});
    let f = FieldSelector::parse(r"metadata.name=a\,b\=c").unwrap();
    assert!(f.matches(&o));
    assert_eq!(f.fields(), vec!["metadata.name"]);
}

#[test]
fn field_selector_errors() {
    for bad in ["metadata.name", "=x", "a=b=c", r"a=b\x", "a=b,c"] {
        assert!(FieldSelector::parse(bad).is_err(), "{bad:?} should fail");
    }
    let e = FieldSelector::parse("foo").unwrap_err().to_string();
    assert!(e.contains("can't understand 'foo'"), "{e}");
}
