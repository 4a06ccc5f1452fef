//! Pod fixtures and what each pod got: its node and IP (Kubernetes), its Neutron port, MAC and
//! IPs (KuryrPort `status.vifs`), and its network namespace (the node's sandbox state).

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use kuryr_types::KuryrPort;
use serde_json::json;

use crate::{
    cluster::Cluster,
    error::{Error, Result},
};

/// The TCP port every test pod declares (the emulated node answers the pod's name on it).
pub const POD_PORT: u16 = 8080;

/// A pod manifest: one container declaring [`POD_PORT`], pinned to `node` when given.
pub fn pod_manifest(ns: &str, name: &str, node: Option<&str>) -> Pod {
    pod_manifest_with_ports(ns, name, node, &[(POD_PORT, "TCP")])
}

/// A pod manifest whose container declares `ports` (`(port, "TCP" | "UDP")`): the emulated node
/// answers the pod's name on each of them.
pub fn pod_manifest_with_ports(ns: &str, name: &str, node: Option<&str>, ports: &[(u16, &str)]) -> Pod {
    let ports: Vec<serde_json::Value> = ports
        .iter()
        .map(|(p, proto)| json!({"containerPort": p, "protocol": proto, "name": format!("{}-{p}", proto.to_lowercase())}))
        .collect();
    let mut spec = json!({
        "containers": [{"name": "app", "image": "kuryr-e2e/app", "ports": ports}],
    });
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "kuryr-e2e"}},
        "spec": spec,
    }))
    .unwrap_or_default()
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}

/// Creates namespace `ns` unless it exists.
pub async fn ensure_namespace(client: &Client, ns: &str) -> Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap_or_default();
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(kube_err(format!("create namespace {ns}"))(e)),
    }
}

/// Creates a pod.
pub async fn create_pod(client: &Client, ns: &str, name: &str, node: Option<&str>) -> Result<()> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod_manifest(ns, name, node))
        .await
        .map(|_| ())
        .map_err(kube_err(format!("create pod {ns}/{name}")))
}

/// Creates a pod declaring `ports` (see [`pod_manifest_with_ports`]).
pub async fn create_pod_with_ports(
    client: &Client,
    ns: &str,
    name: &str,
    node: Option<&str>,
    ports: &[(u16, &str)],
) -> Result<()> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(
            &PostParams::default(),
            &pod_manifest_with_ports(ns, name, node, ports),
        )
        .await
        .map(|_| ())
        .map_err(kube_err(format!("create pod {ns}/{name}")))
}

/// Creates a pod declaring `ports` whose labels are exactly `labels`.
pub async fn create_pod_labelled(
    client: &Client,
    (ns, name): (&str, &str),
    node: Option<&str>,
    ports: &[(u16, &str)],
    labels: BTreeMap<String, String>,
) -> Result<()> {
    let mut pod = pod_manifest_with_ports(ns, name, node, ports);
    pod.metadata.labels = Some(labels);
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .map(|_| ())
        .map_err(kube_err(format!("create pod {ns}/{name}")))
}

/// Deletes namespace `ns` (its pods go with it) unless it is gone already.
pub async fn delete_namespace(client: &Client, ns: &str) -> Result<()> {
    match Api::<Namespace>::all(client.clone())
        .delete(ns, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("delete namespace {ns}"))(e)),
    }
}

/// Deletes a pod (the node tears the sandbox down, the controller releases the port).
pub async fn delete_pod(client: &Client, ns: &str, name: &str) -> Result<()> {
    match Api::<Pod>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("delete pod {ns}/{name}"))(e)),
    }
}

/// The pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn describe(pod: &Pod) -> String {
    let st = pod.status.as_ref();
    format!(
        "{}/{} on {} phase={} ip={}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("-"),
        st.and_then(|s| s.phase.as_deref()).unwrap_or("-"),
        st.and_then(|s| s.pod_ip.as_deref()).unwrap_or("-"),
    )
}

/// Waits until every pod `(namespace, name)` is Ready; the error lists the ones that are not.
pub async fn wait_ready(client: &Client, pods: &[(String, String)], timeout: Duration) -> Result<()> {
    let api: Api<Pod> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    loop {
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(kube_err("list pods"))?;
        let by_key: BTreeMap<(String, String), &Pod> = list
            .items
            .iter()
            .map(|p| {
                (
                    (
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default(),
                    ),
                    p,
                )
            })
            .collect();
        let missing: Vec<String> = pods
            .iter()
            .filter(|k| !by_key.get(*k).is_some_and(|p| is_ready(p)))
            .map(|k| {
                by_key
                    .get(k)
                    .map_or_else(|| format!("{}/{} (absent)", k.0, k.1), |p| describe(p))
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("pods Ready; not Ready: {}", missing.join("; ")),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until none of the pods exists any more.
pub async fn wait_gone(client: &Client, pods: &[(String, String)], timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut left = Vec::new();
        for (ns, name) in pods {
            match Api::<Pod>::namespaced(client.clone(), ns).get_opt(name).await {
                Ok(Some(_)) => left.push(format!("{ns}/{name}")),
                Ok(None) => {}
                Err(e) => return Err(kube_err(format!("get pod {ns}/{name}"))(e)),
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("pods deleted; still there: {}", left.join(", ")),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Everything the harness knows about one pod.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodView {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Node (`spec.nodeName`).
    pub node: String,
    /// `status.podIP`.
    pub pod_ip: String,
    /// Ready condition.
    pub ready: bool,
    /// Neutron port ID of the default VIF (KuryrPort `status.vifs`).
    pub port_id: String,
    /// MAC of the default VIF.
    pub mac: String,
    /// IPs of the default VIF.
    pub vif_ips: Vec<String>,
    /// Subnet CIDR of the first IP.
    pub cidr: String,
    /// `active` of the default VIF.
    pub vif_active: bool,
    /// The pod's network namespace (name under /var/run/netns), from the node's state.
    pub netns: String,
}

/// Reads the sandbox records of a node (`sandboxes/<id>.json` in its state dir; the single
/// `state.json` of older releases too): pod UID → (netns name, start time).
/// A pod with several sandboxes (one whose ADD failed, then a retry) maps to the started one,
/// the latest if several are.
pub fn node_netns_by_uid(cluster: &Cluster, node: &str) -> BTreeMap<String, (String, Option<String>)> {
    let dir = cluster.node_state_dir(node);
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
    };
    let mut records: Vec<serde_json::Value> = std::fs::read_dir(dir.join("sandboxes"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| read(&p))
        .collect();
    if let Some(serde_json::Value::Object(old)) =
        read(&dir.join("state.json")).and_then(|mut v| v.get_mut("sandboxes").map(serde_json::Value::take))
    {
        records.extend(old.into_iter().map(|(_, r)| r));
    }
    let mut out: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    for r in &records {
        let (Some(uid), Some(netns)) = (
            r.get("podUid").and_then(|s| s.as_str()),
            r.get("netns").and_then(|s| s.as_str()),
        ) else {
            continue;
        };
        let started = r.get("started").and_then(|s| s.as_str()).map(str::to_string);
        // RFC 3339 UTC times of one format order as strings; `None` (never started) first.
        let newer = out.get(uid).is_none_or(|(_, had)| started > *had);
        if newer {
            out.insert(uid.to_string(), (netns.to_string(), started));
        }
    }
    out
}

/// Collects the [`PodView`] of every pod in `namespaces`, sorted by namespace and name.
pub async fn collect(cluster: &Cluster, client: &Client, namespaces: &[String]) -> Result<Vec<PodView>> {
    let mut netns = BTreeMap::new();
    for n in &cluster.nodes {
        netns.extend(node_netns_by_uid(cluster, &n.name));
    }
    let mut out = Vec::new();
    for ns in namespaces {
        let pods = Api::<Pod>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(kube_err(format!("list pods in {ns}")))?;
        let kps = Api::<KuryrPort>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .map_err(kube_err(format!("list kuryrports in {ns}")))?;
        let kp_by_name: BTreeMap<String, &KuryrPort> = kps
            .items
            .iter()
            .map(|k| (k.metadata.name.clone().unwrap_or_default(), k))
            .collect();
        for p in &pods.items {
            let name = p.metadata.name.clone().unwrap_or_default();
            let uid = p.metadata.uid.clone().unwrap_or_default();
            let mut v = PodView {
                namespace: ns.clone(),
                name: name.clone(),
                uid: uid.clone(),
                node: p
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .unwrap_or_default(),
                pod_ip: p
                    .status
                    .as_ref()
                    .and_then(|s| s.pod_ip.clone())
                    .unwrap_or_default(),
                ready: is_ready(p),
                netns: netns.get(&uid).map(|(n, _)| n.clone()).unwrap_or_default(),
                ..PodView::default()
            };
            if let Some((_, vif)) = kp_by_name
                .get(&name)
                .and_then(|k| k.status.as_ref())
                .and_then(|s| s.default_vif())
            {
                v.port_id = vif.id.clone().unwrap_or_default();
                v.mac = vif.address.clone().unwrap_or_default();
                v.vif_ips = vif.ips().map(|(_, ip)| ip.to_string()).collect();
                v.cidr = vif
                    .ips()
                    .next()
                    .and_then(|(s, _)| s.cidr.clone())
                    .unwrap_or_default();
                v.vif_active = vif.is_active();
            }
            out.push(v);
        }
    }
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    Ok(out)
}
