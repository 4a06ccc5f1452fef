//! A minimal `/openapi/v3`: the index and one document per group/version listing each
//! resource's operations with `x-kubernetes-group-version-kind` and the `fieldValidation`
//! parameter, so that kubectl detects server-side field validation and does not need schemas.
//! No schemas are published (`components.schemas` is empty).

use serde_json::{Map, Value, json};

use crate::{
    app::App,
    error::{ApiError, ApiResult},
    registry::ResourceInfo,
};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`.
pub fn index(app: &App) -> Value {
    let mut paths = Map::new();
    let mut gvs = vec![(String::new(), "v1".to_string())];
    for (g, vs) in app.registry.groups() {
        for v in vs {
            gvs.push((g.clone(), v));
        }
    }
    let rv = app.store.read(|t| t.rv());
    for (g, v) in gvs {
        let p = gv_path(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={rv:016X}")}),
        );
    }
    json!({ "paths": paths })
}

fn op(r: &ResourceInfo, version: &str, action: &str, with_validation: bool) -> Value {
    let mut params = vec![json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}})];
    if with_validation {
        params.push(json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
    }
    json!({
        "operationId": format!("{action}{}", r.kind),
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": version, "kind": r.kind},
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
    })
}

/// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`.
pub fn group_version(app: &App, group: &str, version: &str) -> ApiResult<Value> {
    let rs = app.registry.resources_in(group, version);
    if rs.is_empty() {
        return Err(ApiError::not_found_path());
    }
    let prefix = format!("/{}", gv_path(group, version));
    let mut paths = Map::new();
    for r in rs {
        let base = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        paths.insert(
            base.clone(),
            json!({"get": op(&r, version, "list", false), "post": op(&r, version, "post", true),
                   "delete": op(&r, version, "deletecollection", false)}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op(&r, version, "get", false), "put": op(&r, version, "put", true),
                   "patch": op(&r, version, "patch", true), "delete": op(&r, version, "delete", false)}),
        );
        if r.status_subresource {
            paths.insert(
                format!("{base}/{{name}}/status"),
                json!({"get": op(&r, version, "get", false), "put": op(&r, version, "put", true),
                       "patch": op(&r, version, "patch", true)}),
            );
        }
    }
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
