//! Adding and removing one finalizer with JSON patches guarded by `test` operations on the
//! finalizer list itself (the pattern of kube-runtime's own `finalizer` helper), so a write
//! fails only when someone else changed the finalizers meanwhile.
//!
//! Upstream sent the whole list in a merge patch guarded by the object's `resourceVersion`,
//! which fails on *any* concurrent update; during a pod burst the scheduler's binding and the
//! kubelet's status updates made about half of the finalizer writes fail with 409 and retry.
//! A failed `test` makes the API server answer 422 ([`is_conflict`] covers both); after one,
//! the live object is read once and the goal re-planned (it is often met already: our own
//! previous write, not yet in the watch cache).

use json_patch::{AddOperation, Patch as JsonPatch, PatchOperation, RemoveOperation, TestOperation};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The patch that appends `name` to `current` (the list the caller saw); `None` when it is
/// there already.
pub fn add_patch(current: &[String], name: &str) -> Option<JsonPatch> {
    if current.iter().any(|f| f == name) {
        return None;
    }
    let path = |p: &str| p.parse().ok();
    let ops = if current.is_empty() {
        // A missing list tests as null (the API server's json-patch leniency).
        vec![
            PatchOperation::Test(TestOperation {
                path: path("/metadata/finalizers")?,
                value: Value::Null,
            }),
            PatchOperation::Add(AddOperation {
                path: path("/metadata/finalizers")?,
                value: Value::from(vec![name]),
            }),
        ]
    } else {
        vec![
            PatchOperation::Test(TestOperation {
                path: path("/metadata/finalizers")?,
                value: Value::from(current.to_vec()),
            }),
            PatchOperation::Add(AddOperation {
                path: path("/metadata/finalizers/-")?,
                value: Value::from(name),
            }),
        ]
    };
    Some(JsonPatch(ops))
}

/// The patch that removes `name` from `current`, tested at its index; `None` when absent.
pub fn remove_patch(current: &[String], name: &str) -> Option<JsonPatch> {
    let i = current.iter().position(|f| f == name)?;
    let at: json_patch::jsonptr::PointerBuf = format!("/metadata/finalizers/{i}").parse().ok()?;
    Some(JsonPatch(vec![
        PatchOperation::Test(TestOperation {
            path: at.clone(),
            value: Value::from(name),
        }),
        PatchOperation::Remove(RemoveOperation { path: at }),
    ]))
}

/// Whether `e` is a lost race on the finalizer list (409, or 422 from a failed `test`): retry
/// soon with a fresh object.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 || s.code == 422)
}

/// What to change: the patch from a finalizer list (`None`: nothing to do).
type Plan = fn(&[String], &str) -> Option<JsonPatch>;

/// Sends `plan(obj's finalizers)`; on a lost race (the object in hand was stale, typically
/// because our own previous write has not reached the watch cache yet) reads the object once
/// and plans again from the live list, so an already satisfied goal is not an error. A
/// different incarnation under the same name (other UID) counts as gone.
async fn converge<K>(api: &Api<K>, obj: &K, name: &str, plan: Plan) -> Result<Outcome, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Some(patch) = plan(obj.finalizers(), name) else {
        return Ok(Outcome::Done);
    };
    let pp = PatchParams::default();
    let err = match api.patch(&obj.name_any(), &pp, &Patch::Json::<()>(patch)).await {
        Ok(_) => return Ok(Outcome::Done),
        Err(e) if is_conflict(&e) => e,
        Err(e) => return Err(e),
    };
    let live = match api.get_opt(&obj.name_any()).await? {
        Some(l) if l.uid() == obj.uid() => l,
        _ => return Ok(Outcome::Gone(err)),
    };
    let Some(patch) = plan(live.finalizers(), name) else {
        return Ok(Outcome::Done);
    };
    api.patch(&obj.name_any(), &pp, &Patch::Json::<()>(patch))
        .await
        .map(|_| Outcome::Done)
}

enum Outcome {
    Done,
    /// The object vanished while we raced for it; the first error.
    Gone(kube::Error),
}

/// Adds `name` to `obj`'s finalizers (nothing when present). Fails if the object is gone.
pub async fn add<K>(api: &Api<K>, obj: &K, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match converge(api, obj, name, add_patch).await? {
        Outcome::Done => Ok(()),
        Outcome::Gone(e) => Err(e),
    }
}

/// Removes `name` from `obj`'s finalizers (nothing when absent or when the object is gone).
pub async fn remove<K>(api: &Api<K>, obj: &K, name: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    converge(api, obj, name, remove_patch).await.map(|_| ())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(doc: &Value, p: &JsonPatch) -> Result<Value, json_patch::PatchError> {
        let mut d = doc.clone();
        json_patch::patch(&mut d, &p.0).map(|_| d)
    }

    fn fins(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn add_appends_after_testing_the_list() {
        let p = add_patch(&fins(&["a"]), "ours").unwrap();
        let doc = json!({"metadata": {"finalizers": ["a"], "resourceVersion": "7"}});
        let out = apply(&doc, &p).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "ours"]));
        // Someone else changed the list meanwhile: the test fails.
        let moved = json!({"metadata": {"finalizers": ["a", "b"]}});
        assert!(apply(&moved, &p).is_err());
        // An unrelated change (another resourceVersion) does not matter.
        let other =
            json!({"metadata": {"finalizers": ["a"], "resourceVersion": "9"}, "spec": {"nodeName": "n"}});
        assert!(apply(&other, &p).is_ok());
        assert!(add_patch(&fins(&["ours"]), "ours").is_none());
    }

    #[test]
    fn add_to_an_empty_list_tests_for_null() {
        let p = add_patch(&[], "ours").unwrap();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                   {"op": "add", "path": "/metadata/finalizers", "value": ["ours"]}])
        );
    }

    #[test]
    fn remove_tests_the_entry_at_its_index() {
        let p = remove_patch(&fins(&["a", "ours", "b"]), "ours").unwrap();
        let doc = json!({"metadata": {"finalizers": ["a", "ours", "b"]}});
        assert_eq!(
            apply(&doc, &p).unwrap()["metadata"]["finalizers"],
            json!(["a", "b"])
        );
        // The list shifted meanwhile: the test fails instead of removing someone else's entry.
        let shifted = json!({"metadata": {"finalizers": ["ours", "b"]}});
        assert!(apply(&shifted, &p).is_err());
        assert!(remove_patch(&fins(&["a"]), "ours").is_none());
    }
}
