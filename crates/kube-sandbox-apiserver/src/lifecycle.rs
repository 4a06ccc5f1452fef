//! Object lifecycle: deletion (preconditions, pod grace periods, finalizers, propagation
//! policies), removal side effects, and the background task that garbage-collects dependents,
//! finishes foreground deletions, empties terminating namespaces and cleans up deleted CRDs.

use std::{sync::Arc, time::Duration};

use serde_json::{Value, json};
use tracing::{debug, info};

use crate::{
    app::App,
    crd, defaults,
    error::{ApiError, ApiResult},
    meta,
    registry::{ResKey, ResourceInfo},
    store::Inner,
};

/// Finalizer that holds an owner until its blocking dependents are gone.
pub const FOREGROUND: &str = "foregroundDeletion";
/// Finalizer of namespaces (in `spec.finalizers`).
pub const NS_FINALIZER: &str = "kubernetes";

/// DeleteOptions from the body and the query.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// `gracePeriodSeconds`.
    pub grace: Option<i64>,
    /// `propagationPolicy` (`Orphan`, `Background`, `Foreground`).
    pub policy: Option<String>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    /// Removed from the store.
    Gone(Arc<Value>),
    /// Marked for deletion, held by finalizers or a grace period.
    Pending(Arc<Value>),
}

fn pod_grace(obj: &Value, opts: &DeleteOpts) -> i64 {
    let spec = obj.get("spec");
    let bound = spec
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = obj
        .get("status")
        .and_then(|s| s.get("phase"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !bound || matches!(phase, "Succeeded" | "Failed") {
        return 0;
    }
    opts.grace
        .or_else(|| {
            spec.and_then(|s| s.get("terminationGracePeriodSeconds"))
                .and_then(Value::as_i64)
        })
        .unwrap_or(30)
        .max(0)
}

/// Deletes one object per the real server's rules.
pub fn delete_object(
    app: &App,
    tx: &mut Inner,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    opts: &DeleteOpts,
) -> ApiResult<Deleted> {
    let key = info.key();
    let cur = tx
        .get(&key, ns, name)
        .cloned()
        .ok_or_else(|| ApiError::not_found(info, name))?;
    if let Some(uid) = &opts.uid {
        if uid != meta::uid_of(&cur) {
            return Err(ApiError::conflict_msg(
                info,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid_of(&cur)
                ),
            ));
        }
    }
    if let Some(rv) = &opts.resource_version {
        let cur_rv = meta::meta_str(&cur, "resourceVersion").unwrap_or("");
        if rv != cur_rv {
            return Err(ApiError::conflict_msg(
                info,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {cur_rv}"
                ),
            ));
        }
    }
    let is_ns = info.group.is_empty() && info.plural == "namespaces";
    if is_ns && matches!(name, "default" | "kube-system" | "kube-public") {
        return Err(ApiError::forbidden(format!(
            "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
        )));
    }
    if opts.dry_run {
        return Ok(Deleted::Pending(cur));
    }
    let policy = opts.policy.as_deref().unwrap_or("Background");
    if policy == "Orphan" {
        orphan_dependents(tx, meta::uid_of(&cur));
    }
    let mut obj = (*cur).clone();
    let mut finalizers = meta::finalizers(&obj);
    if policy == "Foreground" && !finalizers.iter().any(|f| f == FOREGROUND) && !is_ns {
        if meta::is_deleting(&obj) {
            // Real servers do not switch an object already being deleted to foreground.
        } else {
            finalizers.push(FOREGROUND.into());
            meta::set_finalizers(&mut obj, &finalizers);
        }
    }
    if is_ns {
        if !meta::is_deleting(&obj) {
            meta::metadata_mut(&mut obj).insert("deletionTimestamp".into(), json!(meta::now()));
            meta::metadata_mut(&mut obj).insert("deletionGracePeriodSeconds".into(), json!(0));
            obj["status"] = json!({"phase": "Terminating"});
            let stored = tx.put(&key, obj);
            app.kick();
            info!(namespace = %name, "namespace terminating");
            return Ok(Deleted::Pending(stored));
        }
        return Ok(Deleted::Pending(cur));
    }
    let is_pod = info.group.is_empty() && info.plural == "pods";
    let grace = if is_pod { pod_grace(&obj, opts) } else { 0 };
    if grace == 0 && finalizers.is_empty() {
        return Ok(Deleted::Gone(
            remove_object(app, tx, info, ns, name).unwrap_or(cur),
        ));
    }
    let md = meta::metadata_mut(&mut obj);
    let existing_grace = md.get("deletionGracePeriodSeconds").and_then(Value::as_i64);
    let deleting = md.get("deletionTimestamp").is_some_and(|v| !v.is_null());
    let changed = if !deleting {
        md.insert("deletionTimestamp".into(), json!(meta::at_offset(grace)));
        md.insert("deletionGracePeriodSeconds".into(), json!(grace));
        true
    } else if existing_grace.is_some_and(|g| grace < g) {
        // Shortening a grace period is allowed; lengthening it is not.
        md.insert("deletionTimestamp".into(), json!(meta::at_offset(grace)));
        md.insert("deletionGracePeriodSeconds".into(), json!(grace));
        true
    } else {
        obj != *cur
    };
    if !changed {
        return Ok(Deleted::Pending(cur));
    }
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    let stored = tx.put(&key, obj);
    app.kick();
    debug!(resource = %info.plural, %ns, %name, grace, "deletion pending");
    Ok(Deleted::Pending(stored))
}

/// Removes an object and releases what it held.
pub fn remove_object(
    app: &App,
    tx: &mut Inner,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
) -> Option<Arc<Value>> {
    let gone = tx.remove(&info.key(), ns, name)?;
    defaults::on_removed(info, &gone, &mut tx.allocs);
    if crd::is_crd(info) {
        if let Some(k) = crd::target_key(&gone) {
            app.registry.unregister(&k);
        }
    }
    app.kick();
    Some(gone)
}

fn orphan_dependents(tx: &mut Inner, owner_uid: &str) {
    let mut changes = Vec::new();
    for dep in tx.owners.dependents_of(owner_uid) {
        let Some((key, ns, name)) = tx.owners.at(&dep).cloned() else {
            continue;
        };
        let Some(o) = tx.get(&key, &ns, &name) else {
            continue;
        };
        let mut n = (**o).clone();
        if let Some(refs) = n["metadata"]
            .get_mut("ownerReferences")
            .and_then(Value::as_array_mut)
        {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            if refs.is_empty() {
                if let Some(m) = n["metadata"].as_object_mut() {
                    m.remove("ownerReferences");
                }
            }
        }
        changes.push((key, n));
    }
    for (key, n) in changes {
        tx.put(&key, n);
    }
}

/// Runs lifecycle passes until `shutdown` flips.
pub async fn run(app: Arc<App>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = app.lifecycle.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = shutdown.changed() => return,
        }
        // Let a burst of deletes settle into one pass.
        tokio::time::sleep(Duration::from_millis(5)).await;
        // A pass holds the store's lock for at most PASS_BUDGET objects, then lets writers in.
        while app
            .store
            .write(|tx| std::mem::take(&mut tx.lifecycle_dirty) && reconcile(&app, tx))
        {
            tokio::task::yield_now().await;
        }
    }
}

/// How many queued objects one pass looks at before releasing the store's lock.
const PASS_BUDGET: usize = 2048;

type Entry = crate::owners::At;

fn foreground_deleting(o: &Value) -> bool {
    meta::is_deleting(o) && meta::finalizers(o).iter().any(|f| f == FOREGROUND)
}

/// One pass of garbage collection and cleanup: the objects whose ownership changed (from the
/// store's [`crate::owners::OwnerIndex`], at most [`PASS_BUDGET`] of them; the rest stays
/// queued, and the pass returns true), then the namespaces and CRDs being deleted.
/// O(what changed × their owner references and dependents), not O(store).
pub fn reconcile(app: &App, tx: &mut Inner) -> bool {
    for _ in 0..PASS_BUDGET {
        let Some(uid) = tx.owners.pop() else {
            break;
        };
        look_at(app, tx, &uid);
    }
    for ns in tx.owners.terminating_namespaces() {
        empty_namespace(app, tx, &ns);
    }
    for name in tx.owners.deleting_crds() {
        finish_crd(app, tx, name);
    }
    // What this pass changed queued more (a finished budget, a dependent deleted at once).
    let more = tx.owners.has_queued();
    tx.lifecycle_dirty |= more;
    more
}

/// Background and foreground collection for one object, as a dependent and as an owner.
fn look_at(app: &App, tx: &mut Inner, uid: &str) {
    let Some(at) = tx.owners.at(uid).cloned() else {
        // Gone: its dependents were queued when it was removed.
        return;
    };
    let Some(obj) = tx.get(&at.0, &at.1, &at.2).cloned() else {
        return;
    };
    let bg = DeleteOpts::default();
    let owners = meta::owner_uids(&obj);
    if !owners.is_empty() && !meta::is_deleting(&obj) {
        let mut present = false;
        let mut fg_owner = None;
        for (u, _) in &owners {
            let Some((k, ns, n)) = tx.owners.at(u) else {
                continue;
            };
            present = true;
            if tx.get(k, ns, n).is_some_and(|o| foreground_deleting(o)) {
                fg_owner = Some(u.clone());
            }
        }
        if let Some(u) = fg_owner {
            // Its owner waits for it: delete it, then look at the owner again.
            delete_entry(app, tx, &at, &bg);
            tx.owners.requeue(&u);
        } else if !present {
            debug!(resource = %at.0.1, ns = %at.1, name = %at.2, "garbage-collecting orphan");
            delete_entry(app, tx, &at, &bg);
        }
    }
    if foreground_deleting(&obj) {
        let mut blocked = false;
        for d in tx.owners.dependents_of(uid) {
            let Some(dat) = tx.owners.at(&d).cloned() else {
                continue;
            };
            let Some(dep) = tx.get(&dat.0, &dat.1, &dat.2).cloned() else {
                continue;
            };
            if !meta::is_deleting(&dep) {
                delete_entry(app, tx, &dat, &bg);
            }
            // A dependent deleted just now may still exist (held by finalizers).
            let blocks = meta::owner_uids(&dep).iter().any(|(u, b)| u == uid && *b);
            if blocks && tx.get(&dat.0, &dat.1, &dat.2).is_some() {
                blocked = true;
            }
        }
        if !blocked {
            drop_finalizer(app, tx, &at, FOREGROUND);
        }
    }
}

/// Deletes a deleted CRD's objects; releases the CRD when none is left.
fn finish_crd(app: &App, tx: &mut Inner, name: String) {
    let crd_key: ResKey = ("apiextensions.k8s.io".into(), "customresourcedefinitions".into());
    let Some(target) = tx.get(&crd_key, "", &name).and_then(|o| crd::target_key(o)) else {
        return;
    };
    let e: Entry = (crd_key, String::new(), name);
    let Some(info) = app.registry.by_key(&target) else {
        // Not served (any more): nothing to clean.
        drop_finalizer(app, tx, &e, crd::CLEANUP_FINALIZER);
        return;
    };
    let bg = DeleteOpts::default();
    let objs: Vec<(String, String, bool)> = tx
        .list(&target, None)
        .map(|o| {
            (
                meta::namespace(o).to_string(),
                meta::name(o).to_string(),
                meta::is_deleting(o),
            )
        })
        .collect();
    for (ns, n, deleting) in &objs {
        if !deleting {
            let _ = delete_object(app, tx, &info, ns, n, &bg);
        }
    }
    if tx.count(&target) == 0 {
        drop_finalizer(app, tx, &e, crd::CLEANUP_FINALIZER);
    }
}

fn delete_entry(app: &App, tx: &mut Inner, e: &Entry, opts: &DeleteOpts) {
    if let Some(info) = app.registry.by_key(&e.0) {
        let _ = delete_object(app, tx, &info, &e.1, &e.2, opts);
    }
}

fn drop_finalizer(app: &App, tx: &mut Inner, e: &Entry, finalizer: &str) {
    let Some(info) = app.registry.by_key(&e.0) else {
        return;
    };
    let Some(cur) = tx.get(&e.0, &e.1, &e.2).cloned() else {
        return;
    };
    let mut f = meta::finalizers(&cur);
    let before = f.len();
    f.retain(|x| x != finalizer);
    if f.len() == before {
        return;
    }
    let mut o = (*cur).clone();
    meta::set_finalizers(&mut o, &f);
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    tx.put(&e.0, o);
    if f.is_empty() {
        remove_object(app, tx, &info, &e.1, &e.2);
    }
}

fn empty_namespace(app: &App, tx: &mut Inner, ns: &str) {
    let bg = DeleteOpts::default();
    let mut remaining = 0usize;
    for key in tx.keys() {
        let Some(info) = app.registry.by_key(&key) else {
            continue;
        };
        if !info.namespaced {
            continue;
        }
        let objs: Vec<(String, bool)> = tx
            .list(&key, Some(ns))
            .map(|o| (meta::name(o).to_string(), meta::is_deleting(o)))
            .collect();
        for (n, deleting) in objs {
            if !deleting {
                let _ = delete_object(app, tx, &info, ns, &n, &bg);
            }
        }
        remaining += tx.list(&key, Some(ns)).count();
    }
    if remaining > 0 {
        return;
    }
    let key: ResKey = (String::new(), "namespaces".into());
    let Some(cur) = tx.get(&key, "", ns).cloned() else {
        return;
    };
    let spec_f: Vec<String> = cur
        .get("spec")
        .and_then(|s| s.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect())
        .unwrap_or_default();
    if spec_f.iter().any(|f| f == NS_FINALIZER) {
        let mut o = (*cur).clone();
        let rest: Vec<&String> = spec_f.iter().filter(|f| *f != NS_FINALIZER).collect();
        o["spec"]["finalizers"] = json!(rest);
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        tx.put(&key, o);
        if !rest.is_empty() {
            return;
        }
    } else if !spec_f.is_empty() {
        return;
    }
    let Some(cur) = tx.get(&key, "", ns).cloned() else {
        return;
    };
    if meta::finalizers(&cur).is_empty() {
        if let Some(info) = app.registry.by_key(&key) {
            remove_object(app, tx, &info, "", ns);
            info!(namespace = %ns, "namespace deleted");
        }
    }
}
