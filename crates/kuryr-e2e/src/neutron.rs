//! What Neutron itself says about ports: one `/usr/bin/python3` + openstacksdk process against
//! the sandbox cloud (`clouds.yaml`, cloud `kuryr-sandbox`), so the harness checks the system
//! from the outside and does not reuse the code under test.

use std::process::Command;

use serde::Deserialize;

use crate::{
    cluster::run,
    error::{Error, Result},
};

/// A Neutron port, as the harness needs it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct NeutronPort {
    /// Port ID.
    pub id: String,
    /// `ACTIVE`, `DOWN`, …
    pub status: String,
    /// MAC address.
    pub mac: String,
    /// Fixed IP addresses.
    pub ips: Vec<String>,
    /// `binding:host_id`.
    pub host: String,
    /// `device_owner`.
    pub device_owner: String,
    /// `device_id`.
    pub device_id: String,
    /// Network ID.
    pub network_id: String,
    /// Project ID.
    pub project_id: String,
    /// Security groups.
    pub security_groups: Vec<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Name.
    #[serde(default)]
    pub name: String,
}

const SCRIPT: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
mode, arg = sys.argv[1], sys.argv[2]
if mode == "tag":
    ports = list(conn.network.ports(tags=arg))
else:
    wanted = set(i for i in arg.split(",") if i)
    ports = [p for p in conn.network.ports() if p.id in wanted] if wanted else []
print(json.dumps([{
    "id": p.id, "status": p.status or "", "mac": p.mac_address or "",
    "ips": [ip["ip_address"] for ip in (p.fixed_ips or [])],
    "host": p.binding_host_id or "", "device_owner": p.device_owner or "",
    "device_id": p.device_id or "", "network_id": p.network_id or "",
    "project_id": p.project_id or "", "security_groups": p.security_group_ids or [],
    "tags": p.tags or [], "name": p.name or ""} for p in ports]))
"#;

/// Runs an openstacksdk `script` with `args` against the sandbox cloud (one `/usr/bin/python3`
/// process) and decodes the last line of its output that is a JSON list.
pub fn sdk_query<T: serde::de::DeserializeOwned>(what: &str, script: &str, args: &[&str]) -> Result<Vec<T>> {
    let home = std::env::var("KURYR_SANDBOX_HOME").unwrap_or_else(|_| "/var/lib/kuryr-sandbox".into());
    let out = run(
        &format!("openstacksdk {what}"),
        Command::new("/usr/bin/python3")
            .args(["-c", script])
            .args(args)
            .env("OS_CLIENT_CONFIG_FILE", format!("{home}/clouds.yaml"))
            .env("HOME", std::env::temp_dir()),
    )?;
    let json = out.lines().rev().find(|l| l.starts_with('[')).unwrap_or("[]");
    serde_json::from_str(json).map_err(|e| Error::Parse {
        what: format!("openstacksdk {what}"),
        detail: e.to_string(),
    })
}

fn query(mode: &str, arg: &str) -> Result<Vec<NeutronPort>> {
    sdk_query("port query", SCRIPT, &[mode, arg])
}

/// The ports with these IDs (missing ones are simply absent).
pub fn ports_by_id(ids: &[String]) -> Result<Vec<NeutronPort>> {
    query("ids", &ids.join(","))
}

/// Every port carrying `tag`.
pub fn ports_tagged(tag: &str) -> Result<Vec<NeutronPort>> {
    query("tag", tag)
}

const PORT_CALL: &str = r#"
import json, os, sys, openstack
conn = openstack.connect(cloud=os.environ.get("OS_CLOUD", "kuryr-sandbox"))
op = sys.argv[1]
if op == "create":
    net, subnet, ip, name = sys.argv[2:6]
    p = conn.network.create_port(network_id=net, name=name,
                                 fixed_ips=[{"subnet_id": subnet, "ip_address": ip}])
    print(json.dumps([p.id]))
else:
    conn.network.delete_port(sys.argv[2], ignore_missing=True)
    print(json.dumps([]))
"#;

/// Creates a port named `name` holding address `ip` of `subnet` on `network` (an address taken
/// behind kuryr's back); its ID.
pub fn create_port_at(network: &str, subnet: &str, ip: &str, name: &str) -> Result<String> {
    sdk_query::<String>("port create", PORT_CALL, &["create", network, subnet, ip, name])?
        .pop()
        .ok_or_else(|| Error::Parse {
            what: "openstacksdk port create".into(),
            detail: "no port ID printed".into(),
        })
}

/// Deletes port `id` (gone already: fine).
pub fn delete_port(id: &str) -> Result<()> {
    sdk_query::<String>("port delete", PORT_CALL, &["delete", id]).map(|_| ())
}
