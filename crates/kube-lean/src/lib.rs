//! kube-lean: Kubernetes objects decoded without `metadata.managedFields`.
//!
//! The API server sends every object with its server-side-apply bookkeeping,
//! `metadata.managedFields`: one entry per field manager, each with a tree of the fields it
//! owns (`fieldsV1`). k8s-openapi decodes that tree into `serde_json::Value`s — a map and a
//! string per owned field — on every watch event, only for a watcher that never reads it. On
//! the sandbox's emulated VM nodes this was the largest single cost of a pod's start in the
//! node's processes (7 % of a VM's CPU in a 50-pod burst, 2026-11-28 profile: the kubelet's pod
//! watch and kuryr-daemon's watches). client-go's informers drop the field after decoding for
//! memory (`TransformStripManagedFields`); [`Lean`] does not build it at all.
//!
//! Use it for watches of objects nobody reads `managedFields` of:
//!
//! ```no_run
//! # fn f(client: kube::Client) {
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::{Api, runtime::watcher};
//! use kube_lean::Lean;
//!
//! let api: Api<Lean<Pod>> = Api::all(client);
//! let events = kube_lean::watcher(api, watcher::Config::default()); // Event<Pod>
//! # drop(events);
//! # }
//! ```
//!
//! Writes keep using `Api<K>`: a `Lean<K>` has no `managedFields` to send back.

mod de;

use std::{
    borrow::Cow,
    ops::{Deref, DerefMut},
};

use kube::{
    Api, Resource,
    api::ObjectMeta,
    runtime::watcher::{self, Event},
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use kube::runtime::watcher::Error as WatchError;

/// `K` as read from the API without `metadata.managedFields` (always empty). Everything else
/// of `K` is decoded by `K`'s own `Deserialize`; errors are `K`'s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lean<K>(pub K);

impl<K> Lean<K> {
    /// The object.
    pub fn into_inner(self) -> K {
        self.0
    }
}

impl<K> Deref for Lean<K> {
    type Target = K;
    fn deref(&self) -> &K {
        &self.0
    }
}

impl<K> DerefMut for Lean<K> {
    fn deref_mut(&mut self) -> &mut K {
        &mut self.0
    }
}

impl<'de, K: Deserialize<'de>> Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        K::deserialize(de::At {
            inner: d,
            level: de::Level::Object,
        })
        .map(Lean)
    }
}

impl<K: Serialize> Serialize for Lean<K> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// Same API resource as `K` (kind, group, version, plural, scope, metadata-only requests).
impl<K: Resource> Resource for Lean<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn metadata_api() -> bool {
        K::metadata_api()
    }
    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

/// The watcher event of the object inside.
pub fn unwrap_event<K>(ev: Event<Lean<K>>) -> Event<K> {
    match ev {
        Event::Apply(o) => Event::Apply(o.0),
        Event::Delete(o) => Event::Delete(o.0),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(o.0),
        Event::InitDone => Event::InitDone,
    }
}

/// [`kube::runtime::watcher`] over `api`, its objects decoded without `managedFields`.
pub fn watcher<K>(
    api: Api<Lean<K>>,
    cfg: watcher::Config,
) -> impl futures::Stream<Item = Result<Event<K>, WatchError>> + Send
where
    K: Resource + Clone + std::fmt::Debug + for<'de> Deserialize<'de> + Send + 'static,
{
    use futures::TryStreamExt;
    watcher::watcher(api, cfg).map_ok(unwrap_event)
}

#[cfg(test)]
mod tests;
