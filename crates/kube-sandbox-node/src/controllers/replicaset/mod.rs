//! The ReplicaSet controller: keeps `spec.replicas` active pods for every ReplicaSet (pods named
//! `<rs>-<5 random characters>` through `generateName`, controlled by the ReplicaSet), adopts
//! matching orphans and releases pods it no longer selects, deletes surplus pods unscheduled /
//! pending / not ready first, and reports `replicas`, `fullyLabeledReplicas`, `readyReplicas`,
//! `availableReplicas` (honouring `minReadySeconds`), `observedGeneration` and the
//! `ReplicaFailure` condition in the status. Events as upstream's (`SuccessfulCreate`,
//! `SuccessfulDelete`, `FailedCreate`).

pub mod plan;

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, PatchParams, PostParams},
    runtime::watcher,
};
use tokio::sync::Notify;
use tracing::{info, warn};

use super::{
    AbortOnDrop, Error, spawn_reflector,
    workload::{Fresh, MANAGER, adopt, controller_of, controller_ref, pod_from_template, release},
};
use crate::events::{EventType, Recorder, reference};

/// Runs the ReplicaSet controller forever.
pub(crate) async fn run(client: Client, caches: super::Caches) -> Result<(), Error> {
    let notify = Arc::new(Notify::new());
    let (sets, h1) = spawn_reflector(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
        notify.clone(),
    );
    let pods = caches.pods.subscribe(&notify);
    let _guard = AbortOnDrop(vec![h1]);
    sets.wait_until_ready()
        .await
        .map_err(|_| Error::CacheSync("replicasets"))?;
    let mut ctl = Controller {
        client: client.clone(),
        recorder: Recorder::new(client, "replicaset-controller", None),
        pods: Fresh::default(),
        sets: Fresh::default(),
    };
    info!("replicaset controller running");
    loop {
        let pass_started = std::time::Instant::now();
        let outcome = ctl.pass(sets.state(), pods.state()).await;
        super::wait(&notify, outcome, pass_started.elapsed()).await;
    }
}

struct Controller {
    client: Client,
    recorder: Recorder,
    pods: Fresh<Pod>,
    sets: Fresh<ReplicaSet>,
}

impl Controller {
    async fn pass(
        &mut self,
        cached_sets: Vec<Arc<ReplicaSet>>,
        cached_pods: Vec<Arc<Pod>>,
    ) -> super::Outcome {
        let now = jiff::Timestamp::now();
        let all_sets = self.sets.view(cached_sets);
        let all_pods = self.pods.view(cached_pods);
        let mut by_ns: HashMap<Option<String>, Vec<Arc<Pod>>> = HashMap::new();
        for p in &all_pods {
            by_ns.entry(p.namespace()).or_default().push(p.clone());
        }
        let mut outcome = super::Outcome::default();
        for rs in &all_sets {
            let ns_pods = by_ns.get(&rs.namespace()).map(Vec::as_slice).unwrap_or_default();
            let related = related_pods(rs, &all_sets, ns_pods);
            let p = plan::plan(rs, ns_pods, &related);
            let error = self.act(rs, &p).await;
            if error.is_some() {
                outcome.retry = true;
            }
            let desired = plan::status(rs, &p.active, error.as_deref(), now);
            outcome.wake(plan::wake_at(rs, &p.active, now));
            if let Err(e) = self.write_status(rs, &desired).await {
                warn!(replicaset = %rs.name_any(), namespace = ?rs.namespace(), error = %e, "cannot update status");
                outcome.retry = true;
            }
        }
        outcome
    }

    /// Adoption, release, creation and deletion; the first error, if any.
    async fn act(&mut self, rs: &ReplicaSet, p: &plan::Plan) -> Option<String> {
        let ns = rs.namespace().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let owner = controller_ref(rs);
        let mut error = None;
        for pod in &p.adopt {
            match adopt(&api, pod, &owner).await {
                Ok(new) => self.pods.wrote(new),
                Err(e) => warn!(pod = %pod.name_any(), namespace = %ns, error = %e, "cannot adopt pod"),
            }
        }
        for pod in &p.release {
            match release(&api, pod, &owner.uid).await {
                Ok(new) => self.pods.wrote(new),
                Err(e) => warn!(pod = %pod.name_any(), namespace = %ns, error = %e, "cannot release pod"),
            }
        }
        if p.create > 0 {
            let Some(template) = rs.spec.as_ref().and_then(|s| s.template.as_ref()) else {
                return Some("replica set has no pod template".into());
            };
            let pod = pod_from_template(template, &rs.name_any(), owner.clone());
            let params = PostParams {
                field_manager: Some(MANAGER.into()),
                ..Default::default()
            };
            let creates = (0..p.create).map(|_| api.create(&params, &pod));
            for res in futures::future::join_all(creates).await {
                match res {
                    Ok(created) => {
                        let msg = format!("Created pod: {}", created.name_any());
                        info!(replicaset = %rs.name_any(), namespace = %ns, pod = %created.name_any(), "pod created");
                        self.recorder
                            .record(reference(rs), EventType::Normal, "SuccessfulCreate", &msg)
                            .await;
                        self.pods.created(created);
                    }
                    Err(e) => {
                        let msg = format!("Error creating: {e}");
                        warn!(replicaset = %rs.name_any(), namespace = %ns, error = %e, "cannot create pod");
                        self.recorder
                            .record(reference(rs), EventType::Warning, "FailedCreate", &msg)
                            .await;
                        error.get_or_insert(e.to_string());
                    }
                }
            }
        }
        let deletes = p.delete.iter().map(|pod| {
            let api = &api;
            async move { (pod, delete_pod(api, pod).await) }
        });
        for (pod, res) in futures::future::join_all(deletes).await {
            match res {
                Ok(gone) => {
                    info!(replicaset = %rs.name_any(), namespace = %ns, pod = %pod.name_any(), "pod deleted");
                    let msg = format!("Deleted pod: {}", pod.name_any());
                    self.recorder
                        .record(reference(rs), EventType::Normal, "SuccessfulDelete", &msg)
                        .await;
                    self.record_deletion(pod, gone);
                }
                Err(e) => {
                    warn!(pod = %pod.name_any(), namespace = %ns, error = %e, "cannot delete pod");
                    let msg = format!("Error deleting: {e}");
                    self.recorder
                        .record(reference(rs), EventType::Warning, "FailedDelete", &msg)
                        .await;
                    error.get_or_insert(e.to_string());
                }
            }
        }
        error
    }

    fn record_deletion(&mut self, pod: &Pod, after: Option<Pod>) {
        match after {
            Some(p) if p.metadata.deletion_timestamp.is_some() => self.pods.wrote(p),
            _ => self.pods.deleted(&pod.uid().unwrap_or_default()),
        }
    }

    async fn write_status(
        &mut self,
        rs: &ReplicaSet,
        desired: &k8s_openapi::api::apps::v1::ReplicaSetStatus,
    ) -> Result<(), kube::Error> {
        let current = serde_json::to_value(&rs.status).unwrap_or_default();
        let want = serde_json::to_value(desired).unwrap_or_default();
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        if let Some(new) = super::workload::patch_status(&self.client, rs, &current, &want, &params).await? {
            self.sets.wrote(new);
        }
        Ok(())
    }
}

/// Deletes `pod` (default grace: a bound pod waits for its kubelet); returns the pod the server
/// answered with (`None` when it was already gone).
pub(crate) async fn delete_pod(api: &Api<Pod>, pod: &Pod) -> Result<Option<Pod>, kube::Error> {
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&pod.name_any(), &params).await {
        Ok(answer) => Ok(answer.left()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Pods controlled by `rs` or by a ReplicaSet with the same controller (the pods upstream ranks
/// deletions against: `getIndirectlyRelatedPods`).
fn related_pods(rs: &ReplicaSet, all_sets: &[Arc<ReplicaSet>], ns_pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    let mut owners: HashSet<String> = HashSet::from([rs.uid().unwrap_or_default()]);
    if let Some(top) = controller_of(&rs.metadata) {
        for other in all_sets {
            if other.namespace() == rs.namespace()
                && controller_of(&other.metadata).is_some_and(|r| r.uid == top.uid)
            {
                owners.insert(other.uid().unwrap_or_default());
            }
        }
    }
    ns_pods
        .iter()
        .filter(|p| controller_of(&p.metadata).is_some_and(|r| owners.contains(&r.uid)))
        .cloned()
        .collect()
}
