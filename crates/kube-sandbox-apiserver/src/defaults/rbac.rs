//! Defaulting and validation of `rbac.authorization.k8s.io/v1` objects as the real server does
//! it (`SetDefaults_*`, `ValidatePolicyRule`, `ValidateRoleBinding`): rule shapes, binding
//! `roleRef` (required, immutable) and subjects. The objects are stored only: nothing here
//! authorizes requests.

use serde_json::{Value, json};

use super::gofmt;
use crate::error::Cause;

const GROUP: &str = "rbac.authorization.k8s.io";

fn non_empty(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_some_and(|a| !a.is_empty())
}

/// Roles and ClusterRoles: every rule must name verbs, and resources with API groups or
/// (cluster roles only) non-resource URLs.
pub fn role(obj: &Value, namespaced: bool) -> Result<(), Vec<Cause>> {
    let mut errs = Vec::new();
    let rules = obj
        .get("rules")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("rules[{i}]");
        if !non_empty(rule.get("verbs")) {
            errs.push(Cause::new(
                format!("{path}.verbs"),
                "Required value: verbs must contain at least one value",
            ));
        }
        if non_empty(rule.get("nonResourceURLs")) {
            let urls = gofmt::string_slice(rule.get("nonResourceURLs"));
            if namespaced {
                errs.push(Cause::new(
                    format!("{path}.nonResourceURLs"),
                    format!("Invalid value: {urls}: namespaced rules cannot apply to non-resource URLs"),
                ));
            }
            if ["apiGroups", "resources", "resourceNames"]
                .iter()
                .any(|f| non_empty(rule.get(*f)))
            {
                errs.push(Cause::new(
                    format!("{path}.nonResourceURLs"),
                    format!(
                        "Invalid value: {urls}: rules cannot apply to both regular resources and non-resource URLs"
                    ),
                ));
            }
            continue;
        }
        if !non_empty(rule.get("apiGroups")) {
            errs.push(Cause::new(
                format!("{path}.apiGroups"),
                "Required value: resource rules must supply at least one api group",
            ));
        }
        if !non_empty(rule.get("resources")) {
            errs.push(Cause::new(
                format!("{path}.resources"),
                "Required value: resource rules must supply at least one resource",
            ));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

fn role_ref_text(r: &Value) -> String {
    let s = |k: &str| gofmt::quote(r.get(k).and_then(Value::as_str).unwrap_or_default());
    format!(
        "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
        s("apiGroup"),
        s("kind"),
        s("name")
    )
}

/// RoleBindings (`namespaced`) and ClusterRoleBindings: defaults `roleRef.apiGroup` and the
/// subjects' `apiGroup`, validates both, and refuses `roleRef` changes on updates.
pub fn binding(obj: &mut Value, old: Option<&Value>, namespaced: bool) -> Result<(), Vec<Cause>> {
    if !obj.get("roleRef").is_some_and(Value::is_object) {
        obj["roleRef"] = json!({});
    }
    if obj["roleRef"]
        .get("apiGroup")
        .and_then(Value::as_str)
        .unwrap_or("")
        .is_empty()
    {
        obj["roleRef"]["apiGroup"] = json!(GROUP);
    }
    if let Some(subjects) = obj.get_mut("subjects").and_then(Value::as_array_mut) {
        for s in subjects.iter_mut().filter(|s| s.is_object()) {
            let kind = s.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
            if s.get("apiGroup").and_then(Value::as_str).unwrap_or("").is_empty()
                && matches!(kind.as_str(), "User" | "Group")
            {
                s["apiGroup"] = json!(GROUP);
            }
        }
    }
    let mut errs = Vec::new();
    let rr = obj["roleRef"].clone();
    let field = |k: &str| rr.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if field("apiGroup") != GROUP {
        errs.push(Cause::new(
            "roleRef.apiGroup",
            format!(
                "Unsupported value: {}: supported values: \"{GROUP}\"",
                gofmt::quote(&field("apiGroup"))
            ),
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&field("kind").as_str()) {
        let supported: Vec<String> = kinds.iter().map(|k| format!("\"{k}\"")).collect();
        errs.push(Cause::new(
            "roleRef.kind",
            format!(
                "Unsupported value: {}: supported values: {}",
                gofmt::quote(&field("kind")),
                supported.join(", ")
            ),
        ));
    }
    if field("name").is_empty() {
        errs.push(Cause::new("roleRef.name", "Required value"));
    }
    let subjects = obj
        .get("subjects")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, s) in subjects.iter().enumerate() {
        let path = format!("subjects[{i}]");
        let get = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
        if get("name").is_empty() {
            errs.push(Cause::new(format!("{path}.name"), "Required value"));
        }
        match get("kind") {
            "ServiceAccount" => {
                if !get("apiGroup").is_empty() {
                    errs.push(Cause::new(
                        format!("{path}.apiGroup"),
                        format!(
                            "Unsupported value: {}: supported values: \"\"",
                            gofmt::quote(get("apiGroup"))
                        ),
                    ));
                }
                if !namespaced && get("namespace").is_empty() {
                    errs.push(Cause::new(format!("{path}.namespace"), "Required value"));
                }
            }
            "User" | "Group" => {
                if get("apiGroup") != GROUP {
                    errs.push(Cause::new(
                        format!("{path}.apiGroup"),
                        format!(
                            "Unsupported value: {}: supported values: \"{GROUP}\"",
                            gofmt::quote(get("apiGroup"))
                        ),
                    ));
                }
            }
            other => errs.push(Cause::new(
                format!("{path}.kind"),
                format!(
                    "Unsupported value: {}: supported values: \"ServiceAccount\", \"User\", \"Group\"",
                    gofmt::quote(other)
                ),
            )),
        }
    }
    if let Some(old) = old {
        if old.get("roleRef") != Some(&rr) {
            errs.push(Cause::new(
                "roleRef",
                format!("Invalid value: {}: cannot change roleRef", role_ref_text(&rr)),
            ));
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_need_verbs_and_resources() {
        let ok = json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        assert!(role(&ok, true).is_ok());
        let bad =
            json!({"rules": [{"resources": ["pods"]}, {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        let e = role(&bad, true).expect_err("invalid");
        let fields: Vec<&str> = e.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["rules[0].verbs", "rules[0].apiGroups", "rules[1].nonResourceURLs"]
        );
        let cluster = json!({"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]});
        assert!(role(&cluster, false).is_ok());
    }

    #[test]
    fn bindings_default_and_keep_role_ref() {
        let mut rb = json!({"roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "ServiceAccount", "name": "sa"}]});
        binding(&mut rb, None, true).expect("valid");
        assert_eq!(rb["roleRef"]["apiGroup"], GROUP);
        assert_eq!(rb["subjects"][0]["apiGroup"], GROUP);
        assert!(rb["subjects"][1].get("apiGroup").is_none());
        let mut odd = json!({"roleRef": "x", "subjects": ["not-an-object"]});
        assert!(
            binding(&mut odd, None, true).is_err(),
            "malformed input is refused, not a panic"
        );
        let mut changed = rb.clone();
        changed["roleRef"]["name"] = json!("other");
        let e = binding(&mut changed, Some(&rb), true).expect_err("immutable");
        assert_eq!(e[0].field, "roleRef");
        assert!(e[0].message.ends_with("cannot change roleRef"));
        let mut crb = json!({"roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}]});
        let e = binding(&mut crb, None, false).expect_err("invalid");
        let fields: Vec<&str> = e.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["roleRef.kind", "subjects[0].namespace"]);
    }
}
