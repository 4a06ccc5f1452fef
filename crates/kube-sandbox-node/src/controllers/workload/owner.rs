//! Controller references and the claim rules of upstream's `ControllerRefManager`: a controller
//! owns the objects whose controller reference names it and that its selector still matches,
//! adopts matching orphans (unless it is being deleted), releases owned objects its selector no
//! longer matches, and ignores objects another controller owns.

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::MANAGER;

/// The owner reference with `controller: true`, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// A controller reference to `owner` (`controller` and `blockOwnerDeletion` set, as the real
/// controllers make them).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.name_any(),
        uid: owner.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What a controller does with an object it looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Ours, and the selector matches.
    Owned,
    /// An orphan the selector matches: take it.
    Adopt,
    /// Ours, but the selector no longer matches: let it go.
    Release,
    /// Someone else's, or not to be touched.
    Ignore,
}

/// The claim decision for an object with `meta` whose labels `matches` the selector of the
/// controller with `owner_uid` (`owner_deleting` when that controller is being deleted).
pub fn claim(meta: &ObjectMeta, owner_uid: &str, matches: bool, owner_deleting: bool) -> Claim {
    match controller_of(meta) {
        Some(r) if r.uid != owner_uid => Claim::Ignore,
        Some(_) if matches => Claim::Owned,
        Some(_) if owner_deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None if matches && !owner_deleting && meta.deletion_timestamp.is_none() => Claim::Adopt,
        None => Claim::Ignore,
    }
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(MANAGER.into()),
        ..Default::default()
    }
}

/// Adds `owner_ref` to `obj`'s owner references (strategic merge, keyed by uid, as upstream).
pub async fn adopt<K>(api: &Api<K>, obj: &K, owner_ref: &OwnerReference) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch = json!({"metadata": {"ownerReferences": [owner_ref], "uid": obj.uid()}});
    api.patch(&obj.name_any(), &params(), &Patch::Strategic(&patch))
        .await
}

/// Removes the owner reference to `owner_uid` from `obj`.
pub async fn release<K>(api: &Api<K>, obj: &K, owner_uid: &str) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let patch = json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
        "uid": obj.uid()}});
    api.patch(&obj.name_any(), &params(), &Patch::Strategic(&patch))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(controller_uid: Option<&str>, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            owner_references: controller_uid.map(|u| {
                vec![OwnerReference {
                    uid: u.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            deletion_timestamp: deleting.then_some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::UNIX_EPOCH,
            )),
            ..Default::default()
        }
    }

    #[test]
    fn claim_rules() {
        assert_eq!(claim(&meta(Some("me"), false), "me", true, false), Claim::Owned);
        assert_eq!(claim(&meta(Some("me"), true), "me", true, false), Claim::Owned);
        assert_eq!(
            claim(&meta(Some("me"), false), "me", false, false),
            Claim::Release
        );
        assert_eq!(claim(&meta(Some("me"), false), "me", false, true), Claim::Ignore);
        assert_eq!(
            claim(&meta(Some("other"), false), "me", true, false),
            Claim::Ignore
        );
        assert_eq!(claim(&meta(None, false), "me", true, false), Claim::Adopt);
        assert_eq!(claim(&meta(None, false), "me", true, true), Claim::Ignore);
        assert_eq!(claim(&meta(None, true), "me", true, false), Claim::Ignore);
        assert_eq!(claim(&meta(None, false), "me", false, false), Claim::Ignore);
    }
}
