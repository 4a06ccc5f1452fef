//! The network configuration a runtime passes on stdin (a single plugin's config, as libcni
//! derives it from a conflist), with the keys kuryr reads.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{CniError, ErrorCode};
use crate::version::CniVersion;

/// The key GC's valid attachments arrive under (spec 1.1.0).
pub const VALID_ATTACHMENTS_KEY: &str = "cni.dev/valid-attachments";

/// One attachment the runtime still considers valid (GC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// `containerID`.
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// `ifname`.
    pub ifname: String,
}

/// The plugin's network configuration. Unknown keys are kept in `other` (spec: plugins may
/// ignore fields they do not know); the daemon receives the original JSON verbatim.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetConf {
    /// `cniVersion`, the version the runtime wants results in.
    #[serde(rename = "cniVersion", default, skip_serializing_if = "Option::is_none")]
    pub cni_version: Option<String>,
    /// `cniVersions` (1.1.0 conflists; informational here, the runtime picks `cniVersion`).
    #[serde(rename = "cniVersions", default, skip_serializing_if = "Option::is_none")]
    pub cni_versions: Option<Vec<String>>,
    /// Network name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Plugin type (`kuryr-cni`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub plugin_type: Option<String>,
    /// Upstream key: path of `kuryr.conf`; the plugin reads `[cni_daemon]` from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kuryr_conf: Option<String>,
    /// Upstream key: verbose logging (to `log_file`, never stdout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<bool>,
    /// kuryr-rs: log file of the plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_file: Option<String>,
    /// kuryr-rs: daemon address, `host:port` or `unix:/path`; overrides `kuryr_conf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon_address: Option<String>,
    /// kuryr-rs: ADD timeout in seconds (default 180, upstream's alarm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_timeout: Option<u64>,
    /// kuryr-rs: DEL/CHECK/GC/STATUS timeout in seconds (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub del_timeout: Option<u64>,
    /// `prevResult` (DEL, CHECK).
    #[serde(rename = "prevResult", default, skip_serializing_if = "Option::is_none")]
    pub prev_result: Option<Value>,
    /// `runtimeConfig`.
    #[serde(rename = "runtimeConfig", default, skip_serializing_if = "Option::is_none")]
    pub runtime_config: Option<Value>,
    /// `cni.dev/valid-attachments` (GC).
    #[serde(
        rename = "cni.dev/valid-attachments",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub valid_attachments: Option<Vec<Attachment>>,
    /// Every other key.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// A parsed configuration together with the raw JSON it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedConf {
    /// Typed view.
    pub conf: NetConf,
    /// The stdin JSON as given (forwarded to the daemon as `config_kuryr`).
    pub raw: Value,
}

impl NetConf {
    /// Parses stdin. Not JSON → code 6; JSON but not an object or wrong field types → code 7.
    pub fn parse(bytes: &[u8]) -> Result<ParsedConf, CniError> {
        let raw: Value = serde_json::from_slice(bytes).map_err(|e| {
            CniError::new(
                ErrorCode::DecodingFailure,
                "failed to decode network configuration",
            )
            .with_details(e.to_string())
        })?;
        if !raw.is_object() {
            return Err(CniError::new(
                ErrorCode::InvalidNetworkConfig,
                "network configuration is not a JSON object",
            ));
        }
        let conf: NetConf = serde_json::from_value(raw.clone()).map_err(|e| {
            CniError::new(ErrorCode::InvalidNetworkConfig, "invalid network configuration")
                .with_details(e.to_string())
        })?;
        Ok(ParsedConf { conf, raw })
    }

    /// The requested spec version. Absent means 0.1.0 per libcni, which we do not support:
    /// both that and any unknown version give error code 1.
    pub fn version(&self) -> Result<CniVersion, CniError> {
        let v = self.cni_version.as_deref().unwrap_or("0.1.0");
        CniVersion::parse(v).ok_or_else(|| {
            CniError::new(
                ErrorCode::IncompatibleVersion,
                format!("unsupported CNI version {v:?}"),
            )
            .with_details(format!(
                "supported versions: {}",
                crate::version::SUPPORTED_VERSIONS.join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_conf() {
        let p = NetConf::parse(
            br#"{"cniVersion":"0.3.1","name":"kuryr","type":"kuryr-cni","kuryr_conf":"/etc/kuryr/kuryr.conf","debug":true,"foo":1}"#,
        )
        .unwrap();
        assert_eq!(p.conf.version().unwrap(), CniVersion::V0_3_1);
        assert_eq!(p.conf.kuryr_conf.as_deref(), Some("/etc/kuryr/kuryr.conf"));
        assert_eq!(p.conf.debug, Some(true));
        assert_eq!(p.conf.other.get("foo"), Some(&Value::from(1)));
        assert_eq!(p.raw["foo"], 1);
    }

    #[test]
    fn gc_attachments() {
        let p = NetConf::parse(
            br#"{"cniVersion":"1.1.0","name":"k","type":"kuryr-cni","cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}"#,
        )
        .unwrap();
        assert_eq!(
            p.conf.valid_attachments,
            Some(vec![Attachment {
                container_id: "c1".into(),
                ifname: "eth0".into()
            }])
        );
    }

    #[test]
    fn error_codes() {
        assert_eq!(NetConf::parse(b"{").unwrap_err().code, ErrorCode::DecodingFailure);
        assert_eq!(
            NetConf::parse(b"\xff\xfe").unwrap_err().code,
            ErrorCode::DecodingFailure
        );
        assert_eq!(
            NetConf::parse(b"[]").unwrap_err().code,
            ErrorCode::InvalidNetworkConfig
        );
        assert_eq!(
            NetConf::parse(br#"{"debug":"yes"}"#).unwrap_err().code,
            ErrorCode::InvalidNetworkConfig
        );
        let p = NetConf::parse(br#"{"name":"x"}"#).unwrap();
        assert_eq!(p.conf.version().unwrap_err().code, ErrorCode::IncompatibleVersion);
        let p = NetConf::parse(br#"{"cniVersion":"0.2.0"}"#).unwrap();
        assert_eq!(p.conf.version().unwrap_err().code, ErrorCode::IncompatibleVersion);
    }
}
