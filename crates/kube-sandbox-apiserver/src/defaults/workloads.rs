//! Defaulting and validation of the `apps/v1` workloads (Deployment, ReplicaSet, DaemonSet) and
//! `policy/v1` PodDisruptionBudgets, as the real server's `SetDefaults_*`, strategies and
//! `Validate*` functions do it: pod templates get the PodSpec defaults pods get, the selector
//! must match the template labels (and is immutable), rolling-update parameters are checked, and
//! a DaemonSet's template generation is kept in its `deprecated.daemonset.template.generation`
//! annotation (where apps/v1 stores the internal `spec.templateGeneration`).

use serde_json::{Map, Value, json};

use super::{gofmt, pod_spec_defaults, set_default};
use crate::{error::Cause, meta};

/// Annotation holding a DaemonSet's template generation.
pub const DS_TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// Which workload is being prepared (messages differ slightly per kind, as upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
}

fn spec_mut(obj: &mut Value) -> &mut Value {
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    &mut obj["spec"]
}

fn obj_mut<'a>(v: &'a mut Value, field: &str) -> &'a mut Value {
    if !v.get(field).is_some_and(Value::is_object) {
        v[field] = json!({});
    }
    &mut v[field]
}

/// Defaults and validates a workload; `old` is the stored object on updates (its status is
/// already carried over), `None` on creates (the status starts empty, as the strategies set it).
pub fn prepare(kind: Kind, obj: &mut Value, old: Option<&Value>) -> Result<(), Vec<Cause>> {
    let spec = spec_mut(obj);
    match kind {
        Kind::Deployment => deployment_defaults(spec),
        Kind::ReplicaSet => set_default(spec, "replicas", json!(1)),
        Kind::DaemonSet => daemonset_defaults(spec),
    }
    let mut errs = Vec::new();
    if let Some(r) = spec.get("replicas").and_then(Value::as_i64).filter(|r| *r < 0) {
        errs.push(Cause::new(
            "spec.replicas",
            format!("Invalid value: {r}: must be greater than or equal to 0"),
        ));
    }
    errs.extend(validate_selector(kind, spec));
    errs.extend(validate_template(
        kind,
        obj_mut(obj_mut(spec, "template"), "spec"),
    ));
    errs.extend(nonnegative(spec, "minReadySeconds"));
    errs.extend(nonnegative(spec, "revisionHistoryLimit"));
    match kind {
        Kind::Deployment => errs.extend(validate_deployment_strategy(spec)),
        Kind::DaemonSet => errs.extend(validate_daemonset_strategy(spec)),
        Kind::ReplicaSet => {}
    }
    if let Some(old) = old {
        let old_sel = old.pointer("/spec/selector").map(normalized_selector);
        let new_sel = spec.get("selector").map(normalized_selector);
        if old_sel != new_sel {
            let shown = spec.get("selector").cloned().unwrap_or(json!({}));
            errs.push(Cause::new(
                "spec.selector",
                format!(
                    "Invalid value: {}: field is immutable",
                    gofmt::label_selector(&shown)
                ),
            ));
        }
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    if kind == Kind::DaemonSet {
        template_generation(obj, old);
    }
    if old.is_none() {
        obj["status"] = initial_status(kind);
    }
    Ok(())
}

/// Defaults the pod template's spec like a pod's and applies the workload template rules.
fn validate_template(kind: Kind, template_spec: &mut Value) -> Vec<Cause> {
    let mut errs = pod_spec_defaults(template_spec, "spec.template.spec");
    let restart = template_spec
        .get("restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or("Always");
    if restart != "Always" {
        errs.push(Cause::new(
            "spec.template.spec.restartPolicy",
            format!(
                "Unsupported value: {}: supported values: \"Always\"",
                gofmt::quote(restart)
            ),
        ));
    }
    if template_spec
        .get("activeDeadlineSeconds")
        .is_some_and(|v| !v.is_null())
    {
        let owner = if kind == Kind::DaemonSet {
            "DaemonSet"
        } else {
            "ReplicaSet"
        };
        errs.push(Cause::new(
            "spec.template.spec.activeDeadlineSeconds",
            format!("Forbidden: activeDeadlineSeconds in {owner} is not Supported"),
        ));
    }
    errs
}

/// The status a new object starts with (the Go zero value: non-omitempty fields only).
fn initial_status(kind: Kind) -> Value {
    match kind {
        Kind::Deployment => json!({}),
        Kind::ReplicaSet => json!({"replicas": 0}),
        Kind::DaemonSet => json!({"currentNumberScheduled": 0, "numberMisscheduled": 0,
            "desiredNumberScheduled": 0, "numberReady": 0}),
    }
}

/// `SetDefaults_Deployment` of apps/v1.
fn deployment_defaults(spec: &mut Value) {
    set_default(spec, "replicas", json!(1));
    let strategy = obj_mut(spec, "strategy");
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let ru = obj_mut(strategy, "rollingUpdate");
        set_default(ru, "maxUnavailable", json!("25%"));
        set_default(ru, "maxSurge", json!("25%"));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
}

/// `SetDefaults_DaemonSet` of apps/v1.
fn daemonset_defaults(spec: &mut Value) {
    let strategy = obj_mut(spec, "updateStrategy");
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let ru = obj_mut(strategy, "rollingUpdate");
        set_default(ru, "maxUnavailable", json!(1));
        set_default(ru, "maxSurge", json!(0));
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
}

/// The DaemonSet's template generation: 1 on create, +1 whenever the template changes; clients
/// cannot set it on updates (the stored value wins).
fn template_generation(obj: &mut Value, old: Option<&Value>) {
    let parse = |o: &Value| {
        o.pointer("/metadata/annotations")
            .and_then(|a| a.get(DS_TEMPLATE_GENERATION))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<i64>().ok())
    };
    let generation = match old {
        None => parse(obj).filter(|g| *g >= 1).unwrap_or(1),
        Some(old) => {
            let prev = parse(old).unwrap_or(1);
            if old.pointer("/spec/template") == obj.pointer("/spec/template") {
                prev
            } else {
                prev + 1
            }
        }
    };
    let m = meta::metadata_mut(obj);
    let ann = m.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    ann[DS_TEMPLATE_GENERATION] = json!(generation.to_string());
}

fn nonnegative(spec: &Value, field: &str) -> Option<Cause> {
    let v = spec.get(field).and_then(Value::as_i64).filter(|v| *v < 0)?;
    Some(Cause::new(
        format!("spec.{field}"),
        format!("Invalid value: {v}: must be greater than or equal to 0"),
    ))
}

/// `matchLabels: {}` and `matchExpressions: []` are the same as absent.
fn normalized_selector(sel: &Value) -> Value {
    let mut out = Map::new();
    for k in ["matchLabels", "matchExpressions"] {
        let v = sel.get(k);
        let empty = match v {
            None | Some(Value::Null) => true,
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if !empty {
            out.insert(k.into(), v.cloned().unwrap_or(Value::Null));
        }
    }
    Value::Object(out)
}

/// Whether a `metav1.LabelSelector` matches `labels`; `None` when the selector is malformed.
pub fn selector_matches(sel: &Value, labels: Option<&Map<String, Value>>) -> Option<bool> {
    let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    if let Some(ml) = sel.get("matchLabels").filter(|v| !v.is_null()) {
        for (k, v) in ml.as_object()? {
            if get(k) != Some(v.as_str()?) {
                return Some(false);
            }
        }
    }
    if let Some(me) = sel.get("matchExpressions").filter(|v| !v.is_null()) {
        for e in me.as_array()? {
            let key = e.get("key")?.as_str()?;
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let ok = match e.get("operator")?.as_str()? {
                "In" => get(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => get(key).is_some(),
                "DoesNotExist" => get(key).is_none(),
                _ => return None,
            };
            if !ok {
                return Some(false);
            }
        }
    }
    Some(true)
}

fn validate_selector(kind: Kind, spec: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let Some(sel) = spec.get("selector").filter(|s| !s.is_null()) else {
        errs.push(Cause::new("spec.selector", "Required value"));
        return errs;
    };
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for (i, e) in exprs.iter().enumerate() {
            let path = format!("spec.selector.matchExpressions[{i}]");
            let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
            let has_values = e
                .get("values")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
            match op {
                "In" | "NotIn" if !has_values => errs.push(Cause::new(
                    format!("{path}.values"),
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                )),
                "Exists" | "DoesNotExist" if has_values => errs.push(Cause::new(
                    format!("{path}.values"),
                    "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )),
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => errs.push(Cause::new(
                    format!("{path}.operator"),
                    format!(
                        "Invalid value: {}: not a valid selector operator",
                        gofmt::quote(other)
                    ),
                )),
            }
        }
    }
    if normalized_selector(sel).as_object().is_some_and(Map::is_empty) {
        // Upstream's ReplicaSet validation says "deployment" too.
        let what = if kind == Kind::DaemonSet {
            "daemonset"
        } else {
            "deployment"
        };
        errs.push(Cause::new(
            "spec.selector",
            format!(
                "Invalid value: {}: empty selector is invalid for {what}",
                gofmt::label_selector(sel)
            ),
        ));
        return errs;
    }
    if !errs.is_empty() {
        return errs;
    }
    let labels = spec.pointer("/template/metadata/labels");
    if selector_matches(sel, labels.and_then(Value::as_object)) == Some(false) {
        errs.push(Cause::new(
            "spec.template.metadata.labels",
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                gofmt::string_map(labels.filter(|l| !l.is_null()))
            ),
        ));
    }
    errs
}

/// The value of an int-or-percent as upstream's `getIntOrPercentValue` (percent number).
fn int_or_percent_value(v: &Value) -> Option<i64> {
    match v {
        Value::String(s) => s.strip_suffix('%')?.parse().ok(),
        v => v.as_i64(),
    }
}

/// `ValidatePositiveIntOrPercent` + `IsNotMoreThan100Percent`.
fn validate_int_or_percent(v: Option<&Value>, path: &str, errs: &mut Vec<Cause>) {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return;
    };
    match v {
        Value::String(s) => {
            let valid = s
                .strip_suffix('%')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if !valid {
                errs.push(Cause::new(path, format!(
                    "Invalid value: {}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                    gofmt::int_or_string(v)
                )));
            } else if int_or_percent_value(v).is_some_and(|p| p > 100) {
                errs.push(Cause::new(
                    path,
                    format!(
                        "Invalid value: {}: must not be greater than 100%",
                        gofmt::int_or_string(v)
                    ),
                ));
            }
        }
        v => {
            if let Some(n) = v.as_i64().filter(|n| *n < 0) {
                errs.push(Cause::new(
                    path,
                    format!("Invalid value: {n}: must be greater than or equal to 0"),
                ));
            }
        }
    }
}

fn validate_deployment_strategy(spec: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let strategy = spec.get("strategy").cloned().unwrap_or(json!({}));
    let ru = strategy.get("rollingUpdate").filter(|v| !v.is_null());
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "Recreate" => {
            if ru.is_some() {
                errs.push(Cause::new(
                    "spec.strategy.rollingUpdate",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                ));
            }
        }
        "RollingUpdate" => {
            let ru = ru.cloned().unwrap_or(json!({}));
            let path = "spec.strategy.rollingUpdate";
            validate_int_or_percent(
                ru.get("maxUnavailable"),
                &format!("{path}.maxUnavailable"),
                &mut errs,
            );
            validate_int_or_percent(ru.get("maxSurge"), &format!("{path}.maxSurge"), &mut errs);
            let unavailable = ru
                .get("maxUnavailable")
                .and_then(int_or_percent_value)
                .unwrap_or(0);
            let surge = ru.get("maxSurge").and_then(int_or_percent_value).unwrap_or(0);
            if unavailable == 0 && surge == 0 {
                let shown = ru.get("maxUnavailable").cloned().unwrap_or(json!(0));
                errs.push(Cause::new(
                    format!("{path}.maxUnavailable"),
                    format!(
                        "Invalid value: {}: may not be 0 when `maxSurge` is 0",
                        gofmt::int_or_string(&shown)
                    ),
                ));
            }
        }
        other => errs.push(Cause::new(
            "spec.strategy.type",
            format!(
                "Unsupported value: {}: supported values: \"Recreate\", \"RollingUpdate\"",
                gofmt::quote(other)
            ),
        )),
    }
    let progress = spec.get("progressDeadlineSeconds").and_then(Value::as_i64);
    let min_ready = spec.get("minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
    if let Some(p) = progress {
        if p < 0 {
            errs.extend(nonnegative(spec, "progressDeadlineSeconds"));
        } else if p <= min_ready {
            errs.push(Cause::new(
                "spec.progressDeadlineSeconds",
                format!("Invalid value: {p}: must be greater than minReadySeconds"),
            ));
        }
    }
    errs
}

fn validate_daemonset_strategy(spec: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let strategy = spec.get("updateStrategy").cloned().unwrap_or(json!({}));
    match strategy.get("type").and_then(Value::as_str).unwrap_or("") {
        "OnDelete" => {}
        "RollingUpdate" => {
            let path = "spec.updateStrategy.rollingUpdate";
            let Some(ru) = strategy.get("rollingUpdate").filter(|v| !v.is_null()) else {
                errs.push(Cause::new(path, "Required value"));
                return errs;
            };
            validate_int_or_percent(
                ru.get("maxUnavailable"),
                &format!("{path}.maxUnavailable"),
                &mut errs,
            );
            validate_int_or_percent(ru.get("maxSurge"), &format!("{path}.maxSurge"), &mut errs);
            let has_unavailable = ru
                .get("maxUnavailable")
                .and_then(int_or_percent_value)
                .unwrap_or(0)
                != 0;
            let has_surge = ru.get("maxSurge").and_then(int_or_percent_value).unwrap_or(0) != 0;
            if has_unavailable && has_surge {
                let shown = ru.get("maxSurge").cloned().unwrap_or(json!(0));
                errs.push(Cause::new(
                    format!("{path}.maxSurge"),
                    format!(
                        "Invalid value: {}: may not be set when maxUnavailable is non-zero",
                        gofmt::int_or_string(&shown)
                    ),
                ));
            } else if !has_unavailable && !has_surge {
                errs.push(Cause::new(
                    format!("{path}.maxUnavailable"),
                    "Required value: cannot be 0 when maxSurge is 0",
                ));
            }
        }
        other => errs.push(Cause::new(
            "spec.updateStrategy.type",
            format!(
                "Unsupported value: {}: supported values: \"OnDelete\", \"RollingUpdate\"",
                gofmt::quote(other)
            ),
        )),
    }
    errs
}

/// A new PodDisruptionBudget starts with the zero status (no disruption controller runs here).
pub fn pdb_create(obj: &mut Value) {
    obj["status"] = json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0,
        "expectedPods": 0});
}

#[cfg(test)]
mod tests;
