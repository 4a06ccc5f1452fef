//! The DaemonSet controller: one pod per node that matches the template's `nodeSelector` and
//! required node affinity and whose taints the pod tolerates (with the tolerations upstream adds
//! to daemon pods). Pods are created as upstream creates them — pinned by a required node
//! affinity `matchFields metadata.name In [<node>]` and bound by the scheduler — and labelled
//! `controller-revision-hash` and `pod-template-generation`. Updates follow `updateStrategy`:
//! RollingUpdate (`maxUnavailable`, or `maxSurge`) or OnDelete. Pods on nodes that must not run
//! one, surplus and finished pods are deleted; unscheduled pods aimed at a node that no longer
//! exists too (bound ones are the pod garbage collector's). The status carries
//! `desiredNumberScheduled`, `currentNumberScheduled`, `numberReady`, `numberAvailable`,
//! `numberUnavailable`, `updatedNumberScheduled`, `numberMisscheduled` and
//! `observedGeneration`, which `kubectl rollout status ds/x` reads.
//!
//! Knowingly different: no ControllerRevisions are written (the hash is only a label, so
//! `kubectl rollout history|undo ds/x` has nothing to show), and failed pods are replaced with a
//! per-node backoff of 1 s doubling to 15 min as upstream, kept in memory only.

pub mod plan;

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use jiff::Timestamp;
use k8s_openapi::api::{
    apps::v1::{DaemonSet, DaemonSetStatus},
    core::v1::{Node, Pod},
};
use kube::{
    Api, Client, ResourceExt,
    api::{PatchParams, PostParams},
    runtime::watcher,
};
use tokio::sync::Notify;
use tracing::{info, warn};

use super::{
    AbortOnDrop, Error,
    replicaset::delete_pod,
    spawn_reflector,
    workload::{
        Claim, Fresh, MANAGER, adopt, claim, controller_ref, pod_from_template, release, selector_matches,
    },
};
use crate::events::{EventType, Recorder, reference};

const BACKOFF_START: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// Runs the DaemonSet controller forever.
pub(crate) async fn run(client: Client, caches: super::Caches) -> Result<(), Error> {
    let notify = Arc::new(Notify::new());
    let (sets, h1) = spawn_reflector(
        Api::<DaemonSet>::all(client.clone()),
        watcher::Config::default(),
        notify.clone(),
    );
    let pods = caches.pods.subscribe(&notify);
    let nodes = caches.nodes.subscribe(&notify);
    let _guard = AbortOnDrop(vec![h1]);
    sets.wait_until_ready()
        .await
        .map_err(|_| Error::CacheSync("daemonsets"))?;
    let mut ctl = Controller {
        client: client.clone(),
        recorder: Recorder::new(client, "daemonset-controller", None),
        pods: Fresh::default(),
        sets: Fresh::default(),
        backoff: HashMap::new(),
    };
    info!("daemonset controller running");
    loop {
        let pass_started = std::time::Instant::now();
        let outcome = ctl.pass(sets.state(), pods.state(), nodes.state()).await;
        super::wait(&notify, outcome, pass_started.elapsed()).await;
    }
}

struct Controller {
    client: Client,
    recorder: Recorder,
    pods: Fresh<Pod>,
    sets: Fresh<DaemonSet>,
    /// (DaemonSet uid, node) → (no new deletion of a failed pod before, current delay).
    backoff: HashMap<(String, String), (Instant, Duration)>,
}

impl Controller {
    async fn pass(
        &mut self,
        cached_sets: Vec<Arc<DaemonSet>>,
        cached_pods: Vec<Arc<Pod>>,
        nodes: Vec<Arc<Node>>,
    ) -> super::Outcome {
        let now = Timestamp::now();
        let all_sets = self.sets.view(cached_sets);
        let all_pods = self.pods.view(cached_pods);
        let mut outcome = super::Outcome::default();
        for ds in all_sets
            .iter()
            .filter(|d| d.metadata.deletion_timestamp.is_none())
        {
            let ns = ds.namespace();
            let ns_pods: Vec<Arc<Pod>> = all_pods.iter().filter(|p| p.namespace() == ns).cloned().collect();
            let owned = self.claim(ds, &ns_pods).await;
            let by_node = plan::pods_by_node(&owned);
            let hash = plan::hash(ds);
            let mut changes = plan::manage(ds, &nodes, &by_node, &hash, now);
            let failed = std::mem::take(&mut changes.delete_failed);
            changes
                .delete
                .extend(self.failed_to_delete(ds, failed, &mut outcome));
            let nothing = changes.create_on.is_empty() && changes.delete.is_empty();
            let rolling = ds
                .spec
                .as_ref()
                .and_then(|s| s.update_strategy.as_ref())
                .and_then(|u| u.type_.as_deref())
                .is_none_or(|t| t == "RollingUpdate");
            if nothing && rolling {
                changes = plan::rolling_update(ds, &nodes, &by_node, &hash, now);
            }
            if !self.apply(ds, &hash, changes).await {
                outcome.retry = true;
            }
            let st = plan::status(ds, &nodes, &by_node, &hash, now);
            outcome.wake(plan::wake_at(ds, &by_node, now));
            if let Err(e) = self.write_status(ds, &st).await {
                warn!(daemonset = %ds.name_any(), namespace = ?ns, error = %e, "cannot update status");
                outcome.retry = true;
            }
        }
        outcome
    }

    /// Claims the namespace's pods: owned ones (adopting orphans, releasing mismatches).
    async fn claim(&mut self, ds: &DaemonSet, ns_pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
        let Some(selector) = ds.spec.as_ref().map(|s| &s.selector) else {
            return Vec::new();
        };
        let uid = ds.uid().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ds.namespace().unwrap_or_default());
        let owner = controller_ref(ds);
        let mut out = Vec::new();
        for pod in ns_pods {
            let matches = selector_matches(selector, pod.labels());
            match claim(&pod.metadata, &uid, matches, false) {
                Claim::Owned => out.push(pod.clone()),
                Claim::Adopt => match adopt(&api, pod.as_ref(), &owner).await {
                    Ok(p) => {
                        self.pods.wrote(p.clone());
                        out.push(Arc::new(p));
                    }
                    Err(e) => warn!(pod = %pod.name_any(), error = %e, "cannot adopt pod"),
                },
                Claim::Release => match release(&api, pod.as_ref(), &uid).await {
                    Ok(p) => self.pods.wrote(p),
                    Err(e) => warn!(pod = %pod.name_any(), error = %e, "cannot release pod"),
                },
                Claim::Ignore => {}
            }
        }
        out
    }

    /// The failed pods whose node is out of backoff (and starts the next backoff).
    fn failed_to_delete(
        &mut self,
        ds: &DaemonSet,
        failed: Vec<Arc<Pod>>,
        outcome: &mut super::Outcome,
    ) -> Vec<Arc<Pod>> {
        let now = Instant::now();
        let uid = ds.uid().unwrap_or_default();
        let mut out = Vec::new();
        for p in failed {
            let node = plan::target_node(&p).unwrap_or_default();
            let key = (uid.clone(), node.clone());
            match self.backoff.get(&key) {
                Some((until, _)) if *until > now => {
                    let left = *until - now;
                    outcome.wake(Some(Timestamp::now() + left));
                    warn!(daemonset = %ds.name_any(), node = %node, "failed daemon pod: backing off");
                }
                prev => {
                    let delay = prev.map_or(BACKOFF_START, |(_, d)| (*d * 2).min(BACKOFF_MAX));
                    self.backoff.insert(key, (now + delay, delay));
                    out.push(p);
                }
            }
        }
        // Forget nodes that stayed quiet for twice their delay.
        self.backoff
            .retain(|_, (until, delay)| now.duration_since(*until) < *delay * 2);
        out
    }

    /// Creates and deletes pods; false when something failed.
    async fn apply(&mut self, ds: &DaemonSet, hash: &str, changes: plan::Changes) -> bool {
        let ns = ds.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let mut ok = true;
        let template = plan::pod_template(ds, hash);
        let owner = controller_ref(ds);
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        let creates = changes.create_on.iter().map(|node| {
            let mut t = template.clone();
            let spec = t.spec.get_or_insert_with(Default::default);
            spec.affinity = Some(plan::pin_to_node(spec.affinity.take(), node));
            let pod = pod_from_template(&t, &ds.name_any(), owner.clone());
            let (api, params) = (&api, &params);
            async move { (node, api.create(params, &pod).await) }
        });
        for (node, res) in futures::future::join_all(creates).await {
            match res {
                Ok(p) => {
                    info!(daemonset = %ds.name_any(), namespace = %ns, node = %node, pod = %p.name_any(), "daemon pod created");
                    let msg = format!("Created pod: {}", p.name_any());
                    self.recorder
                        .record(reference(ds), EventType::Normal, "SuccessfulCreate", &msg)
                        .await;
                    self.pods.created(p);
                }
                Err(e) => {
                    warn!(daemonset = %ds.name_any(), node = %node, error = %e, "cannot create daemon pod");
                    let msg = format!("Error creating: {e}");
                    self.recorder
                        .record(reference(ds), EventType::Warning, "FailedCreate", &msg)
                        .await;
                    ok = false;
                }
            }
        }
        let deletes = changes.delete.iter().map(|p| {
            let api = &api;
            async move { (p, delete_pod(api, p).await) }
        });
        for (pod, res) in futures::future::join_all(deletes).await {
            match res {
                Ok(after) => {
                    info!(daemonset = %ds.name_any(), namespace = %ns, pod = %pod.name_any(), "daemon pod deleted");
                    let msg = format!("Deleted pod: {}", pod.name_any());
                    self.recorder
                        .record(reference(ds), EventType::Normal, "SuccessfulDelete", &msg)
                        .await;
                    match after {
                        Some(p) if p.metadata.deletion_timestamp.is_some() => self.pods.wrote(p),
                        _ => self.pods.deleted(&pod.uid().unwrap_or_default()),
                    }
                }
                Err(e) => {
                    warn!(pod = %pod.name_any(), error = %e, "cannot delete daemon pod");
                    ok = false;
                }
            }
        }
        ok
    }

    async fn write_status(&mut self, ds: &DaemonSet, st: &DaemonSetStatus) -> Result<(), kube::Error> {
        let current = serde_json::to_value(&ds.status).unwrap_or_default();
        let want = serde_json::to_value(st).unwrap_or_default();
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        if let Some(new) = super::workload::patch_status(&self.client, ds, &current, &want, &params).await? {
            self.sets.wrote(new);
        }
        Ok(())
    }
}
