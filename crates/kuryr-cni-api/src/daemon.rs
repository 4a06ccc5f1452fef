//! The plugin ↔ daemon HTTP contract.
//!
//! Upstream-compatible (kuryr-kubernetes `cni/daemon/service.py`):
//! * `POST /addNetwork`, body [`DaemonRequest`]; success **202** with the default VIF's os-vif
//!   primitive as body.
//! * `POST /delNetwork`, same body; success **204**.
//! * Errors carry a body `{code, msg, details}` ([`CniError`]): 400 (code 4, bad parameters),
//!   410 (code 3, pod gone / UID mismatch), 504 (code 11, timeout), 500 (code 999, other).
//!
//! kuryr-rs extensions for the verbs upstream lacked (an upstream daemon answers 404):
//! * `POST /checkNetwork` (CHECK), same body; success 204.
//! * `POST /gcNetworks` (GC), same body; `config_kuryr` carries `cni.dev/valid-attachments`;
//!   success 204.
//! * `GET /status` (STATUS); success 200 or 204; otherwise an error body with code 50 or 51.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{CniError, ErrorCode};

/// Default daemon address (`[cni_daemon]bind_address`): a unix socket in a root-only
/// directory, served to root only (kuryr-rs; upstream's default, `127.0.0.1:5036` over TCP,
/// answered any local process).
pub const DEFAULT_DAEMON_ADDRESS: &str = "unix:/run/kuryr/cni.sock";

/// A CNI verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// ADD.
    Add,
    /// DEL.
    Del,
    /// CHECK.
    Check,
    /// GC.
    Gc,
    /// STATUS.
    Status,
    /// VERSION (never forwarded).
    Version,
}

impl Verb {
    /// Parses `CNI_COMMAND` (exact, upper case as in the spec).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ADD" => Some(Self::Add),
            "DEL" => Some(Self::Del),
            "CHECK" => Some(Self::Check),
            "GC" => Some(Self::Gc),
            "STATUS" => Some(Self::Status),
            "VERSION" => Some(Self::Version),
            _ => None,
        }
    }

    /// The `CNI_COMMAND` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "ADD",
            Self::Del => "DEL",
            Self::Check => "CHECK",
            Self::Gc => "GC",
            Self::Status => "STATUS",
            Self::Version => "VERSION",
        }
    }

    /// HTTP method and path on the daemon; `None` for VERSION.
    pub fn endpoint(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Add => Some(("POST", "/addNetwork")),
            Self::Del => Some(("POST", "/delNetwork")),
            Self::Check => Some(("POST", "/checkNetwork")),
            Self::Gc => Some(("POST", "/gcNetworks")),
            Self::Status => Some(("GET", "/status")),
            Self::Version => None,
        }
    }

    /// Whether the daemon endpoint is a kuryr-rs extension (absent from upstream daemons).
    pub fn is_extension(self) -> bool {
        matches!(self, Self::Check | Self::Gc | Self::Status)
    }
}

/// The request body, exactly as upstream's Go plugin sends it: every `CNI_*` variable as a
/// string (empty when unset) and the stdin configuration as `config_kuryr`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonRequest {
    /// `CNI_COMMAND`.
    #[serde(rename = "CNI_COMMAND")]
    pub command: String,
    /// `CNI_CONTAINERID`.
    #[serde(rename = "CNI_CONTAINERID", default)]
    pub container_id: String,
    /// `CNI_NETNS`.
    #[serde(rename = "CNI_NETNS", default)]
    pub netns: String,
    /// `CNI_IFNAME`.
    #[serde(rename = "CNI_IFNAME", default)]
    pub ifname: String,
    /// `CNI_ARGS`, unparsed (the daemon parses it).
    #[serde(rename = "CNI_ARGS", default)]
    pub args: String,
    /// `CNI_PATH`.
    #[serde(rename = "CNI_PATH", default)]
    pub path: String,
    /// The network configuration from stdin, verbatim.
    pub config_kuryr: Value,
}

impl DaemonRequest {
    /// The parsed `CNI_ARGS` (daemon side; a parse failure is a 400 with code 4).
    pub fn cni_args(&self) -> Result<crate::CniArgs, crate::args::ArgsError> {
        crate::CniArgs::parse(&self.args)
    }

    /// The verb of `CNI_COMMAND`, if known.
    pub fn verb(&self) -> Option<Verb> {
        Verb::parse(&self.command)
    }
}

/// What the daemon's answer means for the plugin.
#[derive(Debug, Clone, PartialEq)]
pub enum DaemonOutcome {
    /// Success; the body (ADD: VIF primitive), `Value::Null` when empty.
    Ok(Value),
    /// The daemon does not know the endpoint (404): an upstream daemon for an extension verb.
    NotImplemented,
    /// Failure to report.
    Err(CniError),
}

/// The HTTP status a daemon should answer for an error code (upstream conventions).
pub fn http_status_for(code: ErrorCode) -> u16 {
    match code {
        ErrorCode::InvalidEnvironment
        | ErrorCode::DecodingFailure
        | ErrorCode::InvalidNetworkConfig
        | ErrorCode::IncompatibleVersion
        | ErrorCode::UnsupportedField => 400,
        ErrorCode::UnknownContainer => 410,
        ErrorCode::TryAgainLater => 504,
        ErrorCode::PluginNotAvailable | ErrorCode::LimitedConnectivity => 503,
        _ => 500,
    }
}

/// Interprets a daemon response. Success statuses: ADD 202 (200/201 tolerated), others 2xx.
/// An error body `{code, msg, details}` is passed through (an empty `msg` replaced by one naming
/// the status, code 0 by 999); any other error body becomes code 999 with the HTTP status and an
/// excerpt of the body in `details`.
pub fn interpret_response(verb: Verb, status: u16, body: &[u8]) -> DaemonOutcome {
    let success = match verb {
        Verb::Add => matches!(status, 200..=202),
        _ => (200..300).contains(&status),
    };
    if success {
        if body.iter().all(u8::is_ascii_whitespace) {
            return DaemonOutcome::Ok(Value::Null);
        }
        return match serde_json::from_slice(body) {
            Ok(v) => DaemonOutcome::Ok(v),
            Err(e) => DaemonOutcome::Err(
                CniError::new(ErrorCode::DecodingFailure, "daemon returned invalid JSON")
                    .with_details(e.to_string()),
            ),
        };
    }
    if status == 404 && verb.is_extension() {
        return DaemonOutcome::NotImplemented;
    }
    if let Ok(err) = serde_json::from_slice::<CniError>(body) {
        // The runtime shows `msg`: never relay an empty one, nor "success" (0) as an error.
        let msg = if err.msg.trim().is_empty() {
            format!(
                "kuryr-daemon answered HTTP {status} to {} without a message",
                verb.as_str()
            )
        } else {
            err.msg
        };
        let code = if err.code.code() == 0 {
            ErrorCode::DaemonInternal
        } else {
            err.code
        };
        return DaemonOutcome::Err(CniError {
            cni_version: None,
            code,
            msg,
            ..err
        });
    }
    let excerpt: String = String::from_utf8_lossy(body).chars().take(512).collect();
    DaemonOutcome::Err(
        CniError::new(
            ErrorCode::DaemonInternal,
            format!("kuryr-daemon answered HTTP {status} to {}", verb.as_str()),
        )
        .with_details(excerpt),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_is_upstream_shaped() {
        let r = DaemonRequest {
            command: "ADD".into(),
            container_id: "c".into(),
            netns: "/var/run/netns/x".into(),
            ifname: "eth0".into(),
            args: "K8S_POD_NAME=p".into(),
            path: "/opt/cni/bin".into(),
            config_kuryr: serde_json::json!({"cniVersion": "0.3.1"}),
        };
        assert_eq!(r.cni_args().unwrap().pod_name(), Some("p"));
        assert_eq!(r.verb(), Some(Verb::Add));
        let v = serde_json::to_value(&r).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "CNI_ARGS",
                "CNI_COMMAND",
                "CNI_CONTAINERID",
                "CNI_IFNAME",
                "CNI_NETNS",
                "CNI_PATH",
                "config_kuryr"
            ]
        );
    }

    #[test]
    fn an_error_without_words_or_with_code_zero_still_says_what_happened() {
        let DaemonOutcome::Err(e) =
            interpret_response(Verb::Add, 504, br#"{"code":11,"msg":"","details":"d"}"#)
        else {
            panic!("not an error")
        };
        assert_eq!(e.code, ErrorCode::TryAgainLater);
        assert_eq!(e.msg, "kuryr-daemon answered HTTP 504 to ADD without a message");
        assert_eq!(e.details, "d");
        let DaemonOutcome::Err(e) = interpret_response(Verb::Del, 500, br#"{"code":0,"msg":"m"}"#) else {
            panic!("not an error")
        };
        assert_eq!((e.code, e.msg.as_str()), (ErrorCode::DaemonInternal, "m"));
    }

    #[test]
    fn responses() {
        assert_eq!(
            interpret_response(Verb::Add, 202, br#"{"a":1}"#),
            DaemonOutcome::Ok(serde_json::json!({"a":1}))
        );
        assert_eq!(
            interpret_response(Verb::Del, 204, b""),
            DaemonOutcome::Ok(Value::Null)
        );
        assert!(matches!(
            interpret_response(Verb::Add, 204, b""),
            DaemonOutcome::Err(_)
        ));
        assert_eq!(
            interpret_response(Verb::Check, 404, b"nope"),
            DaemonOutcome::NotImplemented
        );
        let DaemonOutcome::Err(e) = interpret_response(Verb::Add, 404, b"nope") else {
            panic!()
        };
        assert_eq!(e.code, ErrorCode::DaemonInternal);
        let DaemonOutcome::Err(e) =
            interpret_response(Verb::Add, 410, br#"{"code":3,"msg":"gone","details":"d"}"#)
        else {
            panic!()
        };
        assert_eq!(e.code, ErrorCode::UnknownContainer);
        let DaemonOutcome::Err(e) = interpret_response(Verb::Add, 202, b"not json") else {
            panic!()
        };
        assert_eq!(e.code, ErrorCode::DecodingFailure);
        assert_eq!(http_status_for(ErrorCode::TryAgainLater), 504);
        assert_eq!(http_status_for(ErrorCode::UnknownContainer), 410);
        assert_eq!(http_status_for(ErrorCode::InvalidEnvironment), 400);
        assert_eq!(http_status_for(ErrorCode::DaemonInternal), 500);
    }
}
