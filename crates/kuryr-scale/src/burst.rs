//! A burst of pods, measured from outside: each pod's create call, the first time a watch sees
//! its KuryrPort with `status.vifs`, and the first time it sees the pod Ready (one monotonic
//! clock, this process's).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use kuryr_types::KuryrPort;
use serde_json::json;

use crate::Error;

/// Label of every pod a burst creates.
pub const LABEL: &str = "kuryr-scale";

type Seen = Arc<Mutex<HashMap<String, Instant>>>;

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Watches every pod and KuryrPort, recording when each first had VIFs and when each pod was
/// first Ready. Dropping it stops the watches.
#[derive(Debug)]
pub struct Observer {
    /// `ns/name` → first seen with `status.vifs`.
    pub vifs: Seen,
    /// `ns/name` → first seen Ready.
    pub ready: Seen,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn key(ns: Option<&str>, name: Option<&str>) -> String {
    format!("{}/{}", ns.unwrap_or(""), name.unwrap_or(""))
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl Observer {
    /// Starts both watches.
    pub fn start(client: &Client) -> Observer {
        let vifs: Seen = Arc::default();
        let ready: Seen = Arc::default();
        let kps: Api<KuryrPort> = Api::all(client.clone());
        let seen = vifs.clone();
        let t1 = tokio::spawn(async move {
            let s = watcher(kps, watcher::Config::default())
                .default_backoff()
                .applied_objects();
            let _ = s
                .try_for_each(|kp| {
                    if kp.status.as_ref().is_some_and(|s| !s.vifs.is_empty()) {
                        lock(&seen)
                            .entry(key(kp.metadata.namespace.as_deref(), kp.metadata.name.as_deref()))
                            .or_insert_with(Instant::now);
                    }
                    futures::future::ready(Ok(()))
                })
                .await;
        });
        let pods: Api<Pod> = Api::all(client.clone());
        let seen = ready.clone();
        let t2 = tokio::spawn(async move {
            let cfg = watcher::Config::default().labels(LABEL);
            let s = watcher(pods, cfg).default_backoff().applied_objects();
            let _ = s
                .try_for_each(|p| {
                    if is_ready(&p) {
                        lock(&seen)
                            .entry(key(p.metadata.namespace.as_deref(), p.metadata.name.as_deref()))
                            .or_insert_with(Instant::now);
                    }
                    futures::future::ready(Ok(()))
                })
                .await;
        });
        Observer {
            vifs,
            ready,
            tasks: vec![t1, t2],
        }
    }
}

/// What a burst measured.
#[derive(Debug, Default)]
pub struct Burst {
    /// Pod create → KuryrPort `status.vifs`, one per pod that got there.
    pub vifs: Vec<Duration>,
    /// Pod create → Ready.
    pub ready: Vec<Duration>,
    /// First create → last Ready.
    pub took: Duration,
}

/// One pod of a burst.
#[derive(Debug, Clone)]
pub struct PodAt {
    /// Namespace.
    pub ns: String,
    /// Name.
    pub name: String,
    /// Hollow node (`spec.nodeName`: the emulated scheduler is not what is measured here).
    pub node: String,
    /// The Service group it belongs to ([`crate::services::GROUP`]; empty: none).
    pub group: String,
}

/// Creates `pods` (at most `concurrency` requests at once) and waits until all are Ready or
/// `timeout` passed.
pub async fn run(
    client: &Client,
    observer: &Observer,
    pods: &[PodAt],
    concurrency: usize,
    timeout: Duration,
    mut broken: impl FnMut() -> Option<String>,
) -> Result<Burst, Error> {
    let created: Seen = Arc::default();
    let started = Instant::now();
    futures::stream::iter(pods.iter().cloned())
        .map(|p| {
            let client = client.clone();
            let created = created.clone();
            async move {
                let mut labels = json!({LABEL: "burst"});
                if !p.group.is_empty() {
                    labels[crate::services::GROUP] = json!(p.group);
                }
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {"name": p.name, "namespace": p.ns, "labels": labels},
                    "spec": {"nodeName": p.node, "containers": [{"name": "c", "image": "busybox"}]}
                }))
                .map_err(|e| Error::Start {
                    what: format!("pod {}", p.name),
                    message: e.to_string(),
                })?;
                lock(&created).insert(key(Some(&p.ns), Some(&p.name)), Instant::now());
                Api::<Pod>::namespaced(client, &p.ns)
                    .create(&PostParams::default(), &pod)
                    .await
                    .map_err(Error::kube(format!("creating pod {}/{}", p.ns, p.name)))?;
                Ok::<(), Error>(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    let deadline = started + timeout;
    loop {
        let ready = {
            let c = lock(&created);
            let r = lock(&observer.ready);
            c.keys().filter(|k| r.contains_key(*k)).count()
        };
        if ready == pods.len() {
            break;
        }
        if let Some(why) = broken() {
            return Err(Error::Start {
                what: format!("the burst ({ready} of {} pods Ready)", pods.len()),
                message: why,
            });
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout(format!(
                "{ready} of {} pods Ready after {timeout:?}",
                pods.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let c = lock(&created);
    let since = |seen: &Seen| -> (Vec<Duration>, Option<Instant>) {
        let s = lock(seen);
        let mut last = None;
        let d = c
            .iter()
            .filter_map(|(k, t0)| {
                let t = s.get(k)?;
                last = last.max(Some(*t));
                Some(t.saturating_duration_since(*t0))
            })
            .collect();
        (d, last)
    };
    let (vifs, _) = since(&observer.vifs);
    let (ready, last) = since(&observer.ready);
    Ok(Burst {
        vifs,
        ready,
        took: last.map_or(Duration::ZERO, |l| l.saturating_duration_since(started)),
    })
}

/// The pods of a burst of `n` on `nodes` hollow nodes (round robin), `per_ns` a namespace.
pub fn layout(prefix: &str, n: usize, nodes: usize, per_ns: usize) -> Vec<PodAt> {
    (0..n)
        .map(|i| PodAt {
            ns: format!("scale-{}", i / per_ns.max(1)),
            name: format!("{prefix}{i}"),
            node: format!("hollow-{}", i % nodes.max(1) + 1),
            group: String::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn layout_spreads_pods_over_nodes_and_namespaces() {
        let l = super::layout("p", 5, 2, 2);
        let at: Vec<(&str, &str)> = l.iter().map(|p| (p.ns.as_str(), p.node.as_str())).collect();
        assert_eq!(
            at,
            [
                ("scale-0", "hollow-1"),
                ("scale-0", "hollow-2"),
                ("scale-1", "hollow-1"),
                ("scale-1", "hollow-2"),
                ("scale-2", "hollow-1")
            ]
        );
    }
}
