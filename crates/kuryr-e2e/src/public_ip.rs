//! LoadBalancer Services as the outside sees them: switch a Service's type (and
//! `loadBalancerIP`), wait for its `status.loadBalancer.ingress`, connect to its floating IP
//! from the machine's root network namespace (the sandbox's "outside", where the external
//! network's gateway lives), and ask Neutron itself (openstacksdk, like [`crate::neutron`])
//! which floating IPs exist.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// Sets `spec.type` of Service `ns/name` and its `loadBalancerIP` (`None`: removed).
pub async fn set_service_type(
    client: &Client,
    ns: &str,
    name: &str,
    type_: &str,
    load_balancer_ip: Option<&str>,
) -> Result<()> {
    let patch = json!({"spec": {"type": type_, "loadBalancerIP": load_balancer_ip}});
    Api::<Service>::namespaced(client.clone(), ns)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|source| Error::Kube {
            what: format!("patch type of service {ns}/{name}"),
            source,
        })
}

/// Merges `spec` into Service `ns/name`'s spec (`loadBalancerSourceRanges`, `sessionAffinity`…).
pub async fn patch_service_spec(client: &Client, ns: &str, name: &str, spec: Value) -> Result<()> {
    Api::<Service>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "spec": spec })),
        )
        .await
        .map(|_| ())
        .map_err(|source| Error::Kube {
            what: format!("patch spec of service {ns}/{name}"),
            source,
        })
}

/// Waits for a Warning Event on Service `ns/name` whose message contains `text`; its message.
pub async fn wait_warning(
    client: &Client,
    ns: &str,
    name: &str,
    text: &str,
    timeout: Duration,
) -> Result<String> {
    wait_warning_on(client, ns, "Service", name, text, timeout).await
}

/// Waits for a Warning Event on the `kind` object `ns/name` whose message contains `text`; its
/// message.
pub async fn wait_warning_on(
    client: &Client,
    ns: &str,
    kind: &str,
    name: &str,
    text: &str,
    timeout: Duration,
) -> Result<String> {
    use k8s_openapi::api::core::v1::Event;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = events
            .list(&Default::default())
            .await
            .map_err(|source| Error::Kube {
                what: format!("list events in {ns}"),
                source,
            })?;
        if let Some(m) = list.items.into_iter().find_map(|e| {
            let m = e.message.unwrap_or_default();
            (e.type_.as_deref() == Some("Warning")
                && e.involved_object.kind.as_deref() == Some(kind)
                && e.involved_object.name.as_deref() == Some(name)
                && m.contains(text))
            .then_some(m)
        }) {
            return Ok(m);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("a Warning Event on {kind} {ns}/{name} saying {text:?}"),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The IPs of Service `ns/name`'s `status.loadBalancer.ingress` (empty: none, or no Service).
pub async fn ingress(client: &Client, ns: &str, name: &str) -> Result<Vec<String>> {
    let svc = Api::<Service>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .map_err(|source| Error::Kube {
            what: format!("get service {ns}/{name}"),
            source,
        })?;
    Ok(svc
        .and_then(|s| s.status)
        .and_then(|s| s.load_balancer)
        .and_then(|l| l.ingress)
        .map(|i| i.into_iter().filter_map(|x| x.ip).collect())
        .unwrap_or_default())
}

/// Waits until Service `ns/name`'s ingress is exactly one address (returned), or, with
/// `want_none`, empty.
pub async fn wait_ingress(
    client: &Client,
    ns: &str,
    name: &str,
    want_none: bool,
    timeout: Duration,
) -> Result<String> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let now = ingress(client, ns, name).await?;
        match (want_none, now.as_slice()) {
            (false, [ip]) => return Ok(ip.clone()),
            (true, []) => return Ok(String::new()),
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!(
                    "service {ns}/{name} ingress to become {} (now {now:?})",
                    if want_none { "empty" } else { "one address" }
                ),
                secs: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One TCP connection from the machine's root namespace to `ip:port`: the first line answered
/// (a pod name), or `error: …`.
pub async fn outside_tcp_answer(ip: &str, port: u16, timeout: Duration) -> String {
    crate::services::tcp_answer_from(None, ip, port, timeout).await
}

/// Connects from outside to `ip:port` until an answer comes (the provider programs the
/// floating IP's NAT a moment after Neutron reports it) or `timeout` passes; the last answer.
pub async fn outside_tcp_until_answered(ip: &str, port: u16, timeout: Duration) -> String {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let a = outside_tcp_answer(ip, port, Duration::from_secs(2)).await;
        if !a.starts_with("error") || tokio::time::Instant::now() >= deadline {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A floating IP as the harness sees it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Fip {
    /// ID.
    pub id: String,
    /// Address.
    pub address: String,
    /// Port it is on (`None`: free).
    pub port_id: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
}

const FIP_SCRIPT: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
cmd = sys.argv[1]
def row(f):
    return {"id": f.id, "address": f.floating_ip_address, "port_id": f.port_id, "tags": list(f.tags or [])}
if cmd == "list":
    print(json.dumps([row(f) for f in conn.network.ips()]))
elif cmd == "create":
    net = conn.network.find_network(sys.argv[2], ignore_missing=False)
    print(json.dumps([row(conn.network.create_ip(floating_network_id=net.id,
                                                 description="kuryr-e2e user address"))]))
elif cmd == "delete":
    conn.network.delete_ip(sys.argv[2], ignore_missing=True)
    print("[]")
"#;

fn fip_cmd(args: &[&str]) -> Result<Vec<Fip>> {
    crate::neutron::sdk_query("floating IP call", FIP_SCRIPT, args)
}

/// Every floating IP of the sandbox project.
pub fn floating_ips() -> Result<Vec<Fip>> {
    fip_cmd(&["list"])
}

/// Allocates a floating IP on `network` (name or ID) as a user would (no kuryr tags).
pub fn create_user_fip(network: &str) -> Result<Fip> {
    fip_cmd(&["create", network])?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Parse {
            what: "openstacksdk floating IP create".into(),
            detail: "no floating IP returned".into(),
        })
}

/// Deletes floating IP `id` (already gone: fine).
pub fn delete_fip(id: &str) -> Result<()> {
    fip_cmd(&["delete", id]).map(|_| ())
}
