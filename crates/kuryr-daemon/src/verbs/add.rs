//! CNI ADD: waits (bounded) for the pod's KuryrPort in the registry, records the attachment,
//! wires every VIF through its binding driver, then waits for activation — Neutron's ACTIVE in
//! the KuryrPort, or OVN's local `ovn-installed` flag on every OVS interface of the pod
//! ([`crate::activation`]) — and returns the default VIF's os-vif primitive.

use std::{
    collections::{BTreeMap, HashSet},
    time::{Duration, Instant},
};

use kuryr_types::{VifEntry, VifKind};
use serde_json::Value;
use tracing::{debug, info};

use crate::{
    activation::{self, Signal},
    binding::spec,
    daemon::{Daemon, OpError},
    registry::{AddDecision, WaitReason},
    request::CniCall,
    state::{Attachment, WiredVif},
};

/// Re-check period of the activation wait if a change channel closed (never in practice).
const POLL_FALLBACK: Duration = Duration::from_millis(100);

impl Daemon {
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
            .wait_registry(&key, deadline, || {
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
            let err = OpError::binding(&call.container_id, &w.spec.ifname);
            let binding = self
                .bindings
                .for_kind(&VifKind::from_name(&w.class))
                .map_err(&err)?;
            binding.connect(&w.spec, &call.netns).await.map_err(&err)?;
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
        let mut reg = self.registry.changed_for(key);
        // Without OVN's flags (a datapath that has none, or a pod they cannot confirm),
        // Neutron's ACTIVE alone ends the wait.
        let ovn_watch = self
            .bindings
            .ovn_installed()
            .filter(|_| activation::flags_can_decide(all_ovs, &devs));
        let mut ovn = ovn_watch.as_ref().map(|w| w.wait());
        loop {
            reg.borrow_and_update();
            // Read in place on each wake-up; the VIFs are copied once, on success.
            let registry_active = self.registry.vifs_active(key, pod_uid);
            // The pod went away meanwhile (its KuryrPort deleted or handed to a new pod of the
            // same name, or the pod terminating): nobody waits for this sandbox any more.
            if registry_active.is_none() || self.registry.pod_gone(key, pod_uid) {
                self.metrics.observe_active_wait("gone", started.elapsed());
                return Err(OpError::PodGone(key.to_owned()));
            }
            let registry_active = registry_active.unwrap_or(false);
            let signal = match ovn.as_mut() {
                Some(o) => {
                    let installed = o.rx.borrow_and_update();
                    activation::decide(registry_active, all_ovs, &devs, &installed)
                }
                None => activation::decide(registry_active, all_ovs, &devs, &HashSet::new()),
            };
            if let Some(signal) = signal {
                let took = started.elapsed();
                self.metrics.observe_active_wait(signal.label(), took);
                debug!(pod = %key, signal = signal.label(), wait_ms = took.as_secs_f64() * 1000.0, "active");
                return Ok(match (signal, self.registry.vifs(key, pod_uid)) {
                    (Signal::Neutron, Some(v)) => v,
                    _ => vifs,
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let changed = async {
                match ovn.as_mut() {
                    Some(o) => tokio::select! {
                        r = reg.changed() => r.is_ok(),
                        r = o.rx.changed() => r.is_ok(),
                    },
                    None => reg.changed().await.is_ok(),
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
    pub(crate) fn plan(
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
}
