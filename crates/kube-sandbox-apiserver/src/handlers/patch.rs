//! PATCH: JSON patch, merge patch, strategic merge patch and server-side apply (through
//! `kube_sandbox_machinery::patch`), including apply-creates and `/status` patches.

use kube_sandbox_machinery::patch::{
    ApplyOptions, PatchError, PatchType, apply_patch, apply_patch_subresource,
};
use serde_json::{Value, json};

use super::{
    Req,
    write::{commit_update, create_in_tx},
};
use crate::{
    app::App,
    error::{ApiError, ApiResult, Cause},
    meta,
};

/// PATCH on an object or its status.
pub fn patch(app: &App, r: &Req) -> ApiResult<(u16, Value)> {
    let ct = r.header(http::header::CONTENT_TYPE).to_string();
    let pt = PatchType::from_content_type(&ct).ok_or_else(|| ApiError::unsupported_media_type(&ct))?;
    let manager = r.query.get("fieldManager").map(String::from);
    if pt == PatchType::Apply && manager.is_none() {
        return Err(ApiError::invalid_options(
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    let force = r.query.flag("force");
    if force && pt != PatchType::Apply {
        return Err(ApiError::invalid_options(
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
        ));
    }
    let opts = manager.as_deref().map(|m| ApplyOptions {
        field_manager: m,
        force,
    });
    let info = &r.info;
    app.store.write(|tx| {
        let cur = tx.get(&info.key(), r.ns(), r.obj_name()).cloned();
        let Some(cur) = cur else {
            if pt != PatchType::Apply || r.sub.is_some() {
                return Err(ApiError::not_found(info, r.obj_name()));
            }
            let mut base = json!({
                "apiVersion": info.api_version(&r.version),
                "kind": info.kind,
                "metadata": {"name": r.obj_name()},
            });
            if info.namespaced {
                base["metadata"]["namespace"] = json!(r.ns());
            }
            let obj = apply_patch(pt, &base, &r.body, opts.as_ref()).map_err(|e| map_err(r, e))?;
            let obj = ensure_object(r, obj)?;
            return create_in_tx(app, tx, r, obj);
        };
        let view = crate::handlers::read::versioned(info, &r.version, &cur);
        let patched = apply_patch_subresource(pt, &view, &r.body, opts.as_ref(), r.sub.as_deref())
            .map_err(|e| map_err(r, e))?;
        let patched = ensure_object(r, patched)?;
        if let Some(rv) = meta::meta_str(&patched, "resourceVersion") {
            if Some(rv) != meta::meta_str(&cur, "resourceVersion") {
                return Err(ApiError::conflict(info, r.obj_name()));
            }
        }
        if meta::name(&patched) != r.obj_name() && !meta::name(&patched).is_empty() {
            return Err(ApiError::invalid(
                info,
                r.obj_name(),
                vec![Cause::new(
                    "metadata.name",
                    format!("Invalid value: \"{}\": field is immutable", meta::name(&patched)),
                )],
            ));
        }
        commit_update(app, tx, r, &cur, patched)
    })
}

/// A patch must leave an object (a JSON patch can replace the root with anything).
fn ensure_object(r: &Req, v: Value) -> ApiResult<Value> {
    if v.is_object() {
        Ok(v)
    } else {
        Err(ApiError::invalid(
            &r.info,
            r.obj_name(),
            vec![Cause::new(
                "",
                "Invalid value: the patched document is not an object",
            )],
        ))
    }
}

fn map_err(r: &Req, e: PatchError) -> ApiError {
    match e {
        PatchError::BadRequest(m) => ApiError::bad_request(m),
        PatchError::Invalid(m) => ApiError::invalid(&r.info, r.obj_name(), vec![Cause::new("", m)]),
        e @ PatchError::Conflict { .. } => ApiError::conflict_plain(&r.info, r.obj_name(), e.to_string()),
    }
}
