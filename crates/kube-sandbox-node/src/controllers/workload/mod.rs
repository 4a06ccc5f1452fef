//! What the workload controllers (ReplicaSet, Deployment, DaemonSet) share: label selectors,
//! pod readiness and availability, int-or-percent arithmetic, template hashes, ownership
//! (controller references, adoption and release), status patches and [`Fresh`], the view of
//! a reflector cache corrected by the controller's own writes.

mod fresh;
mod hash;
mod owner;
mod pods;
mod selector;

use k8s_openapi::{
    api::core::v1::{Pod, PodTemplateSpec},
    apimachinery::pkg::{
        apis::meta::v1::{ObjectMeta, OwnerReference},
        util::intstr::IntOrString,
    },
};
use serde_json::{Map, Value};

pub use fresh::Fresh;
pub use hash::{fnv32a, safe_encode, template_hash};
pub use owner::{Claim, adopt, claim, controller_of, controller_ref, release};
pub use pods::{
    available_since, is_active, is_available, is_ready, is_terminal, next_available_at, rank_for_deletion,
};
pub use selector::{labels_match, selector_matches};

/// The field manager the controllers write as (what the real kube-controller-manager uses).
pub const MANAGER: &str = "kube-controller-manager";

/// `intstr.GetScaledValueFromIntOrPercent`: an int as it is, a percent of `total` rounded up or
/// down; `None` for malformed values.
pub fn scaled_value(v: Option<&IntOrString>, total: i32, round_up: bool) -> Option<i32> {
    match v {
        None => Some(0),
        Some(IntOrString::Int(i)) => Some(*i),
        Some(IntOrString::String(s)) => {
            let pct: i64 = s.strip_suffix('%')?.parse().ok()?;
            let scaled = pct * i64::from(total);
            let v = if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            };
            i32::try_from(v).ok()
        }
    }
}

/// A JSON merge patch turning `current` into `desired` at the top level: keys of `current`
/// missing from `desired` become `null` (status fields that drop back to zero are omitted, as the
/// real controllers' `omitempty` fields are).
pub fn replace_patch(current: Option<&Value>, desired: &Value) -> Value {
    let mut out: Map<String, Value> = desired.as_object().cloned().unwrap_or_default();
    if let Some(cur) = current.and_then(Value::as_object) {
        for k in cur.keys() {
            out.entry(k.clone()).or_insert(Value::Null);
        }
    }
    Value::Object(out)
}

/// Merge-patches the status of `obj` from `current` to `want` (no request when they are equal);
/// the object as written, or `None` when nothing was written (equal, or the object is gone).
pub async fn patch_status<K>(
    client: &kube::Client,
    obj: &K,
    current: &Value,
    want: &Value,
    params: &kube::api::PatchParams,
) -> Result<Option<K>, kube::Error>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    if current == want {
        return Ok(None);
    }
    let meta = obj.meta();
    let api: kube::Api<K> =
        kube::Api::namespaced(client.clone(), meta.namespace.as_deref().unwrap_or_default());
    let body = serde_json::json!({"status": replace_patch(Some(current), want)});
    let name = meta.name.clone().unwrap_or_default();
    match api
        .patch_status(&name, params, &kube::api::Patch::Merge(&body))
        .await
    {
        Ok(new) => Ok(Some(new)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// The pod a controller creates from `template` (`controller.GetPodFromTemplate`): the
/// template's labels, annotations and finalizers, `generateName` `<prefix>-` (the server adds
/// five random characters), the controller reference, and the template's spec.
pub fn pod_from_template(template: &PodTemplateSpec, prefix: &str, owner: OwnerReference) -> Pod {
    let tm = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            labels: tm.labels,
            annotations: tm.annotations,
            finalizers: tm.finalizers,
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The resourceVersion as a number (this API server's are; `None` otherwise).
pub fn rv_number(rv: Option<&String>) -> Option<u64> {
    rv.and_then(|s| s.parse().ok())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn scaled_values_round_like_kubernetes() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(scaled_value(Some(&pct("25%")), 2, true), Some(1));
        assert_eq!(scaled_value(Some(&pct("25%")), 2, false), Some(0));
        assert_eq!(scaled_value(Some(&pct("25%")), 10, true), Some(3));
        assert_eq!(scaled_value(Some(&pct("25%")), 10, false), Some(2));
        assert_eq!(scaled_value(Some(&pct("100%")), 7, false), Some(7));
        assert_eq!(scaled_value(Some(&IntOrString::Int(3)), 10, false), Some(3));
        assert_eq!(scaled_value(None, 10, false), Some(0));
        assert_eq!(scaled_value(Some(&pct("x")), 10, false), None);
    }

    #[test]
    fn replace_patch_nulls_dropped_keys() {
        let cur = json!({"replicas": 2, "readyReplicas": 2, "observedGeneration": 1});
        let want = json!({"replicas": 1, "observedGeneration": 2});
        assert_eq!(
            replace_patch(Some(&cur), &want),
            json!({"replicas": 1, "observedGeneration": 2, "readyReplicas": null})
        );
        assert_eq!(replace_patch(None, &want), want);
    }
}
