//! Unit tests of CRD schema defaulting, pruning and validation.

use super::*;
use serde_json::json;

/// A KuryrPort-like schema.
fn kp_schema() -> Value {
    json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "required": ["podUid", "podNodeName"],
                "properties": {
                    "podUid": {"type": "string"},
                    "podNodeName": {"type": "string"},
                    "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                    "mtu": {"type": "integer", "minimum": 68, "maximum": 9000},
                    "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
                    "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
                    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2,
                             "x-kubernetes-list-type": "set"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "opt": {"type": "string", "nullable": true},
                    "defaults": {"type": "object", "default": {},
                                 "properties": {"x": {"type": "integer", "default": 7}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "tmpl": {"type": "object", "x-kubernetes-embedded-resource": true,
                             "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "vifs": {"type": "object", "additionalProperties": {
                        "type": "object",
                        "properties": {"active": {"type": "boolean"}, "default": {"type": "boolean"}}
                    }}
                }
            }
        }
    })
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "openstack.org/v1", "kind": "KuryrPort",
           "metadata": {"name": "kp", "namespace": "default", "labels": {"a": "b"}},
           "spec": spec})
}

fn run(mut o: Value) -> (Value, Vec<String>) {
    let r = validate_and_prune(&kp_schema(), &mut o);
    let errs = r
        .err()
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect();
    (o, errs)
}

#[test]
fn valid_object_is_defaulted() {
    let (o, errs) = run(obj(json!({"podUid": "u", "podNodeName": "n"})));
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(o["spec"]["mode"], "a");
    assert_eq!(
        o["spec"]["defaults"],
        json!({"x": 7}),
        "defaults inside defaults apply"
    );
    assert_eq!(o["metadata"]["labels"]["a"], "b");
    assert_eq!(o["apiVersion"], "openstack.org/v1");
}

#[test]
fn required_fields() {
    let (_, errs) = run(obj(json!({"mode": "b"})));
    assert_eq!(
        errs,
        vec!["spec.podUid: Required value", "spec.podNodeName: Required value"]
    );
    let mut o = json!({"apiVersion": "openstack.org/v1", "kind": "KuryrPort", "metadata": {"name": "x"}});
    let e = validate_and_prune(&kp_schema(), &mut o).unwrap_err();
    assert_eq!(
        e,
        vec![FieldError {
            path: "spec".into(),
            message: "Required value".into()
        }]
    );
    assert_eq!(format_errors(&e), "spec: Required value");
}

#[test]
fn type_errors_like_the_real_server() {
    let mut o = obj(json!({"podUid": "u", "podNodeName": "n", "mtu": 1.5}));
    o["status"] = json!({"vifs": {"eth0": {"active": "string"}}});
    let (_, errs) = run(o);
    assert_eq!(
        errs,
        vec![
            "spec.mtu: Invalid value: \"number\": spec.mtu in body must be of type integer: \"number\"",
            "status.vifs.eth0.active: Invalid value: \"string\": status.vifs.eth0.active in body must be of type boolean: \"string\"",
        ]
    );
    let (_, errs) = run(obj(json!({"podUid": 5, "podNodeName": "n", "port": true})));
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with("spec.podUid: Invalid value: \"integer\""),
        "{errs:?}"
    );
    assert!(
        errs[1].contains("must be of type integer,string: \"boolean\""),
        "{errs:?}"
    );
}

#[test]
fn constraints() {
    let (_, errs) = run(obj(
        json!({"podUid": "u", "podNodeName": "n", "mode": "c", "mtu": 10,
        "ratio": 0, "name": "ABCDEFG", "tags": ["x", "x", "y"], "port": "http"}),
    ));
    assert_eq!(
        errs,
        vec![
            "spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\"",
            "spec.mtu: Invalid value: 10: spec.mtu in body should be greater than or equal to 68",
            "spec.name: Too long: may not be more than 5 bytes",
            "spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'",
            "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
            "spec.tags: Too many: 3: must have at most 2 items",
            "spec.tags[1]: Duplicate value: \"x\"",
        ]
    );
    let (_, errs) = run(obj(
        json!({"podUid": "u", "podNodeName": "n", "mtu": 9001, "name": "", "tags": []}),
    ));
    assert_eq!(
        errs,
        vec![
            "spec.mtu: Invalid value: 9001: spec.mtu in body should be less than or equal to 9000",
            "spec.name: Invalid value: \"\": spec.name in body should be at least 1 chars long",
            "spec.name: Invalid value: \"\": spec.name in body should match '^[a-z]+$'",
            "spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items",
        ]
    );
}

#[test]
fn pruning() {
    let mut o = obj(json!({"podUid": "u", "podNodeName": "n", "unknown": 1,
        "free": {"anything": {"deep": [1]}},
        "labels": {"k": "v"},
        "tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "bogus": 1}, "spec": {"x": 1}}}));
    o["metadata"]["bogus"] = json!(1);
    o["extra"] = json!("x");
    o["status"] = json!({"vifs": {"eth0": {"active": true, "junk": 1}}, "other": 1});
    let (o, errs) = run(o);
    assert!(errs.is_empty(), "{errs:?}");
    assert!(o["spec"].get("unknown").is_none());
    assert!(o.get("extra").is_none());
    assert!(o["metadata"].get("bogus").is_none());
    assert_eq!(o["metadata"]["name"], "kp");
    assert_eq!(o["spec"]["free"], json!({"anything": {"deep": [1]}}));
    assert_eq!(o["spec"]["labels"], json!({"k": "v"}));
    assert_eq!(o["spec"]["tmpl"]["spec"], json!({"x": 1}));
    assert!(o["spec"]["tmpl"]["metadata"].get("bogus").is_none());
    assert_eq!(o["status"], json!({"vifs": {"eth0": {"active": true}}}));
}

#[test]
fn nulls() {
    let (o, errs) = run(obj(
        json!({"podUid": "u", "podNodeName": "n", "opt": null, "mtu": null, "mode": null}),
    ));
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(o["spec"]["opt"], Value::Null, "nullable null is kept");
    assert!(
        o["spec"].get("mtu").is_none(),
        "non-nullable null without default is dropped"
    );
    assert_eq!(
        o["spec"]["mode"], "a",
        "non-nullable null with default is defaulted"
    );
}

#[test]
fn list_map_duplicates_and_properties_bounds() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "maxProperties": 1,
        "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}});
    let mut o = json!({"spec": {"l": [{"name": "a"}, {"name": "a"}]}});
    let e = validate_and_prune(&schema, &mut o).unwrap_err();
    assert_eq!(e[0].path, "spec.l[1]");
    assert_eq!(e[0].message, "Duplicate value: {\"name\":\"a\"}");
}

#[test]
fn root_preserve_unknown() {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut o = json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "a"}, "spec": {"z": 1}});
    validate_and_prune(&schema, &mut o).unwrap();
    assert_eq!(o["spec"]["z"], 1);
}

#[test]
fn unknown_fields_are_listed() {
    let mut o = obj(json!({"podUid": "u", "podNodeName": "n", "bogus": 1, "free": {"x": 1}}));
    o["metadata"]["junk"] = json!(1);
    o["status"] = json!({"vifs": {"eth0": {"active": true, "nope": 1}}});
    let mut u = unknown_fields(&kp_schema(), &o);
    u.sort();
    assert_eq!(u, ["metadata.junk", "spec.bogus", "status.vifs.eth0.nope"]);
    assert!(unknown_fields(&kp_schema(), &obj(json!({"podUid": "u"}))).is_empty());
}
