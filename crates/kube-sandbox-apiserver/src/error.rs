//! API errors rendered as `meta/v1` `Status` objects, with the messages and reasons the real
//! API server uses, plus the crate's startup [`Error`].

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::registry::ResourceInfo;

/// Failures while starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the listen address failed.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Generating TLS material or building the rustls config failed.
    #[error("setting up TLS: {0}")]
    Tls(#[source] kube_sandbox_machinery::tls::TlsError),
    /// Writing the kubeconfig (or the CA next to it) failed.
    #[error("writing kubeconfig: {0}")]
    Kubeconfig(#[source] kube_sandbox_machinery::tls::TlsError),
    /// Waiting for a shutdown signal failed.
    #[error("waiting for signals: {0}")]
    Signal(#[source] std::io::Error),
    /// The data dir could not be read or written.
    #[error("data dir: {0}")]
    DataDir(#[source] crate::persist::PersistError),
}

/// One field-level cause in `details.causes`.
#[derive(Debug, Clone)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, ...
    pub reason: String,
    /// Human text, e.g. `Required value`.
    pub message: String,
    /// Dotted field path.
    pub field: String,
}

impl Cause {
    /// A cause whose reason is derived from the message the way the real server words it.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        let message = message.into();
        let reason = if message.starts_with("Required value") {
            "FieldValueRequired"
        } else if message.starts_with("Unsupported value") {
            "FieldValueNotSupported"
        } else if message.starts_with("Forbidden") {
            "FieldValueForbidden"
        } else if message.starts_with("Duplicate value") {
            "FieldValueDuplicate"
        } else if message.starts_with("Too long") {
            "FieldValueTooLong"
        } else {
            "FieldValueInvalid"
        };
        Self {
            reason: reason.into(),
            message,
            field: field.into(),
        }
    }
}

/// An API error, rendered as a `Status` with the HTTP code.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, ...
    pub reason: &'static str,
    /// Human text.
    pub message: String,
    /// `details`, when there is something to say.
    pub details: Option<Value>,
}

/// Result alias for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

fn details(info: &ResourceInfo, name: &str, kind: &str) -> Value {
    let mut d = json!({ "name": name, "kind": kind });
    if !info.group.is_empty() {
        d["group"] = json!(info.group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }
    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
    /// 422 on request options (e.g. apply without `fieldManager`).
    pub fn invalid_options(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }
    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }
    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }
    /// 404 NotFound with a message of the caller's.
    pub fn not_found_message(message: String) -> Self {
        Self::new(404, "NotFound", message)
    }
    /// 403 Forbidden with `details` (RBAC denials).
    pub fn forbidden_with(message: String, details: Value) -> Self {
        let mut e = Self::new(403, "Forbidden", message);
        e.details = Some(details);
        e
    }
    /// 404 for a path that names no resource.
    pub fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }
    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }
    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {ct:?})"
            ),
        )
    }
    /// 415 for a create/update body that is not JSON or YAML (clients then fall back to JSON).
    pub fn unsupported_body(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {ct:?})"
            ),
        )
    }
    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }
    /// 410 Gone / Expired (watch from a compacted version).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }
    /// 404 NotFound for an object: `pods "x" not found`.
    pub fn not_found(info: &ResourceInfo, name: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", info.qualified_resource()),
        );
        e.details = Some(details(info, name, &info.plural));
        e
    }
    /// 409 AlreadyExists: `pods "x" already exists`.
    pub fn already_exists(info: &ResourceInfo, name: &str) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", info.qualified_resource()),
        );
        e.details = Some(details(info, name, &info.plural));
        e
    }
    /// 409 Conflict with a custom tail after `Operation cannot be fulfilled on pods "x": `.
    pub fn conflict_msg(info: &ResourceInfo, name: &str, msg: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {msg}",
                info.qualified_resource()
            ),
        );
        e.details = Some(details(info, name, &info.plural));
        e
    }
    /// 409 Conflict for a stale resourceVersion.
    pub fn conflict(info: &ResourceInfo, name: &str) -> Self {
        Self::conflict_msg(
            info,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }
    /// 409 Conflict with a plain message (server-side apply conflicts).
    pub fn conflict_plain(info: &ResourceInfo, name: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(409, "Conflict", message);
        e.details = Some(details(info, name, &info.plural));
        e
    }
    /// 422 Invalid: `Pod "x" is invalid: field: msg` with `details.causes`.
    pub fn invalid(info: &ResourceInfo, name: &str, causes: Vec<Cause>) -> Self {
        let rendered: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if rendered.len() == 1 {
            rendered[0].clone()
        } else {
            format!("[{}]", rendered.join(", "))
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {joined}", info.qualified_kind()),
        );
        let mut d = details(info, name, &info.kind);
        d["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
        );
        e.details = Some(d);
        e
    }
    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = http::StatusCode::from_u16(self.code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        (code, [(http::header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// A `Status` of success (delete of an object that is gone, binding).
pub fn status_success(code: u16, details: Option<Value>) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
    });
    if code != 200 {
        s["code"] = json!(code);
    }
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}
