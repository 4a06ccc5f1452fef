//! Kubernetes Events: the one recorder every handler and background loop of the controller
//! publishes through. `[kubernetes] use_events = false` turns them all off here, in one place;
//! a failure to record is logged, never an error of the caller.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{
    Client,
    runtime::events::{Event, EventType, Recorder, Reporter},
};
use tracing::debug;

/// The controller's Event recorder.
#[derive(Clone)]
pub struct Events {
    recorder: Recorder,
    enabled: bool,
}

impl Events {
    /// A recorder reporting as `component`; `enabled` is `[kubernetes] use_events`.
    pub fn new(client: Client, component: &str, enabled: bool) -> Self {
        let reporter = Reporter {
            controller: component.into(),
            instance: None,
        };
        Events {
            recorder: Recorder::new(client, reporter),
            enabled,
        }
    }

    /// Whether Events are recorded at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// A Warning Event on `on`.
    pub async fn warning(&self, on: &ObjectReference, reason: &str, note: String, action: &str) {
        self.publish(on, EventType::Warning, reason, note, action).await;
    }

    /// A Normal Event on `on`.
    pub async fn normal(&self, on: &ObjectReference, reason: &str, note: String, action: &str) {
        self.publish(on, EventType::Normal, reason, note, action).await;
    }

    async fn publish(
        &self,
        on: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
        action: &str,
    ) {
        if !self.enabled {
            return;
        }
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, on).await {
            debug!(error = %e, reason, "recording event failed");
        }
    }
}
