//! Services as a user sees them: create Services (with or without a selector, headless, with
//! hand-written Endpoints), wait for their KuryrLoadBalancer to record a load balancer, probe
//! the VIP from inside a pod's network namespace (TCP and UDP), and ask Octavia itself (one
//! `/usr/bin/python3` + openstacksdk process, like [`crate::neutron`]) which load balancers
//! carry a tag.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use kuryr_types::KuryrLoadBalancer;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}

/// A Service port: `(name, port, protocol, targetPort)`.
pub type SvcPort<'a> = (&'a str, u16, &'a str, u16);

/// The manifest of Service `ns/name` with `ports`, selecting `selector` (none: selectorless),
/// headless when `headless`.
pub fn service_manifest(
    ns: &str,
    name: &str,
    ports: &[SvcPort<'_>],
    selector: Option<(&str, &str)>,
    headless: bool,
) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, proto, t)| json!({"name": n, "port": p, "protocol": proto, "targetPort": t}))
        .collect();
    let mut spec = json!({"ports": ports});
    if let Some((k, v)) = selector {
        spec["selector"] = json!({ k: v });
    }
    if headless {
        spec["clusterIP"] = json!("None");
    }
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// Creates a Service from [`service_manifest`]; returns its ClusterIP.
pub async fn create_service(
    client: &Client,
    ns: &str,
    name: &str,
    ports: &[SvcPort<'_>],
    selector: Option<(&str, &str)>,
    headless: bool,
) -> Result<String> {
    create_from(
        client,
        ns,
        name,
        service_manifest(ns, name, ports, selector, headless),
    )
    .await
}

/// Creates a Service like [`create_service`] asking for ClusterIP `ip`.
pub async fn create_service_at(
    client: &Client,
    ns: &str,
    name: &str,
    ports: &[SvcPort<'_>],
    selector: Option<(&str, &str)>,
    ip: &str,
) -> Result<String> {
    let mut m = service_manifest(ns, name, ports, selector, false);
    m["spec"]["clusterIP"] = json!(ip);
    create_from(client, ns, name, m).await
}

async fn create_from(client: &Client, ns: &str, name: &str, manifest: Value) -> Result<String> {
    let svc: Service = serde_json::from_value(manifest).map_err(|e| Error::Parse {
        what: "service manifest".into(),
        detail: e.to_string(),
    })?;
    let created = Api::<Service>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &svc)
        .await
        .map_err(kube_err(format!("create service {ns}/{name}")))?;
    Ok(created.spec.and_then(|s| s.cluster_ip).unwrap_or_default())
}

/// Sets the ports of Service `ns/name` (a merge patch of `spec.ports`).
pub async fn set_service_ports(client: &Client, ns: &str, name: &str, ports: &[SvcPort<'_>]) -> Result<()> {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, proto, t)| json!({"name": n, "port": p, "protocol": proto, "targetPort": t}))
        .collect();
    Api::<Service>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"ports": ports}})),
        )
        .await
        .map(|_| ())
        .map_err(kube_err(format!("patch service {ns}/{name}")))
}

/// Makes Service `ns/name` select exactly `selector` (a merge patch that drops `drop`).
pub async fn set_service_selector(
    client: &Client,
    ns: &str,
    name: &str,
    selector: (&str, &str),
    drop: &str,
) -> Result<()> {
    let patch = json!({"spec": {"selector": {selector.0: selector.1, drop: null}}});
    Api::<Service>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(kube_err(format!("patch selector of service {ns}/{name}")))
}

/// Adds label `key=value` to pod `ns/name`.
pub async fn label_pod(client: &Client, ns: &str, name: &str, key: &str, value: &str) -> Result<()> {
    let patch = json!({"metadata": {"labels": {key: value}}});
    Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(kube_err(format!("label pod {ns}/{name}")))
}

/// Sets annotation `key=value` on Service `ns/name`.
pub async fn annotate_service(client: &Client, ns: &str, name: &str, key: &str, value: &str) -> Result<()> {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    Api::<Service>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(kube_err(format!("annotate service {ns}/{name}")))
}

/// Deletes Service `ns/name`.
pub async fn delete_service(client: &Client, ns: &str, name: &str) -> Result<()> {
    match Api::<Service>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(kube_err(format!("delete service {ns}/{name}"))(e)),
    }
}

/// Writes the Endpoints of a selectorless Service: `ips` on `ports` (`(name, port, protocol)`).
pub async fn write_endpoints(
    client: &Client,
    ns: &str,
    name: &str,
    ips: &[&str],
    ports: &[(&str, u16, &str)],
) -> Result<()> {
    let eps: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "subsets": [{
            "addresses": ips.iter().map(|ip| json!({"ip": ip})).collect::<Vec<_>>(),
            "ports": ports.iter().map(|(n, p, proto)| json!({"name": n, "port": p, "protocol": proto})).collect::<Vec<_>>(),
        }],
    }))
    .map_err(|e| Error::Parse {
        what: "endpoints manifest".into(),
        detail: e.to_string(),
    })?;
    Api::<Endpoints>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &eps)
        .await
        .map(|_| ())
        .map_err(kube_err(format!("create endpoints {ns}/{name}")))
}

/// The KuryrLoadBalancer of Service `ns/name`, if any.
pub async fn klb(client: &Client, ns: &str, name: &str) -> Result<Option<KuryrLoadBalancer>> {
    Api::<KuryrLoadBalancer>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(kube_err(format!("get kuryrloadbalancer {ns}/{name}")))
}

/// Waits until the KLB of `ns/name` records `members` members in its status (a load balancer
/// with listeners and pools); returns the load balancer ID.
pub async fn wait_members(
    client: &Client,
    ns: &str,
    name: &str,
    members: usize,
    timeout: Duration,
) -> Result<String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("no KuryrLoadBalancer");
    loop {
        if let Some(k) = klb(client, ns, name).await? {
            let st = k.status.unwrap_or_default();
            let n = st.members.as_ref().map(Vec::len);
            last = format!(
                "status: lb {:?}, members {n:?}",
                st.loadbalancer.as_ref().map(|l| &l.id)
            );
            if st.listeners.is_some() && n == Some(members) {
                return Ok(st.loadbalancer.map(|l| l.id).unwrap_or_default());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("KuryrLoadBalancer {ns}/{name} with {members} members ({last})"),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One TCP connection from `netns` to `ip:port`: the first line answered (a pod name), or
/// `error: …` (refused, timed out).
pub async fn tcp_answer(netns: &str, ip: &str, port: u16, timeout: Duration) -> String {
    tcp_answer_from(Some(netns), ip, port, timeout).await
}

/// [`tcp_answer`] from `netns`, or from the machine's root namespace (`None`: the sandbox's
/// outside).
pub async fn tcp_answer_from(netns: Option<&str>, ip: &str, port: u16, timeout: Duration) -> String {
    let script = "exec 3<>/dev/tcp/$1/$2 && head -n1 <&3";
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = tokio::process::Command::new("ip");
            c.args(["netns", "exec", ns, "timeout"]);
            c
        }
        None => tokio::process::Command::new("timeout"),
    };
    let out = cmd
        .arg(format!("{}", timeout.as_secs_f64()))
        .args(["bash", "-c", script, "probe", ip])
        .arg(port.to_string())
        .kill_on_drop(true)
        .output()
        .await;
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) if o.status.code() == Some(124) => "error: timed out".into(),
        Ok(o) => format!(
            "error: {}",
            String::from_utf8_lossy(&o.stderr)
                .trim()
                .lines()
                .last()
                .unwrap_or("failed")
        ),
        Err(e) => format!("error: cannot run ip netns exec: {e}"),
    }
}

/// `n` TCP connections from `netns` to `ip:port`; how often each answer came back (see
/// [`tcp_answer`]).
pub async fn tcp_answers(netns: &str, ip: &str, port: u16, n: usize) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for _ in 0..n {
        *out.entry(tcp_answer(netns, ip, port, Duration::from_secs(3)).await)
            .or_default() += 1;
    }
    out
}

/// One UDP datagram from `netns` to `ip:port`; the answer (empty on timeout).
pub async fn udp_answer(netns: &str, ip: &str, port: u16, timeout: Duration) -> String {
    let script = "exec 3<>/dev/udp/$1/$2 && printf 'q\\n' >&3 && timeout \"$3\" head -n1 <&3";
    let out = tokio::process::Command::new("ip")
        .args(["netns", "exec", netns, "bash", "-c", script, "probe", ip])
        .arg(port.to_string())
        .arg(format!("{}", timeout.as_secs_f64()))
        .kill_on_drop(true)
        .output()
        .await;
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// An Octavia load balancer as the harness sees it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct OctaviaLb {
    /// ID.
    pub id: String,
    /// Name.
    pub name: String,
    /// VIP.
    pub vip: String,
    /// Provisioning status.
    pub status: String,
}

const LB_SCRIPT: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
lbs = list(conn.load_balancer.load_balancers(tags=sys.argv[1]))
print(json.dumps([{"id": l.id, "name": l.name or "", "vip": l.vip_address or "",
                   "status": l.provisioning_status or ""} for l in lbs]))
"#;

/// Octavia's load balancers carrying `tag`.
pub fn lbs_tagged(tag: &str) -> Result<Vec<OctaviaLb>> {
    crate::neutron::sdk_query("load balancer query", LB_SCRIPT, &[tag])
}

/// Probes from inside a pod's network namespace without a process per probe: one OS thread
/// enters the namespace once, and every probe runs on a short-lived thread it starts (born in
/// the namespace). Cheap enough for a benchmark to probe many VIPs at once on 2 cores.
pub struct Prober {
    tx: std::sync::mpsc::Sender<(
        std::net::SocketAddr,
        Duration,
        tokio::sync::oneshot::Sender<String>,
    )>,
}

impl Prober {
    /// A prober in network namespace `netns`.
    pub fn new(netns: &str) -> Result<Prober> {
        let (tx, rx) = std::sync::mpsc::channel::<(
            std::net::SocketAddr,
            Duration,
            tokio::sync::oneshot::Sender<String>,
        )>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let name = netns.to_string();
        std::thread::spawn(move || {
            if let Err(e) = crate::soak::enter_netns(&name) {
                let _ = ready_tx.send(Err(e));
                return;
            }
            let _ = ready_tx.send(Ok(()));
            for (addr, timeout, reply) in rx {
                std::thread::spawn(move || {
                    let _ = reply.send(tcp_once(addr, timeout));
                });
            }
        });
        let failed = |detail: String| Error::Parse {
            what: format!("network namespace {netns}"),
            detail,
        };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Prober { tx }),
            Ok(Err(detail)) => Err(failed(detail)),
            Err(_) => Err(failed("prober thread ended".into())),
        }
    }

    /// One TCP connection to `ip:port`: the first line answered, or `error: …`.
    pub async fn tcp(&self, ip: &str, port: u16, timeout: Duration) -> String {
        let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
            return format!("error: bad address {ip}");
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        if self
            .tx
            .send((std::net::SocketAddr::new(ip, port), timeout, reply))
            .is_err()
        {
            return "error: prober thread ended".into();
        }
        answer
            .await
            .unwrap_or_else(|_| "error: probe thread ended".into())
    }
}

fn tcp_once(addr: std::net::SocketAddr, timeout: Duration) -> String {
    use std::io::Read;
    let mut s = match std::net::TcpStream::connect_timeout(&addr, timeout) {
        Ok(s) => s,
        Err(e) => return format!("error: {e}"),
    };
    let _ = s.set_read_timeout(Some(timeout));
    let mut buf = [0u8; 128];
    let mut got = Vec::new();
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.contains(&b'\n') {
                    break;
                }
            }
            Err(e) => return format!("error: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&got);
    text.lines().next().unwrap_or_default().trim().to_string()
}
