//! Mutating admission the real server applies to new pods, and the per-namespace objects its
//! controllers publish: the ServiceAccount admission plugin (the pod's ServiceAccount must exist;
//! unless `automountServiceAccountToken` is false on the pod or its ServiceAccount, a projected
//! `kube-api-access-<suffix>` volume — a bound token, the cluster CA, the namespace — is mounted
//! read-only at `/var/run/secrets/kubernetes.io/serviceaccount` in every container), and the
//! `kube-root-ca.crt` ConfigMap of every namespace (what the root-CA publisher controller writes).

use serde_json::{Value, json};

use crate::{
    error::{ApiError, ApiResult},
    meta,
    store::Inner,
};

/// Where the ServiceAccount volume is mounted.
pub const SA_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// Name of the ConfigMap with the cluster CA in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// The token lifetime the admission plugin asks for (the real server's odd 3607 s: one hour
/// plus a little, so that tokens refreshed at 80% never look expired).
const TOKEN_EXPIRATION_S: i64 = 3607;

fn sa_key() -> (String, String) {
    (String::new(), "serviceaccounts".into())
}

/// Applies the ServiceAccount admission plugin to a pod being created in `namespace`.
pub fn service_account(tx: &Inner, namespace: &str, pod: &mut Value) -> ApiResult<()> {
    let pod_name = meta::name(pod).to_string();
    let spec = &pod["spec"];
    let sa_name = spec["serviceAccountName"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let Some(sa) = tx.get(&sa_key(), namespace, &sa_name) else {
        return Err(ApiError::forbidden(format!(
            "pods \"{pod_name}\" is forbidden: error looking up service account {namespace}/{sa_name}: serviceaccount \"{sa_name}\" not found"
        )));
    };
    let automount = spec["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| sa["automountServiceAccountToken"].as_bool())
        .unwrap_or(true);
    if !automount {
        return Ok(());
    }
    let already_mounted = |c: &Value| {
        c["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["mountPath"].as_str().map(|p| p.trim_end_matches('/')) == Some(SA_MOUNT_PATH))
    };
    let volume = format!("kube-api-access-{}", suffix());
    let mut mounted_any = false;
    for field in ["initContainers", "containers"] {
        // `get_mut`, not indexing: a missing field must stay missing (not become null).
        if let Some(cs) = pod
            .get_mut("spec")
            .and_then(|s| s.get_mut(field))
            .and_then(Value::as_array_mut)
        {
            for c in cs.iter_mut() {
                if already_mounted(c) {
                    continue;
                }
                let mount = json!({"name": volume, "readOnly": true, "mountPath": SA_MOUNT_PATH});
                match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                    Some(ms) => ms.push(mount),
                    None => c["volumeMounts"] = json!([mount]),
                }
                mounted_any = true;
            }
        }
    }
    if !mounted_any {
        return Ok(());
    }
    let vol = json!({
        "name": volume,
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_S, "path": "token"}},
                {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
        },
    });
    match pod
        .get_mut("spec")
        .and_then(|s| s.get_mut("volumes"))
        .and_then(Value::as_array_mut)
    {
        Some(vs) => vs.push(vol),
        None => pod["spec"]["volumes"] = json!([vol]),
    }
    Ok(())
}

/// Five lower-case alphanumerics, as the real plugin's volume name suffix.
fn suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char)
        .collect()
}

/// The `kube-root-ca.crt` ConfigMap of `namespace` (HTTP servers publish an empty `ca.crt`).
pub fn root_ca_configmap(namespace: &str, ca_pem: Option<&str>) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": namespace, "uid": meta::uid(),
                     "creationTimestamp": meta::now(),
                     "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
        "data": {"ca.crt": ca_pem.unwrap_or_default()},
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_use_the_safe_alphabet() {
        let s = suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    }

    #[test]
    fn root_ca_configmap_carries_the_ca() {
        let cm = root_ca_configmap("ns", Some("PEM"));
        assert_eq!(cm["data"]["ca.crt"], "PEM");
        assert_eq!(cm["metadata"]["name"], ROOT_CA_CONFIGMAP);
    }
}
