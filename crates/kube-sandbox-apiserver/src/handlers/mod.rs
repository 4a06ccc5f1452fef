//! HTTP entry point: authentication, path routing to discovery or to a resource, request parsing
//! (query, body, DeleteOptions) and dispatch to the read/write/patch/delete handlers.

pub mod delete;
pub mod exec;
pub mod logs;
pub mod patch;
pub mod read;
pub mod write;

use std::{collections::HashMap, sync::Arc, time::Instant};

use axum::{
    body::Body,
    extract::{Request, State},
    response::{IntoResponse, Response},
};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::Value;
use tracing::{debug, warn};

use crate::{
    app::App,
    auth::Identity,
    discovery,
    error::{ApiError, ApiResult},
    rbac,
    registry::ResourceInfo,
};

/// Query parameters.
#[derive(Debug, Default, Clone)]
pub struct Query(pub HashMap<String, String>);

impl Query {
    fn parse(q: Option<&str>) -> Self {
        Self(
            q.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
                .unwrap_or_default(),
        )
    }
    /// A parameter (empty values count as absent).
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }
    /// A boolean parameter (`true`/`1`).
    pub fn flag(&self, k: &str) -> bool {
        matches!(self.get(k), Some("true" | "1"))
    }
    /// `dryRun=All`.
    pub fn dry_run(&self) -> bool {
        self.get("dryRun") == Some("All")
    }
}

/// A parsed resource request.
#[derive(Debug)]
pub struct Req {
    /// HTTP method.
    pub method: Method,
    /// The resource.
    pub info: Arc<ResourceInfo>,
    /// The requested version.
    pub version: String,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Object name from the path.
    pub name: Option<String>,
    /// Subresource (`status`, `binding`, `finalize`).
    pub sub: Option<String>,
    /// Legacy `/watch/` path.
    pub watch_path: bool,
    /// Query.
    pub query: Query,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
}

impl Req {
    /// Namespace or `""`.
    pub fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
    /// Name or `""`.
    pub fn obj_name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
    /// A header as text.
    pub fn header(&self, h: http::header::HeaderName) -> &str {
        self.headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// A JSON response with the object shown in the request's version (Status objects as they are).
fn object_response(r: &Req, code: u16, v: &Value) -> Response {
    if v.get("kind").and_then(Value::as_str) == Some("Status") {
        return json_response(code, v);
    }
    json_response(code, &read::versioned(&r.info, &r.version, v))
}

/// Adds `Warning: 299 - "unknown field \"x\""` headers for unknown fields of a custom object
/// written with `fieldValidation` unset or `Warn` (the real server's default).
fn with_warnings(r: &Req, mut resp: Response) -> Response {
    if r.info.crd.is_none() || !matches!(r.query.get("fieldValidation"), None | Some("Warn")) {
        return resp;
    }
    let Some(schema) = r.info.crd_version(&r.version).and_then(|v| v.schema.as_ref()) else {
        return resp;
    };
    let Ok(body) = serde_json::from_slice::<Value>(&r.body) else {
        return resp;
    };
    for f in kube_sandbox_machinery::schema::unknown_fields(schema, &body) {
        let text = format!("299 - \"unknown field \\\"{f}\\\"\"");
        if let Ok(v) = http::HeaderValue::from_str(&text) {
            resp.headers_mut().append(http::header::WARNING, v);
        }
    }
    resp
}

/// A JSON response.
pub fn json_response(code: u16, v: &Value) -> Response {
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
    let body = serde_json::to_vec(v).unwrap_or_default();
    (code, [(http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

const MAX_BODY: usize = 32 * 1024 * 1024;

/// The one handler behind the router.
pub async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let uri = req.uri().clone();
    let path = uri.path().to_string();
    let identity = if crate::auth::is_public(&path) {
        Ok(crate::auth::Identity::Admin)
    } else {
        crate::auth::authenticate(&app, req.headers())
    };
    let resp = match identity {
        Err(e) => e.into_response(),
        Ok(id) => match route(&app, &id, req).await {
            Ok(r) => r,
            Err(e) => e.into_response(),
        },
    };
    let status = resp.status().as_u16();
    if status >= 500 {
        warn!(%method, uri = %uri, status, "request failed");
    } else {
        debug!(%method, uri = %uri, status, elapsed_us = started.elapsed().as_micros() as u64, "request");
    }
    resp
}

async fn route(app: &Arc<App>, id: &Identity, req: Request) -> ApiResult<Response> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().trim_end_matches('/').to_string();
    let query = Query::parse(parts.uri.query());
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if !matches!(segs.as_slice(), ["api", _, _, ..] | ["apis", _, _, _, ..]) {
        let verb = rbac::verb(&parts.method, true, false, None);
        let shown = if path.is_empty() { "/" } else { path.as_str() };
        rbac::authorize(app, id, &rbac::Attributes::NonResource { verb, path: shown })?;
    }
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        [] => return Ok(discovery::root_paths(app)),
        ["healthz" | "livez" | "readyz", ..] => {
            return Ok((StatusCode::OK, [(http::header::CONTENT_TYPE, "text/plain")], "ok").into_response());
        }
        ["version"] => return Ok(json_response(200, &discovery::version())),
        ["metrics"] => {
            return Ok((
                StatusCode::OK,
                [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                app.requests.render(),
            )
                .into_response());
        }
        ["openapi", "v3"] => return Ok(json_response(200, &crate::openapi::index(app))),
        ["openapi", "v3", "api", v] => {
            return crate::openapi::group_version(app, "", v).map(|d| json_response(200, &d));
        }
        ["openapi", "v3", "apis", g, v] => {
            return crate::openapi::group_version(app, g, v).map(|d| json_response(200, &d));
        }
        ["api"] => return Ok(json_response(200, &discovery::api_versions(app))),
        ["apis"] => return Ok(json_response(200, &discovery::group_list(app))),
        ["apis", g] => return discovery::group(app, g).map(|v| json_response(200, &v)),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::not_found_path()),
    };
    if rest.is_empty() {
        return discovery::resource_list(app, group, version).map(|v| json_response(200, &v));
    }
    let (watch_path, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let (namespace, plural, name, sub) = match rest {
        ["namespaces", ns, r, tail @ ..] if !(tail.is_empty() && matches!(*r, "status" | "finalize")) => {
            match tail {
                [] => (Some(*ns), *r, None, None),
                [n] => (Some(*ns), *r, Some(*n), None),
                [n, s] => (Some(*ns), *r, Some(*n), Some(*s)),
                _ => return Err(ApiError::not_found_path()),
            }
        }
        [r] => (None, *r, None, None),
        [r, n] => (None, *r, Some(*n), None),
        [r, n, s] => (None, *r, Some(*n), Some(*s)),
        _ => return Err(ApiError::not_found_path()),
    };
    let watch = watch_path || query.flag("watch");
    let verb = rbac::verb(&parts.method, name.is_some(), watch, sub);
    app.requests.count(verb, plural);
    // As the real server: a list or watch narrowed to one object by `metadata.name=` is
    // authorized as that name, so `resourceNames` rules cover it.
    let auth_name = match (name, verb) {
        (None, "list" | "watch") => query.get("fieldSelector").and_then(rbac::selected_name),
        _ => name,
    };
    rbac::authorize(
        app,
        id,
        &rbac::Attributes::Resource {
            verb,
            group,
            resource: plural,
            subresource: sub,
            namespace,
            name: auth_name,
        },
    )?;
    if let (true, Some(ns), "pods", Some(n), Some("exec")) = (group.is_empty(), namespace, plural, name, sub)
    {
        return exec::proxy(app, ns, n, parts).await;
    }
    if let (true, Some(ns), "pods", Some(n), Some("log")) = (group.is_empty(), namespace, plural, name, sub) {
        return logs::proxy(app, ns, n, parts).await;
    }
    let info = app
        .registry
        .lookup(group, version, plural)
        .ok_or_else(ApiError::not_found_path)?;
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::not_found_path());
    }
    if info.namespaced && namespace.is_none() && (name.is_some() || parts.method != Method::GET) {
        return Err(ApiError::not_found_path());
    }
    if let Some(s) = sub {
        let ok = match s {
            "status" => info.status_subresource,
            "binding" => info.group.is_empty() && info.plural == "pods",
            "finalize" => info.group.is_empty() && info.plural == "namespaces",
            "token" => info.group.is_empty() && info.plural == "serviceaccounts",
            _ => false,
        };
        if !ok {
            return Err(ApiError::not_found_path());
        }
    }
    let body = axum::body::to_bytes(Body::new(body), MAX_BODY)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?;
    let r = Req {
        method: parts.method.clone(),
        info,
        version: version.to_string(),
        namespace: namespace.map(String::from),
        name: name.map(String::from),
        sub: sub.map(String::from),
        watch_path,
        query,
        headers: parts.headers,
        body,
    };
    let watch = r.watch_path || r.query.flag("watch");
    match (&r.method, r.name.is_some(), r.sub.as_deref()) {
        (&Method::GET, false, _) if watch => crate::watch::serve(app, &r),
        (&Method::GET, false, _) => read::list(app, &r),
        (&Method::GET, true, _) => read::get(app, &r),
        (&Method::POST, false, _) => {
            write::create(app, &r).map(|(c, v)| with_warnings(&r, object_response(&r, c, &v)))
        }
        (&Method::POST, true, Some("token")) => {
            let (ns, n) = (
                r.namespace.as_deref().unwrap_or_default(),
                r.name.as_deref().unwrap_or_default(),
            );
            crate::auth::token_request(app, ns, n, &r.body).map(|(c, v)| json_response(c, &v))
        }
        (_, true, Some("token")) => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
        (&Method::POST, true, Some("binding")) => write::binding(app, &r).map(|(c, v)| json_response(c, &v)),
        (&Method::PUT, true, Some("binding")) | (&Method::PATCH, true, Some("binding")) => Err(
            ApiError::method_not_allowed("the server does not allow this method on the requested resource"),
        ),
        (&Method::PUT, true, _) => {
            write::update(app, &r).map(|(c, v)| with_warnings(&r, object_response(&r, c, &v)))
        }
        (&Method::PATCH, true, _) => patch::patch(app, &r).map(|(c, v)| object_response(&r, c, &v)),
        (&Method::DELETE, true, None) => delete::delete(app, &r).map(|(c, v)| object_response(&r, c, &v)),
        (&Method::DELETE, false, None) => {
            delete::delete_collection(app, &r).map(|(c, v)| json_response(c, &v))
        }
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}
