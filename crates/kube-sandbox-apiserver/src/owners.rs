//! The garbage collector's index, kept by the store on every put and remove: every object by
//! uid, the dependents of every owner uid, the queue of uids whose ownership needs a look, and
//! the namespaces and CRDs being deleted — so that a lifecycle pass costs what changed, not the
//! size of the store (it used to scan every object under the store's lock on every write of an
//! owned object: a burst of pods was a burst of full scans).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use serde_json::Value;

use crate::{meta, registry::ResKey};

/// Where an object is: its resource, namespace and name.
pub type At = (ResKey, String, String);

fn is_namespaces(key: &ResKey) -> bool {
    key.0.is_empty() && key.1 == "namespaces"
}

fn is_crds(key: &ResKey) -> bool {
    key.0 == "apiextensions.k8s.io" && key.1 == "customresourcedefinitions"
}

/// See the module documentation. Memory: one entry per object (its uid and place) plus one per
/// owner reference.
#[derive(Debug, Default)]
pub struct OwnerIndex {
    by_uid: HashMap<String, At>,
    /// Owner uid → the uids of the objects whose ownerReferences name it (the owner may be gone:
    /// the entry lives as long as a dependent refers to it).
    dependents: HashMap<String, HashSet<String>>,
    queue: VecDeque<String>,
    queued: HashSet<String>,
    terminating_ns: BTreeSet<String>,
    deleting_crds: BTreeSet<String>,
}

impl OwnerIndex {
    fn enqueue(&mut self, uid: &str) {
        if !uid.is_empty() && self.queued.insert(uid.to_string()) {
            self.queue.push_back(uid.to_string());
        }
    }

    /// Records a put of `obj` (replacing `prev`); true when the lifecycle task has work.
    /// O(owner references of both).
    pub fn on_put(&mut self, key: &ResKey, prev: Option<&Value>, obj: &Value) -> bool {
        let uid = meta::uid_of(obj);
        if uid.is_empty() {
            return false;
        }
        let name = meta::name(obj);
        let prev_uid = prev.map(meta::uid_of).unwrap_or(uid);
        if prev_uid != uid {
            self.by_uid.remove(prev_uid);
        }
        self.by_uid.insert(
            uid.to_string(),
            (key.clone(), meta::namespace(obj).to_string(), name.to_string()),
        );
        let owners = meta::owner_uids(obj);
        let before = prev.map(meta::owner_uids).unwrap_or_default();
        for (o, _) in &before {
            if !owners.iter().any(|(n, _)| n == o) || prev_uid != uid {
                self.unlink(o, prev_uid);
            }
        }
        for (o, _) in &owners {
            self.dependents
                .entry(o.clone())
                .or_default()
                .insert(uid.to_string());
        }
        let deleting = meta::is_deleting(obj);
        if deleting {
            if is_namespaces(key) {
                self.terminating_ns.insert(name.to_string());
            } else if is_crds(key) {
                self.deleting_crds.insert(name.to_string());
            }
        }
        if !owners.is_empty() || deleting {
            self.enqueue(uid);
            return true;
        }
        false
    }

    fn unlink(&mut self, owner: &str, dependent: &str) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(dependent);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    /// Records the removal of `obj`: its dependents lost an owner and its owners a dependent,
    /// so both are looked at again. Always work for the lifecycle task. O(its owner references
    /// + its dependents).
    pub fn on_remove(&mut self, key: &ResKey, obj: &Value) {
        let uid = meta::uid_of(obj).to_string();
        if self
            .by_uid
            .get(&uid)
            .is_some_and(|(k, ns, n)| k == key && ns == meta::namespace(obj) && n == meta::name(obj))
        {
            self.by_uid.remove(&uid);
        }
        for (o, _) in meta::owner_uids(obj) {
            self.unlink(&o, &uid);
            self.enqueue(&o);
        }
        let deps: Vec<String> = self
            .dependents
            .get(&uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for d in deps {
            self.enqueue(&d);
        }
        if is_namespaces(key) {
            self.terminating_ns.remove(meta::name(obj));
        } else if is_crds(key) {
            self.deleting_crds.remove(meta::name(obj));
        }
    }

    /// Where the object with `uid` is, if it exists.
    pub fn at(&self, uid: &str) -> Option<&At> {
        self.by_uid.get(uid)
    }

    /// The uids of the objects that name `owner` among their owners.
    pub fn dependents_of(&self, owner: &str) -> Vec<String> {
        self.dependents
            .get(owner)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The next uid to look at.
    pub fn pop(&mut self) -> Option<String> {
        let uid = self.queue.pop_front()?;
        self.queued.remove(&uid);
        Some(uid)
    }

    /// Queues `uid` to be looked at again.
    pub fn requeue(&mut self, uid: &str) {
        self.enqueue(uid);
    }

    /// Whether a pass has anything to do.
    pub fn has_work(&self) -> bool {
        self.has_queued() || !self.terminating_ns.is_empty() || !self.deleting_crds.is_empty()
    }

    /// Whether uids wait to be looked at.
    pub fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Namespaces being deleted.
    pub fn terminating_namespaces(&self) -> Vec<String> {
        self.terminating_ns.iter().cloned().collect()
    }

    /// CustomResourceDefinitions being deleted (by name).
    pub fn deleting_crds(&self) -> Vec<String> {
        self.deleting_crds.iter().cloned().collect()
    }

    /// Number of objects indexed (for tests and memory accounting).
    pub fn len(&self) -> usize {
        self.by_uid.len()
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.by_uid.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(p: &str) -> ResKey {
        (String::new(), p.to_string())
    }

    fn obj(name: &str, uid: &str, owners: &[&str]) -> Value {
        let refs: Vec<Value> = owners.iter().map(|u| json!({"uid": u})).collect();
        let mut o = json!({"metadata": {"name": name, "namespace": "ns", "uid": uid}});
        if !refs.is_empty() {
            o["metadata"]["ownerReferences"] = json!(refs);
        }
        o
    }

    fn drain(ix: &mut OwnerIndex) -> Vec<String> {
        std::iter::from_fn(|| ix.pop()).collect()
    }

    #[test]
    fn owned_objects_are_queued_and_indexed_by_owner() {
        let mut ix = OwnerIndex::default();
        assert!(!ix.on_put(&key("pods"), None, &obj("owner", "o1", &[])));
        assert!(ix.on_put(&key("pods"), None, &obj("dep", "d1", &["o1"])));
        assert_eq!(ix.dependents_of("o1"), vec!["d1".to_string()]);
        assert_eq!(drain(&mut ix), vec!["d1".to_string()]);
        // Changing owners moves the dependent between the owners' sets.
        let prev = obj("dep", "d1", &["o1"]);
        ix.on_put(&key("pods"), Some(&prev), &obj("dep", "d1", &["o2"]));
        assert!(ix.dependents_of("o1").is_empty());
        assert_eq!(ix.dependents_of("o2"), vec!["d1".to_string()]);
    }

    #[test]
    fn removing_an_owner_queues_its_dependents_once() {
        let mut ix = OwnerIndex::default();
        let owner = obj("owner", "o1", &[]);
        ix.on_put(&key("pods"), None, &owner);
        ix.on_put(&key("pods"), None, &obj("a", "d1", &["o1"]));
        ix.on_put(&key("pods"), None, &obj("b", "d2", &["o1"]));
        ix.on_put(&key("pods"), None, &obj("b", "d2", &["o1"]));
        assert_eq!(drain(&mut ix).len(), 2);
        ix.on_remove(&key("pods"), &owner);
        assert!(ix.at("o1").is_none());
        let mut q = drain(&mut ix);
        q.sort();
        assert_eq!(q, vec!["d1".to_string(), "d2".to_string()]);
        // Removing a dependent looks at its owner again (a foreground deletion may be done).
        ix.on_remove(&key("pods"), &obj("a", "d1", &["o1"]));
        assert_eq!(drain(&mut ix), vec!["o1".to_string()]);
        assert_eq!(ix.dependents_of("o1"), vec!["d2".to_string()]);
    }

    #[test]
    fn terminating_namespaces_and_crds_are_tracked_until_removed() {
        let mut ix = OwnerIndex::default();
        let ns = json!({"metadata": {"name": "n", "uid": "u", "deletionTimestamp": "x"}});
        assert!(ix.on_put(&key("namespaces"), None, &ns));
        assert_eq!(ix.terminating_namespaces(), vec!["n".to_string()]);
        drain(&mut ix);
        assert!(ix.has_work());
        ix.on_remove(&key("namespaces"), &ns);
        drain(&mut ix);
        assert!(!ix.has_work());
    }
}
