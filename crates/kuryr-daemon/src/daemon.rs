//! The CNI operations (upstream `k8s_cni_registry`): ADD waits on the registry, wires every VIF
//! and waits for activation (Neutron's, or OVN's local `ovn-installed` flag: [`crate::activation`]);
//! DEL, CHECK and GC work from the state files, so they need neither the API server nor the
//! KuryrPort.

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use kuryr_cni_api::{CniError, ErrorCode};
use kuryr_types::{VifEntry, VifKind};
use serde_json::Value;
use tracing::{debug, info, warn};

use crate::{
    activation::{self, OvnInstalledWatch, Signal},
    binding::{Binding, BindingError, ovs::OvsBinding, spec},
    health::Health,
    metrics::Metrics,
    registry::{AddDecision, Registry, WaitReason, all_active},
    request::CniCall,
    state::{Attachment, StateError, StateStore, WiredVif},
};

/// How long DEL may take (upstream: 5 s).
pub const DEL_TIMEOUT: Duration = Duration::from_secs(5);
/// Re-check period of the activation wait if a change channel closed (never in practice).
const POLL_FALLBACK: Duration = Duration::from_millis(100);

/// A failed CNI operation; [`OpError::to_cni`] gives the error body and HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The request is invalid.
    #[error("{0}")]
    Invalid(CniError),
    /// `CNI_NETNS` does not exist.
    #[error("network namespace {0} does not exist")]
    NoNetns(PathBuf),
    /// The pod is being deleted.
    #[error("pod {0} is gone")]
    PodGone(String),
    /// The KuryrPort belongs to another incarnation of the pod.
    #[error("pod {key}: KuryrPort is for pod UID {kp}, the pod's UID is {pod}")]
    UidMismatch {
        /// Pod key.
        key: String,
        /// `spec.podUid`.
        kp: String,
        /// The pod's UID.
        pod: String,
    },
    /// No usable KuryrPort in time.
    #[error("timed out after {timeout:?} waiting for the VIFs of pod {key} ({reason:?})")]
    KuryrPortTimeout {
        /// Pod key.
        key: String,
        /// The bound.
        timeout: Duration,
        /// What was still missing.
        reason: WaitReason,
    },
    /// The VIFs did not become active in time.
    #[error("timed out after {timeout:?} waiting for the VIFs of pod {key} to become active")]
    ActivationTimeout {
        /// Pod key.
        key: String,
        /// The bound.
        timeout: Duration,
    },
    /// A VIF cannot be turned into wiring.
    #[error("VIF {ifname} of pod {key}")]
    Spec {
        /// Pod key.
        key: String,
        /// Its interface.
        ifname: String,
        /// Cause.
        #[source]
        source: spec::SpecError,
    },
    /// Wiring or unwiring failed.
    #[error("binding {ifname} of container {container_id}")]
    Binding {
        /// Container.
        container_id: String,
        /// Interface.
        ifname: String,
        /// Cause.
        #[source]
        source: BindingError,
    },
    /// The state files cannot be updated.
    #[error("recording the attachment")]
    State(#[source] StateError),
    /// DEL took longer than [`DEL_TIMEOUT`].
    #[error("DEL of container {0} did not finish within {DEL_TIMEOUT:?}")]
    DelTimeout(String),
    /// ADD: the container was deleted (DEL) while ADD waited for its KuryrPort.
    #[error("container {0} was deleted while ADD was waiting")]
    DeletedMeanwhile(String),
    /// CHECK: this daemon did not wire the container.
    #[error("container {0} is not wired by this daemon")]
    NotWired(String),
    /// CHECK: the wiring is damaged.
    #[error("wiring of container {container_id} is damaged")]
    CheckFailed {
        /// Container.
        container_id: String,
        /// What is wrong.
        problems: Vec<String>,
    },
}

/// `e` and its causes, `: `-separated.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

impl OpError {
    /// The metric label of this error.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Invalid(_) | Self::NoNetns(_) => "invalid",
            Self::PodGone(_) => "pod_gone",
            Self::UidMismatch { .. } => "uid_mismatch",
            Self::KuryrPortTimeout { .. } => "kuryrport_timeout",
            Self::ActivationTimeout { .. } => "activation_timeout",
            Self::Spec { .. } => "bad_vif",
            Self::Binding { .. } => "binding",
            Self::State(_) => "state",
            Self::DelTimeout(_) => "del_timeout",
            Self::NotWired(_) => "not_wired",
            Self::DeletedMeanwhile(_) => "deleted_meanwhile",
            Self::CheckFailed { .. } => "check_failed",
        }
    }

    /// Whether this is a failure of the daemon itself (counts towards `cni_failures_count`).
    pub fn is_internal(&self) -> bool {
        matches!(self, Self::Spec { .. } | Self::Binding { .. } | Self::State(_))
    }

    /// The CNI error body (upstream codes: 4 bad parameters, 3 pod gone, 11 timeout, 999 other).
    pub fn to_cni(&self) -> CniError {
        match self {
            Self::Invalid(e) => e.clone(),
            Self::NoNetns(_) => CniError::new(ErrorCode::InvalidEnvironment, self.to_string()),
            Self::PodGone(_) | Self::UidMismatch { .. } | Self::NotWired(_) | Self::DeletedMeanwhile(_) => {
                CniError::new(ErrorCode::UnknownContainer, self.to_string())
            }
            Self::KuryrPortTimeout { .. } | Self::ActivationTimeout { .. } | Self::DelTimeout(_) => {
                CniError::new(ErrorCode::TryAgainLater, self.to_string())
            }
            Self::CheckFailed { problems, .. } => {
                CniError::new(ErrorCode::Generic, self.to_string()).with_details(problems.join("; "))
            }
            Self::Spec { .. } | Self::Binding { .. } | Self::State(_) => {
                CniError::new(ErrorCode::DaemonInternal, self.to_string()).with_details(error_chain(self))
            }
        }
    }
}

/// Settings of the operations (from kuryr.conf).
#[derive(Debug, Clone)]
pub struct Settings {
    /// `[cni_daemon] vif_annotation_timeout`: bound of each of ADD's waits.
    pub vif_timeout: Duration,
    /// `[neutron_defaults] ovs_bridge`.
    pub default_bridge: Option<String>,
    /// `[neutron_defaults] network_device_mtu`.
    pub network_device_mtu: u32,
    /// `[cni_daemon] netns_proc_dir` when `docker_mode` is on.
    pub netns_proc_dir: Option<String>,
}

/// The daemon's operations and shared state.
pub struct Daemon {
    /// Settings.
    pub settings: Settings,
    /// The registry.
    pub registry: Arc<Registry>,
    /// The state files.
    pub state: StateStore,
    /// OVS binding driver.
    pub ovs: OvsBinding,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Health.
    pub health: Arc<Health>,
    /// `ovn-installed` flags of the local OVS interfaces.
    ovn: Arc<OvnInstalledWatch>,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Container IDs DEL has seen recently (bounded), so a slow ADD does not wire them after.
    deleted: Mutex<VecDeque<String>>,
}

/// How many recently deleted container IDs are remembered.
const DELETED_MEMORY: usize = 1024;

impl Daemon {
    /// Assembles the daemon.
    pub fn new(
        settings: Settings,
        registry: Arc<Registry>,
        state: StateStore,
        ovs: OvsBinding,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) -> Self {
        Self {
            settings,
            registry,
            state,
            ovn: OvnInstalledWatch::new(ovs.ovsdb().clone()),
            ovs,
            metrics,
            health,
            locks: Mutex::new(HashMap::new()),
            deleted: Mutex::new(VecDeque::new()),
        }
    }

    fn remember_deleted(&self, container_id: &str) {
        let mut d = self.deleted.lock().unwrap_or_else(|p| p.into_inner());
        if !d.iter().any(|c| c == container_id) {
            if d.len() >= DELETED_MEMORY {
                d.pop_front();
            }
            d.push_back(container_id.to_owned());
        }
    }

    fn forget_deleted(&self, container_id: &str) {
        self.deleted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|c| c != container_id);
    }

    fn was_deleted(&self, container_id: &str) -> bool {
        self.deleted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .any(|c| c == container_id)
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut g = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        if g.len() > 4096 {
            g.retain(|_, l| Arc::strong_count(l) > 1);
        }
        g.entry(key.to_owned()).or_default().clone()
    }

    /// Waits (bounded) until `ready` returns `Some`, re-checking on every registry update.
    async fn wait_registry<T>(
        &self,
        deadline: Instant,
        mut ready: impl FnMut() -> Result<T, WaitReason>,
    ) -> Result<T, WaitReason> {
        let mut rx = self.registry.changed();
        loop {
            rx.borrow_and_update();
            let reason = match ready() {
                Ok(v) => return Ok(v),
                Err(r) => r,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || tokio::time::timeout(left, rx.changed()).await.is_err() {
                return Err(reason);
            }
        }
    }

    fn binding(&self, kind: &VifKind) -> Result<Binding, BindingError> {
        Binding::for_kind(kind, &self.ovs)
    }

    /// CNI ADD: returns the default VIF's os-vif primitive.
    pub async fn add(&self, call: &CniCall) -> Result<Value, OpError> {
        let key = call.pod_key().unwrap_or_default();
        if !call.netns.exists() {
            return Err(OpError::NoNetns(call.netns.clone()));
        }
        self.forget_deleted(&call.container_id);
        let timeout = self.settings.vif_timeout;
        let deadline = Instant::now() + timeout;
        let decision = self
            .wait_registry(deadline, || {
                match self.registry.decide(&key, call.pod_uid.as_deref()) {
                    AddDecision::Ready { pod_uid, vifs } => Ok(Ok((pod_uid, vifs))),
                    AddDecision::Gone => Ok(Err(())),
                    AddDecision::Wait(r) => Err(r),
                }
            })
            .await;
        let (pod_uid, vifs) = match decision {
            Ok(Ok(v)) => v,
            Ok(Err(())) => return Err(OpError::PodGone(key)),
            Err(WaitReason::UidMismatch { kp, pod }) => return Err(OpError::UidMismatch { key, kp, pod }),
            Err(reason) => return Err(OpError::KuryrPortTimeout { key, timeout, reason }),
        };

        // Serialized with DEL/GC of this pod only while wiring: a DEL must not wait behind an
        // ADD that is waiting for the KuryrPort.
        let lock = self.lock_for(&key);
        let guard = lock.lock().await;
        if self.was_deleted(&call.container_id) {
            return Err(OpError::DeletedMeanwhile(call.container_id.clone()));
        }
        let wired = self.plan(call, &key, &pod_uid, &vifs)?;
        // Older sandboxes of this pod: their devices (same names) are replaced below.
        for old in self.state.of_pod(
            call.pod_namespace.as_deref().unwrap_or_default(),
            call.pod_name.as_deref().unwrap_or_default(),
        ) {
            if old.container_id != call.container_id {
                info!(pod = %key, old = %old.container_id, new = %call.container_id, "replacing an older sandbox's wiring");
                self.state.remove(&old.container_id).map_err(OpError::State)?;
            }
        }
        let attachment = Attachment {
            container_id: call.container_id.clone(),
            ifname: call.ifname.clone(),
            netns: call.netns.display().to_string(),
            pod_namespace: call.pod_namespace.clone().unwrap_or_default(),
            pod_name: call.pod_name.clone().unwrap_or_default(),
            pod_uid: pod_uid.clone(),
            vifs: wired.clone(),
        };
        // Recorded before wiring: a crash mid-way still leaves DEL something to clean.
        self.state.put(&attachment).map_err(OpError::State)?;
        for w in &wired {
            let started = Instant::now();
            let binding = self
                .binding(&VifKind::from_name(&w.class))
                .map_err(|source| OpError::Binding {
                    container_id: call.container_id.clone(),
                    ifname: w.spec.ifname.clone(),
                    source,
                })?;
            binding
                .connect(&w.spec, &call.netns)
                .await
                .map_err(|source| OpError::Binding {
                    container_id: call.container_id.clone(),
                    ifname: w.spec.ifname.clone(),
                    source,
                })?;
            let took = started.elapsed();
            self.metrics.wire.observe(took.as_secs_f64());
            info!(pod = %key, container = %call.container_id, ifname = %w.spec.ifname, port = %w.spec.port_id,
                host_dev = %w.spec.host_dev, wire_ms = took.as_secs_f64() * 1000.0, "wired");
        }
        drop(guard);

        let vifs = self.wait_active(&key, &pod_uid, vifs, &wired, deadline).await?;
        let default = vifs
            .values()
            .find(|e| e.default)
            .or_else(|| vifs.get(kuryr_types::constants::DEFAULT_IFNAME))
            .or_else(|| vifs.values().next());
        Ok(default.map(|e| e.vif.to_primitive()).unwrap_or(Value::Null))
    }

    /// ADD's last wait (bounded by `deadline`): until the KuryrPort's VIFs are active, or
    /// ovn-controller has installed every OVS interface of the pod ([`activation::decide`]).
    /// Returns the VIFs to report (`vifs`, the wired ones, when OVN's flag ended the wait).
    async fn wait_active(
        &self,
        key: &str,
        pod_uid: &str,
        vifs: BTreeMap<String, VifEntry>,
        wired: &[WiredVif],
        deadline: Instant,
    ) -> Result<BTreeMap<String, VifEntry>, OpError> {
        let started = Instant::now();
        let all_ovs = wired
            .iter()
            .all(|w| VifKind::from_name(&w.class) == VifKind::OpenVSwitch);
        let devs: Vec<String> = wired.iter().map(|w| w.spec.host_dev.clone()).collect();
        let mut reg = self.registry.changed();
        let mut ovn = self.ovn.wait();
        loop {
            reg.borrow_and_update();
            let current = self.registry.vifs(key, pod_uid);
            let registry_active = current.as_ref().is_some_and(all_active);
            let signal = {
                let installed = ovn.rx.borrow_and_update();
                activation::decide(registry_active, all_ovs, &devs, &installed)
            };
            if let Some(signal) = signal {
                let took = started.elapsed();
                self.metrics.observe_active_wait(signal.label(), took);
                debug!(pod = %key, signal = signal.label(), wait_ms = took.as_secs_f64() * 1000.0, "active");
                return Ok(match (signal, current) {
                    (Signal::Neutron, Some(v)) => v,
                    _ => vifs,
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let changed = async {
                tokio::select! {
                    r = reg.changed() => r.is_ok(),
                    r = ovn.rx.changed() => r.is_ok(),
                }
            };
            match tokio::time::timeout(left, changed).await {
                Ok(true) => {}
                // A closed channel cannot wake us: wait out the deadline on the other one.
                Ok(false) if !left.is_zero() => tokio::time::sleep(POLL_FALLBACK.min(left)).await,
                _ => {
                    self.metrics.observe_active_wait("timeout", started.elapsed());
                    return Err(OpError::ActivationTimeout {
                        key: key.to_owned(),
                        timeout: self.settings.vif_timeout,
                    });
                }
            }
        }
    }

    /// The wiring of every VIF: the default one gets `CNI_IFNAME`, others keep their name.
    fn plan(
        &self,
        call: &CniCall,
        key: &str,
        pod_uid: &str,
        vifs: &BTreeMap<String, VifEntry>,
    ) -> Result<Vec<WiredVif>, OpError> {
        let has_default = vifs.values().any(|e| e.default);
        let mut out = Vec::new();
        for (name, e) in vifs {
            let default = e.default || (!has_default && name == kuryr_types::constants::DEFAULT_IFNAME);
            let ifname = if default {
                call.ifname.as_str()
            } else {
                name.as_str()
            };
            let cx = spec::SpecContext {
                ifname,
                default,
                pod_uid,
                default_bridge: self.settings.default_bridge.as_deref(),
                network_device_mtu: self.settings.network_device_mtu,
            };
            let s = spec::wire_spec(&e.vif, cx).map_err(|source| OpError::Spec {
                key: key.to_owned(),
                ifname: name.clone(),
                source,
            })?;
            out.push(WiredVif {
                class: e.vif.kind.as_str().to_owned(),
                spec: s,
            });
        }
        Ok(out)
    }

    async fn unwire(&self, a: &Attachment) -> Result<(), OpError> {
        let netns = PathBuf::from(&a.netns);
        for w in &a.vifs {
            let err = |source| OpError::Binding {
                container_id: a.container_id.clone(),
                ifname: w.spec.ifname.clone(),
                source,
            };
            let binding = self.binding(&VifKind::from_name(&w.class)).map_err(err)?;
            binding.disconnect(&w.spec, &netns).await.map_err(err)?;
        }
        self.state.remove(&a.container_id).map_err(OpError::State)
    }

    /// CNI DEL: idempotent, bounded by [`DEL_TIMEOUT`].
    pub async fn del(&self, call: &CniCall) -> Result<(), OpError> {
        tokio::time::timeout(DEL_TIMEOUT, self.del_inner(call))
            .await
            .map_err(|_| OpError::DelTimeout(call.container_id.clone()))?
    }

    async fn del_inner(&self, call: &CniCall) -> Result<(), OpError> {
        let key = call.pod_key().unwrap_or_else(|| call.container_id.clone());
        let lock = self.lock_for(&key);
        let _guard = lock.lock().await;
        self.remember_deleted(&call.container_id);
        if let Some(a) = self.state.get(&call.container_id) {
            self.unwire(&a).await?;
            info!(pod = %key, container = %call.container_id, "unwired");
            return Ok(());
        }
        if let (Some(ns), Some(name)) = (&call.pod_namespace, &call.pod_name) {
            let current: Vec<String> = self
                .state
                .of_pod(ns, name)
                .into_iter()
                .map(|a| a.container_id)
                .collect();
            if !current.is_empty() {
                info!(pod = %key, container = %call.container_id, current = ?current, "ignoring DEL of a stale container");
                return Ok(());
            }
        }
        // Nothing recorded: at most remove CNI_IFNAME from the container's own namespace.
        if !call.netns.as_os_str().is_empty() && call.netns.exists() {
            remove_ifname(&call.netns, &call.ifname)
                .await
                .map_err(|source| OpError::Binding {
                    container_id: call.container_id.clone(),
                    ifname: call.ifname.clone(),
                    source,
                })?;
        }
        debug!(pod = %key, container = %call.container_id, "DEL of an unknown container");
        Ok(())
    }

    /// CNI CHECK: verifies the recorded wiring.
    pub async fn check(&self, call: &CniCall) -> Result<(), OpError> {
        let a = self
            .state
            .get(&call.container_id)
            .ok_or_else(|| OpError::NotWired(call.container_id.clone()))?;
        let mut problems = Vec::new();
        if a.ifname != call.ifname {
            problems.push(format!("wired as {}, CHECK asks for {}", a.ifname, call.ifname));
        }
        for w in &a.vifs {
            let err = |source| OpError::Binding {
                container_id: a.container_id.clone(),
                ifname: w.spec.ifname.clone(),
                source,
            };
            let binding = self.binding(&VifKind::from_name(&w.class)).map_err(err)?;
            problems.extend(binding.check(&w.spec, Path::new(&a.netns)).await.map_err(err)?);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(OpError::CheckFailed {
                container_id: a.container_id,
                problems,
            })
        }
    }

    /// CNI GC: unwires every attachment not in `call.valid_attachments`; returns how many.
    pub async fn gc(&self, call: &CniCall) -> Result<usize, OpError> {
        let valid: HashSet<(&str, &str)> = call
            .valid_attachments
            .iter()
            .map(|a| (a.container_id.as_str(), a.ifname.as_str()))
            .collect();
        let mut removed = 0;
        for a in self.state.all() {
            if valid.contains(&(a.container_id.as_str(), a.ifname.as_str())) {
                continue;
            }
            let key = crate::registry::pod_key(&a.pod_namespace, &a.pod_name);
            let lock = self.lock_for(&key);
            let _guard = lock.lock().await;
            // Re-read: an ADD may have replaced it meanwhile.
            if self.state.get(&a.container_id).is_none() {
                continue;
            }
            match self.unwire(&a).await {
                Ok(()) => {
                    removed += 1;
                    info!(pod = %key, container = %a.container_id, "garbage-collected");
                }
                Err(e) => {
                    warn!(pod = %key, container = %a.container_id, error = %error_chain(&e), "GC failed")
                }
            }
        }
        Ok(removed)
    }

    /// STATUS: `Ok` when ADD can be served (watchers synced, bridge present).
    pub async fn status(&self) -> Result<(), CniError> {
        if !self.registry.synced() {
            return Err(CniError::new(
                ErrorCode::PluginNotAvailable,
                "kuryr-daemon watchers have not synced yet",
            ));
        }
        if let Some(b) = &self.settings.default_bridge {
            match self.ovs.ovsdb().bridge(b).await {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(CniError::new(
                        ErrorCode::PluginNotAvailable,
                        format!("OVS bridge {b} does not exist"),
                    ));
                }
                Err(e) => {
                    return Err(
                        CniError::new(ErrorCode::PluginNotAvailable, "OVS is not reachable")
                            .with_details(error_chain(&e)),
                    );
                }
            }
        }
        Ok(())
    }
}

async fn remove_ifname(netns: &Path, ifname: &str) -> Result<(), BindingError> {
    use crate::binding::ovs::OvsBindingError;
    let path = netns.to_owned();
    let ifname = ifname.to_owned();
    let r = crate::netns::on_thread(move || async move {
        let ns = crate::netns::open(&path)?;
        crate::netns::enter(&ns, &path)?;
        let nl = crate::netlink::Netlink::connect().map_err(OvsBindingError::Netlink)?;
        nl.delete_link(&ifname).await.map_err(OvsBindingError::Netlink)?;
        Ok::<(), OvsBindingError>(())
    })
    .await
    .map_err(OvsBindingError::from)?;
    r.map_err(BindingError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_upstream_codes() {
        let e = OpError::PodGone("ns/p".into()).to_cni();
        assert_eq!(e.code, ErrorCode::UnknownContainer);
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.code), 410);
        let e = OpError::KuryrPortTimeout {
            key: "ns/p".into(),
            timeout: Duration::from_secs(1),
            reason: WaitReason::NoKuryrPort,
        };
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.to_cni().code), 504);
        assert!(!e.is_internal());
        let e = OpError::State(StateError::Encode(serde_json::from_str::<u8>("x").unwrap_err()));
        assert!(e.is_internal());
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.to_cni().code), 500);
        assert!(e.to_cni().details.contains("encoding state"));
        let e = OpError::NoNetns("/x".into()).to_cni();
        assert_eq!(kuryr_cni_api::daemon::http_status_for(e.code), 400);
        assert!(e.msg.contains("/x"));
    }
}
