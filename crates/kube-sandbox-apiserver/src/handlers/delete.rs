//! DELETE of one object and of collections (DeleteOptions from body and query).

use serde_json::{Value, json};

use super::{Req, read};
use crate::{
    app::App,
    error::{ApiError, ApiResult, status_success},
    lifecycle::{self, DeleteOpts, Deleted},
    meta,
};

fn options(r: &Req) -> ApiResult<DeleteOpts> {
    let mut o = DeleteOpts {
        dry_run: r.query.dry_run(),
        ..Default::default()
    };
    if !r.body.is_empty() {
        let ct = r.header(http::header::CONTENT_TYPE);
        let b: Value = if ct.contains("protobuf") {
            crate::protobuf::decode(&r.body)
                .filter(|v| v["kind"] == "DeleteOptions")
                .ok_or_else(|| ApiError::unsupported_body(ct))?
        } else {
            serde_json::from_slice(&r.body)
                .map_err(|e| ApiError::bad_request(format!("decoding DeleteOptions: {e}")))?
        };
        o.grace = b.get("gracePeriodSeconds").and_then(Value::as_i64);
        o.policy = b
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(String::from);
        if o.policy.is_none() {
            if let Some(orphan) = b.get("orphanDependents").and_then(Value::as_bool) {
                o.policy = Some(if orphan { "Orphan" } else { "Background" }.into());
            }
        }
        let pre = b.get("preconditions");
        o.uid = pre
            .and_then(|p| p.get("uid"))
            .and_then(Value::as_str)
            .map(String::from);
        o.resource_version = pre
            .and_then(|p| p.get("resourceVersion"))
            .and_then(Value::as_str)
            .map(String::from);
        if b.get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"))
        {
            o.dry_run = true;
        }
    }
    if let Some(g) = r.query.get("gracePeriodSeconds") {
        o.grace = Some(
            g.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}")))?,
        );
    }
    if let Some(p) = r.query.get("propagationPolicy") {
        o.policy = Some(p.to_string());
    } else if let Some(orphan) = r.query.get("orphanDependents") {
        o.policy = Some(if orphan == "true" { "Orphan" } else { "Background" }.into());
    }
    if let Some(p) = &o.policy {
        if !matches!(p.as_str(), "Orphan" | "Background" | "Foreground") {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy: Unsupported value: \"{p}\": supported values: \"Foreground\", \"Background\", \"Orphan\""
            )));
        }
    }
    Ok(o)
}

/// DELETE of one object.
pub fn delete(app: &App, r: &Req) -> ApiResult<(u16, Value)> {
    let opts = options(r)?;
    let info = &r.info;
    let out = app
        .store
        .write(|tx| lifecycle::delete_object(app, tx, info, r.ns(), r.obj_name(), &opts))?;
    Ok(match out {
        Deleted::Pending(o) => (200, (*o).clone()),
        Deleted::Gone(o) if info.return_deleted_object => (200, (*o).clone()),
        Deleted::Gone(o) => {
            let mut d = json!({"name": r.obj_name(), "kind": info.plural, "uid": meta::uid_of(&o)});
            if !info.group.is_empty() {
                d["group"] = json!(info.group);
            }
            (200, status_success(200, Some(d)))
        }
    })
}

/// DELETE on a collection (with selectors); returns the list of deleted objects.
pub fn delete_collection(app: &App, r: &Req) -> ApiResult<(u16, Value)> {
    let opts = options(r)?;
    let info = &r.info;
    let page = read::list_page(app, r)?;
    let items: Vec<Value> = app.store.write(|tx| {
        page.items
            .iter()
            .filter_map(|o| {
                match lifecycle::delete_object(app, tx, info, meta::namespace(o), meta::name(o), &opts) {
                    Ok(Deleted::Gone(o) | Deleted::Pending(o)) => Some((*o).clone()),
                    Err(_) => None,
                }
            })
            .collect()
    });
    let rv = app.store.read(|t| t.rv());
    Ok((
        200,
        json!({
            "kind": format!("{}List", info.kind),
            "apiVersion": info.api_version(&r.version),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    ))
}
