//! A container's environment as kubelet builds it: `env` (values, `fieldRef`,
//! `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef`), `envFrom` (ConfigMaps and Secrets with
//! a prefix), the service-link variables of the `kubernetes` Service, `HOSTNAME` and a default
//! `PATH`; plus the downward-API field paths volumes share.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

/// Data of the ConfigMaps and Secrets a pod refers to (`(kind, name)` → key → value); a
/// missing object is absent.
pub type Sources = BTreeMap<(&'static str, String), BTreeMap<String, String>>;

/// Where clients in host-network pods reach the API server.
#[derive(Debug, Clone)]
pub struct ApiEndpoint {
    /// Host (the node's loopback forwarder).
    pub host: String,
    /// Port.
    pub port: u16,
}

/// The value of a downward-API `fieldPath` of `pod`.
pub fn field_ref(pod: &Pod, path: &str, host_ip: &str) -> Result<String, String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let map_key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_string)
    };
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" => host_ip.to_string(),
        "status.podIP" => status
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_else(|| host_ip.to_string()),
        "metadata.labels" | "metadata.annotations" => {
            let m = if path == "metadata.labels" {
                meta.labels.clone()
            } else {
                meta.annotations.clone()
            };
            m.unwrap_or_default()
                .iter()
                .map(|(k, v)| format!("{k}=\"{v}\"\n"))
                .collect()
        }
        _ => {
            if let Some(k) = map_key("metadata.labels['") {
                meta.labels
                    .as_ref()
                    .and_then(|m| m.get(&k))
                    .cloned()
                    .unwrap_or_default()
            } else if let Some(k) = map_key("metadata.annotations['") {
                meta.annotations
                    .as_ref()
                    .and_then(|m| m.get(&k))
                    .cloned()
                    .unwrap_or_default()
            } else {
                return Err(format!("unsupported fieldPath {path:?}"));
            }
        }
    })
}

/// `resourceFieldRef`: the container's limit or request, else the node's capacity stand-in.
fn resource_ref(c: &Container, resource: &str, divisor: Option<&str>) -> Result<String, String> {
    let res = c.resources.as_ref();
    let pick = |limits: bool, key: &str| {
        res.and_then(|r| {
            if limits {
                r.limits.as_ref()
            } else {
                r.requests.as_ref()
            }
        })
        .and_then(|m| m.get(key))
        .map(|q| q.0.clone())
    };
    let (limits, key) = resource
        .split_once('.')
        .map(|(a, b)| (a == "limits", b))
        .ok_or_else(|| format!("unsupported resource {resource:?}"))?;
    let raw = pick(limits, key).or_else(|| if limits { None } else { pick(true, key) });
    // Unset limits read as the node's allocatable: two CPUs and 24 GiB here.
    let raw = raw.unwrap_or_else(|| match key {
        "cpu" => "2".into(),
        "memory" => "25769803776".into(),
        _ => "0".into(),
    });
    match (key, divisor) {
        ("cpu", Some("1m")) => Ok(cpu_millis(&raw).to_string()),
        ("cpu", _) => Ok(cpu_millis(&raw).div_ceil(1000).max(1).to_string()),
        _ => Ok(raw),
    }
}

fn cpu_millis(q: &str) -> u64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => q.parse::<f64>().map(|c| (c * 1000.0).ceil() as u64).unwrap_or(0),
    }
}

/// Expands `$(VAR)` references to variables defined before (kubelet's rule; `$$` escapes); also
/// applied to `command` and `args` with the container's whole environment.
pub fn expand(s: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("$$") {
            out.push('$');
            rest = t;
        } else if let Some(close) = tail.strip_prefix("$(").and_then(|t| t.find(')')) {
            let name = &tail[2..2 + close];
            match vars.get(name) {
                Some(v) => out.push_str(v),
                None => out.push_str(&tail[..close + 3]),
            }
            rest = &tail[close + 3..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The container's complete environment, in kubelet's order of precedence (later wins).
pub fn build(
    pod: &Pod,
    c: &Container,
    sources: &Sources,
    host_ip: &str,
    api: &ApiEndpoint,
) -> Result<Vec<(String, String)>, String> {
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    vars.insert(
        "PATH".into(),
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
    );
    let host = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    vars.insert("HOSTNAME".into(), host);
    let port = api.port.to_string();
    for (k, v) in [
        ("KUBERNETES_SERVICE_HOST", api.host.clone()),
        ("KUBERNETES_SERVICE_PORT", port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", port.clone()),
        ("KUBERNETES_PORT", format!("tcp://{}:{port}", api.host)),
    ] {
        vars.insert(k.into(), v);
    }
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let (kind, name, optional) = match (&from.config_map_ref, &from.secret_ref) {
            (Some(r), _) => ("ConfigMap", r.name.clone(), r.optional.unwrap_or(false)),
            (None, Some(r)) => ("Secret", r.name.clone(), r.optional.unwrap_or(false)),
            _ => continue,
        };
        match sources.get(&(kind, name.clone())) {
            Some(data) => {
                for (k, v) in data {
                    vars.insert(format!("{prefix}{k}"), v.clone());
                }
            }
            None if optional => {}
            None => return Err(format!("{} \"{name}\" not found", kind.to_lowercase())),
        }
    }
    for e in c.env.iter().flatten() {
        let value = match (&e.value, &e.value_from) {
            (Some(v), _) => expand(v, &vars),
            (None, Some(from)) => {
                if let Some(f) = &from.field_ref {
                    field_ref(pod, &f.field_path, host_ip)?
                } else if let Some(r) = &from.resource_field_ref {
                    let divisor = r.divisor.as_ref().map(|d| d.0.as_str());
                    resource_ref(c, &r.resource, divisor)?
                } else if let Some(r) = &from.config_map_key_ref {
                    key_ref(sources, "ConfigMap", &r.name, &r.key, r.optional.unwrap_or(false))?
                } else if let Some(r) = &from.secret_key_ref {
                    key_ref(sources, "Secret", &r.name, &r.key, r.optional.unwrap_or(false))?
                } else {
                    String::new()
                }
            }
            (None, None) => String::new(),
        };
        vars.insert(e.name.clone(), value);
    }
    Ok(vars.into_iter().collect())
}

fn key_ref(
    sources: &Sources,
    kind: &'static str,
    name: &str,
    key: &str,
    optional: bool,
) -> Result<String, String> {
    match sources.get(&(kind, name.to_string())).and_then(|d| d.get(key)) {
        Some(v) => Ok(v.clone()),
        None if optional => Ok(String::new()),
        None => match sources.get(&(kind, name.to_string())) {
            Some(_) => Err(format!("couldn't find key {key} in {kind} {name}")),
            None => Err(format!("{} \"{name}\" not found", kind.to_lowercase())),
        },
    }
}

/// ConfigMaps and Secrets named anywhere in the pod (env, envFrom, volumes, projections).
pub fn referenced(pod: &Pod) -> Vec<(&'static str, String)> {
    let v = serde_json::to_value(pod.spec.as_ref()).unwrap_or(Value::Null);
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<(&'static str, String)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let kind = match k.as_str() {
                        "configMapRef" | "configMapKeyRef" | "configMap" => Some("ConfigMap"),
                        "secretRef" | "secretKeyRef" => Some("Secret"),
                        "secret" => Some("Secret"),
                        _ => None,
                    };
                    let name = x
                        .get("name")
                        .or_else(|| x.get("secretName"))
                        .and_then(Value::as_str);
                    if let (Some(kind), Some(name)) = (kind, name) {
                        out.push((kind, name.to_string()));
                    }
                    walk(x, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&v, &mut out);
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "kube-system", "uid": "u1", "labels": {"app": "kuryr"}},
            "spec": {"nodeName": "node-1", "serviceAccountName": "kuryr-daemon",
                     "volumes": [{"name": "conf", "configMap": {"name": "kuryr-config"}},
                                 {"name": "creds", "secret": {"secretName": "kuryr-creds"}}],
                     "containers": [{"name": "c", "image": "i"}]},
        }))
        .unwrap()
    }

    #[test]
    fn environment_has_refs_prefixes_expansion_and_the_api_service() {
        let c: Container = serde_json::from_value(json!({
            "name": "c",
            "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"}],
            "env": [
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
                {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}},
                {"name": "X", "value": "on $(NODE) $$(NODE) $(NOPE)"},
            ],
        }))
        .unwrap();
        let mut sources = Sources::new();
        sources.insert(
            ("ConfigMap", "cm".into()),
            [("A".to_string(), "1".to_string())].into(),
        );
        sources.insert(
            ("Secret", "s".into()),
            [("password".to_string(), "pw".to_string())].into(),
        );
        let api = ApiEndpoint {
            host: "127.0.0.1".into(),
            port: 6443,
        };
        let env: BTreeMap<String, String> = build(&pod(), &c, &sources, "172.30.0.11", &api)
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(env["NODE"], "node-1");
        assert_eq!(env["APP"], "kuryr");
        assert_eq!(env["CPU"], "2000");
        assert_eq!(env["PASS"], "pw");
        assert_eq!(env["CM_A"], "1");
        assert_eq!(env["X"], "on node-1 $(NODE) $(NOPE)");
        assert_eq!(env["KUBERNETES_SERVICE_HOST"], "127.0.0.1");
        assert_eq!(env["KUBERNETES_SERVICE_PORT"], "6443");
        assert_eq!(env["HOSTNAME"], "node-1");
        sources.remove(&("Secret", "s".into()));
        let e = build(&pod(), &c, &sources, "172.30.0.11", &api).unwrap_err();
        assert_eq!(e, "secret \"s\" not found");
    }

    #[test]
    fn references_are_collected_from_volumes_and_env() {
        assert_eq!(
            referenced(&pod()),
            vec![
                ("ConfigMap", "kuryr-config".into()),
                ("Secret", "kuryr-creds".into())
            ]
        );
        assert!(field_ref(&pod(), "spec.bogus", "1.2.3.4").is_err());
    }
}
