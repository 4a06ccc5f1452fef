//! The Deployment controller's arithmetic, without I/O, after upstream's `deploymentutil`:
//! surge and unavailability budgets (`ResolveFenceposts`: surge rounds up, unavailability rounds
//! down, both 0 means 1 unavailable), the new ReplicaSet's size (`NewRSNewReplicas`), scaling
//! old ReplicaSets down during a rolling update (`reconcileOldReplicaSets`: unhealthy replicas
//! first, then within `maxUnavailable` of the available pods), proportional scaling when the
//! Deployment is resized mid-rollout (`scale`), and which old ReplicaSets history trimming deletes.

use std::cmp::Ordering;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::ResourceExt;

use super::super::workload::scaled_value;

/// Annotation with the revision of a ReplicaSet (and of its Deployment).
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// Annotation with the revisions a ReplicaSet had before a rollback made it new again.
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
/// Annotation with the Deployment's `spec.replicas` when the ReplicaSet was last scaled.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// Annotation with `spec.replicas + maxSurge` when the ReplicaSet was last scaled.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Label carrying the pod template hash on ReplicaSets and their pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// Deployment annotations never copied to ReplicaSets.
pub const SKIP_COPY: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// What the arithmetic needs of a ReplicaSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RsState {
    /// Name.
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.availableReplicas`.
    pub available: i32,
    /// Creation time.
    pub created: Option<Timestamp>,
    /// The `max-replicas` annotation.
    pub max_replicas: Option<i32>,
}

impl RsState {
    /// The state of `rs`.
    pub fn of(rs: &ReplicaSet) -> Self {
        Self {
            name: rs.name_any(),
            replicas: rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            available: rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0),
            created: rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            max_replicas: annotation_int(rs, MAX_REPLICAS),
        }
    }
}

/// An integer annotation of `rs`.
pub fn annotation_int(rs: &ReplicaSet, key: &str) -> Option<i32> {
    rs.annotations().get(key).and_then(|v| v.parse().ok())
}

/// The revision of `rs` (0 when absent).
pub fn revision(rs: &ReplicaSet) -> i64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The Deployment's rollout budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// `spec.replicas`.
    pub replicas: i32,
    /// Pods allowed above `replicas` (0 for Recreate).
    pub max_surge: i32,
    /// Pods allowed to be unavailable (0 for Recreate, never above `replicas`).
    pub max_unavailable: i32,
    /// RollingUpdate (else Recreate).
    pub rolling: bool,
}

/// `ResolveFenceposts`: surge rounded up, unavailability rounded down, and 1 unavailable when
/// both come out 0.
pub fn resolve_fenceposts(surge: i32, unavailable: i32) -> (i32, i32) {
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// The budgets of `d`.
pub fn params(d: &Deployment) -> Params {
    let spec = d.spec.as_ref();
    let replicas = spec.and_then(|s| s.replicas).unwrap_or(1);
    let strategy = spec.and_then(|s| s.strategy.as_ref());
    let rolling = strategy
        .and_then(|s| s.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate");
    if !rolling {
        return Params {
            replicas,
            max_surge: 0,
            max_unavailable: 0,
            rolling,
        };
    }
    let ru = strategy.and_then(|s| s.rolling_update.as_ref());
    let surge = scaled_value(ru.and_then(|r| r.max_surge.as_ref()), replicas, true).unwrap_or(0);
    let unavailable = scaled_value(ru.and_then(|r| r.max_unavailable.as_ref()), replicas, false).unwrap_or(0);
    let (max_surge, max_unavailable) = resolve_fenceposts(surge, unavailable);
    Params {
        replicas,
        max_surge,
        max_unavailable: if replicas == 0 {
            0
        } else {
            max_unavailable.min(replicas)
        },
        rolling,
    }
}

fn total(rss: &[RsState]) -> i32 {
    rss.iter().map(|r| r.replicas).sum()
}

/// Oldest first; equal times by name (`ReplicaSetsByCreationTimestamp`).
fn by_creation(a: &RsState, b: &RsState) -> Ordering {
    match (a.created, b.created) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        _ => a.name.cmp(&b.name),
    }
}

/// `NewRSNewReplicas`: the size the new ReplicaSet may grow to now (`all` includes it).
pub fn new_rs_replicas(p: &Params, all: &[RsState], new: &RsState) -> i32 {
    if !p.rolling {
        return p.replicas;
    }
    let current = total(all);
    let max_total = p.replicas + p.max_surge;
    if current >= max_total {
        return new.replicas;
    }
    let up = (max_total - current).min(p.replicas - new.replicas);
    new.replicas + up
}

/// `reconcileNewReplicaSet`: the new ReplicaSet's target size, if it must change.
pub fn reconcile_new(p: &Params, all: &[RsState], new: &RsState) -> Option<i32> {
    match new.replicas.cmp(&p.replicas) {
        Ordering::Equal => None,
        Ordering::Greater => Some(p.replicas),
        Ordering::Less => Some(new_rs_replicas(p, all, new)).filter(|n| *n != new.replicas),
    }
}

/// `reconcileOldReplicaSets` of a rolling update: the old ReplicaSets' new sizes (only the ones
/// that change). `old` are the active old ReplicaSets; `new` the new one, if any.
pub fn reconcile_old(p: &Params, old: &[RsState], new: Option<&RsState>) -> Vec<(String, i32)> {
    if total(old) == 0 {
        return Vec::new();
    }
    let all_pods = total(old) + new.map_or(0, |n| n.replicas);
    let min_available = p.replicas - p.max_unavailable;
    let new_unavailable = new.map_or(0, |n| n.replicas - n.available);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut olds: Vec<RsState> = old.to_vec();
    olds.sort_by(by_creation);
    // Unhealthy replicas first: they do not count as available anyway.
    let mut scaled = 0;
    for rs in olds.iter_mut() {
        if scaled >= max_scaled_down {
            break;
        }
        if rs.replicas == 0 || rs.replicas == rs.available {
            continue;
        }
        let down = (max_scaled_down - scaled).min(rs.replicas - rs.available);
        rs.replicas -= down;
        scaled += down;
    }
    // Then as many available ones as keep `min_available` available.
    let available: i32 = olds.iter().map(|r| r.available).sum::<i32>() + new.map_or(0, |n| n.available);
    if available > min_available {
        let budget = available - min_available;
        let mut done = 0;
        for rs in olds.iter_mut() {
            if done >= budget {
                break;
            }
            if rs.replicas == 0 {
                continue;
            }
            let down = rs.replicas.min(budget - done);
            rs.replicas -= down;
            done += down;
        }
    }
    olds.iter()
        .filter(|r| old.iter().any(|o| o.name == r.name && o.replicas != r.replicas))
        .map(|r| (r.name.clone(), r.replicas))
        .collect()
}

/// Inputs of [`scale`] beyond the budgets.
#[derive(Debug, Clone, Copy)]
pub struct ScaleInput<'a> {
    /// The new ReplicaSet, if there is one.
    pub new: Option<&'a RsState>,
    /// The new ReplicaSet's `desired-replicas` annotation.
    pub new_desired: Option<i32>,
    /// The old ReplicaSets (all of them).
    pub old: &'a [RsState],
    /// The Deployment's `status.replicas` (proportion fallback).
    pub status_replicas: i32,
}

/// `scale`: sizes when the Deployment's `spec.replicas` changed (or it is paused): one active
/// ReplicaSet takes everything; a saturated new one means the old go to 0; otherwise a rolling
/// Deployment spreads the difference proportionally (by each ReplicaSet's share of the
/// `max-replicas` it was sized for), leftovers to the largest.
pub fn scale(p: &Params, input: ScaleInput<'_>) -> Vec<(String, i32)> {
    let ScaleInput {
        new,
        new_desired,
        old,
        status_replicas,
    } = input;
    let mut all: Vec<RsState> = old.to_vec();
    all.extend(new.cloned());
    let active: Vec<RsState> = all.iter().filter(|r| r.replicas > 0).cloned().collect();
    // FindActiveOrLatest.
    let active_or_latest = match active.len() {
        0 => new.cloned().or_else(|| {
            let mut o = old.to_vec();
            o.sort_by(by_creation);
            o.pop()
        }),
        1 => active.first().cloned(),
        _ => None,
    };
    if let Some(rs) = active_or_latest {
        return if rs.replicas == p.replicas {
            Vec::new()
        } else {
            vec![(rs.name, p.replicas)]
        };
    }
    let saturated = new.is_some_and(|n| {
        n.replicas == p.replicas && new_desired == Some(p.replicas) && n.available == p.replicas
    });
    if saturated {
        return old
            .iter()
            .filter(|r| r.replicas > 0)
            .map(|r| (r.name.clone(), 0))
            .collect();
    }
    if !p.rolling {
        return Vec::new();
    }
    let allowed = if p.replicas > 0 {
        p.replicas + p.max_surge
    } else {
        0
    };
    let to_add = allowed - total(&active);
    let mut sorted = active;
    match to_add.cmp(&0) {
        // Larger first; newer first on ties.
        Ordering::Greater => {
            sorted.sort_by(|a, b| b.replicas.cmp(&a.replicas).then_with(|| by_creation(b, a)))
        }
        // Larger first; older first on ties.
        Ordering::Less => sorted.sort_by(|a, b| b.replicas.cmp(&a.replicas).then_with(|| by_creation(a, b))),
        Ordering::Equal => {}
    }
    let mut added = 0;
    let mut sizes: Vec<(String, i32)> = Vec::new();
    for rs in &sorted {
        let mut size = rs.replicas;
        if to_add != 0 {
            let prop = proportion(p, rs, to_add, added, status_replicas);
            size += prop;
            added += prop;
        }
        sizes.push((rs.name.clone(), size));
    }
    if let Some(first) = sizes.first_mut() {
        if to_add != 0 {
            first.1 = (first.1 + to_add - added).max(0);
        }
    }
    sizes
        .into_iter()
        .filter(|(name, size)| sorted.iter().any(|r| &r.name == name && r.replicas != *size))
        .collect()
}

/// `GetProportion`.
fn proportion(p: &Params, rs: &RsState, to_add: i32, added: i32, status_replicas: i32) -> i32 {
    if rs.replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(p, rs, status_replicas);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// `getReplicaSetFraction`.
fn fraction(p: &Params, rs: &RsState, status_replicas: i32) -> i32 {
    if p.replicas == 0 {
        return -rs.replicas;
    }
    let max_now = p.replicas + p.max_surge;
    let before = match rs.max_replicas.filter(|m| *m != 0) {
        Some(m) => m,
        None if status_replicas == 0 => return 0,
        None => status_replicas,
    };
    let size = f64::from(rs.replicas) * f64::from(max_now) / f64::from(before);
    // Upstream's RoundToInt32: floor(x + 0.5).
    (size + 0.5).floor() as i32 - rs.replicas
}

/// `cleanupDeployment`: the old ReplicaSets to delete so that at most `limit` remain, oldest
/// revision first, skipping any that still has replicas (in spec or status), whose status lags
/// its generation, or that is being deleted.
pub fn history_to_delete<'a>(old: &[&'a ReplicaSet], limit: i32) -> Vec<&'a ReplicaSet> {
    let mut alive: Vec<&ReplicaSet> = old
        .iter()
        .copied()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let diff = i32::try_from(alive.len()).unwrap_or(i32::MAX) - limit.max(0);
    if diff <= 0 {
        return Vec::new();
    }
    alive.sort_by(|a, b| {
        revision(a)
            .cmp(&revision(b))
            .then_with(|| RsState::of(a).created.cmp(&RsState::of(b).created))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    alive
        .into_iter()
        .take(usize::try_from(diff).unwrap_or(0))
        .filter(|rs| {
            let status = rs.status.as_ref();
            status.map_or(0, |s| s.replicas) == 0
                && rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1) == 0
                && status.and_then(|s| s.observed_generation).unwrap_or(0)
                    >= rs.metadata.generation.unwrap_or(0)
        })
        .collect()
}

/// The new revision history of a ReplicaSet that becomes new again (rollback): `history` with
/// `old_revision` appended, oldest entries dropped beyond `limit_chars` (upstream: 2000).
pub fn append_revision_history(history: &str, old_revision: &str, limit_chars: usize) -> Option<String> {
    if history.is_empty() {
        return Some(old_revision.to_string());
    }
    let mut entries: Vec<&str> = history.split(',').collect();
    let mut len = history.len() + old_revision.len() + 1;
    let mut start = 0;
    while len > limit_chars && start < entries.len() {
        len -= entries[start].len() + 1;
        start += 1;
    }
    if len > limit_chars {
        return None;
    }
    entries.drain(..start);
    entries.push(old_revision);
    Some(entries.join(","))
}

#[cfg(test)]
mod tests;
