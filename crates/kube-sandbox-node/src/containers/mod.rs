//! The process runtime for host-network pods whose images are in the node's image table: the
//! pod's volumes are prepared, its init containers run one after the other, then its containers
//! run as real processes (through `kube-sandbox run-container`: the node's network namespace, a
//! private mount namespace with the volumes) with restartPolicy and back-off, httpGet/tcpSocket
//! readiness and liveness probes, logs for `kubectl logs`, SIGTERM then SIGKILL after the grace
//! period, and the pod's status written as kubelet writes it.
//!
//! Knowingly different from a real kubelet: there is no image (the table maps an image to a
//! directory of the machine's executables) and no root file system of the container's own (it
//! sees the machine's, with its volumes mounted over it; missing mount points are created on
//! the machine); the securityContext is applied as [`security`] says (capabilities, user and
//! group, read-only root, `no_new_privs`; not seccomp); no cgroups or resource limits; exec probes are not run (they pass); the
//! back-off starts at the node's `--sandbox-backoff-base` (1 s) instead of 10 s; containers are
//! killed when the node process dies (kubelet's containers outlive it) and started again by the
//! next node process.

pub mod env;
pub mod images;
pub mod launch;
mod process;
pub mod security;
pub mod status;
pub mod volumes;

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use tokio::sync::{Notify, watch};
use tracing::{info, warn};

use super::node::Ctx;
use crate::events::{EventType, reference};

pub(crate) use process::container_log_path;

/// Whether the node runs `pod`'s containers as processes: a host-network pod whose every
/// container image is in the table (other host-network pods run nothing, as before).
pub fn runs_processes(table: &[images::Entry], pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    spec.host_network == Some(true)
        && !table.is_empty()
        && spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .all(|c| {
                c.image
                    .as_deref()
                    .is_some_and(|i| images::lookup(table, i).is_some())
            })
}

/// A running host pod; dropping it does not stop the processes: call [`HostPod::stop`].
pub struct HostPod {
    stop_tx: watch::Sender<Option<Duration>>,
    task: tokio::task::JoinHandle<()>,
}

impl HostPod {
    /// Starts the pod's containers in the background.
    pub(crate) fn start(ctx: Arc<Ctx>, pod: Pod) -> Self {
        let (stop_tx, stop_rx) = watch::channel(None);
        let task = tokio::spawn(async move {
            let name = pod.name_any();
            if let Err(e) = process::run_pod(ctx, pod, stop_rx).await {
                warn!(pod = %name, error = %e, "host pod runtime ended with an error");
            }
        });
        Self { stop_tx, task }
    }

    /// SIGTERM to every container, SIGKILL after `grace`; returns when all have ended.
    pub async fn stop(self, grace: Duration) {
        let _ = self.stop_tx.send(Some(grace));
        let _ = self.task.await;
    }
}

/// Shared, observable state of one pod's containers.
pub(crate) struct Shared {
    pub state: std::sync::Mutex<status::PodState>,
    pub changed: Notify,
}

impl Shared {
    pub fn update(&self, f: impl FnOnce(&mut status::PodState)) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut st);
        drop(st);
        self.changed.notify_one();
    }
    pub fn snapshot(&self) -> status::PodState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Where the pod's files live: `<node state dir>/pods/<uid>`.
pub(crate) fn pod_dir(ctx: &Ctx, pod: &Pod) -> PathBuf {
    ctx.cfg
        .state_dir
        .join("pods")
        .join(pod.uid().unwrap_or_else(|| pod.name_any()))
}

/// Records a Warning event on the pod.
pub(crate) async fn warn_event(ctx: &Ctx, pod: &Pod, reason: &str, message: &str) {
    warn!(pod = %pod.name_any(), namespace = ?pod.namespace(), reason, message, "container runtime");
    ctx.recorder
        .record(reference(pod), EventType::Warning, reason, message)
        .await;
}

/// Records a Normal event on the pod.
pub(crate) async fn normal_event(ctx: &Ctx, pod: &Pod, reason: &str, message: &str) {
    info!(pod = %pod.name_any(), namespace = ?pod.namespace(), reason, message, "container runtime");
    ctx.recorder
        .record(reference(pod), EventType::Normal, reason, message)
        .await;
}

/// Removes the pod's files (volumes, specs, logs) once it is gone.
pub(crate) fn remove_pod_dir(ctx: &Ctx, pod: &Pod) {
    let dir = pod_dir(ctx, pod);
    if dir.exists()
        && let Err(e) = std::fs::remove_dir_all(&dir)
    {
        warn!(dir = %dir.display(), error = %e, "cannot remove the pod's directory");
    }
}

/// The data of the ConfigMaps and Secrets the pod names (absent ones left out).
pub(crate) async fn fetch_sources(ctx: &Ctx, pod: &Pod) -> Result<env::Sources, kube::Error> {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    let ns = pod.namespace().unwrap_or_default();
    let mut out = env::Sources::new();
    for (kind, name) in env::referenced(pod) {
        let data: Option<BTreeMap<String, String>> = if kind == "ConfigMap" {
            let api: kube::Api<ConfigMap> = kube::Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(&name).await?.map(|cm| {
                let mut d = cm.data.unwrap_or_default();
                for (k, v) in cm.binary_data.unwrap_or_default() {
                    d.insert(k, String::from_utf8_lossy(&v.0).into_owned());
                }
                d
            })
        } else {
            let api: kube::Api<Secret> = kube::Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(&name).await?.map(|s| {
                let mut d: BTreeMap<String, String> = s
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                    .collect();
                d.extend(s.string_data.unwrap_or_default());
                d
            })
        };
        if let Some(d) = data {
            out.insert((kind, name), d);
        }
    }
    Ok(out)
}
