//! Strategic merge patch (`application/strategic-merge-patch+json`) for the fields clients patch
//! in practice.
//!
//! Maps merge recursively and `null` deletes a key. Lists follow [`super::strategy`]: keyed lists
//! merge element by element on their merge key, scalar sets merge as unions, every other list is
//! replaced. Directives:
//! - `$patch: replace` on a map replaces the map; as a list element it replaces the whole list
//!   with the other elements; `$patch: delete` deletes a map, or the keyed element it names;
//!   `$patch: merge` is the default.
//! - `$deleteFromPrimitiveList/<field>: [..]` removes those values from a scalar list.
//! - `$retainKeys: [..]` drops the keys of the map not listed (after merging).
//! - `$setElementOrder/<field>` is accepted and ignored: merged lists keep the existing order
//!   with new elements appended.
//!
//! Custom resources have no strategic-merge metadata; the real server refuses this patch type
//! for them (415), which the API server must do before calling in here.

use serde_json::{Map, Value};

use super::PatchError;
use super::strategy::{ListStrategy, list_strategy};

const DIRECTIVE_PATCH: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies a strategic merge `patch` to `doc` (an object of `kind`).
pub fn strategic_merge(kind: &str, doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let Value::Object(p) = patch else {
        return Err(PatchError::BadRequest(
            "strategic merge patch must be a JSON object".into(),
        ));
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let mut path = Vec::new();
    if merge_map(kind, doc, p, &mut path)? == MapOutcome::Delete {
        *doc = Value::Object(Map::new());
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum MapOutcome {
    Keep,
    Delete,
}

fn directive(p: &Map<String, Value>) -> Result<Option<&str>, PatchError> {
    match p.get(DIRECTIVE_PATCH) {
        None => Ok(None),
        Some(Value::String(s)) if matches!(s.as_str(), "replace" | "delete" | "merge") => {
            Ok(Some(s.as_str()))
        }
        Some(v) => Err(PatchError::BadRequest(format!(
            "Unknown patch type: {v}; only replace, delete and merge are valid"
        ))),
    }
}

/// Removes directive keys from a patch fragment (recursively), and nulls inside maps.
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !k.starts_with('$') && !v.is_null())
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|e| {
                    !e.as_object()
                        .is_some_and(|m| m.contains_key(DIRECTIVE_PATCH) && m.len() == 1)
                })
                .map(strip)
                .collect(),
        ),
        v => v.clone(),
    }
}

fn merge_map(
    kind: &str,
    doc: &mut Value,
    patch: &Map<String, Value>,
    path: &mut Vec<String>,
) -> Result<MapOutcome, PatchError> {
    match directive(patch)? {
        Some("delete") => return Ok(MapOutcome::Delete),
        Some("replace") => {
            *doc = strip(&Value::Object(patch.clone()));
            return Ok(MapOutcome::Keep);
        }
        _ => {}
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    for (k, v) in patch {
        if k == DIRECTIVE_PATCH || k == RETAIN_KEYS || k.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        if let Some(field) = k.strip_prefix(DELETE_FROM_PRIMITIVE) {
            let Value::Array(remove) = v else {
                return Err(PatchError::BadRequest(format!("{k} must be a list of values")));
            };
            if let Some(Value::Array(list)) = doc.get_mut(field) {
                list.retain(|e| !remove.contains(e));
            }
            continue;
        }
        if k.starts_with('$') {
            return Err(PatchError::BadRequest(format!("unknown directive {k:?}")));
        }
        let obj = doc
            .as_object_mut()
            .ok_or_else(|| PatchError::Invalid("patch target is not an object".into()))?;
        match v {
            Value::Null => {
                obj.remove(k);
            }
            Value::Object(pm) => {
                path.push(k.clone());
                let target = obj.entry(k.clone()).or_insert(Value::Null);
                let outcome = merge_map(kind, target, pm, path)?;
                path.pop();
                if outcome == MapOutcome::Delete {
                    obj.remove(k);
                }
            }
            Value::Array(pl) => {
                path.push(k.clone());
                let strategy = {
                    let names: Vec<&str> = path.iter().map(String::as_str).collect();
                    list_strategy(kind, &names)
                };
                let target = obj.entry(k.clone()).or_insert(Value::Null);
                merge_list(kind, target, pl, strategy, path)?;
                path.pop();
            }
            scalar => {
                obj.insert(k.clone(), scalar.clone());
            }
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let Value::Array(keys) = retain else {
            return Err(PatchError::BadRequest(
                "$retainKeys must be a list of keys".into(),
            ));
        };
        if let Some(obj) = doc.as_object_mut() {
            obj.retain(|k, _| keys.iter().any(|r| r.as_str() == Some(k)));
        }
    }
    Ok(MapOutcome::Keep)
}

fn is_replace_marker(e: &Value) -> bool {
    e.get(DIRECTIVE_PATCH).and_then(Value::as_str) == Some("replace")
        && e.as_object().is_some_and(|m| m.len() == 1)
}

fn merge_list(
    kind: &str,
    doc: &mut Value,
    patch: &[Value],
    strategy: ListStrategy,
    path: &mut Vec<String>,
) -> Result<(), PatchError> {
    if patch.iter().any(is_replace_marker) || strategy == ListStrategy::Atomic {
        *doc = strip(&Value::Array(patch.to_vec()));
        return Ok(());
    }
    if !doc.is_array() {
        *doc = Value::Array(Vec::new());
    }
    let Value::Array(list) = doc else {
        unreachable!("set to an array above")
    };
    match strategy {
        ListStrategy::Atomic => unreachable!("handled above"),
        ListStrategy::Set => {
            for e in patch {
                if !list.contains(e) {
                    list.push(e.clone());
                }
            }
        }
        ListStrategy::Keyed(key) => {
            path.push("[]".into());
            for e in patch {
                let Value::Object(pm) = e else {
                    path.pop();
                    return Err(PatchError::Invalid(format!(
                        "{}: list element {e} is not an object (merge key {key})",
                        path.join(".")
                    )));
                };
                let Some(kv) = pm.get(key) else {
                    path.pop();
                    return Err(PatchError::Invalid(format!(
                        "map: {e} does not contain declared merge key: {key}"
                    )));
                };
                let pos = list.iter().position(|x| x.get(key) == Some(kv));
                if directive(pm)? == Some("delete") {
                    list.retain(|x| x.get(key) != Some(kv));
                    continue;
                }
                match pos {
                    Some(i) => {
                        merge_map(kind, &mut list[i], pm, path)?;
                    }
                    None => {
                        let mut fresh = Value::Object(Map::new());
                        merge_map(kind, &mut fresh, pm, path)?;
                        list.push(fresh);
                    }
                }
            }
            path.pop();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn smp(kind: &str, doc: Value, patch: Value) -> Value {
        let mut d = doc;
        strategic_merge(kind, &mut d, &patch).unwrap();
        d
    }

    #[test]
    fn maps_merge_and_null_deletes() {
        let d = smp(
            "Pod",
            json!({"metadata": {"labels": {"a": "1", "b": "2"}, "name": "p"}}),
            json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
        );
        assert_eq!(
            d,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}, "name": "p"}})
        );
    }

    #[test]
    fn finalizers_merge_as_set_and_delete_from_primitive_list() {
        let d = smp(
            "Pod",
            json!({"metadata": {"finalizers": ["a", "b"]}}),
            json!({"metadata": {"finalizers": ["b", "c"]}}),
        );
        assert_eq!(d["metadata"]["finalizers"], json!(["a", "b", "c"]));
        let d = smp(
            "Pod",
            d,
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "$setElementOrder/finalizers": ["b", "c"]}}),
        );
        assert_eq!(d["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn containers_merge_by_name() {
        let doc = json!({"spec": {"containers": [
            {"name": "a", "image": "x:1", "ports": [{"containerPort": 80, "name": "http"}],
             "env": [{"name": "E1", "value": "1"}]},
            {"name": "b", "image": "y:1"}
        ]}});
        let d = smp(
            "Pod",
            doc,
            json!({"spec": {"containers": [
                {"name": "a", "image": "x:2", "ports": [{"containerPort": 443}],
                 "env": [{"name": "E1", "value": "2"}, {"name": "E2", "value": "x"}]},
                {"name": "c", "image": "z:1"}
            ]}}),
        );
        assert_eq!(
            d,
            json!({"spec": {"containers": [
                {"name": "a", "image": "x:2",
                 "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
                 "env": [{"name": "E1", "value": "2"}, {"name": "E2", "value": "x"}]},
                {"name": "b", "image": "y:1"},
                {"name": "c", "image": "z:1"}
            ]}})
        );
    }

    #[test]
    fn list_element_delete_and_replace() {
        let doc = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"}, {"type": "Scheduled", "status": "True"}]}});
        let d = smp(
            "Pod",
            doc.clone(),
            json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}),
        );
        assert_eq!(
            d["status"]["conditions"],
            json!([{"type": "Scheduled", "status": "True"}])
        );
        let d = smp(
            "Pod",
            doc.clone(),
            json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert_eq!(
            d["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "Scheduled", "status": "True"}])
        );
        let d = smp(
            "Pod",
            doc,
            json!({"status": {"conditions": [{"$patch": "replace"}, {"type": "X", "status": "True"}]}}),
        );
        assert_eq!(
            d["status"]["conditions"],
            json!([{"type": "X", "status": "True"}])
        );
    }

    #[test]
    fn map_directives() {
        let doc = json!({"spec": {"selector": {"a": "1", "b": "2"}, "other": 1}});
        let d = smp(
            "Service",
            doc.clone(),
            json!({"spec": {"selector": {"$patch": "replace", "c": "3"}}}),
        );
        assert_eq!(d["spec"]["selector"], json!({"c": "3"}));
        let d = smp(
            "Service",
            doc.clone(),
            json!({"spec": {"selector": {"$patch": "delete"}}}),
        );
        assert_eq!(d, json!({"spec": {"other": 1}}));
        let d = smp(
            "Service",
            doc,
            json!({"spec": {"$retainKeys": ["selector"], "selector": {"z": "9"}}}),
        );
        assert_eq!(d, json!({"spec": {"selector": {"a": "1", "b": "2", "z": "9"}}}));
    }

    #[test]
    fn atomic_lists_replace() {
        let d = smp(
            "Pod",
            json!({"spec": {"tolerations": [{"key": "a"}], "args": ["x"]}}),
            json!({"spec": {"tolerations": [{"key": "b"}]}}),
        );
        assert_eq!(d["spec"]["tolerations"], json!([{"key": "b"}]));
        assert_eq!(d["spec"]["args"], json!(["x"]));
    }

    #[test]
    fn service_ports_by_port_and_owner_refs_by_uid() {
        let d = smp(
            "Service",
            json!({"spec": {"ports": [{"port": 80, "name": "http"}]},
                   "metadata": {"ownerReferences": [{"uid": "u1", "name": "a"}]}}),
            json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]},
                   "metadata": {"ownerReferences": [{"uid": "u2", "name": "b"}]}}),
        );
        assert_eq!(
            d["spec"]["ports"],
            json!([{"port": 80, "name": "http", "targetPort": 8080}, {"port": 443}])
        );
        assert_eq!(d["metadata"]["ownerReferences"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn errors() {
        let mut d = json!({});
        assert!(matches!(
            strategic_merge("Pod", &mut d, &json!([1])),
            Err(PatchError::BadRequest(_))
        ));
        assert!(matches!(
            strategic_merge("Pod", &mut d, &json!({"spec": {"containers": [{"image": "x"}]}})),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            strategic_merge("Pod", &mut d, &json!({"spec": {"$patch": "bogus"}})),
            Err(PatchError::BadRequest(_))
        ));
    }

    #[test]
    fn new_subtrees_lose_nulls_and_directives() {
        let d = smp(
            "Pod",
            json!({}),
            json!({"spec": {"a": null, "b": {"$patch": "merge", "c": 1}}}),
        );
        assert_eq!(d, json!({"spec": {"b": {"c": 1}}}));
    }
}
