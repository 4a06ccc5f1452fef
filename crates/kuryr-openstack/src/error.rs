//! The one error type of this crate: what failed (the operation), why (a kind the controller
//! can act on), and Neutron's own message; plus how it is retried and counted.

use std::time::Duration;

/// Boxed cause of a transport or connection failure.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result of this crate's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed Neutron (or connection) operation. `op` is the operation name used in metrics
/// (`port_bulk_create`, `port_list`, …); `kind` is Neutron's `NeutronError.type`
/// (`PortNotFound`, `IpAddressAlreadyAllocated`, …) when it sent one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 404: the resource (or a resource named in the request) does not exist.
    #[error("{op}: not found ({kind}): {message}")]
    NotFound {
        /// Operation.
        op: &'static str,
        /// Neutron error type.
        kind: String,
        /// Neutron's message.
        message: String,
    },
    /// 409/412: a conflicting state (`IpAddressAlreadyAllocated`, `PortInUse`, a revision
    /// mismatch, …); usually transient.
    #[error("{op}: conflict ({kind}): {message}")]
    Conflict {
        /// Operation.
        op: &'static str,
        /// Neutron error type.
        kind: String,
        /// Neutron's message.
        message: String,
    },
    /// 409 with type `OverQuota`: the project's quota is exhausted.
    #[error("{op}: over quota: {message}")]
    OverQuota {
        /// Operation.
        op: &'static str,
        /// Neutron's message.
        message: String,
    },
    /// 400 (and other 4xx not listed here): the request is wrong and retrying will not help.
    #[error("{op}: bad request ({status} {kind}): {message}")]
    BadRequest {
        /// Operation.
        op: &'static str,
        /// HTTP status.
        status: u16,
        /// Neutron error type.
        kind: String,
        /// Neutron's message.
        message: String,
    },
    /// 401/403 after the SDK's own re-authentication: credentials or policy.
    #[error("{op}: unauthorized ({status}): {message}")]
    Unauthorized {
        /// Operation.
        op: &'static str,
        /// HTTP status.
        status: u16,
        /// Neutron's message.
        message: String,
    },
    /// 5xx (and 429): the service is unwell or overloaded.
    #[error("{op}: server error ({status}): {message}")]
    ServerError {
        /// Operation.
        op: &'static str,
        /// HTTP status.
        status: u16,
        /// Neutron's message.
        message: String,
    },
    /// No answer within the request timeout.
    #[error("{op}: no answer within {after:?}")]
    Timeout {
        /// Operation.
        op: &'static str,
        /// The timeout that expired.
        after: Duration,
    },
    /// The request did not get an HTTP answer (connection refused, reset, TLS, catalog).
    #[error("{op}: transport failure")]
    Transport {
        /// Operation.
        op: &'static str,
        /// Cause.
        #[source]
        source: BoxError,
    },
    /// Building the session failed (clouds.yaml, Keystone, discovery) or took too long.
    #[error("connecting to OpenStack ({step}): {message}")]
    Connect {
        /// Step: `config`, `authenticate`, `discover`, `extensions`, `timeout`.
        step: &'static str,
        /// What went wrong.
        message: String,
        /// Cause, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A 2xx answer whose body is not what the API documents.
    #[error("{op}: undecodable response: {message}")]
    Decode {
        /// Operation.
        op: &'static str,
        /// What did not parse.
        message: String,
    },
}

impl Error {
    /// Whether retrying the same request later can succeed (conflicts, quota, 5xx, timeouts,
    /// transport and connection failures). Not-found, bad requests, authorization and
    /// undecodable answers are permanent.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Conflict { .. }
            | Error::OverQuota { .. }
            | Error::ServerError { .. }
            | Error::Timeout { .. }
            | Error::Transport { .. }
            | Error::Connect { .. } => true,
            Error::NotFound { .. }
            | Error::BadRequest { .. }
            | Error::Unauthorized { .. }
            | Error::Decode { .. } => false,
        }
    }

    /// Whether the request may have been carried out although its answer never came: no
    /// answer in time, the connection lost, or a gateway in front of the service (a load
    /// balancer, a proxy) answering 502 or 504 because the service's connection ended mid-request.
    /// A write failing so may have happened: its effects are looked for before it is retried.
    pub fn answer_may_be_lost(&self) -> bool {
        match self {
            Error::Timeout { .. } | Error::Transport { .. } => true,
            Error::ServerError { status, .. } => matches!(status, 502 | 504),
            _ => false,
        }
    }

    /// Whether this is a 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// Low-cardinality label for the `outcome` of request metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::NotFound { .. } => "not_found",
            Error::Conflict { .. } => "conflict",
            Error::OverQuota { .. } => "over_quota",
            Error::BadRequest { .. } => "bad_request",
            Error::Unauthorized { .. } => "unauthorized",
            Error::ServerError { .. } => "server_error",
            Error::Timeout { .. } => "timeout",
            Error::Transport { .. } => "transport",
            Error::Connect { .. } => "connect",
            Error::Decode { .. } => "decode",
        }
    }

    /// The operation that failed (`connect` for connection errors).
    pub fn operation(&self) -> &'static str {
        match self {
            Error::NotFound { op, .. }
            | Error::Conflict { op, .. }
            | Error::OverQuota { op, .. }
            | Error::BadRequest { op, .. }
            | Error::Unauthorized { op, .. }
            | Error::ServerError { op, .. }
            | Error::Timeout { op, .. }
            | Error::Transport { op, .. }
            | Error::Decode { op, .. } => op,
            Error::Connect { .. } => "connect",
        }
    }

    /// Neutron's error type (`PortNotFound`, `OverQuota`, …), empty when unknown.
    pub fn neutron_kind(&self) -> &str {
        match self {
            Error::NotFound { kind, .. } | Error::Conflict { kind, .. } | Error::BadRequest { kind, .. } => {
                kind
            }
            Error::OverQuota { .. } => "OverQuota",
            _ => "",
        }
    }

    /// Maps a non-2xx HTTP answer to an error. `body` is parsed as Neutron's
    /// `{"NeutronError": {"type", "message", "detail"}}`; other bodies (Octavia's
    /// `{"faultstring"}`, Keystone's `{"error": {"message"}}`, plain text) give their text.
    pub fn from_status(op: &'static str, status: u16, body: &[u8]) -> Error {
        let fault = NeutronFault::parse(body);
        let kind = fault.kind.clone();
        let message = fault.message;
        match status {
            404 => Error::NotFound { op, kind, message },
            409 if kind == "OverQuota" => Error::OverQuota { op, message },
            409 | 412 => Error::Conflict { op, kind, message },
            401 | 403 => Error::Unauthorized { op, status, message },
            429 | 500..=599 => Error::ServerError { op, status, message },
            _ => Error::BadRequest {
                op,
                status,
                kind,
                message,
            },
        }
    }
}

/// The parts of an error body this crate uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeutronFault {
    /// `NeutronError.type`, empty when the body is not a NeutronError.
    pub kind: String,
    /// Human-readable message (body text, trimmed, when not JSON).
    pub message: String,
    /// Whether the body was a `NeutronError` (a 404 without one means the URL was wrong).
    pub is_neutron: bool,
}

impl NeutronFault {
    /// Parses an error body; never fails.
    pub fn parse(body: &[u8]) -> NeutronFault {
        let text = || {
            let s = String::from_utf8_lossy(body);
            let s = s.trim();
            let mut s: String = s.chars().take(500).collect();
            if s.is_empty() {
                s = "(empty body)".into();
            }
            s
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
            return NeutronFault {
                kind: String::new(),
                message: text(),
                is_neutron: false,
            };
        };
        let str_at = |v: &serde_json::Value, k: &str| {
            v.get(k).and_then(|x| x.as_str()).unwrap_or_default().to_string()
        };
        if let Some(ne) = v.get("NeutronError") {
            let mut message = str_at(ne, "message");
            let detail = str_at(ne, "detail");
            if !detail.is_empty() {
                message = format!("{message} ({detail})");
            }
            return NeutronFault {
                kind: str_at(ne, "type"),
                message,
                is_neutron: true,
            };
        }
        let message = [
            v.get("faultstring").and_then(|x| x.as_str()),
            v.get("error")
                .and_then(|e| e.get("message"))
                .and_then(|x| x.as_str()),
            v.get("message").and_then(|x| x.as_str()),
        ]
        .into_iter()
        .flatten()
        .next()
        .map(str::to_string)
        .unwrap_or_else(text);
        NeutronFault {
            kind: String::new(),
            message,
            is_neutron: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_neutron_errors() {
        let body = br#"{"NeutronError": {"type": "PortNotFound", "message": "Port x could not be found.", "detail": ""}}"#;
        let e = Error::from_status("port_get", 404, body);
        assert!(e.is_not_found() && !e.is_retryable());
        assert_eq!(e.neutron_kind(), "PortNotFound");
        assert_eq!(e.metric_label(), "not_found");
        assert!(e.to_string().contains("Port x could not be found."));

        let quota = br#"{"NeutronError": {"type": "OverQuota", "message": "Quota exceeded for resources: ['port'].", "detail": ""}}"#;
        let e = Error::from_status("port_bulk_create", 409, quota);
        assert!(matches!(e, Error::OverQuota { .. }) && e.is_retryable());
        assert_eq!(e.metric_label(), "over_quota");

        let ip = br#"{"NeutronError": {"type": "IpAddressAlreadyAllocated", "message": "IP taken", "detail": ""}}"#;
        let e = Error::from_status("port_create", 409, ip);
        assert!(matches!(&e, Error::Conflict { kind, .. } if kind == "IpAddressAlreadyAllocated"));
        assert!(e.is_retryable());

        let e = Error::from_status(
            "port_create",
            400,
            br#"{"NeutronError": {"type": "HTTPBadRequest", "message": "bad", "detail": ""}}"#,
        );
        assert_eq!(e.metric_label(), "bad_request");
        assert!(!e.is_retryable());
        let e = Error::from_status("port_list", 503, b"<html>Service Unavailable</html>");
        assert!(matches!(e, Error::ServerError { status: 503, .. }) && e.is_retryable());
        // A gateway's 502/504: the request may have been carried out; Neutron's own 500 or
        // a 503 (no backend) were not.
        assert!(!e.answer_may_be_lost());
        assert!(Error::from_status("port_bulk_create", 502, b"bad gateway").answer_may_be_lost());
        assert!(Error::from_status("port_bulk_create", 504, b"").answer_may_be_lost());
        assert!(!Error::from_status("port_bulk_create", 500, b"").answer_may_be_lost());
        assert!(!Error::from_status("port_bulk_create", 409, b"").answer_may_be_lost());
        assert_eq!(Error::from_status("x", 403, b"{}").metric_label(), "unauthorized");
        assert_eq!(Error::from_status("x", 412, b"").metric_label(), "conflict");
    }

    #[test]
    fn parses_foreign_bodies() {
        let f =
            NeutronFault::parse(br#"{"faultstring": "Load Balancer is immutable", "faultcode": "Client"}"#);
        assert_eq!(f.message, "Load Balancer is immutable");
        assert!(!f.is_neutron);
        let f = NeutronFault::parse(
            br#"{"error": {"message": "The request you have made requires authentication.", "code": 401}}"#,
        );
        assert!(f.message.starts_with("The request"));
        let f = NeutronFault::parse(b"404 Not Found\n\nThe resource could not be found.\n\n   ");
        assert!(f.message.starts_with("404 Not Found") && !f.is_neutron);
        assert_eq!(NeutronFault::parse(b"").message, "(empty body)");
    }
}
