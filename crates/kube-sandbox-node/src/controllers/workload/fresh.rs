//! A reflector cache corrected by the controller's own writes.
//!
//! A cache lags the API server: right after creating a pod or scaling a ReplicaSet, the next
//! pass may not see it yet and would do the same again. The real controllers guard against that
//! with "expectations"; here the objects the API server returned for our writes are kept and
//! preferred over older cached copies (by resourceVersion, which this API server numbers
//! monotonically), created objects are shown before the cache has them, and deleted ones are
//! hidden until the cache drops them. Entries the cache never confirms expire after
//! [`Fresh::TTL`].

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use kube::{Resource, ResourceExt};

use super::rv_number;

#[derive(Debug)]
struct Written<K> {
    obj: Arc<K>,
    at: Instant,
    /// The cache has shown this uid at some point.
    seen: bool,
}

/// Objects of kind `K` as this controller last wrote them.
#[derive(Debug)]
pub struct Fresh<K> {
    written: HashMap<String, Written<K>>,
    deleted: HashMap<String, Instant>,
}

impl<K> Default for Fresh<K> {
    fn default() -> Self {
        Self {
            written: HashMap::new(),
            deleted: HashMap::new(),
        }
    }
}

impl<K: Resource + Clone> Fresh<K> {
    /// How long an entry the cache never confirms is trusted.
    pub const TTL: Duration = Duration::from_secs(30);

    /// Records what the API server returned for a create.
    pub fn created(&mut self, obj: K) {
        self.record(obj, false);
    }

    /// Records what the API server returned for an update (of an object the cache has shown,
    /// unless we created it ourselves moments ago).
    pub fn wrote(&mut self, obj: K) {
        self.record(obj, true);
    }

    fn record(&mut self, obj: K, seen_if_new: bool) {
        let Some(uid) = obj.uid() else { return };
        let seen = self.written.get(&uid).map_or(seen_if_new, |w| w.seen);
        self.written.insert(
            uid,
            Written {
                obj: Arc::new(obj),
                at: Instant::now(),
                seen,
            },
        );
    }

    /// Records that the object with `uid` was removed.
    pub fn deleted(&mut self, uid: &str) {
        self.written.remove(uid);
        self.deleted.insert(uid.to_string(), Instant::now());
    }

    /// The cached objects with our newer writes applied.
    pub fn view(&mut self, cached: Vec<Arc<K>>) -> Vec<Arc<K>> {
        let now = Instant::now();
        let mut out = Vec::with_capacity(cached.len());
        let mut in_cache = std::collections::HashSet::new();
        for obj in cached {
            let Some(uid) = obj.uid() else {
                out.push(obj);
                continue;
            };
            in_cache.insert(uid.clone());
            if self.deleted.contains_key(&uid) {
                continue;
            }
            match self.written.get_mut(&uid) {
                Some(w) => {
                    w.seen = true;
                    let newer = match (
                        rv_number(w.obj.meta().resource_version.as_ref()),
                        rv_number(obj.meta().resource_version.as_ref()),
                    ) {
                        (Some(mine), Some(cached)) => mine > cached,
                        _ => false,
                    };
                    if newer {
                        out.push(w.obj.clone());
                    } else {
                        self.written.remove(&uid);
                        out.push(obj);
                    }
                }
                None => out.push(obj),
            }
        }
        // Deleted objects the cache no longer has are done with.
        self.deleted
            .retain(|uid, at| in_cache.contains(uid) && now.duration_since(*at) < Self::TTL);
        // Created objects the cache has not shown yet; ones it showed and then dropped are gone.
        self.written
            .retain(|uid, w| in_cache.contains(uid) || (!w.seen && now.duration_since(w.at) < Self::TTL));
        for (uid, w) in &self.written {
            if !in_cache.contains(uid) {
                out.push(w.obj.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;

    fn cm(uid: &str, rv: &str, v: &str) -> ConfigMap {
        serde_json::from_value(
            json!({"metadata": {"name": uid, "uid": uid, "resourceVersion": rv},
            "data": {"v": v}}),
        )
        .unwrap()
    }

    fn values(objs: &[Arc<ConfigMap>]) -> Vec<String> {
        let mut v: Vec<String> = objs
            .iter()
            .map(|o| format!("{}={}", o.name_any(), o.data.as_ref().unwrap()["v"]))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn own_writes_win_until_the_cache_catches_up() {
        let mut f = Fresh::<ConfigMap>::default();
        let cache = vec![Arc::new(cm("a", "5", "old")), Arc::new(cm("b", "6", "b"))];
        f.wrote(cm("a", "7", "new"));
        f.created(cm("c", "8", "created"));
        f.deleted("b");
        assert_eq!(values(&f.view(cache)), ["a=new", "c=created"]);
        // The cache catches up: its copies are used, the markers go.
        let cache = vec![Arc::new(cm("a", "7", "new")), Arc::new(cm("c", "8", "created"))];
        assert_eq!(values(&f.view(cache.clone())), ["a=new", "c=created"]);
        assert!(f.written.is_empty() && f.deleted.is_empty());
        // Something else changes "a" later: the cache wins.
        let cache = vec![Arc::new(cm("a", "9", "theirs"))];
        assert_eq!(values(&f.view(cache)), ["a=theirs"]);
    }

    #[test]
    fn created_then_removed_by_someone_else() {
        let mut f = Fresh::<ConfigMap>::default();
        f.created(cm("a", "3", "x"));
        assert_eq!(values(&f.view(vec![Arc::new(cm("a", "3", "x"))])), ["a=x"]);
        f.wrote(cm("a", "4", "y"));
        // Seen once, now gone from the cache: removed.
        assert!(f.view(vec![]).is_empty());
        // Created and updated before the cache showed it: still there.
        f.created(cm("b", "5", "x"));
        f.wrote(cm("b", "6", "y"));
        assert_eq!(values(&f.view(vec![])), ["b=y"]);
    }
}
