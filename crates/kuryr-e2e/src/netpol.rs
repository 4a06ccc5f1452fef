//! NetworkPolicy from the outside (issue 14): policies and labels written as a user would, and
//! probes from inside pods that wait for the answer a policy calls for — the time that takes
//! is the enforcement latency the tests and the benchmark report.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}

/// Creates (or replaces) NetworkPolicy `name` in `ns` with `spec` (JSON as in a manifest).
pub async fn apply_policy(client: &Client, ns: &str, name: &str, spec: Value) -> Result<()> {
    let np: NetworkPolicy = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }))
    .map_err(|e| Error::Parse {
        what: format!("NetworkPolicy {ns}/{name}"),
        detail: e.to_string(),
    })?;
    let api: Api<NetworkPolicy> = Api::namespaced(client.clone(), ns);
    match api.create(&PostParams::default(), &np).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let p = json!({"spec": np.spec});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&p))
                .await
                .map(|_| ())
                .map_err(kube_err(format!("update NetworkPolicy {ns}/{name}")))
        }
        Err(e) => Err(kube_err(format!("create NetworkPolicy {ns}/{name}"))(e)),
    }
}

/// Deletes NetworkPolicy `name` (gone already: fine).
pub async fn delete_policy(client: &Client, ns: &str, name: &str) -> Result<()> {
    match Api::<NetworkPolicy>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("delete NetworkPolicy {ns}/{name}"))(e)),
    }
}

/// Sets label `key=value` on namespace `ns`.
pub async fn label_namespace(client: &Client, ns: &str, key: &str, value: &str) -> Result<()> {
    let mut m = serde_json::Map::new();
    m.insert(key.into(), json!(value));
    patch_labels(client, Labelled::Namespace(ns), m).await
}

/// Whose labels [`patch_labels`] changes.
#[derive(Debug, Clone, Copy)]
pub enum Labelled<'a> {
    /// A pod.
    Pod {
        /// Namespace.
        ns: &'a str,
        /// Name.
        name: &'a str,
    },
    /// A namespace.
    Namespace(&'a str),
}

/// Merge-patches `labels` onto a pod or namespace: a string sets a label, `null` removes it.
pub async fn patch_labels(
    client: &Client,
    who: Labelled<'_>,
    labels: serde_json::Map<String, Value>,
) -> Result<()> {
    let p = json!({"metadata": {"labels": labels}});
    let pp = PatchParams::default();
    match who {
        Labelled::Pod { ns, name } => Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns)
            .patch(name, &pp, &Patch::Merge(&p))
            .await
            .map(|_| ())
            .map_err(kube_err(format!("label pod {ns}/{name}"))),
        Labelled::Namespace(ns) => Api::<Namespace>::all(client.clone())
            .patch(ns, &pp, &Patch::Merge(&p))
            .await
            .map(|_| ())
            .map_err(kube_err(format!("label namespace {ns}"))),
    }
}

/// One label to set (`Some`) or remove (`None`), as [`patch_labels`] takes it.
pub fn one_label(key: &str, value: Option<&str>) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert(key.into(), value.map_or(Value::Null, |v| json!(v)));
    m
}

/// What a probe should come back with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The server's answer (its pod name).
    Allowed,
    /// No answer (the policy drops the connection).
    Denied,
}

/// How long one probe waits for an answer: a dropped SYN never answers, so this bounds how
/// precisely a flip to "denied" is timed.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(400);

/// Probes `ip:port` from `netns` until the answer is `want` (`server`'s name when allowed);
/// returns how long that took from `since`. The answer must then hold for two more probes.
pub async fn converge(
    netns: &str,
    ip: &str,
    port: u16,
    server: &str,
    want: Expect,
    since: Instant,
    within: Duration,
) -> Result<Duration> {
    let matches = |a: &str| match want {
        Expect::Allowed => a == server,
        Expect::Denied => a.starts_with("error"),
    };
    let mut last = String::new();
    while since.elapsed() < within {
        let a = crate::services::tcp_answer(netns, ip, port, PROBE_TIMEOUT).await;
        if matches(&a) {
            let took = since.elapsed();
            for _ in 0..2 {
                let again = crate::services::tcp_answer(netns, ip, port, PROBE_TIMEOUT).await;
                if !matches(&again) {
                    return Err(Error::Parse {
                        what: format!("{ip}:{port} from {netns}"),
                        detail: format!("answered {a:?} ({want:?}) then {again:?}: not stable"),
                    });
                }
            }
            return Ok(took);
        }
        last = a;
    }
    Err(Error::Timeout {
        what: format!("{ip}:{port} from {netns} to be {want:?} (last answer {last:?})"),
        secs: within.as_secs(),
    })
}

/// A security group as the harness sees it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Group {
    /// ID.
    pub id: String,
    /// Name.
    pub name: String,
    /// Number of rules.
    pub rules: usize,
}

const SG_SCRIPT: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
print(json.dumps([{"id": g.id, "name": g.name, "rules": len(g.security_group_rules or [])}
                  for g in conn.network.security_groups(tags=sys.argv[1])]))
"#;

/// The security groups carrying `tag` (a cluster's).
pub fn groups_tagged(tag: &str) -> Result<Vec<Group>> {
    crate::neutron::sdk_query("security group list", SG_SCRIPT, &[tag])
}
