//! PATCH bodies: JSON patch, JSON merge patch, strategic merge patch and server-side apply
//! (with `managedFields` ownership and conflicts).
//!
//! - JSON patch (RFC 6902) and JSON merge patch (RFC 7386) come from the `json-patch` crate.
//! - Strategic merge patch: [`strategic`] (list strategies in [`strategy`]).
//! - Server-side apply and the `managedFields` of ordinary writes: [`apply`] (field sets in
//!   [`fieldset`]).
//!
//! [`apply_patch`] only computes the new object; for JSON, merge and strategic patches the API
//! server then calls [`record_update`] so the writer's fields are tracked in `managedFields`.

mod apply;
pub mod fieldset;
pub mod strategic;
pub mod strategy;

pub use apply::{record_update, record_update_subresource};

use serde_json::Value;

/// The four patch flavours, chosen by the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json`.
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// Maps a Content-Type header value (parameters ignored) to a patch type.
    pub fn from_content_type(ct: &str) -> Option<Self> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Server-side apply parameters (`fieldManager`, `force` query parameters).
#[derive(Debug, Clone)]
pub struct ApplyOptions<'a> {
    /// The field manager; required for apply.
    pub field_manager: &'a str,
    /// Take ownership of conflicting fields instead of failing.
    pub force: bool,
}

/// Why a patch could not be applied; the API server maps each to an HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// Undecodable body (400).
    #[error("{0}")]
    BadRequest(String),
    /// Well-formed but not applicable, e.g. a failed JSON-patch `test` (422).
    #[error("{0}")]
    Invalid(String),
    /// Server-side apply conflicts with other managers (409); one entry per field.
    #[error("Apply failed with {} conflict(s): {}", conflicts.len(), conflicts.join("; "))]
    Conflict {
        /// `conflict with "manager": .path` lines.
        conflicts: Vec<String>,
    },
}

/// Applies RFC 6902 operations one by one (on a document the caller discards on error), with
/// the real server's leniency (kube-apiserver applies JSON patches with Go's
/// `gopkg.in/evanphx/json-patch.v4`, whose object lookup never fails on a missing key):
/// * a `test` for `null` succeeds when the path is missing but its parent exists — kube-rs's
///   finalizer helper relies on it (`test /metadata/finalizers == null`, then `add`);
/// * a `replace` of a key missing from an existing object sets it, as `add` would —
///   upstream Kuryr's `replace /status/nsLabels` on a KuryrNetwork whose status has no
///   labels yet relies on it (a missing parent is still an error, as there).
fn apply_json_patch(doc: &mut Value, ops: &json_patch::Patch) -> Result<(), PatchError> {
    let parent_is_object = |doc: &Value, path: &str| {
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        doc.pointer(parent).is_some_and(Value::is_object)
    };
    for op in &ops.0 {
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
        {
            let path = t.path.as_str();
            if doc.pointer(path).is_none() {
                let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
                if doc.pointer(parent).is_some() {
                    continue;
                }
            }
        }
        if let json_patch::PatchOperation::Replace(r) = op
            && doc.pointer(r.path.as_str()).is_none()
            && parent_is_object(doc, r.path.as_str())
        {
            let add = json_patch::PatchOperation::Add(json_patch::AddOperation {
                path: r.path.clone(),
                value: r.value.clone(),
            });
            json_patch::patch(doc, std::slice::from_ref(&add))
                .map_err(|e| PatchError::Invalid(format!("the JSON patch could not be applied: {e}")))?;
            continue;
        }
        json_patch::patch(doc, std::slice::from_ref(op))
            .map_err(|e| PatchError::Invalid(format!("the JSON patch could not be applied: {e}")))?;
    }
    Ok(())
}

/// Applies `body` of type `pt` to `current` and returns the new object.
/// `current` is `{}`-like (only apiVersion/kind/metadata.name/namespace) when apply creates.
pub fn apply_patch(
    pt: PatchType,
    current: &Value,
    body: &[u8],
    apply: Option<&ApplyOptions<'_>>,
) -> Result<Value, PatchError> {
    apply_patch_subresource(pt, current, body, apply, None)
}

/// [`apply_patch`] through a subresource (`Some("status")`): a server-side apply then records
/// its `managedFields` entry with `subresource: status`, separate from the same manager's
/// main-resource entry, like the real server. The caller keeps the result's
/// `metadata.managedFields` along with the status it copies.
pub fn apply_patch_subresource(
    pt: PatchType,
    current: &Value,
    body: &[u8],
    apply: Option<&ApplyOptions<'_>>,
    subresource: Option<&str>,
) -> Result<Value, PatchError> {
    let parse = |what: &str| -> Result<Value, PatchError> {
        serde_json::from_slice(body)
            .map_err(|e| PatchError::BadRequest(format!("error decoding {what} patch: {e}")))
    };
    match pt {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| PatchError::BadRequest(format!("error decoding JSON patch: {e}")))?;
            let mut doc = current.clone();
            apply_json_patch(&mut doc, &ops)?;
            Ok(doc)
        }
        PatchType::Merge => {
            let p = parse("merge")?;
            let mut doc = current.clone();
            json_patch::merge(&mut doc, &p);
            Ok(doc)
        }
        PatchType::StrategicMerge => {
            let p = parse("strategic merge")?;
            let kind = current.get("kind").and_then(Value::as_str).unwrap_or("");
            let mut doc = current.clone();
            strategic::strategic_merge(kind, &mut doc, &p)?;
            Ok(doc)
        }
        PatchType::Apply => {
            let opts = apply.filter(|o| !o.field_manager.is_empty()).ok_or_else(|| {
                PatchError::Invalid(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is \
                     required for apply patch"
                        .into(),
                )
            })?;
            apply::server_side_apply(current, body, opts, subresource.unwrap_or(""))
        }
    }
}

#[cfg(test)]
mod tests;
