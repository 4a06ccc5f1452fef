//! Octavia's objects as the controller reads them (load balancers, listeners, pools, members,
//! the status tree) and the bodies it sends, with the API version that gates optional fields.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Octavia's API version (`v2.N`; read once from the version document, no microversion header
/// exists). Optional features are gated on it the way Octavia documents them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ApiVersion {
    /// The `N` of `v2.N`.
    pub minor: u32,
}

impl ApiVersion {
    /// `v2.N` from a version id such as `v2.26`; `None` for anything else.
    pub fn parse(id: &str) -> Option<Self> {
        let rest = id.strip_prefix("v2.")?;
        rest.parse().ok().map(|minor| ApiVersion { minor })
    }
    /// Tags on load-balancer objects (2.5).
    pub fn tags(self) -> bool {
        self.minor >= 5
    }
    /// `allowed_cidrs` on listeners (2.12).
    pub fn allowed_cidrs(self) -> bool {
        self.minor >= 12
    }
    /// Two listeners on one port with different protocols (TCP and UDP on 53) (2.13).
    pub fn same_port_protocols(self) -> bool {
        self.minor >= 13
    }
    /// SCTP listeners and pools (2.23).
    pub fn sctp(self) -> bool {
        self.minor >= 23
    }
}

impl std::fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "v2.{}", self.minor)
    }
}

/// An Octavia load balancer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct LoadBalancer {
    /// ID.
    pub id: String,
    /// Name (`<namespace>/<service>` for kuryr's).
    #[serde(default, deserialize_with = "null_string")]
    pub name: String,
    /// Description.
    #[serde(default, deserialize_with = "null_string")]
    pub description: String,
    /// Project.
    #[serde(default, deserialize_with = "null_string")]
    pub project_id: String,
    /// VIP address.
    #[serde(default, deserialize_with = "null_string")]
    pub vip_address: String,
    /// VIP port.
    #[serde(default, deserialize_with = "null_string")]
    pub vip_port_id: String,
    /// VIP subnet.
    #[serde(default, deserialize_with = "null_string")]
    pub vip_subnet_id: String,
    /// Provider (`amphora`, `ovn`, …).
    #[serde(default, deserialize_with = "null_string")]
    pub provider: String,
    /// `ACTIVE`, `PENDING_CREATE`, `PENDING_UPDATE`, `PENDING_DELETE`, `DELETED`, `ERROR`.
    #[serde(default, deserialize_with = "null_string")]
    pub provisioning_status: String,
    /// `ONLINE`, `OFFLINE`, `DEGRADED`, `ERROR`, `NO_MONITOR`, `DRAINING`.
    #[serde(default, deserialize_with = "null_string")]
    pub operating_status: String,
    /// Tags (Octavia 2.5+).
    #[serde(default)]
    pub tags: Vec<String>,
}

fn null_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// Provisioning states.
pub mod status {
    /// Ready for the next write.
    pub const ACTIVE: &str = "ACTIVE";
    /// Failed; may be deleted and recreated.
    pub const ERROR: &str = "ERROR";
    /// Being deleted.
    pub const PENDING_DELETE: &str = "PENDING_DELETE";
    /// Gone (listed briefly by some releases).
    pub const DELETED: &str = "DELETED";

    /// Whether a write is in progress (`PENDING_*`): the object is locked.
    pub fn is_pending(s: &str) -> bool {
        s.starts_with("PENDING_")
    }
}

/// One listener, pool or member of the status tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TreeMember {
    /// ID.
    pub id: String,
    /// Name.
    #[serde(default, deserialize_with = "null_string")]
    pub name: String,
    /// Address.
    #[serde(default, deserialize_with = "null_string")]
    pub address: String,
    /// Port.
    #[serde(default)]
    pub protocol_port: i32,
    /// Provisioning status.
    #[serde(default, deserialize_with = "null_string")]
    pub provisioning_status: String,
    /// Operating status.
    #[serde(default, deserialize_with = "null_string")]
    pub operating_status: String,
}

/// A pool in the status tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TreePool {
    /// ID.
    pub id: String,
    /// Name.
    #[serde(default, deserialize_with = "null_string")]
    pub name: String,
    /// Provisioning status.
    #[serde(default, deserialize_with = "null_string")]
    pub provisioning_status: String,
    /// Members.
    #[serde(default)]
    pub members: Vec<TreeMember>,
    /// Its health monitor, if any.
    #[serde(default, rename = "health_monitor")]
    pub health_monitor: Option<TreeHealthMonitor>,
}

/// A health monitor in the status tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TreeHealthMonitor {
    /// ID.
    pub id: String,
    /// `TCP`, `UDP-CONNECT`, …
    #[serde(default, rename = "type", deserialize_with = "null_string")]
    pub type_: String,
    /// Provisioning status.
    #[serde(default, deserialize_with = "null_string")]
    pub provisioning_status: String,
    /// Operating status.
    #[serde(default, deserialize_with = "null_string")]
    pub operating_status: String,
}

/// A health monitor's settings (`POST /v2/lbaas/healthmonitors` without the pool, and what a
/// `GET` answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HealthMonitorSettings {
    /// `TCP`, `UDP-CONNECT`, `SCTP`.
    #[serde(rename = "type", default, deserialize_with = "null_string")]
    pub type_: String,
    /// Seconds between probes.
    #[serde(default)]
    pub delay: i64,
    /// Seconds a probe may take.
    #[serde(default)]
    pub timeout: i64,
    /// Successes to mark a member ONLINE.
    #[serde(default)]
    pub max_retries: i64,
    /// Failures to mark a member ERROR.
    #[serde(default)]
    pub max_retries_down: i64,
}

/// `POST /v2/lbaas/healthmonitors`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HealthMonitorCreate {
    /// The pool.
    pub pool_id: String,
    /// Name (the pool's).
    pub name: String,
    /// Settings.
    pub settings: HealthMonitorSettings,
    /// Tags.
    pub tags: Vec<String>,
}

impl HealthMonitorCreate {
    /// The JSON body for `version`.
    pub fn to_json(&self, version: ApiVersion) -> Value {
        let s = &self.settings;
        let mut h = json!({
            "pool_id": self.pool_id,
            "name": self.name,
            "type": s.type_,
            "delay": s.delay,
            "timeout": s.timeout,
            "max_retries": s.max_retries,
            "max_retries_down": s.max_retries_down,
        });
        if version.tags() && !self.tags.is_empty() {
            h["tags"] = json!(self.tags);
        }
        json!({ "healthmonitor": h })
    }
}

/// A listener in the status tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct TreeListener {
    /// ID.
    pub id: String,
    /// Name.
    #[serde(default, deserialize_with = "null_string")]
    pub name: String,
    /// Provisioning status.
    #[serde(default, deserialize_with = "null_string")]
    pub provisioning_status: String,
    /// Its pools (kuryr gives each listener one).
    #[serde(default)]
    pub pools: Vec<TreePool>,
}

/// `GET /v2/lbaas/loadbalancers/{id}/status`: the whole tree in one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct StatusTree {
    /// Load balancer ID.
    pub id: String,
    /// Provisioning status of the load balancer.
    #[serde(default, deserialize_with = "null_string")]
    pub provisioning_status: String,
    /// Operating status of the load balancer.
    #[serde(default, deserialize_with = "null_string")]
    pub operating_status: String,
    /// Listeners.
    #[serde(default)]
    pub listeners: Vec<TreeListener>,
}

/// A listener as listed (the fields the status tree lacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Listener {
    /// ID.
    pub id: String,
    /// Name.
    #[serde(default, deserialize_with = "null_string")]
    pub name: String,
    /// `TCP`, `UDP`, `SCTP`, `HTTP`, …
    #[serde(default, deserialize_with = "null_string")]
    pub protocol: String,
    /// Port.
    #[serde(default)]
    pub protocol_port: i32,
    /// Its default pool.
    #[serde(default)]
    pub default_pool_id: Option<String>,
    /// Client inactivity timeout (ms).
    #[serde(default)]
    pub timeout_client_data: Option<i64>,
    /// Member inactivity timeout (ms).
    #[serde(default)]
    pub timeout_member_data: Option<i64>,
    /// Allowed source CIDRs (2.12+).
    #[serde(default)]
    pub allowed_cidrs: Option<Vec<String>>,
}

/// A pool as listed (the session persistence the status tree lacks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Pool {
    /// ID.
    pub id: String,
    /// Name.
    #[serde(default, deserialize_with = "null_string")]
    pub name: String,
    /// `{"type": "SOURCE_IP" | "HTTP_COOKIE" | "APP_COOKIE", …}` or none.
    #[serde(default)]
    pub session_persistence: Option<SessionPersistence>,
}

impl Pool {
    /// Whether the pool keeps a client on one member by source address.
    pub fn source_ip_persistence(&self) -> bool {
        self.session_persistence
            .as_ref()
            .is_some_and(|s| s.type_ == "SOURCE_IP")
    }
}

/// A pool's session persistence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SessionPersistence {
    /// Its type.
    #[serde(rename = "type", default, deserialize_with = "null_string")]
    pub type_: String,
}

/// `POST /v2/lbaas/loadbalancers`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbCreate {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Project.
    pub project_id: String,
    /// VIP subnet.
    pub vip_subnet_id: String,
    /// VIP address (the ClusterIP).
    pub vip_address: Option<String>,
    /// Provider; `None`: Octavia's default.
    pub provider: Option<String>,
    /// Tags (dropped before 2.5).
    pub tags: Vec<String>,
    /// The whole tree in the same call ("fully populated" create: one write, one lock cycle,
    /// instead of one per listener, pool and member set). Empty: the load balancer alone.
    pub listeners: Vec<FullListener>,
}

/// A listener of a fully populated create, with its default pool and members.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FullListener {
    /// The listener (its `loadbalancer_id` is ignored).
    pub listener: ListenerCreate,
    /// Its default pool (its `listener_id` is ignored).
    pub pool: PoolCreate,
    /// The pool's members.
    pub members: Vec<MemberSpec>,
}

impl FullListener {
    fn to_json(&self, version: ApiVersion) -> Value {
        let mut l = self.listener.to_json(version)["listener"].take();
        if let Some(m) = l.as_object_mut() {
            m.remove("loadbalancer_id");
        }
        let mut p = self.pool.to_json(version)["pool"].take();
        if let Some(m) = p.as_object_mut() {
            m.remove("listener_id");
        }
        p["members"] = Value::Array(self.members.iter().map(MemberSpec::to_json).collect());
        l["default_pool"] = p;
        l
    }
}

impl LbCreate {
    /// The JSON body for `version`.
    pub fn to_json(&self, version: ApiVersion) -> Value {
        let mut lb = json!({
            "name": self.name,
            "description": self.description,
            "project_id": self.project_id,
            "vip_subnet_id": self.vip_subnet_id,
        });
        if let Some(ip) = &self.vip_address {
            lb["vip_address"] = json!(ip);
        }
        if let Some(p) = &self.provider {
            lb["provider"] = json!(p);
        }
        if version.tags() && !self.tags.is_empty() {
            lb["tags"] = json!(self.tags);
        }
        if !self.listeners.is_empty() {
            lb["listeners"] = Value::Array(self.listeners.iter().map(|l| l.to_json(version)).collect());
        }
        json!({ "loadbalancer": lb })
    }
}

/// `POST /v2/lbaas/listeners`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListenerCreate {
    /// Load balancer.
    pub loadbalancer_id: String,
    /// Name.
    pub name: String,
    /// Protocol.
    pub protocol: String,
    /// Port.
    pub protocol_port: i32,
    /// Client inactivity timeout (ms).
    pub timeout_client_data: Option<i64>,
    /// Member inactivity timeout (ms).
    pub timeout_member_data: Option<i64>,
    /// Allowed source CIDRs (sent only from 2.12 on).
    pub allowed_cidrs: Option<Vec<String>>,
    /// Tags.
    pub tags: Vec<String>,
}

impl ListenerCreate {
    /// The JSON body for `version`.
    pub fn to_json(&self, version: ApiVersion) -> Value {
        let mut l = json!({
            "loadbalancer_id": self.loadbalancer_id,
            "name": self.name,
            "protocol": self.protocol,
            "protocol_port": self.protocol_port,
        });
        if let Some(t) = self.timeout_client_data {
            l["timeout_client_data"] = json!(t);
        }
        if let Some(t) = self.timeout_member_data {
            l["timeout_member_data"] = json!(t);
        }
        if let Some(c) = &self.allowed_cidrs
            && version.allowed_cidrs()
        {
            l["allowed_cidrs"] = json!(c);
        }
        if version.tags() && !self.tags.is_empty() {
            l["tags"] = json!(self.tags);
        }
        json!({ "listener": l })
    }
}

/// `POST /v2/lbaas/pools`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PoolCreate {
    /// The listener whose default pool it becomes.
    pub listener_id: String,
    /// Name.
    pub name: String,
    /// Protocol.
    pub protocol: String,
    /// `ROUND_ROBIN`, `SOURCE_IP_PORT`, …
    pub lb_algorithm: String,
    /// `SOURCE_IP` persistence (`sessionAffinity: ClientIP`).
    pub source_ip_persistence: bool,
    /// Tags.
    pub tags: Vec<String>,
}

impl PoolCreate {
    /// The JSON body for `version`.
    pub fn to_json(&self, version: ApiVersion) -> Value {
        let mut p = json!({
            "listener_id": self.listener_id,
            "name": self.name,
            "protocol": self.protocol,
            "lb_algorithm": self.lb_algorithm,
        });
        if self.source_ip_persistence {
            p["session_persistence"] = json!({ "type": "SOURCE_IP" });
        }
        if version.tags() && !self.tags.is_empty() {
            p["tags"] = json!(self.tags);
        }
        json!({ "pool": p })
    }
}

/// One member of a batch member update: Octavia matches existing members by (address, port).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct MemberSpec {
    /// Address.
    pub address: String,
    /// Port.
    pub protocol_port: i32,
    /// Name (`<namespace>/<pod>:<port>`).
    pub name: String,
    /// Subnet (L2 member mode); `None`: Octavia routes to it (L3).
    pub subnet_id: Option<String>,
}

impl MemberSpec {
    /// The member's JSON in a batch body.
    pub fn to_json(&self) -> Value {
        let mut m = json!({
            "address": self.address,
            "protocol_port": self.protocol_port,
            "name": self.name,
        });
        if let Some(s) = &self.subnet_id {
            m["subnet_id"] = json!(s);
        }
        m
    }
}

/// Which load balancers to list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LbFilter {
    /// Exact name.
    pub name: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// VIP address.
    pub vip_address: Option<String>,
    /// All of these tags.
    pub tags: Vec<String>,
}

impl LbFilter {
    /// Query parameters.
    pub fn query(&self) -> crate::model::Query {
        let mut q = Vec::new();
        for (k, v) in [
            ("name", &self.name),
            ("project_id", &self.project_id),
            ("vip_address", &self.vip_address),
        ] {
            if let Some(v) = v {
                q.push((k.to_string(), v.clone()));
            }
        }
        if !self.tags.is_empty() {
            q.push(("tags".into(), self.tags.join(",")));
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_gate_optional_fields() {
        let old = ApiVersion::parse("v2.4").unwrap_or_default();
        let new = ApiVersion::parse("v2.26").unwrap_or_default();
        assert_eq!(new.minor, 26);
        assert!(ApiVersion::parse("v1").is_none());
        let lb = LbCreate {
            name: "ns/svc".into(),
            tags: vec!["k8s".into()],
            ..LbCreate::default()
        };
        assert!(lb.to_json(old)["loadbalancer"].get("tags").is_none());
        assert_eq!(lb.to_json(new)["loadbalancer"]["tags"], json!(["k8s"]));
        let l = ListenerCreate {
            allowed_cidrs: Some(vec!["10.0.0.0/8".into()]),
            ..ListenerCreate::default()
        };
        assert!(
            l.to_json(ApiVersion { minor: 11 })["listener"]
                .get("allowed_cidrs")
                .is_none()
        );
        assert_eq!(l.to_json(new)["listener"]["allowed_cidrs"], json!(["10.0.0.0/8"]));
        assert!(new.sctp() && new.same_port_protocols() && !old.tags());
        let full = LbCreate {
            name: "ns/svc".into(),
            listeners: vec![FullListener {
                listener: ListenerCreate {
                    loadbalancer_id: "ignored".into(),
                    name: "ns/svc:TCP:80".into(),
                    protocol: "TCP".into(),
                    protocol_port: 80,
                    ..ListenerCreate::default()
                },
                pool: PoolCreate {
                    listener_id: "ignored".into(),
                    name: "ns/svc:TCP:80".into(),
                    protocol: "TCP".into(),
                    lb_algorithm: "SOURCE_IP_PORT".into(),
                    ..PoolCreate::default()
                },
                members: vec![MemberSpec {
                    address: "10.0.0.5".into(),
                    protocol_port: 8080,
                    name: "ns/p:8080".into(),
                    subnet_id: None,
                }],
            }],
            ..LbCreate::default()
        }
        .to_json(new);
        let l = &full["loadbalancer"]["listeners"][0];
        assert!(l.get("loadbalancer_id").is_none() && l["default_pool"].get("listener_id").is_none());
        assert_eq!(l["default_pool"]["members"][0]["address"], "10.0.0.5");
    }

    #[test]
    fn status_tree_and_nulls_parse() {
        let body = json!({"id": "lb", "provisioning_status": "ACTIVE", "operating_status": "ONLINE",
            "listeners": [{"id": "l1", "name": "ns/s:TCP:80", "provisioning_status": "ACTIVE",
              "pools": [{"id": "p1", "name": null, "provisioning_status": "ACTIVE",
                "members": [{"id": "m1", "name": "ns/p:8080", "address": "10.0.0.5", "protocol_port": 8080,
                  "provisioning_status": "ACTIVE", "operating_status": "NO_MONITOR"}]}]}]});
        let t: StatusTree = serde_json::from_value(body).expect("tree");
        assert_eq!(t.listeners[0].pools[0].members[0].protocol_port, 8080);
        assert_eq!(t.listeners[0].pools[0].name, "");
        let q = LbFilter {
            name: Some("ns/s".into()),
            tags: vec!["a".into(), "b".into()],
            ..LbFilter::default()
        }
        .query();
        assert_eq!(
            q,
            vec![("name".into(), "ns/s".into()), ("tags".into(), "a,b".into())]
        );
    }
}
