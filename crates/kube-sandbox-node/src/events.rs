//! Recording core/v1 Events the way kubelet and the scheduler do (one Event object per call).

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::{Api, Client, Resource, ResourceExt, api::PostParams};
use tracing::warn;

/// Who records an event.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    component: String,
    host: Option<String>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("component", &self.component)
            .field("host", &self.host)
            .finish()
    }
}

/// `Normal` or `Warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`
    Normal,
    /// `Warning`
    Warning,
}

/// A reference to `obj` for `involvedObject`.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.uid(),
        resource_version: obj.resource_version(),
        ..Default::default()
    }
}

/// 16 random hex digits (event name suffix).
fn suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_string()
}

impl Recorder {
    /// A recorder for `component` (e.g. `kubelet`) on `host`.
    pub fn new(client: Client, component: &str, host: Option<&str>) -> Self {
        Self {
            client,
            component: component.to_string(),
            host: host.map(str::to_string),
        }
    }

    /// Records an event; failures are logged, never returned (events are best effort).
    pub async fn record(&self, obj: ObjectReference, ty: EventType, reason: &str, message: &str) {
        let ns = obj.namespace.clone().unwrap_or_else(|| "default".to_string());
        let now = jiff::Timestamp::now();
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{}", obj.name.clone().unwrap_or_default(), suffix())),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            involved_object: obj,
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            type_: Some(
                match ty {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: self.host.clone(),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            count: Some(1),
            action: Some(reason.to_string()),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone().unwrap_or_else(|| self.component.clone())),
            ..Default::default()
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        if let Err(e) = api.create(&PostParams::default(), &ev).await {
            warn!(reason, error = %e, "cannot record event");
        }
    }
}
