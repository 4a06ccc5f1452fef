//! The Deployment controller: owns the ReplicaSets whose labels its selector matches (adopting
//! orphans, releasing the ones it no longer selects), creates the new ReplicaSet
//! `<deployment>-<pod-template-hash>` for the current template, and moves replicas to it with
//! the RollingUpdate (`maxSurge` / `maxUnavailable`, computed from available pods) or Recreate
//! strategy; scales proportionally when resized mid-rollout or paused; keeps the
//! `deployment.kubernetes.io/revision` annotations; trims old ReplicaSets (scaled to 0) to
//! `revisionHistoryLimit`; and writes the status and the `Available` / `Progressing` conditions
//! `kubectl rollout status` waits for. The decisions are in [`rollout`], [`status`] and
//! [`newrs`]; this module does the I/O in the order upstream's `syncDeployment` does.

pub mod newrs;
pub mod rollout;
pub mod status;

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::{
    apps::v1::{Deployment, DeploymentStatus, ReplicaSet},
    core::v1::Pod,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    runtime::watcher,
};
use serde_json::json;
use tokio::sync::Notify;
use tracing::{debug, info, warn};

use super::{
    AbortOnDrop, Error, spawn_reflector,
    workload::{
        Claim, Fresh, MANAGER, adopt, claim, controller_of, controller_ref, is_terminal, release,
        selector_matches,
    },
};
use crate::events::{EventType, Recorder, reference};
use rollout::{Params, RsState, params};

/// Runs the Deployment controller forever.
pub(crate) async fn run(client: Client, caches: super::Caches) -> Result<(), Error> {
    let notify = Arc::new(Notify::new());
    let (deps, h1) = spawn_reflector(
        Api::<Deployment>::all(client.clone()),
        watcher::Config::default(),
        notify.clone(),
    );
    let (sets, h2) = spawn_reflector(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
        notify.clone(),
    );
    let pods = caches.pods.subscribe(&notify);
    let _guard = AbortOnDrop(vec![h1, h2]);
    for (store_ready, what) in [
        (deps.wait_until_ready().await.is_ok(), "deployments"),
        (sets.wait_until_ready().await.is_ok(), "replicasets"),
        (pods.wait_until_ready().await.is_ok(), "pods"),
    ] {
        if !store_ready {
            return Err(Error::CacheSync(what));
        }
    }
    let mut ctl = Controller {
        client: client.clone(),
        recorder: Recorder::new(client, "deployment-controller", None),
        deps: Fresh::default(),
        sets: Fresh::default(),
    };
    info!("deployment controller running");
    loop {
        let pass_started = std::time::Instant::now();
        let now = Timestamp::now();
        let all_deps = ctl.deps.view(deps.state());
        let all_sets = ctl.sets.view(sets.state());
        let all_pods = pods.state();
        let mut outcome = super::Outcome::default();
        for d in &all_deps {
            let ns = d.namespace();
            let ns_sets: Vec<ReplicaSet> = all_sets
                .iter()
                .filter(|r| r.namespace() == ns)
                .map(|r| (**r).clone())
                .collect();
            let ns_pods: Vec<Arc<Pod>> = all_pods.iter().filter(|p| p.namespace() == ns).cloned().collect();
            match ctl.sync(d, ns_sets, &ns_pods, now).await {
                Ok(wake) => outcome.wake(wake),
                Err(e) => {
                    warn!(deployment = %d.name_any(), namespace = ?ns, error = %e, "sync failed");
                    outcome.retry = true;
                }
            }
        }
        super::wait(&notify, outcome, pass_started.elapsed()).await;
    }
}

struct Controller {
    client: Client,
    recorder: Recorder,
    deps: Fresh<Deployment>,
    sets: Fresh<ReplicaSet>,
}

/// One Deployment being synced: its ReplicaSets and the status this pass builds.
struct Sync<'a> {
    d: &'a Deployment,
    p: Params,
    rss: Vec<ReplicaSet>,
    st: DeploymentStatus,
    /// The Deployment's revision annotation as last written.
    revision: Option<String>,
    now: Timestamp,
}

impl Sync<'_> {
    fn state(&self, i: usize) -> RsState {
        RsState::of(&self.rss[i])
    }
    fn old(&self, new: Option<usize>) -> Vec<usize> {
        (0..self.rss.len()).filter(|i| Some(*i) != new).collect()
    }
}

fn params_for(client: &Client, ns: &str) -> (Api<ReplicaSet>, PatchParams) {
    (
        Api::namespaced(client.clone(), ns),
        PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        },
    )
}

impl Controller {
    async fn sync(
        &mut self,
        d: &Deployment,
        ns_sets: Vec<ReplicaSet>,
        ns_pods: &[Arc<Pod>],
        now: Timestamp,
    ) -> Result<Option<Timestamp>, kube::Error> {
        let Some(spec) = d.spec.as_ref() else {
            return Ok(None);
        };
        let sel = &spec.selector;
        if sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
            && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty())
        {
            debug!(deployment = %d.name_any(), "empty selector: not syncing");
            return Ok(None);
        }
        let rss = self.claim(d, ns_sets).await;
        let mut s = Sync {
            d,
            p: params(d),
            rss,
            st: d.status.clone().unwrap_or_default(),
            revision: d.annotations().get(rollout::REVISION).cloned(),
            now,
        };
        if d.metadata.deletion_timestamp.is_some() {
            let new = self.new_rs(&mut s, false).await?;
            self.finish_plain(&mut s, new).await?;
            return Ok(None);
        }
        status::paused_condition(d, &mut s.st, now);
        let paused = spec.paused.unwrap_or(false);
        let new = self.new_rs(&mut s, false).await?;
        let scaling = (0..s.rss.len()).any(|i| {
            let rs = &s.rss[i];
            rs.spec.as_ref().and_then(|x| x.replicas).unwrap_or(0) > 0
                && rollout::annotation_int(rs, rollout::DESIRED_REPLICAS).is_some_and(|v| v != s.p.replicas)
        });
        if paused || scaling {
            self.scale(&mut s, new).await?;
            if paused {
                self.cleanup(&s, new).await;
            }
            self.finish_plain(&mut s, new).await?;
            return Ok(None);
        }
        if s.p.rolling {
            self.rolling(&mut s).await
        } else {
            self.recreate(&mut s, new, ns_pods).await
        }
    }

    /// `getReplicaSetsForDeployment`: claims the namespace's ReplicaSets.
    async fn claim(&mut self, d: &Deployment, ns_sets: Vec<ReplicaSet>) -> Vec<ReplicaSet> {
        let Some(spec) = d.spec.as_ref() else {
            return Vec::new();
        };
        let uid = d.uid().unwrap_or_default();
        let deleting = d.metadata.deletion_timestamp.is_some();
        let (api, _) = params_for(&self.client, &d.namespace().unwrap_or_default());
        let owner = controller_ref(d);
        let mut out = Vec::new();
        for rs in ns_sets {
            let matches = selector_matches(&spec.selector, rs.labels());
            match claim(&rs.metadata, &uid, matches, deleting) {
                Claim::Owned => out.push(rs),
                Claim::Adopt => match adopt(&api, &rs, &owner).await {
                    Ok(new) => {
                        self.sets.wrote(new.clone());
                        out.push(new);
                    }
                    Err(e) => warn!(replicaset = %rs.name_any(), error = %e, "cannot adopt replica set"),
                },
                Claim::Release => match release(&api, &rs, &uid).await {
                    Ok(new) => self.sets.wrote(new),
                    Err(e) => warn!(replicaset = %rs.name_any(), error = %e, "cannot release replica set"),
                },
                Claim::Ignore => {}
            }
        }
        out
    }

    /// `getNewReplicaSet`: finds the new ReplicaSet and brings its annotations up to date, or
    /// (with `create`) creates it. Returns its index in `s.rss`.
    async fn new_rs(&mut self, s: &mut Sync<'_>, create: bool) -> Result<Option<usize>, kube::Error> {
        let found = newrs::find_new(s.d, &s.rss);
        let max_old = s
            .old(found)
            .iter()
            .map(|i| rollout::revision(&s.rss[*i]))
            .max()
            .unwrap_or(0);
        let new_revision = max_old + 1;
        let ns = s.d.namespace().unwrap_or_default();
        let (api, pp) = params_for(&self.client, &ns);
        if let Some(i) = found {
            let rs = &s.rss[i];
            let annotations = newrs::annotations(s.d, rs, new_revision, true, &s.p);
            let min_ready = s.d.spec.as_ref().and_then(|x| x.min_ready_seconds);
            let rs_min_ready = rs.spec.as_ref().and_then(|x| x.min_ready_seconds);
            if annotations.is_some() || min_ready.unwrap_or(0) != rs_min_ready.unwrap_or(0) {
                let mut body = json!({"metadata": {"resourceVersion": rs.resource_version()},
                    "spec": {"minReadySeconds": min_ready}});
                if let Some(a) = annotations {
                    body["metadata"]["annotations"] = json!(a);
                }
                let updated = api.patch(&rs.name_any(), &pp, &Patch::Merge(&body)).await?;
                self.sets.wrote(updated.clone());
                s.rss[i] = updated;
            }
            let revision = rollout::revision(&s.rss[i]).to_string();
            self.set_revision(s, revision).await?;
            if status::has_progress_deadline(s.d) && status::get(&s.st, "Progressing").is_none() {
                let msg = format!("Found new replica set \"{}\"", s.rss[i].name_any());
                status::set(
                    &mut s.st,
                    status::condition("Progressing", "True", status::FOUND_NEW_RS, msg, s.now),
                );
            }
            return Ok(Some(i));
        }
        if !create {
            return Ok(None);
        }
        let all: Vec<RsState> = (0..s.rss.len()).map(|i| s.state(i)).collect();
        let zero = RsState {
            name: String::new(),
            replicas: 0,
            available: 0,
            created: None,
            max_replicas: None,
        };
        let replicas = rollout::new_rs_replicas(&s.p, &all, &zero);
        let rs = newrs::build(s.d, &s.p, replicas, new_revision);
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        let created = match api.create(&params, &rs).await {
            Ok(c) => {
                info!(deployment = %s.d.name_any(), namespace = %ns, replicaset = %c.name_any(), replicas, "new replica set");
                if replicas > 0 {
                    let msg = format!("Scaled up replica set {} from 0 to {replicas}", c.name_any());
                    self.recorder
                        .record(reference(s.d), EventType::Normal, "ScalingReplicaSet", &msg)
                        .await;
                }
                if status::has_progress_deadline(s.d) {
                    let msg = format!("Created new replica set \"{}\"", c.name_any());
                    status::set(
                        &mut s.st,
                        status::condition("Progressing", "True", status::NEW_RS_CREATED, msg, s.now),
                    );
                }
                c
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {
                // A slow cache, or a hash collision.
                let existing = api.get(&rs.name_any()).await?;
                let ours =
                    controller_of(&existing.metadata).is_some_and(|r| Some(&r.uid) == s.d.uid().as_ref());
                let same = match (
                    existing.spec.as_ref().and_then(|x| x.template.as_ref()),
                    s.d.spec.as_ref(),
                ) {
                    (Some(t), Some(ds)) => newrs::equal_ignore_hash(t, &ds.template),
                    _ => false,
                };
                if !(ours && same) {
                    let count = s.st.collision_count.unwrap_or(0) + 1;
                    warn!(deployment = %s.d.name_any(), collision_count = count, "hash collision; bumping collisionCount");
                    s.st.collision_count = Some(count);
                    self.write_status(s.d, &s.st).await?;
                    return Err(kube::Error::Api(e));
                }
                existing
            }
            Err(e) => {
                let msg = format!("Failed to create new replica set \"{}\": {e}", rs.name_any());
                if status::has_progress_deadline(s.d) {
                    status::set(
                        &mut s.st,
                        status::condition(
                            "Progressing",
                            "False",
                            status::FAILED_RS_CREATE,
                            msg.clone(),
                            s.now,
                        ),
                    );
                    let _ = self.write_status(s.d, &s.st).await;
                }
                self.recorder
                    .record(reference(s.d), EventType::Warning, status::FAILED_RS_CREATE, &msg)
                    .await;
                return Err(e);
            }
        };
        self.sets.created(created.clone());
        self.set_revision(s, new_revision.to_string()).await?;
        s.rss.push(created);
        Ok(Some(s.rss.len() - 1))
    }

    /// `SetDeploymentRevision` on the Deployment's own annotations.
    async fn set_revision(&mut self, s: &mut Sync<'_>, revision: String) -> Result<(), kube::Error> {
        if s.revision.as_ref() == Some(&revision) {
            return Ok(());
        }
        let d = s.d;
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), &d.namespace().unwrap_or_default());
        let body = json!({"metadata": {"annotations": {rollout::REVISION: revision}}});
        let (_, pp) = params_for(&self.client, "");
        let updated = api.patch(&d.name_any(), &pp, &Patch::Merge(&body)).await?;
        self.deps.wrote(updated);
        s.revision = Some(revision);
        Ok(())
    }

    /// `scaleReplicaSetAndRecordEvent`: sets `spec.replicas` and the replica annotations; true
    /// when the size changed.
    async fn scale_rs(&mut self, s: &mut Sync<'_>, i: usize, to: i32) -> Result<bool, kube::Error> {
        let rs = &s.rss[i];
        let from = rs.spec.as_ref().and_then(|x| x.replicas).unwrap_or(1);
        let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
        let annotations_changed = newrs::set_replicas_annotations(&mut annotations, &s.p);
        if from == to && !annotations_changed {
            return Ok(false);
        }
        let (api, pp) = params_for(&self.client, &rs.namespace().unwrap_or_default());
        let body = json!({"metadata": {"resourceVersion": rs.resource_version(), "annotations": annotations},
            "spec": {"replicas": to}});
        let updated = api.patch(&rs.name_any(), &pp, &Patch::Merge(&body)).await?;
        self.sets.wrote(updated.clone());
        if from != to {
            let dir = if from < to { "up" } else { "down" };
            let msg = format!(
                "Scaled {dir} replica set {} from {from} to {to}",
                updated.name_any()
            );
            info!(deployment = %s.d.name_any(), replicaset = %updated.name_any(), from, to, "scaled replica set");
            self.recorder
                .record(reference(s.d), EventType::Normal, "ScalingReplicaSet", &msg)
                .await;
        }
        // The pass goes on with the ReplicaSets as they were (as upstream's does); only the
        // annotations and size are noted.
        Ok(from != to)
    }

    /// `sync`: proportional scaling for resizes and paused Deployments.
    async fn scale(&mut self, s: &mut Sync<'_>, new: Option<usize>) -> Result<(), kube::Error> {
        let old: Vec<RsState> = s.old(new).iter().map(|i| s.state(*i)).collect();
        let new_state = new.map(|i| s.state(i));
        let new_desired = new.and_then(|i| rollout::annotation_int(&s.rss[i], rollout::DESIRED_REPLICAS));
        let status_replicas = s.d.status.as_ref().and_then(|x| x.replicas).unwrap_or(0);
        let changes = rollout::scale(
            &s.p,
            rollout::ScaleInput {
                new: new_state.as_ref(),
                new_desired,
                old: &old,
                status_replicas,
            },
        );
        for (name, to) in changes {
            if let Some(i) = s.rss.iter().position(|r| r.name_any() == name) {
                self.scale_rs(s, i, to).await?;
            }
        }
        Ok(())
    }

    async fn rolling(&mut self, s: &mut Sync<'_>) -> Result<Option<Timestamp>, kube::Error> {
        let Some(new) = self.new_rs(s, true).await? else {
            return Ok(None);
        };
        let all: Vec<RsState> = (0..s.rss.len()).map(|i| s.state(i)).collect();
        if let Some(to) = rollout::reconcile_new(&s.p, &all, &s.state(new)) {
            if self.scale_rs(s, new, to).await? {
                return self.finish_rollout(s, Some(new)).await;
            }
        }
        let old_active: Vec<RsState> = s
            .old(Some(new))
            .iter()
            .map(|i| s.state(*i))
            .filter(|r| r.replicas > 0)
            .collect();
        let mut scaled = false;
        for (name, to) in rollout::reconcile_old(&s.p, &old_active, Some(&s.state(new))) {
            if let Some(i) = s.rss.iter().position(|r| r.name_any() == name) {
                scaled |= self.scale_rs(s, i, to).await?;
            }
        }
        if !scaled && status::complete(s.d, &s.st) {
            self.cleanup(s, Some(new)).await;
        }
        self.finish_rollout(s, Some(new)).await
    }

    async fn recreate(
        &mut self,
        s: &mut Sync<'_>,
        mut new: Option<usize>,
        pods: &[Arc<Pod>],
    ) -> Result<Option<Timestamp>, kube::Error> {
        let mut scaled_down = false;
        for i in s.old(new) {
            if s.state(i).replicas > 0 {
                scaled_down |= self.scale_rs(s, i, 0).await?;
            }
        }
        if scaled_down || self.old_pods_running(s, new, pods) {
            return self.finish_rollout(s, new).await;
        }
        if new.is_none() {
            new = self.new_rs(s, true).await?;
        }
        if let Some(i) = new {
            let replicas = s.p.replicas;
            self.scale_rs(s, i, replicas).await?;
        }
        if status::complete(s.d, &s.st) {
            self.cleanup(s, new).await;
        }
        self.finish_rollout(s, new).await
    }

    /// `oldPodsRunning`: an old ReplicaSet still reports pods, or one of its pods is not
    /// terminal (terminating ones included).
    fn old_pods_running(&self, s: &Sync<'_>, new: Option<usize>, pods: &[Arc<Pod>]) -> bool {
        let old = s.old(new);
        if old
            .iter()
            .any(|i| s.rss[*i].status.as_ref().is_some_and(|x| x.replicas > 0))
        {
            return true;
        }
        let old_uids: Vec<String> = old.iter().filter_map(|i| s.rss[*i].uid()).collect();
        pods.iter()
            .any(|p| controller_of(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid)) && !is_terminal(p))
    }

    /// `cleanupDeployment`: deletes old ReplicaSets beyond `revisionHistoryLimit`.
    async fn cleanup(&mut self, s: &Sync<'_>, new: Option<usize>) {
        let Some(limit) = s.d.spec.as_ref().and_then(|x| x.revision_history_limit) else {
            return;
        };
        let old: Vec<&ReplicaSet> = s.old(new).iter().map(|i| &s.rss[*i]).collect();
        for rs in rollout::history_to_delete(&old, limit) {
            let api: Api<ReplicaSet> =
                Api::namespaced(self.client.clone(), &rs.namespace().unwrap_or_default());
            match api.delete(&rs.name_any(), &DeleteParams::default()).await {
                Ok(_) => {
                    info!(deployment = %s.d.name_any(), replicaset = %rs.name_any(), "old replica set deleted (history limit)");
                    self.sets.deleted(&rs.uid().unwrap_or_default());
                }
                Err(e) => warn!(replicaset = %rs.name_any(), error = %e, "cannot delete old replica set"),
            }
        }
    }

    /// `syncDeploymentStatus`: counts and `Available` only.
    async fn finish_plain(&mut self, s: &mut Sync<'_>, new: Option<usize>) -> Result<(), kube::Error> {
        let all: Vec<&ReplicaSet> = s.rss.iter().collect();
        let st = status::calculate(s.d, &s.st, &all, new.map(|i| &s.rss[i]), &s.p, s.now);
        self.write_status(s.d, &st).await
    }

    /// `syncRolloutStatus`; returns when the rollout would time out.
    async fn finish_rollout(
        &mut self,
        s: &mut Sync<'_>,
        new: Option<usize>,
    ) -> Result<Option<Timestamp>, kube::Error> {
        let all: Vec<&ReplicaSet> = s.rss.iter().collect();
        let st = status::rollout(s.d, &s.st, &all, new.map(|i| &s.rss[i]), &s.p, s.now);
        self.write_status(s.d, &st).await?;
        Ok(status::deadline_at(s.d, &st))
    }

    async fn write_status(&mut self, d: &Deployment, st: &DeploymentStatus) -> Result<(), kube::Error> {
        let current = serde_json::to_value(&d.status).unwrap_or_default();
        let want = serde_json::to_value(st).unwrap_or_default();
        let (_, pp) = params_for(&self.client, "");
        if let Some(new) = super::workload::patch_status(&self.client, d, &current, &want, &pp).await? {
            self.deps.wrote(new);
        }
        Ok(())
    }
}
