//! Registering the Node object and keeping it alive: status (conditions, addresses, nodeInfo,
//! capacity) and the heartbeat Lease in `kube-node-lease`.

use std::{collections::BTreeMap, net::IpAddr};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use kube::{
    Api, Client,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;

use super::Error;

/// Kubelet version the emulated nodes report.
pub const KUBELET_VERSION: &str = "v1.33.0-kube-sandbox";

/// Namespace of node leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// What the node says about itself.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Node name.
    pub name: String,
    /// InternalIP.
    pub ip: IpAddr,
    /// Labels (defaults already merged).
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Port of the kubelet endpoint on loopback (`daemonEndpoints`).
    pub kubelet_port: u16,
}

/// The machine architecture as Go (and so Kubernetes) names it.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Default labels of a node, overridable by `--label`.
pub fn default_labels(name: &str) -> BTreeMap<String, String> {
    let arch = go_arch();
    BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.to_string()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), arch.to_string()),
        ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
        ("beta.kubernetes.io/arch".to_string(), arch.to_string()),
    ])
}

/// The `status` of the Node at time `now`; `ready_since` is the Ready transition time.
pub fn status(id: &Identity, now: jiff::Timestamp, ready_since: jiff::Timestamp) -> serde_json::Value {
    let cond = |ty: &str, status: &str, reason: &str, msg: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": msg,
               "lastHeartbeatTime": crate::k8s_time(now), "lastTransitionTime": crate::k8s_time(ready_since)})
    };
    let resources = json!({"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "50Gi"});
    json!({
        "conditions": [
            cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": id.ip.to_string()},
            {"type": "Hostname", "address": id.name},
        ],
        "capacity": resources,
        "allocatable": resources,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": id.kubelet_port}},
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": "", "osImage": "kube-sandbox",
            "containerRuntimeVersion": "kube-sandbox://0.1.0",
            "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "",
            "operatingSystem": "linux", "architecture": go_arch(),
        },
    })
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Creates the Node or updates its labels/annotations, then writes its status. Returns its UID.
pub async fn register(client: &Client, id: &Identity, since: jiff::Timestamp) -> Result<String, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(id.name.clone()),
            labels: Some(id.labels.clone()),
            annotations: Some(id.annotations.clone()).filter(|a| !a.is_empty()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(e) if is_status(&e, 409) => {
            let patch = json!({"metadata": {"labels": id.labels, "annotations": id.annotations}});
            api.patch(&id.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| Error::Api {
                    step: "update node",
                    source,
                })?;
        }
        Err(source) => {
            return Err(Error::Api {
                step: "create node",
                source,
            });
        }
    }
    let patched = update_status(client, id, since).await?;
    Ok(patched.metadata.uid.unwrap_or_default())
}

/// Writes the node status (heartbeat).
pub async fn update_status(client: &Client, id: &Identity, since: jiff::Timestamp) -> Result<Node, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let body = json!({"status": status(id, jiff::Timestamp::now(), since)});
    api.patch_status(&id.name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map_err(|source| Error::Api {
            step: "update node status",
            source,
        })
}

/// Renews (or creates) the node's Lease; `true` when it had to be created.
pub async fn renew_lease(client: &Client, id: &Identity, node_uid: &str) -> Result<bool, Error> {
    let api: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let now = MicroTime(jiff::Timestamp::now());
    let patch = json!({"spec": {"holderIdentity": id.name, "renewTime": now}});
    match api
        .patch(&id.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => return Ok(false),
        Err(e) if is_status(&e, 404) => {}
        Err(source) => {
            return Err(Error::Api {
                step: "renew lease",
                source,
            });
        }
    }
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(id.name.clone()),
            namespace: Some(LEASE_NAMESPACE.into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: id.name.clone(),
                uid: node_uid.to_string(),
                ..Default::default()
            }])
            .filter(|_| !node_uid.is_empty()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(id.name.clone()),
            lease_duration_seconds: Some(40),
            renew_time: Some(now),
            ..Default::default()
        }),
    };
    match api.create(&PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(e) if is_status(&e, 404) => {
            // The lease namespace is missing (a bare API server): create it, then retry.
            let ns_api: Api<Namespace> = Api::all(client.clone());
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(LEASE_NAMESPACE.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match ns_api.create(&PostParams::default(), &ns).await {
                Ok(_) => {}
                Err(e) if is_status(&e, 409) => {}
                Err(source) => {
                    return Err(Error::Api {
                        step: "create lease namespace",
                        source,
                    });
                }
            }
            api.create(&PostParams::default(), &lease)
                .await
                .map(|_| true)
                .map_err(|source| Error::Api {
                    step: "create lease",
                    source,
                })
        }
        Err(e) if is_status(&e, 409) => Ok(false),
        Err(source) => Err(Error::Api {
            step: "create lease",
            source,
        }),
    }
}

/// Parses `k=v` pairs from the command line.
pub fn parse_pairs(pairs: &[String]) -> Result<BTreeMap<String, String>, Error> {
    let mut out = BTreeMap::new();
    for p in pairs {
        let (k, v) = p
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| Error::BadArgument(format!("expected key=value, got {p:?}")))?;
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn status_has_ready_condition_addresses_and_capacity() {
        let id = Identity {
            name: "n1".into(),
            ip: "10.0.0.7".parse().unwrap(),
            labels: default_labels("n1"),
            annotations: BTreeMap::new(),
            kubelet_port: 41234,
        };
        let now = jiff::Timestamp::now();
        let s = status(&id, now, now);
        let ready = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "True");
        assert_eq!(
            s["addresses"][0],
            json!({"type":"InternalIP","address":"10.0.0.7"})
        );
        assert_eq!(s["allocatable"]["pods"], "110");
        assert_eq!(s["nodeInfo"]["kubeletVersion"], KUBELET_VERSION);
        assert_eq!(id.labels["kubernetes.io/hostname"], "n1");
        assert_eq!(id.labels["kubernetes.io/os"], "linux");
    }

    #[test]
    fn pairs_parse_and_reject() {
        let p = parse_pairs(&["a=b".into(), "c=".into(), "x/y=z=w".into()]).unwrap();
        assert_eq!(p["a"], "b");
        assert_eq!(p["c"], "");
        assert_eq!(p["x/y"], "z=w");
        assert!(parse_pairs(&["novalue".into()]).is_err());
        assert!(parse_pairs(&["=v".into()]).is_err());
    }
}
