//! [`Reflected`]: a watch-fed, in-memory cache of one kind that the drivers read instead of
//! asking the API server once per pod. The watch runs in a background task that ends when the
//! cache is dropped.

use std::{
    fmt::Debug,
    hash::Hash,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use futures::StreamExt;
use kube::{
    Api, Client, Resource,
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use kube_lean::Lean;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use super::DriverError;

/// A cache of `K` kept up to date by a watch.
pub struct Reflected<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    store: Store<K>,
    synced: Arc<AtomicBool>,
    task: Option<JoinHandle<()>>,
    /// Bumped after every change is in the store.
    changed: tokio::sync::watch::Sender<u64>,
}

impl<K> Reflected<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    /// Starts watching every `K` in a background task of the current Tokio runtime. Objects
    /// are decoded without `managedFields` ([`kube_lean`]): no driver reads them, and they
    /// were most of the cost of decoding an object.
    pub fn spawn(client: Client, what: &'static str) -> Result<Self, DriverError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| DriverError::NoRuntime { what })?;
        let (store, writer) = reflector::store();
        let synced = Arc::new(AtomicBool::new(false));
        let flag = synced.clone();
        let (changed, _) = tokio::sync::watch::channel(0u64);
        let bump = changed.clone();
        let api: Api<Lean<K>> = Api::all(client);
        let stream = reflector::reflector(writer, kube_lean::watcher(api, watcher::Config::default()))
            .default_backoff()
            .for_each(move |ev| {
                if matches!(ev, Ok(watcher::Event::InitDone)) {
                    flag.store(true, Ordering::Release);
                }
                // The reflector has written the event to the store before yielding it.
                if matches!(
                    ev,
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone)
                ) {
                    bump.send_modify(|n| *n = n.wrapping_add(1));
                }
                if let Err(e) = ev {
                    tracing::warn!(cache = what, error = %e, "driver cache watch failed, retrying");
                }
                futures::future::ready(())
            });
        let task = handle.spawn(stream);
        Ok(Self {
            store,
            synced,
            task: Some(task),
            changed,
        })
    }

    /// A cache fed by someone else's store (tests, or a handler sharing its reflector);
    /// `synced` tells whether it has listed everything once.
    pub fn from_store(store: Store<K>, synced: Arc<AtomicBool>) -> Self {
        Self {
            store,
            synced,
            task: None,
            changed: tokio::sync::watch::channel(0u64).0,
        }
    }

    /// The cached object `name` (in `ns` for namespaced kinds).
    pub fn get(&self, ns: Option<&str>, name: &str) -> Option<Arc<K>> {
        let mut r = ObjectRef::new(name);
        if let Some(ns) = ns {
            r = r.within(ns);
        }
        self.store.get(&r)
    }

    /// Whether the initial list has been received (before that a miss means nothing).
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// A stream that yields after the cache changed (bursts coalesce into one item): a trigger
    /// for reconciles that read this cache, which then see the change — unlike a second watch
    /// of the same kind, which may fire before this cache has caught up.
    pub fn changes(&self) -> impl futures::Stream<Item = ()> + Send + 'static {
        let mut rx = self.changed.subscribe();
        rx.mark_unchanged();
        tokio_stream::wrappers::WatchStream::from_changes(rx).map(|_| ())
    }

    /// The underlying store.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }
}

impl<K> Drop for Reflected<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}
