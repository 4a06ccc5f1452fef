//! The in-memory object store: objects per resource in `(namespace, name)` order, one monotonic
//! resourceVersion counter, the bounded watch-history ring and the fan-out of committed events
//! by topic ([`crate::topics`]; each event serialized once, shared by every watcher).

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::{
    defaults::Allocs,
    meta,
    registry::ResKey,
    topics::{Topic, Topics},
};

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug)]
pub struct WatchEvent {
    /// The resourceVersion it produced.
    pub rv: u64,
    /// Which resource.
    pub key: ResKey,
    /// Type.
    pub etype: EventType,
    /// The object after the change (for DELETED: the last state, with the deletion's RV).
    pub object: Arc<Value>,
    /// The object before the change (MODIFIED only).
    pub prev: Option<Arc<Value>>,
    /// `{"type":..,"object":..}\n`, serialized once.
    pub line: Bytes,
}

/// Serializes a watch event line.
pub fn event_line(etype: &str, object: &Value) -> Bytes {
    let mut v = Vec::with_capacity(256);
    v.extend_from_slice(b"{\"type\":\"");
    v.extend_from_slice(etype.as_bytes());
    v.extend_from_slice(b"\",\"object\":");
    // Serializing a Value cannot fail.
    let _ = serde_json::to_writer(&mut v, object);
    v.extend_from_slice(b"}\n");
    Bytes::from(v)
}

type Objects = BTreeMap<(String, String), Arc<Value>>;

/// State guarded by the store lock.
#[derive(Debug)]
pub struct Inner {
    rv: u64,
    data: HashMap<ResKey, Objects>,
    history: VecDeque<Arc<WatchEvent>>,
    history_cap: usize,
    /// Every event with rv > history_start is in `history`.
    history_start: u64,
    pending: Vec<Arc<WatchEvent>>,
    /// ClusterIP and NodePort allocations (changed together with Services).
    pub allocs: Allocs,
    /// Set when something the lifecycle task cares about changed (an object with owners or a
    /// deletionTimestamp was written, or an object was removed).
    pub lifecycle_dirty: bool,
    /// What the lifecycle task looks at: objects by uid, dependents by owner, what changed.
    pub owners: crate::owners::OwnerIndex,
    /// The log every committed change is appended to (`--data-dir`).
    wal: Option<crate::persist::Wal>,
    /// The watchers' channels.
    topics: Topics,
}

impl Inner {
    /// The current resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }
    /// The oldest resourceVersion a watch can start from.
    pub fn history_start(&self) -> u64 {
        self.history_start
    }
    /// One object.
    pub fn get(&self, key: &ResKey, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.data.get(key)?.get(&(ns.to_string(), name.to_string()))
    }
    /// Objects of a resource, in `(namespace, name)` order, optionally in one namespace.
    pub fn list<'a>(
        &'a self,
        key: &ResKey,
        ns: Option<&'a str>,
    ) -> Box<dyn Iterator<Item = &'a Arc<Value>> + 'a> {
        let Some(objs) = self.data.get(key) else {
            return Box::new(std::iter::empty());
        };
        match ns {
            Some(ns) => Box::new(
                objs.range((ns.to_string(), String::new())..)
                    .take_while(move |((n, _), _)| n == ns)
                    .map(|(_, v)| v),
            ),
            None => Box::new(objs.values()),
        }
    }
    /// Objects after `(ns, name)` (exclusive), for pagination.
    pub fn list_after<'a>(
        &'a self,
        key: &ResKey,
        ns: Option<&'a str>,
        after: (String, String),
    ) -> Box<dyn Iterator<Item = &'a Arc<Value>> + 'a> {
        let Some(objs) = self.data.get(key) else {
            return Box::new(std::iter::empty());
        };
        let it = objs
            .range((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded))
            .filter(move |((n, _), _)| ns.is_none_or(|ns| ns == n))
            .map(|(_, v)| v);
        Box::new(it)
    }
    /// Keys of every resource with objects.
    pub fn keys(&self) -> Vec<ResKey> {
        self.data.keys().cloned().collect()
    }
    /// Every object with its resource.
    fn all_objects(&self) -> impl Iterator<Item = (&ResKey, &Value)> {
        self.data
            .iter()
            .flat_map(|(k, objs)| objs.values().map(move |o| (k, o.as_ref())))
    }

    /// Folds the log into a snapshot (under the lock: writes wait for it, rarely).
    fn compact(&mut self) {
        let Some(mut wal) = self.wal.take() else { return };
        let started = std::time::Instant::now();
        match wal.compact(self.rv, self.all_objects()) {
            Ok(()) => tracing::info!(
                rv = self.rv,
                ms = started.elapsed().as_millis() as u64,
                "data dir compacted"
            ),
            Err(e) => tracing::error!(error = %e, "compacting the data dir failed"),
        }
        self.wal = Some(wal);
    }

    /// Number of objects of a resource.
    pub fn count(&self, key: &ResKey) -> usize {
        self.data.get(key).map_or(0, |m| m.len())
    }

    fn record(&mut self, ev: WatchEvent) {
        let ev = Arc::new(ev);
        self.history.push_back(ev.clone());
        while self.history.len() > self.history_cap {
            if let Some(old) = self.history.pop_front() {
                self.history_start = old.rv;
            }
        }
        self.pending.push(ev);
    }

    /// Stores `obj` (create or replace), assigning the next resourceVersion.
    pub fn put(&mut self, key: &ResKey, mut obj: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        meta::metadata_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let ns = meta::namespace(&obj).to_string();
        let name = meta::name(&obj).to_string();
        let obj = Arc::new(obj);
        let prev = self
            .data
            .entry(key.clone())
            .or_default()
            .insert((ns, name), obj.clone());
        if self.owners.on_put(key, prev.as_deref(), &obj) {
            self.lifecycle_dirty = true;
        }
        let etype = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        let line = event_line(etype.as_str(), &obj);
        self.record(WatchEvent {
            rv,
            key: key.clone(),
            etype,
            object: obj.clone(),
            prev,
            line,
        });
        obj
    }

    /// Removes an object; returns its last state (carrying the deletion's resourceVersion).
    pub fn remove(&mut self, key: &ResKey, ns: &str, name: &str) -> Option<Arc<Value>> {
        let old = self
            .data
            .get_mut(key)?
            .remove(&(ns.to_string(), name.to_string()))?;
        self.owners.on_remove(key, &old);
        self.lifecycle_dirty = true;
        self.rv += 1;
        let rv = self.rv;
        let mut obj = (*old).clone();
        meta::metadata_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let obj = Arc::new(obj);
        let line = event_line(EventType::Deleted.as_str(), &obj);
        self.record(WatchEvent {
            rv,
            key: key.clone(),
            etype: EventType::Deleted,
            object: obj.clone(),
            prev: None,
            line,
        });
        Some(obj)
    }

    /// Events with rv > `from` for `key`; `None` when `from` is older than the kept history.
    pub fn history_since(&self, key: &ResKey, from: u64) -> Option<Vec<Arc<WatchEvent>>> {
        if from < self.history_start {
            return None;
        }
        let idx = self.history.partition_point(|e| e.rv <= from);
        Some(
            self.history
                .iter()
                .skip(idx)
                .filter(|e| &e.key == key)
                .cloned()
                .collect(),
        )
    }
}

/// The store: one lock, one counter, the watchers' topics.
#[derive(Debug)]
pub struct Store {
    inner: Mutex<Inner>,
    /// The resourceVersion of the last commit whose events have all been sent (bookmarks of
    /// watchers of quiet topics advance with it).
    latest: Arc<AtomicU64>,
}

impl Store {
    /// An empty store keeping `history_cap` events for watches.
    pub fn new(history_cap: usize, allocs: Allocs) -> Self {
        Self {
            inner: Mutex::new(Inner {
                rv: 0,
                data: HashMap::new(),
                history: VecDeque::new(),
                history_cap: history_cap.max(1),
                history_start: 0,
                pending: Vec::new(),
                allocs,
                lifecycle_dirty: false,
                owners: Default::default(),
                wal: None,
                topics: Topics::default(),
            }),
            latest: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The resourceVersion every sent event is at most (see [`Store::write`]).
    pub fn latest(&self) -> Arc<AtomicU64> {
        self.latest.clone()
    }

    /// Runs `f` with read access.
    pub fn read<T>(&self, f: impl FnOnce(&Inner) -> T) -> T {
        f(&self.inner.lock())
    }

    /// Runs `f` with write access; the events it produced are broadcast before the lock is
    /// released, so the broadcast order is the resourceVersion order.
    /// With a data dir, the events are in its log before anybody sees them.
    pub fn write<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut g = self.inner.lock();
        let out = f(&mut g);
        let Inner { pending, wal, .. } = &mut *g;
        if let Some(w) = wal.as_mut().filter(|_| !pending.is_empty()) {
            let logged = pending
                .iter()
                .try_for_each(|ev| w.append(ev))
                .and_then(|()| w.flush());
            if let Err(e) = logged {
                tracing::error!(error = %e, "appending to the data dir's log failed: these changes will not survive a restart");
            }
        }
        let Inner {
            pending, topics, rv, ..
        } = &mut *g;
        for ev in pending.drain(..) {
            topics.dispatch(&ev);
        }
        self.latest.store(*rv, Ordering::Release);
        if g.wal.as_ref().is_some_and(crate::persist::Wal::wants_compaction) {
            g.compact();
        }
        out
    }

    /// Fills an empty store with what a data dir held (no events: nobody watches yet); watches
    /// can only start from now on.
    pub fn restore(&self, loaded: crate::persist::Loaded) {
        let mut g = self.inner.lock();
        for (key, obj) in loaded.objects {
            let at = (meta::namespace(&obj).to_string(), meta::name(&obj).to_string());
            g.owners.on_put(&key, None, &obj);
            g.data.entry(key).or_default().insert(at, Arc::new(obj));
        }
        g.rv = g.rv.max(loaded.rv);
        g.history_start = g.rv;
        g.lifecycle_dirty = true;
    }

    /// Starts logging every committed change into `dir` (a snapshot of the current state is
    /// written first).
    pub fn persist_to(&self, dir: &std::path::Path) -> Result<(), crate::persist::PersistError> {
        let mut g = self.inner.lock();
        let rv = g.rv;
        let wal = crate::persist::open_wal(dir, rv, g.all_objects())?;
        g.wal = Some(wal);
        Ok(())
    }

    /// Subscribes to future events and runs `f` under the same lock, so that nothing is missed
    /// or seen twice between `f`'s snapshot and the subscription.
    pub fn subscribe_with<T>(
        &self,
        topic: Topic,
        f: impl FnOnce(&Inner) -> T,
    ) -> (broadcast::Receiver<Arc<WatchEvent>>, T) {
        let mut g = self.inner.lock();
        let rx = g.topics.subscribe(topic);
        let out = f(&g);
        (rx, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ResKey {
        (String::new(), "configmaps".into())
    }

    fn cm(ns: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name}})
    }

    fn store(cap: usize) -> Store {
        Store::new(cap, Allocs::new("10.96.0.0/16".parse().expect("cidr")))
    }

    #[test]
    fn rv_is_monotonic_and_lists_are_ordered() {
        let s = store(100);
        s.write(|t| {
            t.put(&key(), cm("b", "x"));
            t.put(&key(), cm("a", "z"));
            t.put(&key(), cm("a", "y"));
        });
        s.read(|t| {
            assert_eq!(t.rv(), 3);
            let names: Vec<_> = t.list(&key(), None).map(|o| meta::name(o).to_string()).collect();
            assert_eq!(names, ["y", "z", "x"]);
            assert_eq!(t.list(&key(), Some("a")).count(), 2);
            let after: Vec<_> = t
                .list_after(&key(), None, ("a".into(), "y".into()))
                .map(|o| meta::name(o).to_string())
                .collect();
            assert_eq!(after, ["z", "x"]);
            assert_eq!(
                meta::meta_str(t.get(&key(), "a", "y").expect("y"), "resourceVersion"),
                Some("3")
            );
        });
    }

    #[test]
    fn history_is_bounded() {
        let s = store(2);
        s.write(|t| {
            for i in 0..5 {
                t.put(&key(), cm("a", &format!("n{i}")));
            }
        });
        s.read(|t| {
            assert_eq!(t.history_start(), 3);
            assert!(t.history_since(&key(), 2).is_none());
            assert_eq!(t.history_since(&key(), 3).expect("kept").len(), 2);
            assert_eq!(t.history_since(&key(), 5).expect("kept").len(), 0);
        });
    }

    #[test]
    fn delete_event_carries_new_rv() {
        let s = store(10);
        let (mut rx, _) = s.subscribe_with(
            Topic {
                key: key(),
                shard: None,
            },
            |_| (),
        );
        s.write(|t| {
            t.put(&key(), cm("a", "x"));
            t.remove(&key(), "a", "x");
        });
        let a = rx.try_recv().expect("added");
        assert_eq!(a.etype, EventType::Added);
        let d = rx.try_recv().expect("deleted");
        assert_eq!(d.etype, EventType::Deleted);
        assert_eq!(meta::meta_str(&d.object, "resourceVersion"), Some("2"));
        assert!(
            std::str::from_utf8(&d.line)
                .expect("utf8")
                .starts_with("{\"type\":\"DELETED\"")
        );
    }
}
