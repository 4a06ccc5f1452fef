//! Field sets for `managedFields`: a tree of owned paths with the real `FieldsV1` encoding
//! (`f:<name>` for a map field, `k:{"name":"x"}` for a keyed list item, `v:"value"` for a set
//! item, `.` for "the node itself" when the node also has owned children), and the walks that
//! compute which fields an applied configuration or an update touches.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::strategy::{ListStrategy, list_strategy, map_is_atomic};

/// A set of owned field paths. A path is a list of encoded segments (`f:spec`, `k:{...}`, `v:..`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// The node itself is in the set.
    own: bool,
    children: BTreeMap<String, FieldSet>,
}

/// An owned path: encoded segments from the root.
pub type Path = Vec<String>;

impl FieldSet {
    /// Decodes a `fieldsV1` object (lenient: anything not an object is an empty set).
    pub fn from_fields_v1(v: &Value) -> Self {
        let mut set = FieldSet::default();
        if let Value::Object(m) = v {
            for (k, child) in m {
                if k == "." {
                    set.own = true;
                    continue;
                }
                let mut c = FieldSet::from_fields_v1(child);
                if child.as_object().is_some_and(Map::is_empty) {
                    c.own = true;
                }
                if c.own || !c.children.is_empty() {
                    set.children.insert(k.clone(), c);
                }
            }
        }
        set
    }

    /// Encodes as a `fieldsV1` object.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.own && !self.children.is_empty() {
            m.insert(".".into(), Value::Object(Map::new()));
        }
        for (k, c) in &self.children {
            m.insert(k.clone(), c.to_fields_v1());
        }
        Value::Object(m)
    }

    /// True when nothing is owned.
    pub fn is_empty(&self) -> bool {
        !self.own && self.children.is_empty()
    }

    /// Adds a path.
    pub fn insert(&mut self, path: &[String]) {
        let mut cur = self;
        for seg in path {
            cur = cur.children.entry(seg.clone()).or_default();
        }
        cur.own = true;
    }

    /// True when the path itself is owned.
    pub fn contains(&self, path: &[String]) -> bool {
        let mut cur = self;
        for seg in path {
            match cur.children.get(seg) {
                Some(c) => cur = c,
                None => return false,
            }
        }
        cur.own
    }

    /// Removes a path (its descendants stay); prunes emptied nodes.
    pub fn remove(&mut self, path: &[String]) {
        fn rec(node: &mut FieldSet, path: &[String]) {
            match path.split_first() {
                None => node.own = false,
                Some((seg, rest)) => {
                    if let Some(c) = node.children.get_mut(seg) {
                        rec(c, rest);
                        if c.is_empty() {
                            node.children.remove(seg);
                        }
                    }
                }
            }
        }
        rec(self, path);
    }

    /// Every owned path, parents before children.
    pub fn paths(&self) -> Vec<Path> {
        fn rec(node: &FieldSet, prefix: &mut Path, out: &mut Vec<Path>) {
            if node.own {
                out.push(prefix.clone());
            }
            for (k, c) in &node.children {
                prefix.push(k.clone());
                rec(c, prefix, out);
                prefix.pop();
            }
        }
        let mut out = Vec::new();
        rec(self, &mut Vec::new(), &mut out);
        out
    }

    /// Adds every path of `other`.
    pub fn union_with(&mut self, other: &FieldSet) {
        self.own |= other.own;
        for (k, c) in &other.children {
            self.children.entry(k.clone()).or_default().union_with(c);
        }
    }
}

/// The strategy-table name of an encoded path (`f:x` → `x`, items → `[]`).
fn plain(path: &[String]) -> Vec<&str> {
    path.iter()
        .map(|s| s.strip_prefix("f:").unwrap_or("[]"))
        .collect()
}

fn strategy_at(kind: &str, path: &[String]) -> ListStrategy {
    list_strategy(kind, &plain(path))
}

/// True when the map at `path` is atomic for server-side apply (see [`map_is_atomic`]).
pub fn atomic_map_at(kind: &str, path: &[String]) -> bool {
    map_is_atomic(kind, &plain(path))
}

/// The identity of a keyed list item under server-side apply: its merge key, plus `protocol`
/// (defaulting to `TCP`) for Service `port`s and container `containerPort`s, like the real
/// server's list-map keys (so `53/TCP` and `53/UDP` are two items). `None` when the key is missing.
pub fn item_key(key: &str, item: &Value) -> Option<Map<String, Value>> {
    let mut m = Map::new();
    m.insert(key.into(), item.get(key).filter(|v| !v.is_null())?.clone());
    if matches!(key, "port" | "containerPort") {
        let proto = item.get("protocol").filter(|v| !v.is_null()).cloned();
        m.insert("protocol".into(), proto.unwrap_or_else(|| "TCP".into()));
    }
    Some(m)
}

/// The `k:` segment of a keyed item (see [`item_key`]).
pub fn key_segment(key: &Map<String, Value>) -> String {
    format!("k:{}", Value::Object(key.clone()))
}

/// The `v:` segment of a set item.
pub fn value_segment(value: &Value) -> String {
    format!("v:{value}")
}

/// Metadata fields the server manages itself; never part of anyone's field set.
const SYSTEM_METADATA: &[&str] = &[
    "name",
    "namespace",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// True when `key` under `path` is never tracked (apiVersion, kind, system metadata).
pub(super) fn ignored(path: &[String], key: &str) -> bool {
    match path {
        [] => matches!(key, "apiVersion" | "kind"),
        [m] if m == "f:metadata" => SYSTEM_METADATA.contains(&key),
        _ => false,
    }
}

/// True when every element of `list` has a distinct [`item_key`] for `key`.
pub fn well_keyed(list: &[Value], key: &str) -> bool {
    let mut seen = Vec::new();
    for e in list {
        match item_key(key, e) {
            Some(k) => {
                if seen.contains(&k) {
                    return false;
                }
                seen.push(k);
            }
            None => return false,
        }
    }
    true
}

/// The field set of an applied configuration: its leaves (scalars, atomic lists, empty maps),
/// keyed list items themselves plus their fields, and set items.
pub fn set_of_applied(kind: &str, v: &Value) -> FieldSet {
    let mut set = FieldSet::default();
    walk_applied(kind, v, &mut Vec::new(), &mut set);
    set
}

fn walk_applied(kind: &str, v: &Value, path: &mut Path, set: &mut FieldSet) {
    match v {
        Value::Object(m) if (!m.is_empty() || path.is_empty()) && !atomic_map_at(kind, path) => {
            for (k, c) in m {
                if ignored(path, k) || c.is_null() {
                    continue;
                }
                path.push(format!("f:{k}"));
                walk_applied(kind, c, path, set);
                path.pop();
            }
        }
        Value::Array(list) => match strategy_at(kind, path) {
            ListStrategy::Keyed(key) if !list.is_empty() && well_keyed(list, key) => {
                for e in list {
                    let Some(k) = item_key(key, e) else { continue };
                    path.push(key_segment(&k));
                    set.insert(path);
                    walk_applied(kind, e, path, set);
                    path.pop();
                }
            }
            ListStrategy::Set if !list.is_empty() => {
                for e in list {
                    path.push(value_segment(e));
                    set.insert(path);
                    path.pop();
                }
            }
            _ => set.insert(path),
        },
        _ => set.insert(path),
    }
}

/// The fields `new` sets that `old` did not have with the same value (an update's ownership).
/// New maps and keyed items are owned as nodes (`.`), like the real server records.
pub fn set_of_changes(kind: &str, old: Option<&Value>, new: &Value) -> FieldSet {
    let mut set = FieldSet::default();
    walk_changes(kind, old, new, &mut Vec::new(), &mut set);
    set
}

fn walk_changes(kind: &str, old: Option<&Value>, new: &Value, path: &mut Path, set: &mut FieldSet) {
    if old == Some(new) {
        return;
    }
    match new {
        Value::Object(_) if atomic_map_at(kind, path) => set.insert(path),
        Value::Object(m) => {
            let old_map = old.and_then(Value::as_object);
            // A map created by this write is owned as a node, except the top-level structs
            // typed objects always have (`metadata`, `spec`, `status`).
            let always_there =
                path.len() == 1 && matches!(path[0].as_str(), "f:metadata" | "f:spec" | "f:status");
            if old_map.is_none() && !path.is_empty() && !always_there {
                set.insert(path);
            }
            if m.is_empty() && path.len() == 1 {
                set.insert(path);
            }
            for (k, c) in m {
                if ignored(path, k) || c.is_null() {
                    continue;
                }
                path.push(format!("f:{k}"));
                walk_changes(kind, old_map.and_then(|o| o.get(k)), c, path, set);
                path.pop();
            }
        }
        Value::Array(list) => match strategy_at(kind, path) {
            ListStrategy::Keyed(key) if well_keyed(list, key) => {
                let old_list = old.and_then(Value::as_array);
                if old_list.is_none() {
                    set.insert(path);
                }
                for e in list {
                    let Some(k) = item_key(key, e) else { continue };
                    let old_item =
                        old_list.and_then(|l| l.iter().find(|x| item_key(key, x).as_ref() == Some(&k)));
                    path.push(key_segment(&k));
                    if old_item.is_none() {
                        set.insert(path);
                    }
                    walk_changes(kind, old_item, e, path, set);
                    path.pop();
                }
            }
            ListStrategy::Set => {
                let old_list = old.and_then(Value::as_array);
                if old_list.is_none() {
                    set.insert(path);
                }
                for e in list {
                    if !old_list.is_some_and(|l| l.contains(e)) {
                        path.push(value_segment(e));
                        set.insert(path);
                        path.pop();
                    }
                }
            }
            _ => set.insert(path),
        },
        _ => set.insert(path),
    }
}

/// Parses a `k:{...}` segment into its key fields.
fn parse_key(seg: &str) -> Option<Map<String, Value>> {
    serde_json::from_str::<Value>(seg.strip_prefix("k:")?)
        .ok()?
        .as_object()
        .cloned()
}

fn item_matches(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| match item.get(k) {
        Some(x) => x == v,
        // `protocol` defaults to TCP (see `item_key`).
        None => k == "protocol" && v == "TCP",
    })
}

fn value_of_segment(seg: &str) -> Option<Value> {
    serde_json::from_str(seg.strip_prefix("v:")?).ok()
}

/// The value at an encoded path, if present.
pub fn get_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for seg in path {
        cur = step(cur, seg)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, seg: &str) -> Option<&'a Value> {
    if let Some(f) = seg.strip_prefix("f:") {
        cur.get(f)
    } else if seg.starts_with("k:") {
        let key = parse_key(seg)?;
        cur.as_array()?.iter().find(|e| item_matches(e, &key))
    } else if seg.starts_with("v:") {
        let v = value_of_segment(seg)?;
        cur.as_array()?.iter().find(|e| **e == v)
    } else {
        None
    }
}

/// Removes the value at an encoded path (a field, a keyed item, a set item); then removes maps
/// that became empty, except top-level ones (`spec`, `metadata`...). Returns whether anything
/// was removed.
pub fn remove_at(obj: &mut Value, path: &[String]) -> bool {
    fn rec(cur: &mut Value, path: &[String], depth: usize) -> bool {
        let Some((seg, rest)) = path.split_first() else {
            return false;
        };
        if rest.is_empty() {
            return remove_child(cur, seg);
        }
        let (removed, prune) = match child_mut(cur, seg) {
            Some(c) => {
                let r = rec(c, rest, depth + 1);
                (r, r && c.as_object().is_some_and(Map::is_empty) && depth >= 1)
            }
            None => return false,
        };
        if prune {
            remove_child(cur, seg);
        }
        removed
    }
    rec(obj, path, 0)
}

fn child_mut<'a>(cur: &'a mut Value, seg: &str) -> Option<&'a mut Value> {
    if let Some(f) = seg.strip_prefix("f:") {
        cur.get_mut(f)
    } else if seg.starts_with("k:") {
        let key = parse_key(seg)?;
        cur.as_array_mut()?.iter_mut().find(|e| item_matches(e, &key))
    } else if seg.starts_with("v:") {
        let v = value_of_segment(seg)?;
        cur.as_array_mut()?.iter_mut().find(|e| **e == v)
    } else {
        None
    }
}

fn remove_child(cur: &mut Value, seg: &str) -> bool {
    if let Some(f) = seg.strip_prefix("f:") {
        cur.as_object_mut().is_some_and(|m| m.remove(f).is_some())
    } else if seg.starts_with("k:") {
        let (Some(key), Some(list)) = (parse_key(seg), cur.as_array_mut()) else {
            return false;
        };
        let n = list.len();
        list.retain(|e| !item_matches(e, &key));
        list.len() != n
    } else if seg.starts_with("v:") {
        let (Some(v), Some(list)) = (value_of_segment(seg), cur.as_array_mut()) else {
            return false;
        };
        let n = list.len();
        list.retain(|e| *e != v);
        list.len() != n
    } else {
        false
    }
}

/// A path as the real server prints it in conflicts: `.spec.containers[name="a"].image`,
/// `.metadata.finalizers[="x"]`.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for seg in path {
        if let Some(f) = seg.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(key) = parse_key(seg) {
            let inner: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", inner.join(",")));
        } else if let Some(v) = seg.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        } else {
            out.push_str(seg);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(segs: &[&str]) -> Path {
        segs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fields_v1_roundtrip() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                       "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}}}});
        let s = FieldSet::from_fields_v1(&v);
        assert!(s.contains(&p(&["f:metadata", "f:labels"])));
        assert!(s.contains(&p(&["f:metadata", "f:labels", "f:app"])));
        assert!(!s.contains(&p(&["f:metadata"])));
        assert!(s.contains(&p(&["f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"])));
        assert_eq!(s.to_fields_v1(), v);
    }

    #[test]
    fn applied_set_encoding() {
        let cfg = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"app": "x"}, "finalizers": ["f1"]},
            "spec": {"containers": [{"name": "a", "image": "i", "ports": [{"containerPort": 80}]}],
                     "tolerations": [{"key": "k"}]}});
        let s = set_of_applied("Pod", &cfg);
        assert_eq!(
            s.to_fields_v1(),
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}, "f:finalizers": {"v:\"f1\"": {}}},
                "f:spec": {
                    "f:containers": {"k:{\"name\":\"a\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }},
                    "f:tolerations": {}
                }
            })
        );
    }

    #[test]
    fn change_sets() {
        let old = json!({"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"x": 1, "y": 2}});
        let new = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"},
                          "annotations": {"n": "v"}}, "spec": {"x": 1, "y": 3}});
        let s = set_of_changes("ConfigMap", Some(&old), &new);
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:b": {}}, "f:annotations": {".": {}, "f:n": {}}},
                   "f:spec": {"f:y": {}}})
        );
        let created = set_of_changes(
            "ConfigMap",
            None,
            &json!({"apiVersion": "v1", "data": {"k": "v"}}),
        );
        assert_eq!(created.to_fields_v1(), json!({"f:data": {".": {}, "f:k": {}}}));
    }

    #[test]
    fn get_and_remove() {
        let mut o = json!({"metadata": {"labels": {"a": "1"}, "finalizers": ["x", "y"]},
                           "spec": {"containers": [{"name": "a", "image": "i"}, {"name": "b"}]}});
        let img = p(&["f:spec", "f:containers", "k:{\"name\":\"a\"}", "f:image"]);
        assert_eq!(get_at(&o, &img), Some(&json!("i")));
        assert!(remove_at(&mut o, &p(&["f:metadata", "f:finalizers", "v:\"x\""])));
        assert_eq!(o["metadata"]["finalizers"], json!(["y"]));
        assert!(remove_at(
            &mut o,
            &p(&["f:spec", "f:containers", "k:{\"name\":\"b\"}"])
        ));
        assert_eq!(o["spec"]["containers"], json!([{"name": "a", "image": "i"}]));
        assert!(remove_at(&mut o, &p(&["f:metadata", "f:labels", "f:a"])));
        assert!(
            o["metadata"].get("labels").is_none(),
            "emptied labels map is pruned"
        );
        assert!(!remove_at(&mut o, &p(&["f:nope", "f:x"])));
        assert_eq!(display_path(&img), ".spec.containers[name=\"a\"].image");
        assert_eq!(
            display_path(&p(&["f:metadata", "f:finalizers", "v:\"x\""])),
            ".metadata.finalizers[=\"x\"]"
        );
    }

    #[test]
    fn set_ops() {
        let mut a = FieldSet::default();
        a.insert(&p(&["f:a", "f:b"]));
        let mut b = FieldSet::default();
        b.insert(&p(&["f:a"]));
        b.insert(&p(&["f:c"]));
        a.union_with(&b);
        assert_eq!(a.paths().len(), 3);
        a.remove(&p(&["f:a", "f:b"]));
        a.remove(&p(&["f:a"]));
        assert_eq!(a.paths(), vec![p(&["f:c"])]);
        a.remove(&p(&["f:c"]));
        assert!(a.is_empty());
    }
}
