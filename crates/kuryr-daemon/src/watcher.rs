//! The two watchers that feed the [`Registry`]: this node's KuryrPorts (label
//! `kuryr.openstack.org/nodeName=<node>`) and pods (field `spec.nodeName=<node>`, metadata only),
//! both decoded without `managedFields` ([`kube_lean`]).

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client, ResourceExt,
    core::PartialObjectMeta,
    runtime::{WatchStreamExt, watcher},
};
use kube_lean::Lean;
use kuryr_types::{KuryrPort, constants::KURYRPORT_LABEL};
use tracing::{info, warn};

use crate::{
    health::Health,
    registry::{PodRecord, PortRecord, Registry, Source, pod_key},
};

fn key_of<K: ResourceExt>(o: &K) -> String {
    pod_key(&o.namespace().unwrap_or_default(), &o.name_any())
}

/// Watches KuryrPorts of `node` until the stream ends (it retries with backoff on errors).
pub async fn watch_ports(client: Client, node: String, registry: Arc<Registry>, health: Arc<Health>) {
    let api: Api<Lean<KuryrPort>> = Api::all(client);
    let cfg = watcher::Config::default().labels(&format!("{KURYRPORT_LABEL}={node}"));
    let mut stream = kube_lean::watcher(api, cfg).default_backoff().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(ev)) => match ev {
                watcher::Event::Init => registry.relist_start(Source::Ports),
                watcher::Event::InitApply(kp) | watcher::Event::Apply(kp) => {
                    registry.put_port(key_of(&kp), PortRecord::from_kp(&kp));
                }
                watcher::Event::Delete(kp) => registry.delete_port(&key_of(&kp)),
                watcher::Event::InitDone => {
                    registry.relist_done(Source::Ports);
                    info!(node = %node, ports = registry.port_count(), "KuryrPorts listed");
                }
            },
            Ok(None) => break,
            Err(e) => warn!(error = %e, "KuryrPort watch error, retrying"),
        }
    }
    warn!("KuryrPort watcher ended");
    health.watcher_died();
}

/// Watches pods of `node` until the stream ends. Metadata only (`as=PartialObjectMetadata`):
/// the registry needs a pod's UID and whether it is terminating, and a node sees every change
/// of each of its pods' status, so decoding whole pods cost the node's CPU for nothing (on the
/// emulated VM nodes, a measurable share of each pod's start).
pub async fn watch_pods(client: Client, node: String, registry: Arc<Registry>, health: Arc<Health>) {
    let api: Api<Lean<PartialObjectMeta<Pod>>> = Api::all(client);
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut stream = kube_lean::watcher(api, cfg).default_backoff().boxed();
    loop {
        match stream.try_next().await {
            Ok(Some(ev)) => match ev {
                watcher::Event::Init => registry.relist_start(Source::Pods),
                watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                    let rec = PodRecord {
                        uid: p.metadata.uid.clone().unwrap_or_default(),
                        terminating: p.metadata.deletion_timestamp.is_some(),
                    };
                    registry.put_pod(key_of(&p), rec);
                }
                watcher::Event::Delete(p) => registry.delete_pod(&key_of(&p)),
                watcher::Event::InitDone => {
                    registry.relist_done(Source::Pods);
                    info!(node = %node, "pods listed");
                }
            },
            Ok(None) => break,
            Err(e) => warn!(error = %e, "pod watch error, retrying"),
        }
    }
    warn!("pod watcher ended");
    health.watcher_died();
}
