//! Shared server state handed to every request handler and background task.

use std::time::Duration;

use tokio::sync::Notify;

use crate::{registry::Registry, store::Store};

/// Everything a handler needs.
#[derive(Debug)]
pub struct App {
    /// Objects, resourceVersions, history and broadcast.
    pub store: Store,
    /// Built-in and custom resources.
    pub registry: Registry,
    /// Required bearer token, if any.
    pub token: Option<String>,
    /// ServiceAccount tokens minted by TokenRequests.
    pub tokens: crate::auth::Tokens,
    /// The CA certificate clients verify us with (HTTPS mode), published in every namespace's
    /// `kube-root-ca.crt` ConfigMap.
    pub ca_pem: Option<String>,
    /// Wakes the lifecycle task (GC, namespace and CRD cleanup) after deletes.
    pub lifecycle: Notify,
    /// Interval of periodic watch bookmarks.
    pub bookmark_interval: Duration,
    /// `host:port` clients reach us at (discovery's serverAddressByClientCIDRs).
    pub server_address: String,
    /// Resource requests served, by verb and resource (`/metrics`).
    pub requests: crate::metrics::RequestCounts,
}

impl App {
    /// Asks the lifecycle task for a pass.
    pub fn kick(&self) {
        self.lifecycle.notify_one();
    }
}
