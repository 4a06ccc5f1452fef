//! Discovery documents: `/version`, `/api`, `/apis`, `/apis/<group>`, and the resource lists of
//! each group/version (with verbs, short names, subresources).

use axum::response::Response;
use serde_json::{Value, json};

use crate::{
    app::App,
    error::{ApiError, ApiResult},
    handlers::json_response,
    registry::ResourceInfo,
};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-kube-sandbox",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/` (a list of paths, like the real server).
pub fn root_paths(app: &App) -> Response {
    let mut paths = vec!["/api".to_string(), "/api/v1".into(), "/apis".into()];
    for (g, vs) in app.registry.groups() {
        paths.push(format!("/apis/{g}"));
        for v in vs {
            paths.push(format!("/apis/{g}/{v}"));
        }
    }
    paths.extend([
        "/healthz".into(),
        "/livez".into(),
        "/readyz".into(),
        "/version".into(),
    ]);
    json_response(200, &json!({ "paths": paths }))
}

/// `/api`.
pub fn api_versions(app: &App) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": app.server_address}]
    })
}

fn group_doc(g: &str, vs: &[String]) -> Value {
    let versions: Vec<Value> = vs
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({
        "name": g,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn group_list(app: &App) -> Value {
    let groups: Vec<Value> = app
        .registry
        .groups()
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn group(app: &App, g: &str) -> ApiResult<Value> {
    let groups = app.registry.groups();
    let (_, vs) = groups
        .iter()
        .find(|(name, _)| name == g)
        .ok_or_else(ApiError::not_found_path)?;
    let mut doc = group_doc(g, vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Ok(doc)
}

const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn entries(r: &ResourceInfo) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": VERBS,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    if r.status_subresource {
        out.push(json!({
            "name": format!("{}/status", r.plural),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if r.group.is_empty() && r.plural == "pods" {
        out.push(json!({
            "name": "pods/binding",
            "singularName": "",
            "namespaced": true,
            "kind": "Binding",
            "verbs": ["create"],
        }));
    }
    if r.group.is_empty() && r.plural == "namespaces" {
        out.push(json!({
            "name": "namespaces/finalize",
            "singularName": "",
            "namespaced": false,
            "kind": "Namespace",
            "verbs": ["update"],
        }));
    }
    out
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resource_list(app: &App, group: &str, version: &str) -> ApiResult<Value> {
    let rs = app.registry.resources_in(group, version);
    if rs.is_empty() {
        return Err(ApiError::not_found_path());
    }
    let resources: Vec<Value> = rs.iter().flat_map(|r| entries(r)).collect();
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}
