//! A Deployment's status, without I/O: the counts summed over its ReplicaSets
//! (`calculateStatus`), the `Available` condition (`MinimumReplicasAvailable` /
//! `MinimumReplicasUnavailable`), the `Progressing` condition of `syncRolloutStatus`
//! (`NewReplicaSetCreated`, `FoundNewReplicaSet`, `ReplicaSetUpdated`, `NewReplicaSetAvailable`,
//! `ProgressDeadlineExceeded`, `DeploymentPaused`, `DeploymentResumed`), and `ReplicaFailure`
//! copied from the ReplicaSets. These are what `kubectl rollout status` reads.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::{
    api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet},
    apimachinery::pkg::apis::meta::v1::Time,
};
use kube::ResourceExt;

use super::rollout::Params;

/// `Progressing` reason when a new ReplicaSet was created.
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
/// `Progressing` reason when an existing ReplicaSet is the new one.
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
/// `Progressing` reason while replicas move.
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
/// `Progressing` reason once the rollout completed.
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
/// `Progressing` reason when no progress was made within `progressDeadlineSeconds`.
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
/// `Progressing` reason when creating the new ReplicaSet failed.
pub const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
/// `Progressing` reason while paused.
pub const PAUSED: &str = "DeploymentPaused";
/// `Progressing` reason after resuming.
pub const RESUMED: &str = "DeploymentResumed";

/// A condition as `NewDeploymentCondition` makes it (both times now).
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The condition of `type_`.
pub fn get<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// `SetDeploymentCondition`: no change when status and reason are the same; the transition time
/// kept when only the reason changes; the condition moves to the end.
pub fn set(status: &mut DeploymentStatus, mut cond: DeploymentCondition) {
    if let Some(cur) = get(status, &cond.type_) {
        if cur.status == cond.status && cur.reason == cond.reason {
            return;
        }
        if cur.status == cond.status {
            cond.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove(status, &cond.type_);
    status.conditions.get_or_insert_with(Vec::new).push(cond);
}

/// Removes the condition of `type_`.
pub fn remove(status: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = status.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
        if cs.is_empty() {
            status.conditions = None;
        }
    }
}

/// Whether `d` has a progress deadline (`progressDeadlineSeconds` set and not MaxInt32).
pub fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|p| p != i32::MAX)
}

fn sum(rss: &[&ReplicaSet], f: impl Fn(&ReplicaSet) -> Option<i32>) -> i32 {
    rss.iter().map(|rs| f(rs).unwrap_or(0)).sum()
}

fn nonzero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// `calculateStatus`: counts over `all` (which includes `new`), conditions from `base` with
/// `Available` set.
pub fn calculate(
    d: &Deployment,
    base: &DeploymentStatus,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    p: &Params,
    now: Timestamp,
) -> DeploymentStatus {
    let status_of = |rs: &ReplicaSet| rs.status.clone().unwrap_or_default();
    let available = sum(all, |rs| status_of(rs).available_replicas);
    let total_spec = sum(all, |rs| rs.spec.as_ref().and_then(|s| s.replicas));
    let mut st = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nonzero(sum(all, |rs| Some(status_of(rs).replicas))),
        updated_replicas: nonzero(new.map_or(0, |rs| status_of(rs).replicas)),
        ready_replicas: nonzero(sum(all, |rs| status_of(rs).ready_replicas)),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total_spec - available).max(0)),
        collision_count: base.collision_count,
        conditions: base.conditions.clone(),
        terminating_replicas: None,
    };
    if available >= p.replicas - p.max_unavailable {
        set(
            &mut st,
            condition(
                "Available",
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.".into(),
                now,
            ),
        );
    } else {
        set(
            &mut st,
            condition(
                "Available",
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.".into(),
                now,
            ),
        );
    }
    st
}

fn count(n: Option<i32>) -> i32 {
    n.unwrap_or(0)
}

/// `DeploymentComplete`: every replica updated and available, the generation observed.
pub fn complete(d: &Deployment, st: &DeploymentStatus) -> bool {
    let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    count(st.updated_replicas) == replicas
        && count(st.replicas) == replicas
        && count(st.available_replicas) == replicas
        && st.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, ready or available replicas, or fewer old ones.
fn progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let old_old = count(old.replicas) - count(old.updated_replicas);
    let new_old = count(new.replicas) - count(new.updated_replicas);
    count(new.updated_replicas) > count(old.updated_replicas)
        || new_old < old_old
        || count(new.ready_replicas) > count(old.ready_replicas)
        || count(new.available_replicas) > count(old.available_replicas)
}

fn deadline(d: &Deployment) -> SignedDuration {
    SignedDuration::from_secs(i64::from(
        d.spec
            .as_ref()
            .and_then(|s| s.progress_deadline_seconds)
            .unwrap_or(600),
    ))
}

/// `DeploymentTimedOut`.
fn timed_out(d: &Deployment, st: &DeploymentStatus, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(c) = get(st, "Progressing") else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| t.0 + deadline(d) < now),
    }
}

/// `syncRolloutStatus`: [`calculate`], then the `Progressing` condition, then `ReplicaFailure`
/// from the ReplicaSets. `base` is the Deployment's status as this pass left it.
pub fn rollout(
    d: &Deployment,
    base: &DeploymentStatus,
    all: &[&ReplicaSet],
    new: Option<&ReplicaSet>,
    p: &Params,
    now: Timestamp,
) -> DeploymentStatus {
    let mut st = calculate(d, base, all, new, p, now);
    if !has_progress_deadline(d) {
        remove(&mut st, "Progressing");
    }
    let current = get(&st, "Progressing").cloned();
    let is_complete = count(st.replicas) == count(st.updated_replicas)
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    if has_progress_deadline(d) && !is_complete {
        let what = |verb: &str| match new {
            Some(rs) => format!("ReplicaSet \"{}\" {verb}.", rs.name_any()),
            None => format!("Deployment \"{}\" {verb}.", d.name_any()),
        };
        if complete(d, &st) {
            set(
                &mut st,
                condition(
                    "Progressing",
                    "True",
                    NEW_RS_AVAILABLE,
                    what("has successfully progressed"),
                    now,
                ),
            );
        } else if progressing(base, &st) {
            let mut c = condition("Progressing", "True", RS_UPDATED, what("is progressing"), now);
            if let Some(cur) = &current {
                if cur.status == "True" {
                    c.last_transition_time = cur.last_transition_time.clone();
                }
                remove(&mut st, "Progressing");
            }
            set(&mut st, c);
        } else if timed_out(d, &st, now) {
            set(
                &mut st,
                condition(
                    "Progressing",
                    "False",
                    TIMED_OUT,
                    what("has timed out progressing"),
                    now,
                ),
            );
        }
    }
    match replica_failure(all, new) {
        Some(c) => set(&mut st, c),
        None => remove(&mut st, "ReplicaFailure"),
    }
    st
}

/// `getReplicaFailures`: the new ReplicaSet's `ReplicaFailure`, else any other's.
fn replica_failure(all: &[&ReplicaSet], new: Option<&ReplicaSet>) -> Option<DeploymentCondition> {
    let failure = |rs: &ReplicaSet| {
        rs.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "ReplicaFailure")
            .map(|c| DeploymentCondition {
                type_: "ReplicaFailure".into(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_update_time: c.last_transition_time.clone(),
                last_transition_time: c.last_transition_time.clone(),
            })
    };
    new.and_then(failure)
        .or_else(|| all.iter().find_map(|rs| failure(rs)))
}

/// `checkPausedConditions`: `Progressing` Unknown with `DeploymentPaused` / `DeploymentResumed`
/// when `spec.paused` flips (never over a timeout). True when `st` changed.
pub fn paused_condition(d: &Deployment, st: &mut DeploymentStatus, now: Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let reason = get(st, "Progressing").and_then(|c| c.reason.clone());
    if reason.as_deref() == Some(TIMED_OUT) {
        return false;
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let paused_cond = reason.as_deref() == Some(PAUSED);
    if paused && !paused_cond {
        set(
            st,
            condition(
                "Progressing",
                "Unknown",
                PAUSED,
                "Deployment is paused".into(),
                now,
            ),
        );
        true
    } else if !paused && paused_cond {
        set(
            st,
            condition(
                "Progressing",
                "Unknown",
                RESUMED,
                "Deployment is resumed".into(),
                now,
            ),
        );
        true
    } else {
        false
    }
}

/// When a stuck rollout will time out (`requeueStuckDeployment`), if it can.
pub fn deadline_at(d: &Deployment, st: &DeploymentStatus) -> Option<Timestamp> {
    if !has_progress_deadline(d) || complete(d, st) {
        return None;
    }
    let c = get(st, "Progressing")?;
    if c.status != "True" || c.reason.as_deref() == Some(NEW_RS_AVAILABLE) {
        return None;
    }
    c.last_update_time.as_ref().map(|t| t.0 + deadline(d))
}

#[cfg(test)]
mod tests;
