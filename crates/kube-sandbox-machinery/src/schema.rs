//! CRD `openAPIV3Schema` handling as the real API server does it: defaulting, pruning of unknown
//! fields, and validation of types, required fields and the common constraints.
//!
//! Order, as in the real request pipeline: non-nullable `null`s without a default are dropped;
//! `default`s fill absent (or non-nullable `null`) fields, recursively, including inside values
//! that were themselves defaulted; unknown fields are pruned unless the node says
//! `x-kubernetes-preserve-unknown-fields: true`; then the object is validated and **all** errors
//! are returned.
//!
//! Root `apiVersion`, `kind` and `metadata` are never pruned by the schema; `metadata` (at the root
//! and in `x-kubernetes-embedded-resource` objects) keeps exactly the `ObjectMeta` fields.
//!
//! Validated keywords: `type` (`integer` accepts JSON integers only), `nullable`, `required`,
//! `enum`, `minimum`/`maximum` (+ `exclusiveMinimum`/`exclusiveMaximum`), `minLength`/`maxLength`,
//! `pattern`, `minItems`/`maxItems`, `minProperties`/`maxProperties`, `items`, `properties`,
//! `additionalProperties` (schema or bool), `x-kubernetes-int-or-string`,
//! `x-kubernetes-list-type: set|map` (duplicates). Not evaluated: `format`, `uniqueItems`,
//! `allOf`/`anyOf`/`oneOf`/`not`, CEL `x-kubernetes-validations`.

use serde_json::{Map, Value};

/// One validation failure, rendered like the real server's field errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path, e.g. `spec.vifs.eth0.active`.
    pub path: String,
    /// What is wrong, e.g. `Invalid value: "string": must be of type boolean`.
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// The fields of `ObjectMeta`; everything else under `metadata` is pruned.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Defaults, prunes and validates `obj` (a full custom object) against `schema`
/// (the version's `openAPIV3Schema`). `apiVersion`, `kind` and `metadata` are never pruned.
pub fn validate_and_prune(schema: &Value, obj: &mut Value) -> Result<(), Vec<FieldError>> {
    normalize(schema, obj, true, "", &mut Vec::new());
    let mut errs = Vec::new();
    validate(schema, obj, "", true, &mut errs);
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// Joins all errors the way the real server lists them in a Status message:
/// `[spec.a: Required value, spec.b: Invalid value: ...]` (no brackets for a single error).
pub fn format_errors(errs: &[FieldError]) -> String {
    let parts: Vec<String> = errs.iter().map(ToString::to_string).collect();
    if parts.len() == 1 {
        parts.join("")
    } else {
        format!("[{}]", parts.join(", "))
    }
}

fn flag(s: &Value, k: &str) -> bool {
    s.get(k).and_then(Value::as_bool) == Some(true)
}

fn nullable(s: &Value) -> bool {
    flag(s, "nullable")
}

fn props(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

/// `additionalProperties` as a schema (a `true` means "anything").
fn additional(s: &Value) -> Option<&Value> {
    match s.get("additionalProperties") {
        Some(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

fn additional_allowed(s: &Value) -> bool {
    matches!(
        s.get("additionalProperties"),
        Some(Value::Object(_) | Value::Bool(true))
    )
}

/// Fills a field of an object node: drops non-nullable nulls without default, applies defaults.
fn default_field(obj: &mut Map<String, Value>, key: &str, child: &Value) {
    match obj.get(key) {
        Some(Value::Null) if !nullable(child) => match child.get("default") {
            Some(d) => {
                obj.insert(key.to_string(), d.clone());
            }
            None => {
                obj.remove(key);
            }
        },
        None => {
            if let Some(d) = child.get("default") {
                obj.insert(key.to_string(), d.clone());
            }
        }
        _ => {}
    }
}

fn prune_meta(meta: &mut Value, path: &str, pruned: &mut Vec<String>) {
    if let Value::Object(m) = meta {
        m.retain(|k, _| {
            let keep = OBJECT_META_FIELDS.contains(&k.as_str());
            if !keep {
                pruned.push(child_path(path, k));
            }
            keep
        });
    }
}

/// Null-pruning, defaulting and pruning, in place; the paths of pruned unknown fields are
/// appended to `pruned`.
fn normalize(s: &Value, v: &mut Value, resource_root: bool, path: &str, pruned: &mut Vec<String>) {
    match v {
        Value::Object(obj) => {
            let properties = props(s);
            let addl = additional(s);
            if let Some(p) = properties {
                for (k, child) in p {
                    if resource_root && k == "metadata" {
                        continue;
                    }
                    default_field(obj, k, child);
                }
            }
            if let Some(a) = addl {
                let keys: Vec<String> = obj.keys().cloned().collect();
                for k in keys {
                    if properties.is_none_or(|p| !p.contains_key(&k)) {
                        default_field(obj, &k, a);
                    }
                }
            }
            let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
            let keep_any = preserve || additional_allowed(s);
            obj.retain(|k, _| {
                let keep = (resource_root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                    || properties.is_some_and(|p| p.contains_key(k))
                    || keep_any;
                if !keep {
                    pruned.push(child_path(path, k));
                }
                keep
            });
            for (k, child) in obj.iter_mut() {
                let cp = child_path(path, k);
                if resource_root && k == "metadata" {
                    prune_meta(child, &cp, pruned);
                    continue;
                }
                if resource_root && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                if let Some(cs) = properties.and_then(|p| p.get(k)) {
                    let embedded = flag(cs, "x-kubernetes-embedded-resource");
                    normalize(cs, child, embedded, &cp, pruned);
                } else if let Some(a) = addl {
                    let embedded = flag(a, "x-kubernetes-embedded-resource");
                    normalize(a, child, embedded, &cp, pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                let embedded = flag(is, "x-kubernetes-embedded-resource");
                for (i, it) in items.iter_mut().enumerate() {
                    normalize(is, it, embedded, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

/// The fields of `obj` that pruning would drop (unknown to `schema`), as dotted paths
/// (`spec.bogus`, `spec.items[0].x`, `metadata.foo`), for `fieldValidation=Strict|Warn`: the real
/// server answers Strict with 400 `strict decoding error: unknown field "spec.bogus"` and Warn
/// with a `Warning: unknown field "spec.bogus"` header.
pub fn unknown_fields(schema: &Value, obj: &Value) -> Vec<String> {
    let mut copy = obj.clone();
    let mut pruned = Vec::new();
    normalize(schema, &mut copy, true, "", &mut pruned);
    pruned
}

/// The name of a JSON value's type in error messages.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    }
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn num(s: &Value, k: &str) -> Option<f64> {
    s.get(k).and_then(Value::as_f64)
}

fn count(s: &Value, k: &str) -> Option<u64> {
    s.get(k).and_then(Value::as_u64)
}

fn validate(s: &Value, v: &Value, path: &str, resource_root: bool, errs: &mut Vec<FieldError>) {
    let mut err = |message: String| {
        errs.push(FieldError {
            path: path.to_string(),
            message,
        })
    };
    if v.is_null() && nullable(s) {
        return;
    }
    if flag(s, "x-kubernetes-int-or-string") {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            let t = type_name(v);
            err(format!(
                "Invalid value: \"{t}\": {path} in body must be of type integer,string: \"{t}\""
            ));
        }
        return;
    }
    if let Some(ty) = s.get("type").and_then(Value::as_str)
        && !type_ok(ty, v)
    {
        let t = type_name(v);
        err(format!(
            "Invalid value: \"{t}\": {path} in body must be of type {ty}: \"{t}\""
        ));
        return;
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(ToString::to_string).collect();
        err(format!(
            "Unsupported value: {v}: supported values: {}",
            list.join(", ")
        ));
    }
    match v {
        Value::String(st) => {
            let len = st.chars().count() as u64;
            if let Some(min) = count(s, "minLength")
                && len < min
            {
                err(format!(
                    "Invalid value: {v}: {path} in body should be at least {min} chars long"
                ));
            }
            if let Some(max) = count(s, "maxLength")
                && len > max
            {
                err(format!("Too long: may not be more than {max} bytes"));
            }
            if let Some(pat) = s.get("pattern").and_then(Value::as_str)
                && let Ok(re) = regex::Regex::new(pat)
                && !re.is_match(st)
            {
                err(format!("Invalid value: {v}: {path} in body should match '{pat}'"));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = num(s, "minimum") {
                if flag(s, "exclusiveMinimum") && x <= min {
                    err(format!(
                        "Invalid value: {v}: {path} in body should be greater than {}",
                        s["minimum"]
                    ));
                } else if x < min {
                    err(format!(
                        "Invalid value: {v}: {path} in body should be greater than or equal to {}",
                        s["minimum"]
                    ));
                }
            }
            if let Some(max) = num(s, "maximum") {
                if flag(s, "exclusiveMaximum") && x >= max {
                    err(format!(
                        "Invalid value: {v}: {path} in body should be less than {}",
                        s["maximum"]
                    ));
                } else if x > max {
                    err(format!(
                        "Invalid value: {v}: {path} in body should be less than or equal to {}",
                        s["maximum"]
                    ));
                }
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = count(s, "minItems")
                && n < min
            {
                err(format!(
                    "Invalid value: {n}: {path} in body should have at least {min} items"
                ));
            }
            if let Some(max) = count(s, "maxItems")
                && n > max
            {
                err(format!("Too many: {n}: must have at most {max} items"));
            }
            list_type_duplicates(s, items, path, errs);
            if let Some(is) = s.get("items") {
                for (i, it) in items.iter().enumerate() {
                    validate(
                        is,
                        it,
                        &format!("{path}[{i}]"),
                        flag(is, "x-kubernetes-embedded-resource"),
                        errs,
                    );
                }
            }
        }
        Value::Object(obj) => {
            if let Some(req) = s.get("required").and_then(Value::as_array) {
                for r in req.iter().filter_map(Value::as_str) {
                    if resource_root && matches!(r, "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    if !obj.contains_key(r) {
                        errs.push(FieldError {
                            path: child_path(path, r),
                            message: "Required value".into(),
                        });
                    }
                }
            }
            let n = obj.len() as u64;
            if let Some(min) = count(s, "minProperties")
                && n < min
            {
                errs.push(FieldError {
                    path: path.to_string(),
                    message: format!(
                        "Invalid value: {n}: {path} in body should have at least {min} properties"
                    ),
                });
            }
            if let Some(max) = count(s, "maxProperties")
                && n > max
            {
                errs.push(FieldError {
                    path: path.to_string(),
                    message: format!("Too many: {n}: must have at most {max} items"),
                });
            }
            let properties = props(s);
            let addl = additional(s);
            for (k, child) in obj {
                if resource_root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let cp = child_path(path, k);
                if let Some(cs) = properties.and_then(|p| p.get(k)) {
                    validate(cs, child, &cp, flag(cs, "x-kubernetes-embedded-resource"), errs);
                } else if let Some(a) = addl {
                    validate(a, child, &cp, flag(a, "x-kubernetes-embedded-resource"), errs);
                }
            }
        }
        _ => {}
    }
}

/// `x-kubernetes-list-type: set` (duplicate values) and `map` (duplicate keys).
fn list_type_duplicates(s: &Value, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            for (i, it) in items.iter().enumerate() {
                if items[..i].contains(it) {
                    errs.push(FieldError {
                        path: format!("{path}[{i}]"),
                        message: format!("Duplicate value: {it}"),
                    });
                }
            }
        }
        Some("map") => {
            let keys: Vec<&str> = s
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if keys.is_empty() {
                return;
            }
            let key_of = |it: &Value| -> Vec<Value> {
                keys.iter()
                    .map(|k| it.get(*k).cloned().unwrap_or(Value::Null))
                    .collect()
            };
            for (i, it) in items.iter().enumerate() {
                let k = key_of(it);
                if items[..i].iter().any(|o| key_of(o) == k) {
                    let shown: Map<String, Value> = keys
                        .iter()
                        .map(|kn| (kn.to_string(), it.get(*kn).cloned().unwrap_or(Value::Null)))
                        .collect();
                    errs.push(FieldError {
                        path: format!("{path}[{i}]"),
                        message: format!("Duplicate value: {}", Value::Object(shown)),
                    });
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
