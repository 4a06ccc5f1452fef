//! Compares the generated CRD schemas with upstream's (`kubernetes_crds/kuryr_crds/*.yaml` of
//! openstack/kuryr-kubernetes at 398bd461), transcribed below as expectations: same property
//! names, types, `required` lists and `x-kubernetes-preserve-unknown-fields`, same names, short
//! names, scope and printer columns. The only departures allowed are kuryr-rs's optional
//! extensions in [`EXTENSIONS`]: objects upstream wrote stay valid, and an upstream CRD left
//! installed merely prunes them (the features they carry are then off).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;
use std::collections::BTreeSet;

/// kuryr-rs additions: (schema path, optional property). Never `required`.
const EXTENSIONS: &[(&str, &str)] = &[
    ("KuryrLoadBalancer.spec", "source_ranges"),
    ("KuryrLoadBalancer.spec", "session_affinity"),
    ("KuryrLoadBalancer.spec", "health_monitor"),
    ("KuryrNetworkPolicy.status", "portVariantGroups"),
];

/// Expected shape of one schema node.
enum N {
    Str,
    Int,
    Bool,
    /// `type: object` + preserve-unknown-fields.
    Free,
    /// `type: object`, nothing else (KLB topology).
    Plain,
    Arr(Box<N>),
    Obj(Vec<(&'static str, N)>, Vec<&'static str>),
}

fn obj(props: Vec<(&'static str, N)>, required: &[&'static str]) -> N {
    N::Obj(props, required.to_vec())
}
fn arr(n: N) -> N {
    N::Arr(Box::new(n))
}

fn check(path: &str, want: &N, got: &Value, errors: &mut Vec<String>) {
    let ty = got.get("type").and_then(Value::as_str).unwrap_or("<none>");
    let preserve = got
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let expect_ty = match want {
        N::Str => "string",
        N::Int => "integer",
        N::Bool => "boolean",
        N::Free | N::Plain | N::Obj(..) => "object",
        N::Arr(_) => "array",
    };
    if ty != expect_ty {
        errors.push(format!("{path}: type {ty}, upstream {expect_ty}"));
        return;
    }
    let want_preserve = matches!(want, N::Free);
    if preserve != want_preserve {
        errors.push(format!(
            "{path}: preserve-unknown-fields {preserve}, upstream {want_preserve}"
        ));
    }
    match want {
        N::Free | N::Plain if got.get("properties").is_some() => {
            errors.push(format!("{path}: has properties, upstream has none"));
        }
        N::Arr(item) => match got.get("items") {
            Some(items) => check(&format!("{path}[]"), item, items, errors),
            None => errors.push(format!("{path}: no items")),
        },
        N::Obj(props, required) => {
            let got_props = got.get("properties").and_then(Value::as_object);
            let got_names: BTreeSet<&str> = got_props
                .map(|m| m.keys().map(String::as_str).collect())
                .unwrap_or_default();
            let mut want_names: BTreeSet<&str> = props.iter().map(|(n, _)| *n).collect();
            want_names.extend(
                EXTENSIONS
                    .iter()
                    .filter(|(p, _)| *p == path)
                    .map(|(_, n)| *n)
                    .filter(|n| got_names.contains(n)),
            );
            if got_names != want_names {
                errors.push(format!(
                    "{path}: properties {got_names:?}, upstream {want_names:?}"
                ));
            }
            let got_req: BTreeSet<&str> = got
                .get("required")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let want_req: BTreeSet<&str> = required.iter().copied().collect();
            if got_req != want_req {
                errors.push(format!("{path}: required {got_req:?}, upstream {want_req:?}"));
            }
            for (name, n) in props {
                if let Some(g) = got_props.and_then(|m| m.get(*name)) {
                    check(&format!("{path}.{name}"), n, g, errors);
                }
            }
        }
        _ => {}
    }
}

struct Expect {
    name: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    short: &'static str,
    /// (name, type, jsonPath)
    columns: Vec<(&'static str, &'static str, &'static str)>,
    schema: N,
}

fn verify(crd: CustomResourceDefinition, e: Expect) {
    let mut errors = Vec::new();
    assert_eq!(crd.metadata.name.as_deref(), Some(e.name));
    assert_eq!(crd.spec.group, "openstack.org");
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.kind, e.kind);
    assert_eq!(crd.spec.names.plural, e.plural);
    assert_eq!(crd.spec.names.singular.as_deref(), Some(e.singular));
    assert_eq!(crd.spec.names.short_names, Some(vec![e.short.to_string()]));
    assert_eq!(crd.spec.versions.len(), 1);
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1");
    assert!(v.served && v.storage);
    assert!(v.subresources.is_none(), "upstream CRDs have no subresources");
    let cols: Vec<(&str, &str, &str)> = v
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(cols, e.columns, "{}: printer columns", e.kind);
    let schema = serde_json::to_value(
        v.schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema"),
    )
    .expect("schema as JSON");
    check(e.kind, &e.schema, &schema, &mut errors);
    assert!(
        errors.is_empty(),
        "{} differs from upstream:\n{}",
        e.kind,
        errors.join("\n")
    );
}

#[test]
fn checker_reports_differences() {
    let got = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}},
        "required": ["a"]});
    let mut errors = Vec::new();
    check(
        "x",
        &obj(vec![("a", N::Int), ("b", N::Str)], &[]),
        &got,
        &mut errors,
    );
    assert_eq!(errors.len(), 3, "{errors:?}");
    errors.clear();
    check("x", &obj(vec![("a", N::Str)], &["a"]), &got, &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn kuryrport_matches_upstream() {
    verify(
        kuryr_types::crds::kuryrport(),
        Expect {
            name: "kuryrports.openstack.org",
            kind: "KuryrPort",
            plural: "kuryrports",
            singular: "kuryrport",
            short: "kp",
            columns: vec![
                ("PodUID", "string", ".spec.podUid"),
                ("Nodename", "string", ".spec.podNodeName"),
                ("labels", "string", ".metadata.labels"),
            ],
            schema: obj(
                vec![
                    (
                        "spec",
                        obj(
                            vec![
                                ("podUid", N::Str),
                                ("podNodeName", N::Str),
                                ("podStatic", N::Bool),
                            ],
                            &["podUid", "podNodeName"],
                        ),
                    ),
                    ("status", obj(vec![("vifs", N::Free)], &["vifs"])),
                ],
                &[],
            ),
        },
    );
}

#[test]
fn kuryrnetwork_matches_upstream() {
    verify(
        kuryr_types::crds::kuryrnetwork(),
        Expect {
            name: "kuryrnetworks.openstack.org",
            kind: "KuryrNetwork",
            plural: "kuryrnetworks",
            singular: "kuryrnetwork",
            short: "kns",
            columns: vec![
                ("SUBNET-CIDR", "string", ".status.subnetCIDR"),
                ("Age", "date", ".metadata.creationTimestamp"),
            ],
            schema: obj(
                vec![
                    (
                        "spec",
                        obj(
                            vec![("nsName", N::Str), ("projectId", N::Str), ("nsLabels", N::Free)],
                            &["nsName", "projectId", "nsLabels"],
                        ),
                    ),
                    (
                        "status",
                        obj(
                            vec![
                                ("netId", N::Str),
                                ("populated", N::Bool),
                                ("routerId", N::Str),
                                ("subnetCIDR", N::Str),
                                ("subnetId", N::Str),
                                ("nsLabels", N::Free),
                            ],
                            &[],
                        ),
                    ),
                ],
                &[],
            ),
        },
    );
}

fn sg_rule_item() -> N {
    obj(
        vec![
            (
                "affectedPods",
                arr(obj(
                    vec![("podIP", N::Str), ("podNamespace", N::Str)],
                    &["podIP", "podNamespace"],
                )),
            ),
            ("namespace", N::Str),
            (
                "sgRule",
                obj(
                    vec![
                        ("description", N::Str),
                        ("direction", N::Str),
                        ("ethertype", N::Str),
                        ("port_range_max", N::Int),
                        ("port_range_min", N::Int),
                        ("protocol", N::Str),
                        ("remote_ip_prefix", N::Str),
                    ],
                    &[],
                ),
            ),
        ],
        &["sgRule"],
    )
}

#[test]
fn kuryrnetworkpolicy_matches_upstream() {
    verify(
        kuryr_types::crds::kuryrnetworkpolicy(),
        Expect {
            name: "kuryrnetworkpolicies.openstack.org",
            kind: "KuryrNetworkPolicy",
            plural: "kuryrnetworkpolicies",
            singular: "kuryrnetworkpolicy",
            short: "knp",
            columns: vec![
                ("SG-ID", "string", ".status.securityGroupId"),
                ("Age", "date", ".metadata.creationTimestamp"),
            ],
            schema: obj(
                vec![
                    (
                        "spec",
                        obj(
                            vec![
                                ("egressSgRules", arr(sg_rule_item())),
                                ("ingressSgRules", arr(sg_rule_item())),
                                ("podSelector", N::Free),
                                ("policyTypes", arr(N::Str)),
                            ],
                            &["egressSgRules", "ingressSgRules", "podSelector", "policyTypes"],
                        ),
                    ),
                    (
                        "status",
                        obj(
                            vec![
                                ("securityGroupId", N::Str),
                                (
                                    "securityGroupRules",
                                    arr(obj(
                                        vec![
                                            ("id", N::Str),
                                            ("description", N::Str),
                                            ("direction", N::Str),
                                            ("ethertype", N::Str),
                                            ("port_range_max", N::Int),
                                            ("port_range_min", N::Int),
                                            ("protocol", N::Str),
                                            ("remote_ip_prefix", N::Str),
                                            ("security_group_id", N::Str),
                                        ],
                                        &["id"],
                                    )),
                                ),
                                ("podSelector", N::Free),
                            ],
                            &["securityGroupRules"],
                        ),
                    ),
                ],
                &["status", "spec"],
            ),
        },
    );
}

#[test]
fn kuryrloadbalancer_matches_upstream() {
    let endpoint = obj(
        vec![
            ("addresses", arr(N::Str)),
            ("conditions", obj(vec![("ready", N::Bool)], &[])),
            ("hostname", N::Str),
            (
                "targetRef",
                obj(
                    vec![
                        ("kind", N::Str),
                        ("name", N::Str),
                        ("namespace", N::Str),
                        ("resourceVersion", N::Str),
                        ("uid", N::Str),
                    ],
                    &[],
                ),
            ),
            ("topology", N::Plain),
        ],
        &[],
    );
    let spec = obj(
        vec![
            (
                "endpointSlices",
                arr(obj(
                    vec![
                        ("endpoints", arr(endpoint)),
                        (
                            "ports",
                            arr(obj(
                                vec![("name", N::Str), ("port", N::Int), ("protocol", N::Str)],
                                &[],
                            )),
                        ),
                    ],
                    &[],
                )),
            ),
            ("ip", N::Str),
            ("lb_ip", N::Str),
            (
                "ports",
                arr(obj(
                    vec![
                        ("name", N::Str),
                        ("port", N::Int),
                        ("protocol", N::Str),
                        ("targetPort", N::Str),
                    ],
                    &["port", "protocol", "targetPort"],
                )),
            ),
            ("project_id", N::Str),
            ("security_groups_ids", arr(N::Str)),
            ("subnet_id", N::Str),
            ("type", N::Str),
            ("provider", N::Str),
            ("timeout_client_data", N::Int),
            ("timeout_member_data", N::Int),
        ],
        &[],
    );
    let status = obj(
        vec![
            (
                "listeners",
                arr(obj(
                    vec![
                        ("id", N::Str),
                        ("loadbalancer_id", N::Str),
                        ("name", N::Str),
                        ("port", N::Int),
                        ("project_id", N::Str),
                        ("protocol", N::Str),
                        ("timeout_client_data", N::Int),
                        ("timeout_member_data", N::Int),
                    ],
                    &["id", "loadbalancer_id", "name", "port", "project_id", "protocol"],
                )),
            ),
            (
                "loadbalancer",
                obj(
                    vec![
                        ("id", N::Str),
                        ("ip", N::Str),
                        ("name", N::Str),
                        ("port_id", N::Str),
                        ("project_id", N::Str),
                        ("provider", N::Str),
                        ("security_groups", arr(N::Str)),
                        ("subnet_id", N::Str),
                    ],
                    &[
                        "id",
                        "ip",
                        "name",
                        "port_id",
                        "project_id",
                        "provider",
                        "security_groups",
                        "subnet_id",
                    ],
                ),
            ),
            (
                "members",
                arr(obj(
                    vec![
                        ("id", N::Str),
                        ("ip", N::Str),
                        ("name", N::Str),
                        ("pool_id", N::Str),
                        ("port", N::Int),
                        ("project_id", N::Str),
                        ("subnet_id", N::Str),
                    ],
                    &["id", "ip", "name", "pool_id", "port", "project_id", "subnet_id"],
                )),
            ),
            (
                "pools",
                arr(obj(
                    vec![
                        ("id", N::Str),
                        ("listener_id", N::Str),
                        ("loadbalancer_id", N::Str),
                        ("name", N::Str),
                        ("project_id", N::Str),
                        ("protocol", N::Str),
                    ],
                    &[
                        "id",
                        "listener_id",
                        "loadbalancer_id",
                        "name",
                        "project_id",
                        "protocol",
                    ],
                )),
            ),
            (
                "service_pub_ip_info",
                obj(
                    vec![("ip_id", N::Str), ("ip_addr", N::Str), ("alloc_method", N::Str)],
                    &["ip_id", "ip_addr", "alloc_method"],
                ),
            ),
        ],
        &[],
    );
    verify(
        kuryr_types::crds::kuryrloadbalancer(),
        Expect {
            name: "kuryrloadbalancers.openstack.org",
            kind: "KuryrLoadBalancer",
            plural: "kuryrloadbalancers",
            singular: "kuryrloadbalancer",
            short: "klb",
            columns: vec![
                ("PROJECT-ID", "string", ".spec.project_id"),
                ("Age", "date", ".metadata.creationTimestamp"),
            ],
            schema: obj(vec![("spec", spec), ("status", status)], &[]),
        },
    );
}
