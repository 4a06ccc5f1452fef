//! The `CNI_*` environment variables and their validation per verb (CNI spec 1.1.0,
//! "Parameters").
//!
//! Required per verb: ADD and CHECK need `CNI_CONTAINERID`, `CNI_NETNS` (which must exist) and
//! `CNI_IFNAME`; DEL needs `CNI_CONTAINERID` and `CNI_IFNAME` (a missing or vanished netns is
//! not an error: DEL must succeed when resources are gone); GC, STATUS and VERSION need only
//! `CNI_COMMAND`. `CNI_PATH` is never required: the plugin delegates to no other plugin.

use std::ffi::OsString;
use std::path::Path;

use kuryr_cni_api::{CniArgs, CniError, ErrorCode, Verb};

/// The raw variables (empty string when unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CniEnv {
    /// `CNI_COMMAND`.
    pub command: String,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS`.
    pub netns: String,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// `CNI_ARGS`.
    pub args: String,
    /// `CNI_PATH`.
    pub path: String,
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(ErrorCode::InvalidEnvironment, msg)
}

impl CniEnv {
    /// Reads the variables through `get` (the process environment in production).
    pub fn read(get: impl Fn(&str) -> Option<OsString>) -> Result<Self, CniError> {
        let var = |name: &str| -> Result<String, CniError> {
            match get(name) {
                None => Ok(String::new()),
                Some(v) => v
                    .into_string()
                    .map_err(|_| invalid(format!("{name} is not valid UTF-8"))),
            }
        };
        Ok(Self {
            command: var("CNI_COMMAND")?,
            container_id: var("CNI_CONTAINERID")?,
            netns: var("CNI_NETNS")?,
            ifname: var("CNI_IFNAME")?,
            args: var("CNI_ARGS")?,
            path: var("CNI_PATH")?,
        })
    }

    /// The verb, or error 4 when `CNI_COMMAND` is missing or unknown.
    pub fn verb(&self) -> Result<Verb, CniError> {
        if self.command.is_empty() {
            return Err(invalid("CNI_COMMAND is not set"));
        }
        Verb::parse(&self.command)
            .ok_or_else(|| invalid(format!("unknown CNI_COMMAND {:?}", truncate(&self.command))))
    }

    /// Validates the variables `verb` needs. Netns existence is checked separately
    /// ([`check_netns_exists`]) so the error ordering stays: env, config, version, netns.
    pub fn validate(&self, verb: Verb) -> Result<Option<CniArgs>, CniError> {
        let needs_container = matches!(verb, Verb::Add | Verb::Del | Verb::Check);
        if needs_container {
            validate_container_id(&self.container_id)?;
            validate_ifname(&self.ifname)?;
        }
        if matches!(verb, Verb::Add | Verb::Check) && self.netns.is_empty() {
            return Err(invalid("CNI_NETNS is not set"));
        }
        if needs_container {
            let args = CniArgs::parse(&self.args)
                .map_err(|e| invalid("CNI_ARGS is malformed").with_details(e.to_string()))?;
            return Ok(Some(args));
        }
        Ok(None)
    }
}

/// Error 3 unless `CNI_NETNS` names an existing path (ADD, CHECK).
pub fn check_netns_exists(netns: &str) -> Result<(), CniError> {
    match Path::new(netns).try_exists() {
        Ok(true) => Ok(()),
        Ok(false) => Err(CniError::new(
            ErrorCode::UnknownContainer,
            format!("network namespace {:?} does not exist", truncate(netns)),
        )),
        Err(e) => Err(CniError::new(
            ErrorCode::UnknownContainer,
            format!("network namespace {:?} is not accessible", truncate(netns)),
        )
        .with_details(e.to_string())),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(256).collect()
}

/// Spec: non-empty, starts with an alphanumeric character, then alphanumerics, `_`, `.`, `-`.
pub fn validate_container_id(id: &str) -> Result<(), CniError> {
    let mut chars = id.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else if id.is_empty() {
        Err(invalid("CNI_CONTAINERID is not set"))
    } else {
        Err(invalid(format!(
            "CNI_CONTAINERID {:?} is not a valid container ID",
            truncate(id)
        )))
    }
}

/// Linux interface-name rules (`dev_valid_name`): 1..=15 bytes, not `.`/`..`, no `/`, `:` or
/// whitespace.
pub fn validate_ifname(name: &str) -> Result<(), CniError> {
    if name.is_empty() {
        return Err(invalid("CNI_IFNAME is not set"));
    }
    let ok = name.len() <= 15
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace() || c.is_control());
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "CNI_IFNAME {:?} is not a valid interface name",
            truncate(name)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> CniEnv {
        let m: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        CniEnv::read(|k| m.get(k).cloned()).unwrap()
    }

    #[test]
    fn verbs() {
        assert_eq!(env(&[]).verb().unwrap_err().code, ErrorCode::InvalidEnvironment);
        assert_eq!(
            env(&[("CNI_COMMAND", "add")]).verb().unwrap_err().code,
            ErrorCode::InvalidEnvironment
        );
        for v in ["ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION"] {
            assert_eq!(env(&[("CNI_COMMAND", v)]).verb().unwrap().as_str(), v);
        }
    }

    #[test]
    fn required_per_verb() {
        let full = [
            ("CNI_CONTAINERID", "abc123"),
            ("CNI_NETNS", "/proc/self/ns/net"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", "K8S_POD_NAME=p"),
        ];
        for verb in [Verb::Add, Verb::Check, Verb::Del] {
            assert_eq!(env(&full).validate(verb).unwrap().unwrap().pod_name(), Some("p"));
            for skip in ["CNI_CONTAINERID", "CNI_IFNAME"] {
                let e: Vec<_> = full.iter().copied().filter(|(k, _)| *k != skip).collect();
                assert_eq!(
                    env(&e).validate(verb).unwrap_err().code,
                    ErrorCode::InvalidEnvironment,
                    "{verb:?} {skip}"
                );
            }
        }
        let no_ns: Vec<_> = full.iter().copied().filter(|(k, _)| *k != "CNI_NETNS").collect();
        assert!(env(&no_ns).validate(Verb::Add).is_err());
        assert!(env(&no_ns).validate(Verb::Check).is_err());
        assert!(env(&no_ns).validate(Verb::Del).is_ok());
        for verb in [Verb::Gc, Verb::Status, Verb::Version] {
            assert_eq!(env(&[]).validate(verb).unwrap(), None);
        }
        let bad_args = [
            ("CNI_CONTAINERID", "abc"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", "junk"),
        ];
        assert_eq!(
            env(&bad_args).validate(Verb::Del).unwrap_err().code,
            ErrorCode::InvalidEnvironment
        );
    }

    #[test]
    fn names() {
        for ok in ["eth0", "a", "net1.100", "123456789012345"] {
            validate_ifname(ok).unwrap();
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "a:b",
            "1234567890123456",
            "é234567890123\u{e9}",
        ] {
            assert!(validate_ifname(bad).is_err(), "{bad:?}");
        }
        for ok in ["a", "0ab_c.d-e", "f0e1d2c3b4a5968778695a4b3c2d1e0f"] {
            validate_container_id(ok).unwrap();
        }
        for bad in ["", "-a", "_a", "a b", "a/b", "ä"] {
            assert!(validate_container_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn netns() {
        check_netns_exists("/proc/self/ns/net").unwrap();
        assert_eq!(
            check_netns_exists("/nonexistent/netns").unwrap_err().code,
            ErrorCode::UnknownContainer
        );
    }

    #[test]
    fn non_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let e =
            CniEnv::read(|k| (k == "CNI_IFNAME").then(|| OsString::from_vec(vec![0xff, 0xfe]))).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidEnvironment);
    }
}

/// The fuzz target `cni_env` (crate `kuryr-fuzz`): the CNI_* variables as a runtime (or anyone
/// running the plugin) sets them, non-UTF-8 bytes included.
#[cfg(test)]
mod fuzz {
    use std::{collections::HashMap, ffi::OsString, os::unix::ffi::OsStringExt};

    use super::*;

    #[test]
    fn cni_env() {
        let r = kuryr_fuzz::run("cni_env", vec![], |b| {
            let vars: HashMap<String, OsString> = b
                .split(|c| *c == b'\n')
                .filter_map(|line| {
                    let at = line.iter().position(|c| *c == b'=')?;
                    let key = String::from_utf8_lossy(&line[..at]).into_owned();
                    Some((key, OsString::from_vec(line[at + 1..].to_vec())))
                })
                .collect();
            let env = match CniEnv::read(|k| vars.get(k).cloned()) {
                Ok(e) => e,
                Err(e) => {
                    assert_eq!(e.code, ErrorCode::InvalidEnvironment, "{e:?}");
                    assert!(!e.msg.is_empty());
                    return false;
                }
            };
            let verb = match env.verb() {
                Ok(v) => v,
                Err(e) => {
                    assert!(!e.msg.is_empty());
                    return false;
                }
            };
            match env.validate(verb) {
                Ok(_) => true,
                Err(e) => {
                    assert!(!e.msg.is_empty() && e.code.code() != 0, "{e:?}");
                    false
                }
            }
        });
        assert!(r.accepted > 0, "{r:?}");
    }
}
