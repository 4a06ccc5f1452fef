//! Validation of the plugin's requests (the [`DaemonRequest`] body of `kuryr-cni-api`) into a
//! typed [`CniCall`], with CNI errors that name what is wrong. Pure: the namespace path's
//! existence is checked by the caller.

use std::path::PathBuf;

use kuryr_cni_api::{
    CniError, DaemonRequest, ErrorCode, Verb,
    config::{Attachment as ValidAttachment, VALID_ATTACHMENTS_KEY},
};
use serde_json::Value;

use crate::binding::spec::valid_ifname;

/// A validated request.
#[derive(Debug, Clone, PartialEq)]
pub struct CniCall {
    /// `CNI_CONTAINERID` (may be empty for GC).
    pub container_id: String,
    /// `CNI_NETNS`, rewritten under `netns_proc_dir` in docker mode; may be empty for DEL/GC.
    pub netns: PathBuf,
    /// `CNI_IFNAME` (`eth0` when a DEL does not say).
    pub ifname: String,
    /// `K8S_POD_NAMESPACE`.
    pub pod_namespace: Option<String>,
    /// `K8S_POD_NAME`.
    pub pod_name: Option<String>,
    /// `K8S_POD_UID`.
    pub pod_uid: Option<String>,
    /// GC: the attachments the runtime still uses.
    pub valid_attachments: Vec<ValidAttachment>,
}

impl CniCall {
    /// `<namespace>/<name>` when both are known.
    pub fn pod_key(&self) -> Option<String> {
        Some(crate::registry::pod_key(
            self.pod_namespace.as_deref()?,
            self.pod_name.as_deref()?,
        ))
    }
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(ErrorCode::InvalidEnvironment, msg)
}

/// Parses a request body.
pub fn parse_body(body: &[u8]) -> Result<DaemonRequest, CniError> {
    serde_json::from_slice(body).map_err(|e| {
        CniError::new(
            ErrorCode::DecodingFailure,
            "request body is not a valid kuryr-daemon request",
        )
        .with_details(e.to_string())
    })
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.filter(|v| !v.is_empty()).map(str::to_owned)
}

/// Validates `req` for `verb`. `netns_proc_dir` (docker mode) replaces a leading `/proc`.
pub fn validate(req: &DaemonRequest, verb: Verb, netns_proc_dir: Option<&str>) -> Result<CniCall, CniError> {
    let args = req
        .cni_args()
        .map_err(|e| invalid("CNI_ARGS is malformed").with_details(e.to_string()))?;
    let strict = matches!(verb, Verb::Add | Verb::Check);
    if strict || verb == Verb::Del {
        if req.container_id.is_empty() {
            return Err(invalid("CNI_CONTAINERID is missing"));
        }
        if req.container_id.len() > 256 || req.container_id.chars().any(char::is_control) {
            return Err(invalid("CNI_CONTAINERID is malformed"));
        }
    }
    if strict && req.netns.is_empty() {
        return Err(invalid("CNI_NETNS is missing"));
    }
    let ifname = if req.ifname.is_empty() && !strict {
        "eth0".to_owned()
    } else {
        req.ifname.clone()
    };
    if (strict || verb == Verb::Del) && !valid_ifname(&ifname) {
        return Err(invalid(format!(
            "CNI_IFNAME {ifname:?} is not a valid interface name"
        )));
    }
    let pod_namespace = non_empty(args.pod_namespace());
    let pod_name = non_empty(args.pod_name());
    if strict && (pod_namespace.is_none() || pod_name.is_none()) {
        return Err(invalid("CNI_ARGS lacks K8S_POD_NAMESPACE or K8S_POD_NAME"));
    }
    let mut netns = req.netns.clone();
    if let (Some(dir), Some(rest)) = (netns_proc_dir, req.netns.strip_prefix("/proc")) {
        netns = format!("{}{rest}", dir.trim_end_matches('/'));
    }
    let valid_attachments = if verb == Verb::Gc {
        match req.config_kuryr.get(VALID_ATTACHMENTS_KEY) {
            // Read as "nothing is valid" it would unwire every pod of the node: the CNI spec
            // (1.1) makes the list mandatory for GC, so its absence is an error and nothing is
            // removed. An empty list is the runtime saying that nothing is valid.
            None | Some(Value::Null) => {
                return Err(CniError::new(
                    ErrorCode::InvalidNetworkConfig,
                    format!("GC without {VALID_ATTACHMENTS_KEY}: nothing is removed"),
                )
                .with_details(format!(
                    "the runtime must list the attachments that are still valid in {VALID_ATTACHMENTS_KEY} (CNI 1.1)"
                )));
            }
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| {
                CniError::new(
                    ErrorCode::InvalidNetworkConfig,
                    format!("{VALID_ATTACHMENTS_KEY} is malformed"),
                )
                .with_details(e.to_string())
            })?,
        }
    } else {
        Vec::new()
    };
    Ok(CniCall {
        container_id: req.container_id.clone(),
        netns: PathBuf::from(netns),
        ifname,
        pod_namespace,
        pod_name,
        pod_uid: non_empty(args.pod_uid()),
        valid_attachments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(args: &str) -> DaemonRequest {
        DaemonRequest {
            command: "ADD".into(),
            container_id: "c1".into(),
            netns: "/proc/42/ns/net".into(),
            ifname: "eth0".into(),
            args: args.into(),
            path: "/opt/cni/bin".into(),
            config_kuryr: json!({"cniVersion": "1.0.0"}),
        }
    }

    const ARGS: &str = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u";

    #[test]
    fn valid_add() {
        let c = validate(&req(ARGS), Verb::Add, None).unwrap();
        assert_eq!(c.pod_key().as_deref(), Some("ns/p"));
        assert_eq!(c.pod_uid.as_deref(), Some("u"));
        assert_eq!(c.netns, PathBuf::from("/proc/42/ns/net"));
        let c = validate(&req(ARGS), Verb::Add, Some("/host/proc/")).unwrap();
        assert_eq!(c.netns, PathBuf::from("/host/proc/42/ns/net"));
    }

    #[test]
    fn invalid_adds_name_the_problem() {
        let cases: Vec<(DaemonRequest, &str)> = vec![
            (
                DaemonRequest {
                    container_id: String::new(),
                    ..req(ARGS)
                },
                "CNI_CONTAINERID",
            ),
            (
                DaemonRequest {
                    netns: String::new(),
                    ..req(ARGS)
                },
                "CNI_NETNS",
            ),
            (
                DaemonRequest {
                    ifname: "bad/name".into(),
                    ..req(ARGS)
                },
                "CNI_IFNAME",
            ),
            (req("K8S_POD_NAMESPACE=ns"), "K8S_POD_NAME"),
            (req("junk"), "CNI_ARGS"),
        ];
        for (r, what) in cases {
            let e = validate(&r, Verb::Add, None).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidEnvironment);
            assert!(e.msg.contains(what), "{} does not mention {what}", e.msg);
        }
    }

    #[test]
    fn del_is_lenient_and_gc_reads_attachments() {
        let r = DaemonRequest {
            netns: String::new(),
            ifname: String::new(),
            args: String::new(),
            ..req("")
        };
        let c = validate(&r, Verb::Del, None).unwrap();
        assert_eq!(c.ifname, "eth0");
        assert_eq!(c.pod_key(), None);
        let mut r = req("");
        r.config_kuryr = json!({"cni.dev/valid-attachments": [{"containerID": "c9", "ifname": "eth0"}]});
        let c = validate(&r, Verb::Gc, None).unwrap();
        assert_eq!(c.valid_attachments.len(), 1);
        // Without the list (or with null) nothing is valid would mean everything goes: refused.
        for absent in [json!({}), json!({"cni.dev/valid-attachments": null})] {
            r.config_kuryr = absent;
            let e = validate(&r, Verb::Gc, None).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidNetworkConfig);
            assert!(e.msg.contains("valid-attachments"), "{}", e.msg);
        }
        r.config_kuryr = json!({"cni.dev/valid-attachments": []});
        assert!(validate(&r, Verb::Gc, None).unwrap().valid_attachments.is_empty());
        r.config_kuryr = json!({"cni.dev/valid-attachments": 5});
        assert_eq!(
            validate(&r, Verb::Gc, None).unwrap_err().code,
            ErrorCode::InvalidNetworkConfig
        );
    }

    #[test]
    fn bad_bodies() {
        for b in [
            &b"not json"[..],
            b"{}",
            b"[]",
            b"{\"CNI_COMMAND\": 5, \"config_kuryr\": {}}",
        ] {
            assert_eq!(parse_body(b).unwrap_err().code, ErrorCode::DecodingFailure);
        }
        assert!(parse_body(br#"{"CNI_COMMAND": "ADD", "config_kuryr": {}}"#).is_ok());
    }
}
