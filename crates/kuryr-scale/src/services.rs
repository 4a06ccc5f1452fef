//! A burst of ClusterIP Services over the step's pods, measured from outside: each Service's
//! create call, and the first time a watch sees its KuryrLoadBalancer's status with as many
//! members as the Service has ready backends (the controller writes the status once the load
//! balancer is `ACTIVE` with its members: converged).

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, Client,
    api::PostParams,
    runtime::{WatchStreamExt, watcher},
};
use kuryr_types::KuryrLoadBalancer;
use serde_json::json;

use crate::{
    Error,
    burst::{PodAt, lock},
};

/// The label that puts a pod behind one Service of its namespace.
pub const GROUP: &str = "kuryr-scale-group";

/// One Service of a burst.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAt {
    /// Namespace.
    pub ns: String,
    /// Name.
    pub name: String,
    /// The value of [`GROUP`] it selects.
    pub group: String,
    /// Its backends (pods of the burst with that group in that namespace).
    pub backends: usize,
}

/// `services` Services spread over the namespaces of `pods`, each selecting the pods of one
/// group there; `pods` get their groups (`groups` a namespace, round robin).
pub fn layout(pods: &mut [PodAt], services: usize) -> Vec<ServiceAt> {
    let mut namespaces: Vec<String> = pods.iter().map(|p| p.ns.clone()).collect();
    namespaces.dedup();
    if services == 0 || namespaces.is_empty() {
        return Vec::new();
    }
    let groups = services.div_ceil(namespaces.len());
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut backends: BTreeMap<(String, String), usize> = BTreeMap::new();
    for p in pods.iter_mut() {
        let i = index.entry(p.ns.clone()).or_default();
        p.group = format!("g{}", *i % groups);
        *i += 1;
        *backends.entry((p.ns.clone(), p.group.clone())).or_default() += 1;
    }
    (0..services)
        .map(|j| {
            let ns = namespaces[(j / groups) % namespaces.len()].clone();
            let group = format!("g{}", j % groups);
            ServiceAt {
                backends: backends.get(&(ns.clone(), group.clone())).copied().unwrap_or(0),
                name: format!("svc-{group}"),
                ns,
                group,
            }
        })
        .collect()
}

/// `ns/name` → (members → first seen with that many).
type Seen = Arc<Mutex<HashMap<String, BTreeMap<usize, Instant>>>>;

/// Watches KuryrLoadBalancers, recording when each first had a load balancer in its status
/// with N members. Dropping it stops the watch.
#[derive(Debug)]
pub struct Observer {
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Observer {
    /// Starts the watch.
    pub fn start(client: &Client) -> Observer {
        let seen: Seen = Arc::default();
        let klbs: Api<KuryrLoadBalancer> = Api::all(client.clone());
        let s = seen.clone();
        let task = tokio::spawn(async move {
            let stream = watcher(klbs, watcher::Config::default())
                .default_backoff()
                .applied_objects();
            let _ = stream
                .try_for_each(|k| {
                    if let Some(st) = k.status.as_ref().filter(|s| s.loadbalancer.is_some()) {
                        let members = st.members.as_ref().map_or(0, Vec::len);
                        let key = format!(
                            "{}/{}",
                            k.metadata.namespace.as_deref().unwrap_or(""),
                            k.metadata.name.as_deref().unwrap_or("")
                        );
                        lock(&s)
                            .entry(key)
                            .or_default()
                            .entry(members)
                            .or_insert_with(Instant::now);
                    }
                    futures::future::ready(Ok(()))
                })
                .await;
        });
        Observer { seen, task }
    }

    /// When `key` was first seen with at least `members` members.
    fn converged(&self, key: &str, members: usize) -> Option<Instant> {
        lock(&self.seen).get(key)?.range(members..).map(|(_, t)| *t).min()
    }
}

/// What a Service burst measured.
#[derive(Debug, Default)]
pub struct Burst {
    /// Service create → its load balancer converged with every backend a member.
    pub converged: Vec<Duration>,
    /// First create → last converged.
    pub took: Duration,
}

/// Creates `services` (at most `concurrency` requests at once) and waits until each one's load
/// balancer has all its backends as members, or `timeout` passed.
pub async fn run(
    client: &Client,
    observer: &Observer,
    services: &[ServiceAt],
    concurrency: usize,
    timeout: Duration,
    mut broken: impl FnMut() -> Option<String>,
) -> Result<Burst, Error> {
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let started = Instant::now();
    futures::stream::iter(services.iter().cloned())
        .map(|s| {
            let client = client.clone();
            let created = created.clone();
            async move {
                let svc: Service = serde_json::from_value(json!({
                    "metadata": {"name": s.name, "namespace": s.ns},
                    "spec": {"selector": {GROUP: s.group},
                             "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}
                }))
                .map_err(|e| Error::Start {
                    what: format!("service {}", s.name),
                    message: e.to_string(),
                })?;
                lock(&created).insert(format!("{}/{}", s.ns, s.name), Instant::now());
                Api::<Service>::namespaced(client, &s.ns)
                    .create(&PostParams::default(), &svc)
                    .await
                    .map_err(Error::kube(format!("creating service {}/{}", s.ns, s.name)))?;
                Ok::<(), Error>(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    let deadline = started + timeout;
    let done = |s: &ServiceAt| observer.converged(&format!("{}/{}", s.ns, s.name), s.backends);
    loop {
        let n = services.iter().filter(|s| done(s).is_some()).count();
        if n == services.len() {
            break;
        }
        if let Some(why) = broken() {
            return Err(Error::Start {
                what: format!("the Service burst ({n} of {} converged)", services.len()),
                message: why,
            });
        }
        if Instant::now() > deadline {
            return Err(Error::Timeout(format!(
                "{n} of {} load balancers converged after {timeout:?}",
                services.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let c = lock(&created);
    let mut last = started;
    let converged = services
        .iter()
        .filter_map(|s| {
            let t0 = c.get(&format!("{}/{}", s.ns, s.name))?;
            let t = done(s)?;
            last = last.max(t);
            Some(t.saturating_duration_since(*t0))
        })
        .collect();
    Ok(Burst {
        converged,
        took: last.saturating_duration_since(started),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_spread_over_namespaces_and_select_groups_of_their_pods() {
        let mut pods = crate::burst::layout("p", 8, 2, 4);
        let s = layout(&mut pods, 4);
        let groups: Vec<&str> = pods.iter().map(|p| p.group.as_str()).collect();
        assert_eq!(groups, ["g0", "g1", "g0", "g1", "g0", "g1", "g0", "g1"]);
        let at: Vec<(&str, &str, usize)> = s
            .iter()
            .map(|s| (s.ns.as_str(), s.group.as_str(), s.backends))
            .collect();
        assert_eq!(
            at,
            [
                ("scale-0", "g0", 2),
                ("scale-0", "g1", 2),
                ("scale-1", "g0", 2),
                ("scale-1", "g1", 2)
            ]
        );
        assert!(layout(&mut pods, 0).is_empty());
    }
}
