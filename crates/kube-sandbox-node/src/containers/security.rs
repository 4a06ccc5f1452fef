//! A container's securityContext as the runtime applies it: the capability set (a privileged
//! container keeps every capability; any other starts from the runtime's default set, then
//! `drop`, then `add`), the user and group it runs as (`runAsNonRoot` refused for root, as
//! kubelet refuses it), a read-only root file system, and `no_new_privs` when privilege
//! escalation is not allowed. The decision is pure ([`of`]); `run-container` applies it
//! ([`super::launch`]).
//!
//! Knowingly not emulated: seccomp profiles, SELinux/AppArmor, `procMount`, and the masked and
//! read-only paths of a runtime's `/proc` (a non-privileged container here still writes
//! `/proc/sys`).

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};

/// The capabilities containerd and CRI-O give a non-privileged container (containerd's
/// default `oci.WithDefaultCapabilities` set; CRI-O's default is a subset of it).
pub const RUNTIME_DEFAULT_CAPS: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// How one container process is confined. The default confines nothing (what the node's own
/// helpers, such as CNI plugins, run with).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Security {
    /// The capabilities it keeps (canonical `CAP_*` names, sorted); `None`: every one.
    pub caps: Option<Vec<String>>,
    /// The user it runs as; `None`: root (images here have no user of their own).
    pub uid: Option<u32>,
    /// Its group; `None`: root's.
    pub gid: Option<u32>,
    /// The root file system is mounted read-only (volumes keep their own mode).
    pub read_only_root: bool,
    /// `PR_SET_NO_NEW_PRIVS` (`allowPrivilegeEscalation: false`).
    pub no_new_privs: bool,
}

impl Security {
    /// Runs as a user other than root.
    pub fn non_root(&self) -> bool {
        self.uid.is_some_and(|u| u != 0)
    }
}

/// A capability's canonical name (`NET_ADMIN` → `CAP_NET_ADMIN`), or why it is not one.
fn canonical(name: &str) -> Result<String, String> {
    let c = caps::to_canonical(name);
    c.parse::<caps::Capability>()
        .map(|_| c.clone())
        .map_err(|_| format!("unknown capability {name:?}"))
}

/// The confinement of container `c` of `pod`, or the `CreateContainerConfigError` message.
pub fn of(pod: &Pod, c: &Container) -> Result<Security, String> {
    let psc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let uid = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| psc.and_then(|p| p.run_as_user));
    let gid = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| psc.and_then(|p| p.run_as_group));
    let non_root = sc
        .and_then(|s| s.run_as_non_root)
        .or_else(|| psc.and_then(|p| p.run_as_non_root))
        .unwrap_or(false);
    let to_id = |what: &str, v: i64| {
        u32::try_from(v).map_err(|_| format!("{what} {v} is not a valid ID (0 to 4294967295)"))
    };
    let uid = uid.map(|u| to_id("runAsUser", u)).transpose()?;
    let gid = gid.map(|g| to_id("runAsGroup", g)).transpose()?;
    if non_root && uid.unwrap_or(0) == 0 {
        // kubelet's words.
        return Err(match uid {
            Some(_) => "container's runAsUser breaks non-root policy".into(),
            None => "container has runAsNonRoot and image will run as root".into(),
        });
    }
    let privileged = sc.and_then(|s| s.privileged).unwrap_or(false);
    let caps = if privileged {
        None
    } else {
        let mut set: std::collections::BTreeSet<String> =
            RUNTIME_DEFAULT_CAPS.iter().map(|s| (*s).to_string()).collect();
        let wanted = sc.and_then(|s| s.capabilities.as_ref());
        for d in wanted.and_then(|w| w.drop.as_ref()).into_iter().flatten() {
            if d.eq_ignore_ascii_case("ALL") {
                set.clear();
            } else {
                set.remove(&canonical(d)?);
            }
        }
        let mut all = false;
        for a in wanted.and_then(|w| w.add.as_ref()).into_iter().flatten() {
            if a.eq_ignore_ascii_case("ALL") {
                all = true;
            } else {
                set.insert(canonical(a)?);
            }
        }
        (!all).then(|| set.into_iter().collect())
    };
    Ok(Security {
        caps,
        uid,
        gid,
        read_only_root: sc.and_then(|s| s.read_only_root_filesystem).unwrap_or(false),
        no_new_privs: sc.and_then(|s| s.allow_privilege_escalation) == Some(false),
    })
}

/// The user every container of `pod` runs as, when they all run as the same non-root user
/// (kubelet then gives the projected ServiceAccount token to that user, mode 0600).
pub fn pod_user(pod: &Pod) -> Option<u32> {
    let spec = pod.spec.as_ref()?;
    let mut users = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .map(|c| of(pod, c).ok().and_then(|s| s.uid));
    let first = users.next()??;
    (first != 0 && users.all(|u| u == Some(first))).then_some(first)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> (Pod, Container) {
        let p: Pod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap();
        let c = p.spec.as_ref().unwrap().containers[0].clone();
        (p, c)
    }

    #[test]
    fn capabilities_start_from_the_runtime_default_then_drop_then_add() {
        let (p, c) = pod(json!({"containers": [{"name": "c"}]}));
        let s = of(&p, &c).unwrap();
        assert_eq!(s.caps.as_ref().unwrap().len(), RUNTIME_DEFAULT_CAPS.len());
        assert!(!s.non_root() && !s.read_only_root && !s.no_new_privs);

        let (p, c) = pod(json!({"containers": [{"name": "c", "securityContext": {
            "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN", "sys_admin", "CAP_SYS_PTRACE"]}}}]}));
        assert_eq!(
            of(&p, &c).unwrap().caps.unwrap(),
            ["CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_SYS_PTRACE"]
        );
        let (p, c) = pod(json!({"containers": [{"name": "c", "securityContext": {
            "capabilities": {"drop": ["NET_RAW"]}}}]}));
        assert!(
            !of(&p, &c)
                .unwrap()
                .caps
                .unwrap()
                .contains(&"CAP_NET_RAW".to_string())
        );
        let (p, c) = pod(json!({"containers": [{"name": "c", "securityContext": {
            "privileged": true, "capabilities": {"drop": ["ALL"]}}}]}));
        assert_eq!(of(&p, &c).unwrap().caps, None, "privileged keeps everything");
        let (p, c) = pod(json!({"containers": [{"name": "c", "securityContext": {
            "capabilities": {"add": ["NET_ADMIM"]}}}]}));
        assert!(of(&p, &c).unwrap_err().contains("NET_ADMIM"));
    }

    #[test]
    fn users_come_from_the_container_then_the_pod_and_root_is_refused_when_not_allowed() {
        let (p, c) = pod(json!({
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532},
            "containers": [{"name": "c", "securityContext": {
                "readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false}}]}));
        let s = of(&p, &c).unwrap();
        assert_eq!((s.uid, s.gid), (Some(65532), Some(65532)));
        assert!(s.non_root() && s.read_only_root && s.no_new_privs);
        assert_eq!(pod_user(&p), Some(65532));

        let (p, c) = pod(json!({"securityContext": {"runAsNonRoot": true},
            "containers": [{"name": "c"}]}));
        assert_eq!(
            of(&p, &c).unwrap_err(),
            "container has runAsNonRoot and image will run as root"
        );
        let (p, c) = pod(json!({"securityContext": {"runAsNonRoot": true, "runAsUser": 7},
            "containers": [{"name": "c", "securityContext": {"runAsUser": 0}}]}));
        assert!(of(&p, &c).unwrap_err().contains("non-root"));
        let (p, c) = pod(json!({"containers": [{"name": "c", "securityContext": {"runAsUser": -1}}]}));
        assert!(of(&p, &c).unwrap_err().contains("runAsUser -1"));
        assert_eq!(pod_user(&p), None);
    }
}
