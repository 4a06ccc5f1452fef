//! CustomResourceDefinitions: validation and defaulting of the CRD itself, turning it into a
//! served resource (with its `Established` status), and schema enforcement on custom objects.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::{
    app::App,
    error::{ApiError, ApiResult, Cause},
    meta,
    registry::{CrdVersion, ResKey, ResourceInfo},
    store::Inner,
};

/// Finalizer that holds a CRD until its objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// True for the CustomResourceDefinition resource itself.
pub fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(n) => cur = n,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

/// Validates and defaults a CRD (create and update).
pub fn prepare(obj: &mut Value) -> Result<(), Vec<Cause>> {
    let mut errs = Vec::new();
    let group = s(obj, &["spec", "group"]).to_string();
    let plural = s(obj, &["spec", "names", "plural"]).to_string();
    let kind = s(obj, &["spec", "names", "kind"]).to_string();
    if group.is_empty() {
        errs.push(Cause::new("spec.group", "Required value"));
    } else if !group.contains('.') {
        errs.push(Cause::new(
            "spec.group",
            format!("Invalid value: \"{group}\": should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        errs.push(Cause::new("spec.names.plural", "Required value"));
    }
    if kind.is_empty() {
        errs.push(Cause::new("spec.names.kind", "Required value"));
    }
    let name = meta::name(obj).to_string();
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        errs.push(Cause::new(
            "metadata.name",
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match s(obj, &["spec", "scope"]) {
        "Namespaced" | "Cluster" => {}
        "" => errs.push(Cause::new("spec.scope", "Required value")),
        other => errs.push(Cause::new(
            "spec.scope",
            format!("Unsupported value: \"{other}\": supported values: \"Cluster\", \"Namespaced\""),
        )),
    }
    let versions = obj
        .get("spec")
        .and_then(|s| s.get("versions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(Cause::new(
            "spec.versions",
            "Invalid value: null: must have exactly one version marked as storage version",
        ));
    } else {
        let storage = versions
            .iter()
            .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .count();
        if storage != 1 {
            errs.push(Cause::new(
                "spec.versions",
                "Invalid value: []apiextensions.CustomResourceDefinitionVersion: must have exactly one version marked as storage version",
            ));
        }
        for (i, v) in versions.iter().enumerate() {
            if s(v, &["name"]).is_empty() {
                errs.push(Cause::new(format!("spec.versions[{i}].name"), "Required value"));
            }
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    let names = &mut obj["spec"]["names"];
    if s(names, &["singular"]).is_empty() {
        names["singular"] = json!(kind.to_lowercase());
    }
    if s(names, &["listKind"]).is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    if obj["spec"].get("conversion").is_none() {
        obj["spec"]["conversion"] = json!({"strategy": "None"});
    }
    Ok(())
}

fn version_priority(v: &str) -> (u8, u32, u32) {
    // v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > anything else.
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    let parse_n = |t: &str| t.parse::<u32>().ok();
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(n) = tail.strip_prefix("beta").and_then(parse_n) {
        (2, major, n)
    } else if let Some(n) = tail.strip_prefix("alpha").and_then(parse_n) {
        (1, major, n)
    } else {
        (0, 0, 0)
    }
}

/// The served resource a CRD defines.
pub fn info_from(obj: &Value) -> Option<ResourceInfo> {
    let spec = obj.get("spec")?;
    let names = spec.get("names")?;
    let strs = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    let mut versions = Vec::new();
    let mut per = HashMap::new();
    let mut storage = String::new();
    for v in spec.get("versions")?.as_array()? {
        let name = v.get("name")?.as_str()?.to_string();
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage = name.clone();
        }
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        per.insert(
            name.clone(),
            CrdVersion {
                schema: v.get("schema").and_then(|s| s.get("openAPIV3Schema")).cloned(),
                printer_columns: v.get("additionalPrinterColumns").cloned(),
                status: v
                    .get("subresources")
                    .and_then(|s| s.get("status"))
                    .is_some_and(|s| !s.is_null()),
            },
        );
        versions.push(name);
    }
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    let kind = names.get("kind")?.as_str()?.to_string();
    Some(ResourceInfo {
        group: spec.get("group")?.as_str()?.to_string(),
        versions,
        storage_version: storage,
        plural: names.get("plural")?.as_str()?.to_string(),
        singular: names
            .get("singular")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| kind.to_lowercase()),
        kind,
        namespaced: spec.get("scope").and_then(Value::as_str) == Some("Namespaced"),
        short_names: strs(names.get("shortNames")),
        categories: strs(names.get("categories")),
        status_subresource: per.values().any(|v| v.status),
        generation: true,
        create_on_update: false,
        unconditional_update: false,
        return_deleted_object: true,
        field_labels: Vec::new(),
        crd: Some(per),
    })
}

/// The storage key of the resource a CRD defines.
pub fn target_key(obj: &Value) -> Option<ResKey> {
    Some((
        obj.get("spec")?.get("group")?.as_str()?.to_string(),
        obj.get("spec")?
            .get("names")?
            .get("plural")?
            .as_str()?
            .to_string(),
    ))
}

fn accepted_status(obj: &Value) -> Value {
    let now = meta::now();
    let old = obj.get("status").cloned().unwrap_or(json!({}));
    let keep_time = |t: &str| {
        old.get("conditions")
            .and_then(Value::as_array)
            .and_then(|cs| {
                cs.iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
            })
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or(json!(now))
    };
    let mut stored: Vec<String> = old
        .get("storedVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    if let Some(sv) = obj["spec"]["versions"]
        .as_array()
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .and_then(|v| v.get("name").and_then(Value::as_str))
    {
        if !stored.iter().any(|x| x == sv) {
            stored.push(sv.to_string());
        }
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": keep_time("NamesAccepted"),
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": keep_time("Established"),
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
        ],
        "acceptedNames": obj["spec"]["names"].clone(),
        "storedVersions": stored,
    })
}

/// After a CRD is written: serve it and mark it Established (a second write, as the real
/// controllers do asynchronously).
pub fn after_write(app: &App, tx: &mut Inner, key: &ResKey, obj: &Value) {
    if meta::is_deleting(obj) {
        return;
    }
    if let Some(info) = info_from(obj) {
        app.registry.register(info);
    }
    let status = accepted_status(obj);
    if obj.get("status") != Some(&status) {
        let mut o = obj.clone();
        o["status"] = status;
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        tx.put(key, o);
    }
}

/// `fieldValidation=Strict`: unknown fields (those pruning would drop) are a 400, worded like the
/// real server's strict decoding error. `Warn` (the default) and `Ignore` accept them (no
/// `Warning` headers are sent).
pub fn strict_check(info: &ResourceInfo, version: &str, obj: &Value, mode: Option<&str>) -> ApiResult<()> {
    if mode != Some("Strict") {
        return Ok(());
    }
    let Some(schema) = info.crd_version(version).and_then(|v| v.schema.as_ref()) else {
        return Ok(());
    };
    let unknown = kube_sandbox_machinery::schema::unknown_fields(schema, obj);
    if unknown.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
    Err(ApiError::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        list.join(", "),
        kind = info.kind
    )))
}

/// Defaults, prunes and validates a custom object against its version's schema.
pub fn validate_custom(info: &ResourceInfo, version: &str, obj: &mut Value) -> Result<(), Vec<Cause>> {
    let Some(schema) = info.crd_version(version).and_then(|v| v.schema.as_ref()) else {
        return Ok(());
    };
    kube_sandbox_machinery::schema::validate_and_prune(schema, obj)
        .map_err(|errs| errs.into_iter().map(|e| Cause::new(e.path, e.message)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "kuryrports.openstack.org"},
            "spec": {"group": "openstack.org", "scope": "Namespaced",
                "names": {"plural": "kuryrports", "kind": "KuryrPort", "shortNames": ["kp"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false},
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
                    {"name": "v2alpha1", "served": false, "storage": false}
                ]}
        })
    }

    #[test]
    fn crd_to_info() {
        let mut c = crd();
        prepare(&mut c).expect("valid");
        assert_eq!(c["spec"]["names"]["singular"], "kuryrport");
        let info = info_from(&c).expect("info");
        assert_eq!(info.versions, ["v1", "v1beta1"]);
        assert_eq!(info.storage_version, "v1");
        assert!(info.status_subresource && info.namespaced);
        assert_eq!(info.short_names, ["kp"]);
        let st = accepted_status(&c);
        assert_eq!(st["conditions"][1]["type"], "Established");
        assert_eq!(st["storedVersions"], json!(["v1"]));
    }

    #[test]
    fn crd_name_must_match() {
        let mut c = crd();
        c["metadata"]["name"] = json!("x.openstack.org");
        let e = prepare(&mut c).expect_err("bad name");
        assert_eq!(e[0].field, "metadata.name");
    }
}
