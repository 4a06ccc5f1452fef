//! Start-up of the handler: the pools are rebuilt from the KuryrPorts and Neutron before any
//! request is served; KuryrPorts whose port is gone get their VIF dropped (and a new port);
//! inactive VIFs are tracked again by the activation loop.

use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use kuryr_types::KuryrPort;
use serde_json::json;
use tracing::warn;

use super::activation::{Activation, Owner};
use crate::{
    Context, OpenStack,
    pool::{self, recovery::in_use_refs},
};

/// Why recovery failed.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// Listing KuryrPorts failed.
    #[error("listing KuryrPorts")]
    List(#[source] kube::Error),
    /// Rebuilding the pools failed.
    #[error("rebuilding the pools")]
    Pool(#[source] pool::Error),
}

pub(super) async fn recover(
    ctx: &Context,
    os: &OpenStack,
    activation: &Activation,
    kps: &Api<KuryrPort>,
) -> Result<(), RecoveryError> {
    let list = kps
        .list(&ListParams::default())
        .await
        .map_err(RecoveryError::List)?;
    let report = os
        .pool
        .recover(in_use_refs(&list.items))
        .await
        .map_err(RecoveryError::Pool)?;
    // A KuryrPort naming a port that is not ours (another cluster's, a user's): the port is
    // left alone in Neutron, the pod is told and gets a port of ours.
    for (r, why) in &report.refused {
        warn!(pod = %r.pod, port = %r.port_id, reason = %why, "KuryrPort references a port that is not this cluster's: not used, not released");
        let pod = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(r.pod.namespace.clone()),
            name: Some(r.pod.name.clone()),
            ..Default::default()
        };
        let note = format!(
            "KuryrPort names Neutron port {} but {why}: the pod gets a port of this cluster's",
            r.port_id
        );
        ctx.events
            .warning(&pod, "KuryrPortNotOurs", note, "Recover")
            .await;
    }
    // KuryrPorts whose port is gone (or taken by another KuryrPort, or not ours): drop those
    // VIFs, the reconcile gives the pods new ports.
    for r in report
        .missing
        .iter()
        .chain(report.conflicts.iter())
        .chain(report.refused.iter().map(|(r, _)| r))
    {
        let Some(kp) = list
            .items
            .iter()
            .find(|k| k.namespace().as_deref() == Some(&r.pod.namespace) && k.name_any() == r.pod.name)
        else {
            continue;
        };
        let Some(status) = &kp.status else { continue };
        for (ifname, entry) in &status.vifs {
            if entry.vif.id.as_deref() == Some(&r.port_id) {
                warn!(pod = %r.pod, port = %r.port_id, "KuryrPort references a port that is gone, shared or not ours: dropping its VIF");
                let api: Api<KuryrPort> = Api::namespaced(ctx.client.clone(), &r.pod.namespace);
                let patch = json!({"status": {"vifs": {ifname.clone(): null}}});
                if let Err(e) = api
                    .patch(&r.pod.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    warn!(pod = %r.pod, error = %e, "dropping the VIF failed");
                }
            }
        }
    }
    // VIFs written before the restart and not active yet.
    for kp in &list.items {
        track_inactive(activation, kp);
    }
    Ok(())
}

pub(super) fn track_inactive(activation: &Activation, kp: &KuryrPort) {
    let Some(status) = &kp.status else { return };
    if kp.metadata.deletion_timestamp.is_some() {
        return;
    }
    for (ifname, entry) in &status.vifs {
        if entry.vif.active == Some(false)
            && let Some(id) = &entry.vif.id
        {
            activation.track(
                id,
                Owner {
                    namespace: kp.namespace().unwrap_or_default(),
                    name: kp.name_any(),
                    ifname: ifname.clone(),
                    pod_uid: kp.spec.pod_uid.clone(),
                    scheduled: None,
                },
            );
        }
    }
}
