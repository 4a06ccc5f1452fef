//! kuryr-rs' own pool manager requests (JSON in, JSON out), the ones `kuryrctl pools` sends:
//! a node named by `host` (its name) or by `trunk` (its address: a worker VM's IP names its
//! trunk, as in upstream's requests); the pool's project and network default to what the pod
//! drivers give a pod of `namespace` (default `default`), as upstream's `populatePool` did.
//! Unknown fields are refused, so a misspelt option is an error instead of a default.

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{StatusCode, Uri},
    response::{IntoResponse, Response},
};
use kuryr_core::pool::PoolKey;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Manager, bad_request, failure, upstream};
use crate::drivers::PodTarget;

/// `populatePool` body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PopulateBody {
    /// Node name (or `trunk`).
    pub host: Option<String>,
    /// Node address: a worker VM's IP, which names its trunk (or `host`).
    pub trunk: Option<String>,
    /// Project (default: the project driver's).
    pub project_id: Option<String>,
    /// Network (default: the subnets driver's for a pod of `namespace`).
    pub network_id: Option<String>,
    /// Subnets (default: the subnets driver's when the network is too; else Neutron chooses).
    #[serde(default)]
    pub subnet_ids: Vec<String>,
    /// Security groups (default: the security groups driver's).
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// Ports to create (default `ports_pool_batch`).
    pub num_ports: Option<u32>,
    /// Namespace whose pods the defaults are for (default `default`).
    pub namespace: Option<String>,
}

/// `freePool` body: one node's pools, or all without a node.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FreeBody {
    /// Node name.
    pub host: Option<String>,
    /// Node address (a worker VM's IP).
    pub trunk: Option<String>,
}

/// `listPools` query: every field narrows the list; `ports` adds each pool's ports.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Node name.
    pub host: Option<String>,
    /// Node address (a worker VM's IP).
    pub trunk: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// Network.
    pub network_id: Option<String>,
    /// Include the ports of each pool by state.
    #[serde(default)]
    pub ports: bool,
}

/// A `listPools` row: the pool's counters, and its ports when asked for.
#[derive(Debug, Serialize)]
pub struct ListRow {
    /// Key and counters.
    #[serde(flatten)]
    pub summary: crate::pool::PoolSummary,
    /// Port IDs by state (`?ports=true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<crate::pool::PoolPorts>,
}

/// The node `host` or `trunk` names (exactly one of them); `None` when neither is given.
async fn node(m: &Manager, host: Option<String>, trunk: Option<String>) -> Result<Option<String>, Response> {
    match (host, trunk) {
        (Some(_), Some(_)) => Err(bad_request("give the node as host or as trunk, not both")),
        (Some(h), None) if h.is_empty() => Err(bad_request("host is empty")),
        (Some(h), None) => Ok(Some(h)),
        (None, Some(t)) => upstream::node_of(m, &t)
            .await
            .map(Some)
            .map_err(|e| bad_request(&e)),
        (None, None) => Ok(None),
    }
}

/// The pool the body asks for: given fields win over the drivers' defaults. The drivers are
/// asked whenever a field is missing, the security groups included: a pool whose group set is
/// not the one pods get would never serve a pod. Only when the drivers are not available do
/// missing groups stay empty (Neutron's default group), as a project and network are required.
async fn target(m: &Manager, b: &mut PopulateBody) -> Result<PodTarget, Response> {
    let mut sgs = std::mem::take(&mut b.security_groups);
    let subnet_ids = std::mem::take(&mut b.subnet_ids);
    let sgs_from_drivers = sgs.is_empty() && m.drivers.is_some();
    let mut t = match (b.project_id.take(), b.network_id.take()) {
        (Some(project_id), Some(network_id)) if !sgs_from_drivers => PodTarget {
            project_id,
            network_id,
            subnet_ids: Vec::new(),
            security_groups: Vec::new(),
        },
        (project, network) => {
            let ns = b.namespace.as_deref().unwrap_or("default");
            let mut d = upstream::default_target(m, ns).await.map_err(|e| {
                (StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": e}))).into_response()
            })?;
            if let Some(p) = project {
                d.project_id = p;
            }
            if let Some(n) = network
                && n != d.network_id
            {
                // The default subnets are the default network's.
                d.network_id = n;
                d.subnet_ids.clear();
            }
            if sgs.is_empty() {
                sgs = std::mem::take(&mut d.security_groups);
            }
            d
        }
    };
    if !subnet_ids.is_empty() {
        t.subnet_ids = subnet_ids;
    }
    sgs.sort();
    sgs.dedup();
    t.security_groups = sgs;
    Ok(t)
}

/// `POST /populatePool` with kuryr-rs' body: `{host, project_id, network_id, created}`.
pub async fn populate(m: &Manager, body: &Bytes) -> Response {
    let mut b: PopulateBody = match serde_json::from_slice(body) {
        Ok(b) => b,
        Err(e) => return bad_request(&format!("populatePool body: {e}")),
    };
    match b.num_ports {
        Some(0) => return bad_request("num_ports must be at least 1"),
        Some(n) if n > super::MAX_POPULATE_PORTS => {
            return bad_request(&format!(
                "num_ports {n} is more than one request may ask for ({}): send several",
                super::MAX_POPULATE_PORTS
            ));
        }
        _ => {}
    }
    let host = match node(m, b.host.take(), b.trunk.take()).await {
        Ok(Some(h)) => h,
        Ok(None) => {
            return bad_request("populatePool needs the node: host (its name) or trunk (its address)");
        }
        Err(r) => return r,
    };
    let target = match target(m, &mut b).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let n = b.num_ports.unwrap_or(m.batch()).min(super::MAX_POPULATE_PORTS);
    match m.source.populate(&host, &target, Some(n)).await {
        Ok(created) => Json(json!({
            "host": host,
            "project_id": target.project_id,
            "network_id": target.network_id,
            "created": created,
        }))
        .into_response(),
        Err(e) => failure(&e),
    }
}

/// `POST /freePool` with kuryr-rs' body (or none: every pool): `{host?, deleted}`.
pub async fn free(m: &Manager, body: &Bytes) -> Response {
    let b = if body.iter().all(u8::is_ascii_whitespace) {
        FreeBody::default()
    } else {
        match serde_json::from_slice::<FreeBody>(body) {
            Ok(b) => b,
            Err(e) => return bad_request(&format!("freePool body: {e}")),
        }
    };
    let host = match node(m, b.host, b.trunk).await {
        Ok(h) => h,
        Err(r) => return r,
    };
    match m.free_pools(host.as_deref()).await {
        Ok(deleted) => Json(json!({"host": host, "deleted": deleted})).into_response(),
        Err(e) => failure(&e),
    }
}

/// `GET /listPools[?host=|trunk=&project_id=&network_id=&ports=true]`.
pub async fn list(State(m): State<Manager>, uri: Uri) -> Response {
    let q: ListQuery = match uri.query() {
        None => ListQuery::default(),
        Some(q) => match parse_list_query(q) {
            Ok(q) => q,
            Err(e) => return bad_request(&format!("listPools query: {e}")),
        },
    };
    let host = match node(&m, q.host, q.trunk).await {
        Ok(h) => h,
        Err(r) => return r,
    };
    let rows: Vec<ListRow> = m
        .summaries()
        .into_iter()
        .filter(|s| host.as_ref().is_none_or(|h| &s.host == h))
        .filter(|s| q.project_id.as_ref().is_none_or(|p| &s.project_id == p))
        .filter(|s| q.network_id.as_ref().is_none_or(|n| &s.network_id == n))
        .map(|summary| {
            let ports = q.ports.then(|| {
                m.pool_ports(&PoolKey::new(
                    &summary.host,
                    &summary.project_id,
                    &summary.network_id,
                ))
            });
            ListRow { summary, ports }
        })
        .collect();
    Json(rows).into_response()
}

/// Parses a query string with axum's `Query` rules (which name the offending field).
fn parse_list_query(q: &str) -> Result<ListQuery, String> {
    let uri: Uri = format!("/?{q}").parse().map_err(|e| format!("{e}"))?;
    axum::extract::Query::<ListQuery>::try_from_uri(&uri)
        .map(|axum::extract::Query(q)| q)
        .map_err(|e| e.body_text())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_refuse_unknown_fields_and_name_them() {
        let e =
            serde_json::from_slice::<PopulateBody>(br#"{"host": "n", "num_port": 3}"#).expect_err("misspelt");
        assert!(e.to_string().contains("num_port"), "{e}");
        let b: PopulateBody =
            serde_json::from_slice(br#"{"trunk": "10.0.0.5", "num_ports": 3}"#).expect("body");
        assert_eq!((b.trunk.as_deref(), b.num_ports), (Some("10.0.0.5"), Some(3)));
        assert!(serde_json::from_slice::<FreeBody>(br#"{"hosts": ["n"]}"#).is_err());
        let q = parse_list_query("trunk=10.0.0.5&ports=true").expect("query");
        assert_eq!(q.trunk.as_deref(), Some("10.0.0.5"));
        assert!(q.ports);
        let e = parse_list_query("hots=n").expect_err("misspelt");
        assert!(e.contains("hots"), "{e}");
        assert!(parse_list_query("ports=maybe").is_err());
    }
}
