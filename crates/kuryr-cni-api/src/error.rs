//! CNI error codes and the error object `{cniVersion, code, msg, details}` that the plugin prints
//! on stdout and the daemon returns as an HTTP error body.

use serde::{Deserialize, Serialize};

/// A CNI error code: the spec's well-known codes plus kuryr's plugin-specific ones (≥ 100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 1: incompatible CNI version.
    IncompatibleVersion,
    /// 2: unsupported field in the network configuration.
    UnsupportedField,
    /// 3: container unknown or does not exist (upstream: pod gone, UID mismatch).
    UnknownContainer,
    /// 4: invalid necessary environment variables (`CNI_*`).
    InvalidEnvironment,
    /// 5: I/O failure (reading stdin, writing files).
    IoFailure,
    /// 6: failed to decode content (bad JSON).
    DecodingFailure,
    /// 7: invalid network config.
    InvalidNetworkConfig,
    /// 11: try again later (daemon down, timeout); the runtime retries.
    TryAgainLater,
    /// 50: STATUS — the plugin is not available (cannot serve ADD).
    PluginNotAvailable,
    /// 51: STATUS — the plugin is available but with limited connectivity.
    LimitedConnectivity,
    /// 100: upstream kuryr's generic plugin error.
    Generic,
    /// 999: upstream kuryr's daemon internal error (`500` from the daemon).
    DaemonInternal,
    /// Any other code received from the daemon, passed through verbatim.
    Other(u32),
}

impl ErrorCode {
    /// The numeric code.
    pub fn code(self) -> u32 {
        match self {
            Self::IncompatibleVersion => 1,
            Self::UnsupportedField => 2,
            Self::UnknownContainer => 3,
            Self::InvalidEnvironment => 4,
            Self::IoFailure => 5,
            Self::DecodingFailure => 6,
            Self::InvalidNetworkConfig => 7,
            Self::TryAgainLater => 11,
            Self::PluginNotAvailable => 50,
            Self::LimitedConnectivity => 51,
            Self::Generic => 100,
            Self::DaemonInternal => 999,
            Self::Other(c) => c,
        }
    }

    /// The enum value for a numeric code.
    pub fn from_code(code: u32) -> Self {
        match code {
            1 => Self::IncompatibleVersion,
            2 => Self::UnsupportedField,
            3 => Self::UnknownContainer,
            4 => Self::InvalidEnvironment,
            5 => Self::IoFailure,
            6 => Self::DecodingFailure,
            7 => Self::InvalidNetworkConfig,
            11 => Self::TryAgainLater,
            50 => Self::PluginNotAvailable,
            51 => Self::LimitedConnectivity,
            100 => Self::Generic,
            999 => Self::DaemonInternal,
            c => Self::Other(c),
        }
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.code())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u32::deserialize(d).map(Self::from_code)
    }
}

/// The CNI error object. Printed on stdout (with `cniVersion`) when a verb fails, and used as
/// the daemon's HTTP error body (upstream sends it without `cniVersion`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("CNI error {}: {msg}{}", code.code(), if details.is_empty() { String::new() } else { format!(" ({details})") })]
pub struct CniError {
    /// Spec version of the output; filled by the plugin just before printing.
    #[serde(rename = "cniVersion", default, skip_serializing_if = "Option::is_none")]
    pub cni_version: Option<String>,
    /// The error code.
    pub code: ErrorCode,
    /// Short message.
    #[serde(default)]
    pub msg: String,
    /// Longer explanation; may be empty.
    #[serde(default)]
    pub details: String,
}

impl CniError {
    /// A new error without details.
    pub fn new(code: ErrorCode, msg: impl Into<String>) -> Self {
        Self {
            cni_version: None,
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    /// Adds details.
    pub fn with_details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// Sets the spec version reported with the error.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.cni_version = Some(version.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_roundtrip() {
        for c in [1, 2, 3, 4, 5, 6, 7, 11, 50, 51, 100, 999, 123] {
            assert_eq!(ErrorCode::from_code(c).code(), c);
        }
    }

    #[test]
    fn serializes_like_the_spec() {
        let e = CniError::new(ErrorCode::TryAgainLater, "daemon down")
            .with_details("connection refused")
            .with_version("1.0.0");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"cniVersion": "1.0.0", "code": 11, "msg": "daemon down", "details": "connection refused"})
        );
        let back: CniError = serde_json::from_str(r#"{"code": 3, "msg": "pod gone"}"#).unwrap();
        assert_eq!(back.code, ErrorCode::UnknownContainer);
        assert_eq!(back.details, "");
    }
}
