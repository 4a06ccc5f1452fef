//! Keystone v3 as far as a client of the model needs it: the version document and password or
//! application-credential authentication answering a token whose catalog points `network` (and
//! `load-balancer`) at this server. Any credentials are accepted: the model measures, it does not
//! guard (it listens on loopback).

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::{Value, json};

use crate::Cloud;

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    Router::new()
        .route("/identity", get(version))
        .route("/identity/", get(version))
        .route("/identity/v3", get(version))
        .route("/identity/v3/", get(version))
        .route("/identity/v3/auth/tokens", post(token))
}

async fn version(State(c): State<Arc<Cloud>>) -> Json<Value> {
    let base = c.base();
    Json(json!({"version": {
        "id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": format!("{base}/identity/v3/")}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}]
    }}))
}

fn endpoint(id: &str, kind: &str, name: &str, url: String) -> Value {
    let eps: Vec<Value> = ["public", "internal", "admin"]
        .iter()
        .map(|i| {
            json!({"id": format!("{id}-{i}"), "interface": i, "region": "RegionOne",
                   "region_id": "RegionOne", "url": url})
        })
        .collect();
    json!({"type": kind, "name": name, "id": id, "endpoints": eps})
}

async fn token(State(c): State<Arc<Cloud>>, body: axum::body::Bytes) -> Response {
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"error": {"code": 400, "title": "Bad Request",
                    "message": format!("the request body is not JSON: {e}")}})),
            )
                .into_response();
        }
    };
    let project = req
        .pointer("/auth/scope/project/name")
        .and_then(Value::as_str)
        .unwrap_or("k8s");
    let user = req
        .pointer("/auth/identity/password/user/name")
        .and_then(Value::as_str)
        .unwrap_or("kuryr");
    let base = c.base();
    let body = json!({"token": {
        "methods": ["password"], "expires_at": "2099-01-01T00:00:00.000000Z",
        "issued_at": "2026-01-01T00:00:00.000000Z",
        "user": {"id": "model-user", "name": user, "domain": {"id": "default", "name": "Default"}},
        "project": {"id": "model-project", "name": project, "domain": {"id": "default", "name": "Default"}},
        "roles": [{"id": "r-admin", "name": "admin"}, {"id": "r-member", "name": "member"}],
        "catalog": [
            endpoint("s-network", "network", "neutron", format!("{base}/network")),
            endpoint("s-lb", "load-balancer", "octavia", format!("{base}/load-balancer")),
            endpoint("s-identity", "identity", "keystone", format!("{base}/identity")),
        ]
    }});
    let mut r = (StatusCode::CREATED, Json(body)).into_response();
    r.headers_mut()
        .insert("X-Subject-Token", HeaderValue::from_static("model-token"));
    r
}
