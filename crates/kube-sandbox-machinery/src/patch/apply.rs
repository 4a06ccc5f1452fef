//! Server-side apply (`application/apply-patch+yaml`) and the `managedFields` bookkeeping of
//! ordinary writes, following the Kubernetes server-side apply documentation:
//!
//! - The applied configuration is a partial object. The result is the current object with every
//!   applied field set (maps merge, keyed lists merge per key, set lists merge as unions, other
//!   lists and scalars are replaced).
//! - Fields the same manager applied before but omits now are removed, unless another manager
//!   also owns them.
//! - Setting a field another manager owns to a different value is a conflict (409) listing
//!   `conflict with "manager": .path` per field, unless `force` is set, in which case the field
//!   changes owner. Setting it to the same value makes the ownership shared.
//! - Ownership lives in `metadata.managedFields` entries
//!   `{manager, operation: Apply|Update, apiVersion, time, fieldsType: FieldsV1, fieldsV1}`.
//!   Entries are identified by (manager, operation, subresource), and for `Update` also by
//!   apiVersion, like the real server.
//! - An apply body carrying `metadata.managedFields` is refused (400
//!   `metadata.managedFields must be nil`), as the real server does.
//!
//! [`record_update`] gives non-apply writes (create, update, patch) an `Update` entry owning the
//! fields they changed, taking them away from other managers, so later applies see conflicts.

use serde_json::{Map, Value};

use super::fieldset::{
    FieldSet, Path, atomic_map_at, display_path, get_at, ignored, item_key, remove_at, set_of_applied,
    set_of_changes, well_keyed,
};
use super::strategy::{ListStrategy, list_strategy};
use super::{ApplyOptions, PatchError};

/// One `managedFields` entry, decoded.
#[derive(Debug, Clone)]
struct Entry {
    /// Unknown fields of the original entry, kept as they were.
    raw: Map<String, Value>,
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
    set: FieldSet,
    /// Changed by this write: gets a new `time`.
    touched: bool,
}

fn text(m: &Map<String, Value>, k: &str) -> String {
    m.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

fn read_entries(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj.pointer("/metadata/managedFields").and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(Value::as_object)
        .map(|m| Entry {
            raw: m.clone(),
            manager: text(m, "manager"),
            operation: text(m, "operation"),
            api_version: text(m, "apiVersion"),
            subresource: text(m, "subresource"),
            set: m
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
            touched: false,
        })
        .collect()
}

fn now_rfc3339() -> String {
    let now = jiff::Timestamp::now();
    jiff::Timestamp::from_second(now.as_second())
        .unwrap_or(now)
        .to_string()
}

fn write_entries(obj: &mut Value, entries: Vec<Entry>) {
    let now = now_rfc3339();
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.set.is_empty())
        .map(|e| {
            let mut m = e.raw;
            m.insert("manager".into(), e.manager.into());
            m.insert("operation".into(), e.operation.into());
            if !e.api_version.is_empty() {
                m.insert("apiVersion".into(), e.api_version.into());
            }
            if e.touched || !m.contains_key("time") {
                m.insert("time".into(), now.clone().into());
            }
            if !e.subresource.is_empty() {
                m.insert("subresource".into(), e.subresource.into());
            }
            m.insert("fieldsType".into(), "FieldsV1".into());
            m.insert("fieldsV1".into(), e.set.to_fields_v1());
            Value::Object(m)
        })
        .collect();
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// How the real server names a manager in a conflict message.
fn describe(e: &Entry) -> String {
    let mut s = format!("{:?}", e.manager);
    if !e.subresource.is_empty() {
        s.push_str(&format!(" with subresource {:?}", e.subresource));
    }
    if e.operation == "Update" {
        s.push_str(&format!(" using {}", e.api_version));
        if let Some(t) = e.raw.get("time").and_then(Value::as_str) {
            s.push_str(&format!(" at {t}"));
        }
    }
    s
}

/// Drops owned paths that no longer exist in `obj`.
fn prune_missing(set: &mut FieldSet, obj: &Value) {
    for p in set.paths() {
        if get_at(obj, &p).is_none() {
            set.remove(&p);
        }
    }
}

/// True when some strict prefix of `path` is an owned leaf of `set` whose applied value is not a
/// map (the old path is then covered by the new atomic value).
fn covered(set: &FieldSet, applied: &Value, path: &[String]) -> bool {
    (1..path.len()).any(|n| {
        let prefix = &path[..n];
        set.contains(prefix) && !get_at(applied, prefix).is_some_and(Value::is_object)
    })
}

/// True when `path` ends in a key field of a keyed item (`...k:{"name":"a"}.f:name`).
fn is_key_field(path: &[String]) -> bool {
    let [.., item, field] = path else {
        return false;
    };
    let (Some(key), Some(f)) = (item.strip_prefix("k:"), field.strip_prefix("f:")) else {
        return false;
    };
    serde_json::from_str::<Value>(key)
        .ok()
        .and_then(|k| k.as_object().map(|m| m.contains_key(f)))
        .unwrap_or(false)
}

/// True when `set` owns `path` or anything below it.
fn owns_under(set: &FieldSet, path: &[String]) -> bool {
    set.paths().iter().any(|p| p.starts_with(path))
}

/// Checks that keyed lists of the applied configuration have their keys, like the real server.
fn validate_applied(kind: &str, v: &Value, path: &mut Vec<String>) -> Result<(), PatchError> {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                path.push(k.clone());
                validate_applied(kind, c, path)?;
                path.pop();
            }
        }
        Value::Array(list) => {
            let names: Vec<&str> = path.iter().map(String::as_str).collect();
            if let ListStrategy::Keyed(key) = list_strategy(kind, &names)
                && !well_keyed(list, key)
            {
                return Err(PatchError::BadRequest(format!(
                    ".{}: associative list with key {key:?} has an element without the key \
                     or a duplicate key",
                    path.join(".")
                )));
            }
            path.push("[]".into());
            for e in list {
                validate_applied(kind, e, path)?;
            }
            path.pop();
        }
        _ => {}
    }
    Ok(())
}

/// Removes `null`s from maps (recursively), for values inserted as a whole.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, c)| !c.is_null())
                .map(|(k, c)| (k.clone(), without_nulls(c)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        v => v.clone(),
    }
}

/// Merges an applied configuration into `cur`.
fn ssa_merge(kind: &str, cur: &mut Value, applied: &Value, path: &mut Path) {
    match applied {
        Value::Object(_) if atomic_map_at(kind, path) => *cur = without_nulls(applied),
        Value::Object(m) => {
            if !cur.is_object() {
                *cur = Value::Object(Map::new());
            }
            for (k, v) in m {
                if ignored(path, k) && !(path.is_empty() && (k == "apiVersion" || k == "kind")) {
                    continue;
                }
                let Some(obj) = cur.as_object_mut() else {
                    return;
                };
                if v.is_null() {
                    obj.remove(k);
                    continue;
                }
                path.push(format!("f:{k}"));
                ssa_merge(kind, obj.entry(k.clone()).or_insert(Value::Null), v, path);
                path.pop();
            }
        }
        Value::Array(list) => {
            let names: Vec<&str> = path
                .iter()
                .map(|s| s.strip_prefix("f:").unwrap_or("[]"))
                .collect();
            match list_strategy(kind, &names) {
                ListStrategy::Keyed(key) if well_keyed(list, key) => {
                    if !cur.is_array() {
                        *cur = Value::Array(Vec::new());
                    }
                    let Some(items) = cur.as_array_mut() else {
                        return;
                    };
                    for e in list {
                        let k = item_key(key, e);
                        match items.iter().position(|x| item_key(key, x) == k) {
                            Some(i) => {
                                path.push("[]".into());
                                ssa_merge(kind, &mut items[i], e, path);
                                path.pop();
                            }
                            None => items.push(without_nulls(e)),
                        }
                    }
                }
                ListStrategy::Set => {
                    if !cur.is_array() {
                        *cur = Value::Array(Vec::new());
                    }
                    if let Some(items) = cur.as_array_mut() {
                        for e in list {
                            if !items.contains(e) {
                                items.push(e.clone());
                            }
                        }
                    }
                }
                _ => *cur = without_nulls(applied),
            }
        }
        v => *cur = v.clone(),
    }
}

/// Parses an apply body (YAML or JSON).
fn parse_body(body: &[u8]) -> Result<Value, PatchError> {
    let v: Value = serde_yaml::from_slice(body)
        .map_err(|e| PatchError::BadRequest(format!("error decoding YAML: {e}")))?;
    if !v.is_object() {
        return Err(PatchError::BadRequest(
            "apply patch body must be an object".into(),
        ));
    }
    Ok(v)
}

/// Server-side apply of `body` onto `current`.
pub(super) fn server_side_apply(
    current: &Value,
    body: &[u8],
    opts: &ApplyOptions<'_>,
    subresource: &str,
) -> Result<Value, PatchError> {
    let applied = parse_body(body)?;
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(PatchError::BadRequest(
            "metadata.managedFields must be nil".into(),
        ));
    }
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| PatchError::BadRequest("apiVersion must be set in the applied object".into()))?
        .to_string();
    let kind = applied
        .get("kind")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| PatchError::BadRequest("kind must be set in the applied object".into()))?
        .to_string();
    if let Some(cur_kind) = current.get("kind").and_then(Value::as_str)
        && !cur_kind.is_empty()
        && cur_kind != kind
    {
        return Err(PatchError::BadRequest(format!(
            "the applied object's kind {kind:?} does not match the object's kind {cur_kind:?}"
        )));
    }
    validate_applied(&kind, &applied, &mut Vec::new())?;

    let mut entries = read_entries(current);
    let me = entries.iter().position(|e| {
        e.manager == opts.field_manager && e.operation == "Apply" && e.subresource == subresource
    });
    let new_set = set_of_applied(&kind, &applied);

    // Conflicts: fields we set to a new value that another manager owns.
    let mut conflicts = Vec::new();
    let mut lost: Vec<(usize, Path)> = Vec::new();
    for path in new_set.paths() {
        if path
            .last()
            .is_some_and(|s| s.starts_with("k:") || s.starts_with("v:"))
        {
            continue;
        }
        let Some(cur_val) = get_at(current, &path) else {
            continue;
        };
        if get_at(&applied, &path) == Some(cur_val) {
            continue;
        }
        for (i, e) in entries.iter().enumerate() {
            if Some(i) != me && e.set.contains(&path) {
                conflicts.push(format!("conflict with {}: {}", describe(e), display_path(&path)));
                lost.push((i, path.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !opts.force {
        return Err(PatchError::Conflict { conflicts });
    }
    for (i, p) in &lost {
        entries[*i].set.remove(p);
    }

    // Remove what this manager applied before and no longer applies (if nobody else owns it).
    let mut obj = current.clone();
    if let Some(i) = me {
        let mut stale: Vec<Path> = entries[i]
            .set
            .paths()
            .into_iter()
            .filter(|p| !new_set.contains(p) && !covered(&new_set, &applied, p))
            .filter(|p| {
                !entries
                    .iter()
                    .enumerate()
                    .any(|(j, e)| j != i && owns_under(&e.set, p))
            })
            .collect();
        // Parents first; what lies under a removed node goes with it. Key fields of keyed
        // items are never removed on their own (the item would lose its identity).
        stale.sort_by_key(Vec::len);
        let mut removed: Vec<Path> = Vec::new();
        for p in stale {
            if removed.iter().any(|r| p.starts_with(r)) || is_key_field(&p) {
                continue;
            }
            remove_at(&mut obj, &p);
            removed.push(p);
        }
    }

    ssa_merge(&kind, &mut obj, &applied, &mut Vec::new());

    match me {
        Some(i) => {
            let e = &mut entries[i];
            e.set = new_set;
            e.api_version = api_version;
            e.touched = true;
        }
        None => entries.push(Entry {
            raw: Map::new(),
            manager: opts.field_manager.to_string(),
            operation: "Apply".into(),
            api_version,
            subresource: subresource.to_string(),
            set: new_set,
            touched: true,
        }),
    }
    for e in &mut entries {
        prune_missing(&mut e.set, &obj);
    }
    write_entries(&mut obj, entries);
    Ok(obj)
}

/// Records an `Update` entry for `manager` owning the fields a non-apply write changed between
/// `old` (`{}`/null for a create) and `new`, taking them from other managers; writes the result
/// into `new.metadata.managedFields`.
///
/// A client that sends its own non-empty `managedFields` (different from the stored ones) resets
/// the tracking to what it sent, as with the real server.
pub fn record_update(old: &Value, new: &mut Value, manager: &str, api_version: &str) {
    record_update_subresource(old, new, manager, api_version, None);
}

/// [`record_update`] for a write through a subresource (e.g. `status`): the entry carries
/// `subresource`.
pub fn record_update_subresource(
    old: &Value,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    subresource: Option<&str>,
) {
    let kind = new
        .get("kind")
        .or_else(|| old.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let old_mf = old.pointer("/metadata/managedFields");
    let new_mf = new.pointer("/metadata/managedFields");
    let client_reset = new_mf.and_then(Value::as_array).is_some_and(|l| !l.is_empty()) && new_mf != old_mf;
    let mut entries = if client_reset {
        read_entries(new)
            .into_iter()
            .filter(|e| !e.manager.is_empty() || !e.set.is_empty())
            .collect()
    } else {
        read_entries(old)
    };
    let empty = Value::Object(Map::new());
    let old_for_diff = if old.is_object() { old } else { &empty };
    let changes = set_of_changes(&kind, Some(old_for_diff), new);
    let sub = subresource.unwrap_or("");
    if !changes.is_empty() {
        let paths = changes.paths();
        let mine = |e: &Entry| {
            e.manager == manager
                && e.operation == "Update"
                && e.api_version == api_version
                && e.subresource == sub
        };
        for e in entries.iter_mut().filter(|e| !mine(e)) {
            for p in &paths {
                e.set.remove(p);
            }
        }
        match entries.iter_mut().find(|e| mine(e)) {
            Some(e) => {
                e.set.union_with(&changes);
                e.touched = true;
            }
            None => entries.push(Entry {
                raw: Map::new(),
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                subresource: sub.to_string(),
                set: changes,
                touched: true,
            }),
        }
    }
    for e in &mut entries {
        prune_missing(&mut e.set, new);
    }
    write_entries(new, entries);
}
