//! The pod loop: watches pods bound to this node, runs one worker per pod UID (sandbox setup with
//! backoff, status, graceful deletion) and garbage-collects sandboxes no live pod owns.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Duration,
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, Preconditions},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use tokio::{sync::watch, task::JoinHandle};
use tracing::{debug, info, warn};

use super::{
    Ctx, Error,
    sandbox::{self, Running, SetupError},
    status,
};
use crate::{
    containers::{self, HostPod},
    events::{EventType, reference},
    state::SandboxRecord,
};

/// How often a pod waiting for the runtime network reports `NetworkNotReady`.
const NOT_READY_REPORT_EVERY: Duration = Duration::from_secs(30);

struct Worker {
    /// The pod's latest version, shared (a worker looks at each event of its pod; a deep copy
    /// per event cost the emulated VM nodes' CPU for nothing).
    tx: watch::Sender<Option<Arc<Pod>>>,
    handle: JoinHandle<()>,
}

fn host_network(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false)
}

fn now() -> String {
    crate::k8s_now()
}

/// Runs the pod loop until `shutdown` resolves. Sandboxes stay as they are on shutdown (a
/// restarted node adopts them).
pub(crate) async fn run(ctx: Arc<Ctx>, shutdown: impl std::future::Future<Output = ()>) -> Result<(), Error> {
    // Without managedFields: the kubelet never reads them, and decoding them was the largest
    // share of decoding a pod (kube_lean's docs).
    let api: Api<kube_lean::Lean<Pod>> = Api::all(ctx.client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={}", ctx.cfg.name));
    let mut stream = kube_lean::watcher(api, cfg).default_backoff().boxed();
    let mut workers: HashMap<String, Worker> = HashMap::new();
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut seen_in_list: HashSet<String> = HashSet::new();
    let mut synced = false;
    let mut gc_tick = tokio::time::interval(ctx.cfg.gc_interval);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(uid) = done_rx.recv() => {
                if workers.get(&uid).is_some_and(|w| w.handle.is_finished()) {
                    workers.remove(&uid);
                }
            }
            _ = gc_tick.tick(), if synced => gc(&ctx, &workers),
            ev = stream.try_next() => match ev {
                Ok(Some(watcher::Event::Init)) => seen_in_list.clear(),
                Ok(Some(watcher::Event::InitApply(pod))) => {
                    if let Some(uid) = pod.uid() { seen_in_list.insert(uid); }
                    dispatch(&ctx, &mut workers, &done_tx, pod);
                }
                Ok(Some(watcher::Event::Apply(pod))) => dispatch(&ctx, &mut workers, &done_tx, pod),
                Ok(Some(watcher::Event::Delete(pod))) => {
                    if let Some(w) = pod.uid().and_then(|u| workers.get(&u)) {
                        let _ = w.tx.send(None);
                    }
                }
                Ok(Some(watcher::Event::InitDone)) => {
                    // Pods that vanished while we were not watching.
                    for (uid, w) in &workers {
                        if !seen_in_list.contains(uid) {
                            let _ = w.tx.send(None);
                        }
                    }
                    if !synced {
                        synced = true;
                        gc(&ctx, &workers);
                    }
                }
                Ok(None) => break,
                Err(e) => warn!(error = %e, "pod watch failed; retrying"),
            },
        }
    }
    for (_, w) in workers {
        w.handle.abort();
    }
    Ok(())
}

fn dispatch(
    ctx: &Arc<Ctx>,
    workers: &mut HashMap<String, Worker>,
    done_tx: &tokio::sync::mpsc::UnboundedSender<String>,
    pod: Pod,
) {
    if pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) != Some(ctx.cfg.name.as_str()) {
        return;
    }
    let Some(uid) = pod.uid() else { return };
    if let Some(w) = workers.get(&uid) {
        if !w.handle.is_finished() {
            let _ = w.tx.send(Some(Arc::new(pod)));
            return;
        }
    }
    // A new pod (or one seen again after its worker ended): adopt a complete sandbox of ours,
    // collect the rest.
    let mut records: Vec<SandboxRecord> = ctx.records_of(&uid);
    records.sort_by(|a, b| b.started.cmp(&a.started));
    let adopt_idx = records
        .iter()
        .position(|r| r.started.is_some() && r.network.is_some() && ctx.netns_exists(&r.netns));
    let adopt = adopt_idx.map(|i| records.remove(i));
    for rec in records {
        spawn_gc(ctx, rec);
    }
    let (tx, rx) = watch::channel(Some(Arc::new(pod)));
    let ctx2 = ctx.clone();
    let done = done_tx.clone();
    let uid2 = uid.clone();
    let handle = tokio::spawn(async move {
        worker(ctx2, rx, adopt).await;
        let _ = done.send(uid2);
    });
    workers.insert(uid, Worker { tx, handle });
}

/// Tears down sandboxes that no live worker owns.
fn gc(ctx: &Arc<Ctx>, workers: &HashMap<String, Worker>) {
    let orphans: Vec<SandboxRecord> = ctx
        .all_records()
        .into_iter()
        .filter(|r| workers.get(&r.pod_uid).is_none_or(|w| w.handle.is_finished()))
        .collect();
    for rec in orphans {
        spawn_gc(ctx, rec);
    }
}

fn spawn_gc(ctx: &Arc<Ctx>, rec: SandboxRecord) {
    if !ctx.gc_busy_insert(&rec.sandbox_id) {
        return;
    }
    let ctx = ctx.clone();
    tokio::spawn(async move {
        info!(pod = %rec.name, namespace = %rec.namespace, sandbox = %rec.sandbox_id, "collecting sandbox without a pod");
        if let Err(e) = sandbox::teardown(&ctx, &rec).await {
            warn!(sandbox = %rec.sandbox_id, error = %e, "sandbox garbage collection failed; will retry");
        }
        ctx.gc_busy_remove(&rec.sandbox_id);
    });
}

async fn worker(ctx: Arc<Ctx>, mut rx: watch::Receiver<Option<Arc<Pod>>>, adopt: Option<SandboxRecord>) {
    let mut running: Option<Running> = None;
    let mut host_pod: Option<HostPod> = None;
    if let Some(rec) = adopt {
        let pod = rx.borrow().clone();
        if let Some(pod) = pod {
            match sandbox::start_responders(&ctx, &pod, &rec).await {
                Ok(responders) => {
                    info!(pod = %rec.name, namespace = %rec.namespace, sandbox = %rec.sandbox_id, "adopted sandbox");
                    running = Some(Running {
                        record: rec,
                        responders,
                    });
                }
                Err(e) => {
                    warn!(sandbox = %rec.sandbox_id, error = %e, "cannot adopt sandbox; recreating");
                    if let Err(e) = sandbox::teardown(&ctx, &rec).await {
                        warn!(sandbox = %rec.sandbox_id, error = %e, "teardown failed; garbage collection retries");
                    }
                }
            }
        }
    }
    let base = ctx.cfg.sandbox_backoff_base;
    let mut backoff = base;
    let mut pending_reported = false;
    let mut last_not_ready: Option<std::time::Instant> = None;
    let mut running_status: Option<serde_json::Value> = None;
    loop {
        let pod = rx.borrow_and_update().clone();
        let mut retry_after: Option<Duration> = None;
        match pod {
            None => {
                if let Some(h) = host_pod.take() {
                    h.stop(Duration::from_secs(2)).await;
                }
                if let Some(r) = running.take() {
                    stop_and_teardown(&ctx, None, r, jiff::Timestamp::now() + Duration::from_secs(30)).await;
                }
                return;
            }
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => {
                let deadline = pod
                    .metadata
                    .deletion_timestamp
                    .as_ref()
                    .map(|t| t.0)
                    .unwrap_or_else(jiff::Timestamp::now)
                    .max(jiff::Timestamp::now() + Duration::from_secs(2));
                if let Some(h) = host_pod.take() {
                    let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(30).max(0) as u64;
                    h.stop(Duration::from_secs(grace)).await;
                    containers::remove_pod_dir(&ctx, &pod);
                }
                if let Some(r) = running.take() {
                    stop_and_teardown(&ctx, Some(&pod), r, deadline).await;
                }
                delete_pod_object(&ctx, &pod).await;
                return;
            }
            Some(pod) if containers::runs_processes(&ctx.cfg.images, &pod) => {
                if host_pod.is_none() {
                    host_pod = Some(HostPod::start(ctx.clone(), Pod::clone(&pod)));
                }
            }
            Some(pod) if host_network(&pod) => {
                let ips = vec![ctx.cfg.node_ip.to_string()];
                let desired = status::running(&pod, ctx.cfg.node_ip, &ips, None, &now());
                if !status::up_to_date(&pod, &desired) && write_status(&ctx, &pod, &desired).await.is_err() {
                    retry_after = Some(Duration::from_secs(1));
                }
            }
            Some(pod) => {
                if running.is_none() {
                    if !pending_reported {
                        let desired = status::pending(&pod, ctx.cfg.node_ip, &now());
                        pending_reported = write_status(&ctx, &pod, &desired).await.is_ok();
                    }
                    match sandbox::setup(&ctx, &pod).await {
                        Ok(r) => {
                            running = Some(r);
                            running_status = None;
                            backoff = base;
                        }
                        Err(e @ SetupError::NetworkNotReady(_)) => {
                            // Kubelet re-syncs pods as soon as the runtime network turns ready:
                            // poll at the base interval, report once per 30 s.
                            if last_not_ready.is_none_or(|t| t.elapsed() >= NOT_READY_REPORT_EVERY) {
                                report_setup_failure(&ctx, &pod, &e).await;
                                last_not_ready = Some(std::time::Instant::now());
                            }
                            retry_after = Some(base);
                        }
                        Err(e) => {
                            report_setup_failure(&ctx, &pod, &e).await;
                            // Whatever the failed attempt could not tear down is garbage now.
                            for rec in pod.uid().map(|u| ctx.records_of(&u)).unwrap_or_default() {
                                spawn_gc(&ctx, rec);
                            }
                            retry_after = Some(backoff);
                            backoff = (backoff * 2).min(ctx.cfg.sandbox_backoff_cap);
                        }
                    }
                }
                if let Some(r) = &running {
                    // What up_to_date compares of a running status (phase, IPs, conditions,
                    // readiness) does not change while the sandbox runs: the last one built
                    // answers for the events that follow (the pod's own status writes among
                    // them) without building it again.
                    let known = running_status
                        .as_ref()
                        .is_some_and(|d| status::up_to_date(&pod, d));
                    if !known {
                        let desired = status::running(
                            &pod,
                            ctx.cfg.node_ip,
                            &r.record.pod_ips,
                            Some(&r.record),
                            &now(),
                        );
                        if !status::up_to_date(&pod, &desired)
                            && write_status(&ctx, &pod, &desired).await.is_err()
                        {
                            retry_after = Some(Duration::from_secs(1));
                        }
                        running_status = Some(desired);
                    }
                }
            }
        }
        match retry_after {
            Some(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {}
                    r = rx.changed() => if r.is_err() { return },
                }
            }
            None => {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}

async fn report_setup_failure(ctx: &Ctx, pod: &Pod, e: &SetupError) {
    let (reason, msg) = match e {
        SetupError::NetworkNotReady(_) => ("NetworkNotReady", e.to_string()),
        _ => (
            "FailedCreatePodSandBox",
            format!("Failed to create pod sandbox: rpc error: code = Unknown desc = {e}"),
        ),
    };
    warn!(pod = %pod.name_any(), namespace = ?pod.namespace(), reason, error = %msg, "sandbox creation failed");
    ctx.recorder
        .record(reference(pod), EventType::Warning, reason, &msg)
        .await;
}

/// Stops the containers and tears the sandbox down, retrying DEL with backoff until `deadline`;
/// after that the record stays and garbage collection keeps retrying in the background.
async fn stop_and_teardown(ctx: &Ctx, pod: Option<&Pod>, r: Running, deadline: jiff::Timestamp) {
    if let Some(resp) = r.responders {
        resp.stop();
    }
    let mut backoff = ctx.cfg.sandbox_backoff_base;
    loop {
        match sandbox::teardown(ctx, &r.record).await {
            Ok(()) => return,
            Err(e) => {
                let msg = format!(
                    "error killing pod: failed to \"KillPodSandbox\" for \"{}\" with KillPodSandboxError: \"rpc error: code = Unknown desc = {e}\"",
                    r.record.pod_uid
                );
                warn!(sandbox = %r.record.sandbox_id, error = %msg, "sandbox teardown failed");
                if let Some(pod) = pod {
                    ctx.recorder
                        .record(reference(pod), EventType::Warning, "FailedKillPod", &msg)
                        .await;
                }
                if jiff::Timestamp::now() + backoff > deadline {
                    warn!(sandbox = %r.record.sandbox_id, "grace period over; removing the pod, garbage collection keeps retrying the teardown");
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ctx.cfg.sandbox_backoff_cap);
            }
        }
    }
}

/// Writes the pod's status with a merge patch. The response (the whole pod) is read but not
/// decoded: the node learns the pod's new state from its watch anyway, and decoding pods is
/// the largest single cost of the emulated kubelet in a profile of a burst on a VM node.
async fn write_status(ctx: &Ctx, pod: &Pod, status: &serde_json::Value) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let url = <Pod as kube::Resource>::url_path(&(), Some(&ns));
    let body = json!({"status": status});
    let sent = match kube::core::Request::new(url).patch_subresource(
        "status",
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&body),
    ) {
        Ok(req) => ctx.client.request_text(req).await.map(drop),
        Err(e) => Err(kube::Error::BuildRequest(e)),
    };
    match sent {
        Ok(_) => {
            debug!(pod = %pod.name_any(), phase = %status["phase"], "pod status written");
            Ok(())
        }
        Err(e) => {
            warn!(pod = %pod.name_any(), error = %e, "cannot write pod status");
            Err(e)
        }
    }
}

/// Final removal of the pod object (grace period 0, only this incarnation: UID precondition).
async fn delete_pod_object(ctx: &Ctx, pod: &Pod) {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.uid(),
            resource_version: None,
        }),
        ..Default::default()
    };
    for attempt in 0..5u32 {
        match api.delete(&pod.name_any(), &dp).await {
            Ok(_) => {
                info!(pod = %pod.name_any(), namespace = ?pod.namespace(), "pod removed");
                return;
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return,
            Err(e) => {
                warn!(pod = %pod.name_any(), attempt, error = %e, "cannot remove pod");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
