//! Pod sandboxes as a CRI runtime makes them: netns + CNI ADD (result cached) + the emulated
//! containers' responders; teardown is CNI DEL with the cached config and result + netns removal.

use std::{net::IpAddr, path::PathBuf, sync::Arc};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use serde_json::{Map, Value, json};
use tracing::{info, warn};

use super::{Ctx, Error};
use crate::{
    cni::{self, Invocation},
    netns, responder,
    state::{CachedResult, SandboxRecord},
};

/// Interface name given to plugins, as CRI runtimes do.
pub const IFNAME: &str = "eth0";

/// A sandbox whose network is up and whose containers serve.
#[derive(Debug)]
pub(crate) struct Running {
    pub record: SandboxRecord,
    pub responders: Option<responder::Responders>,
}

/// Why a sandbox could not be created.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// No valid CNI config: the runtime network is not ready.
    #[error(
        "network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: {0}"
    )]
    NetworkNotReady(#[source] cni::Error),
    /// CNI ADD failed.
    #[error("failed to setup network for sandbox \"{sandbox_id}\": {source}")]
    Cni {
        sandbox_id: String,
        #[source]
        source: cni::Error,
    },
    /// Anything else (netns, state, responders).
    #[error("failed to create sandbox \"{sandbox_id}\": {source}")]
    Other {
        sandbox_id: String,
        #[source]
        source: Error,
    },
}

/// 64 random hex digits (sandbox and container ids).
pub fn hex64() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// TCP and UDP ports the pod's containers declare.
pub fn declared_ports(pod: &Pod) -> (Vec<u16>, Vec<u16>) {
    let mut tcp = Vec::new();
    let mut udp = Vec::new();
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    for p in containers.flat_map(|c| c.ports.iter().flatten()) {
        let Ok(port) = u16::try_from(p.container_port) else {
            continue;
        };
        match p.protocol.as_deref().unwrap_or("TCP") {
            "TCP" => tcp.push(port),
            "UDP" => udp.push(port),
            _ => {}
        }
    }
    for v in [&mut tcp, &mut udp] {
        v.sort_unstable();
        v.dedup();
    }
    (tcp, udp)
}

/// Capability args a CRI runtime offers plugins: `portMappings` from `hostPort`s (always present,
/// possibly empty) and `io.kubernetes.cri.pod-annotations` (containerd).
pub fn capability_args(pod: &Pod) -> Map<String, Value> {
    let mut mappings = Vec::new();
    let containers = pod.spec.iter().flat_map(|s| s.containers.iter());
    for p in containers.flat_map(|c| c.ports.iter().flatten()) {
        let Some(host_port) = p.host_port.filter(|h| *h > 0) else {
            continue;
        };
        let mut m = json!({
            "hostPort": host_port,
            "containerPort": p.container_port,
            "protocol": p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
        });
        if let Some(ip) = p.host_ip.as_deref().filter(|i| !i.is_empty()) {
            m["hostIP"] = json!(ip);
        }
        mappings.push(m);
    }
    let mut caps = Map::new();
    caps.insert("portMappings".into(), Value::Array(mappings));
    caps.insert(
        "io.kubernetes.cri.pod-annotations".into(),
        json!(pod.annotations()),
    );
    caps
}

fn invocation(ctx: &Ctx, rec: &SandboxRecord, args: String, caps: Map<String, Value>) -> Invocation {
    // A namespace that is already gone is passed as empty (allowed for DEL by the spec).
    let path = ctx.netns_path(&rec.netns);
    Invocation {
        container_id: rec.sandbox_id.clone(),
        netns: if path.exists() { path } else { PathBuf::new() },
        ifname: rec.ifname.clone(),
        args,
        capability_args: caps,
    }
}

/// Starts the pod's responders inside its netns (binding happens on a helper thread); none on
/// a hollow node.
pub(crate) async fn start_responders(
    ctx: &Ctx,
    pod: &Pod,
    rec: &SandboxRecord,
) -> Result<Option<responder::Responders>, Error> {
    if !ctx.responders() {
        return Ok(None);
    }
    let (tcp, udp) = declared_ports(pod);
    let path = netns::path(&rec.netns);
    let name = pod.name_any();
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let _guard = handle.enter();
        responder::start(&path, &name, &tcp, &udp)
    })
    .await
    .map_err(|_| Error::Netns {
        step: "start responders",
        source: netns::Error::Thread,
    })?
    .map(Some)
    .map_err(|source| Error::Netns {
        step: "start responders",
        source,
    })
}

/// Creates a sandbox for `pod`: records it, creates the netns, runs CNI ADD, caches the result,
/// starts the responders. On failure everything done so far is torn down.
pub(crate) async fn setup(ctx: &Arc<Ctx>, pod: &Pod) -> Result<Running, SetupError> {
    let list = ctx
        .cni_conf
        .load(&ctx.cfg.cni_conf_dir)
        .map_err(SetupError::NetworkNotReady)?;
    let sandbox_id = hex64();
    let other = |source| SetupError::Other {
        sandbox_id: sandbox_id.clone(),
        source,
    };
    let mut rec = SandboxRecord {
        pod_uid: pod.uid().unwrap_or_default(),
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        sandbox_id: sandbox_id.clone(),
        netns: format!("cni-{}", uuid::Uuid::new_v4()),
        ifname: IFNAME.into(),
        // Set from the start: a sandbox torn down before its result is cached gets a CNI DEL
        // with the current config (plugins take a DEL for what was never added, as the spec
        // requires), and the record is written once less per sandbox.
        network: Some(list.name.clone()),
        pod_ips: Vec::new(),
        container_id: hex64(),
        created: crate::k8s_now(),
        started: None,
    };
    let args = cni::config::cni_args(&rec.namespace, &rec.name, &sandbox_id, &rec.pod_uid);
    // Record first, so that a crash at any later point leaves something to clean up.
    ctx.put_record(&rec).map_err(other)?;
    let mut cache = CachedResult {
        kind: "cniCacheV1".into(),
        container_id: sandbox_id.clone(),
        if_name: rec.ifname.clone(),
        network_name: list.name.clone(),
        config: list.clone(),
        cni_args: args.clone(),
        capability_args: capability_args(pod),
        result: None,
    };
    let result = async {
        ctx.create_netns(&rec.netns)
            .await
            .map_err(|source| other(Error::Netns { step: "create netns", source }))?;
        ctx.store
            .save_result(&cache)
            .map_err(|source| other(Error::SaveState { source }))?;
        let res = cni::add_network(
            &*ctx.runner,
            &list,
            &invocation(ctx, &rec, args.clone(), cache.capability_args.clone()),
        )
            .await
            .map_err(|source| SetupError::Cni {
                sandbox_id: sandbox_id.clone(),
                source,
            })?;
        cache.result = Some(res.raw.clone());
        ctx.store
            .save_result(&cache)
            .map_err(|source| other(Error::SaveState { source }))?;
        rec.pod_ips = res.pod_ips(&rec.ifname).iter().map(IpAddr::to_string).collect();
        let responders = start_responders(ctx, pod, &rec).await.map_err(other)?;
        rec.started = Some(crate::precise_now());
        ctx.put_record(&rec).map_err(other)?;
        info!(pod = %rec.name, namespace = %rec.namespace, sandbox = %sandbox_id, ips = ?rec.pod_ips, "sandbox ready");
        Ok(Running {
            record: rec.clone(),
            responders,
        })
    }
    .await;
    if result.is_err() {
        let current = ctx.record(&sandbox_id).unwrap_or(rec);
        if let Err(e) = teardown(ctx, &current).await {
            warn!(sandbox = %sandbox_id, error = %e, "cannot tear down failed sandbox; garbage collection retries");
        }
    }
    result
}

/// Tears a sandbox down: CNI DEL (cached config and result; the current config when ADD never
/// ran), netns removal, forgetting it. Errors leave the record for a later retry.
pub(crate) async fn teardown(ctx: &Ctx, rec: &SandboxRecord) -> Result<(), Error> {
    if let Some(net) = &rec.network {
        let cached = ctx
            .store
            .load_result(net, &rec.sandbox_id, &rec.ifname)
            .map_err(|source| Error::LoadState { source })?;
        let (list, args, caps, prev) = match cached {
            Some(c) => (Some(c.config), c.cni_args, c.capability_args, c.result),
            None => (
                ctx.cni_conf.load(&ctx.cfg.cni_conf_dir).ok(),
                cni::config::cni_args(&rec.namespace, &rec.name, &rec.sandbox_id, &rec.pod_uid),
                Map::new(),
                None,
            ),
        };
        if let Some(list) = list {
            cni::del_network(
                &*ctx.runner,
                &list,
                &invocation(ctx, rec, args, caps),
                prev.as_ref(),
            )
            .await
            .map_err(|source| Error::Cni {
                sandbox_id: rec.sandbox_id.clone(),
                source,
            })?;
        }
        ctx.store.remove_result(net, &rec.sandbox_id, &rec.ifname);
    }
    ctx.delete_netns(&rec.netns)
        .await
        .map_err(|source| Error::Netns {
            step: "delete netns",
            source,
        })?;
    ctx.forget_record(&rec.sandbox_id)?;
    info!(pod = %rec.name, namespace = %rec.namespace, sandbox = %rec.sandbox_id, "sandbox removed");
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_ports() {
        let id = hex64();
        assert_eq!(id.len(), 64);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]},
                {"name": "b", "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 9, "protocol": "SCTP"}]}
            ]}
        }))
        .unwrap();
        assert_eq!(declared_ports(&pod), (vec![80], vec![53]));
        let caps = capability_args(&pod);
        assert_eq!(caps["portMappings"], json!([]));
        let hp: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "a", "ports": [
                {"containerPort": 80, "hostPort": 8080},
                {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "10.0.0.1"}]}]}
        }))
        .unwrap();
        let caps = capability_args(&hp);
        assert_eq!(
            caps["portMappings"],
            json!([{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
                   {"hostPort": 5353, "containerPort": 53, "protocol": "udp", "hostIP": "10.0.0.1"}])
        );
        assert_eq!(caps["io.kubernetes.cri.pod-annotations"], json!({"a": "b"}));
    }
}
