//! Upstream's pool manager bodies and answers (its `[kubernetes] enable_manager` API, used by
//! the ports-pool how-to and `contrib/pools-management/subports.py`): `{"trunks": [...],
//! "num_ports": N}` for `populatePool` / `freePool`, `{"pool_key": [trunk, project, [sgs]]}` for
//! `showPool`, answered with upstream's sentences. Upstream's "trunks" are the worker VMs' IPs
//! (nested pools); kuryr-rs pools are per node, so a trunk is resolved to a node by its
//! addresses (or taken as the node's name). `populatePool` uses the defaults the drivers give
//! an empty pod, as upstream did (default project, subnets and security groups).

use axum::{
    http::StatusCode,
    response::{IntoResponse, Response},
};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{Api, api::ListParams};
use kuryr_core::pool::SgSet;
use serde_json::Value;

use super::Manager;
use crate::drivers::PodTarget;

/// An upstream `populatePool` / `freePool` request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrunksRequest {
    /// Trunk IPs (or node names) as given.
    pub trunks: Vec<String>,
    /// `num_ports` (upstream's default: 1).
    pub num_ports: u32,
}

/// The request when `body` is upstream's `{"trunks": ...}` shape.
pub fn trunks(body: &[u8]) -> Option<TrunksRequest> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let trunks = v.get("trunks")?;
    let trunks = trunks
        .as_array()
        .map(|a| a.iter().filter_map(|t| t.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let num_ports = v
        .get("num_ports")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(1);
    Some(TrunksRequest { trunks, num_ports })
}

/// Upstream's pool key: `[trunk, project_id, [security group ids]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamKey {
    /// Trunk IP or node name.
    pub trunk: String,
    /// Project.
    pub project_id: String,
    /// Security groups.
    pub security_groups: Vec<String>,
}

/// The key when `body` is upstream's `{"pool_key": [...]}` shape.
pub fn pool_key(body: &[u8]) -> Option<UpstreamKey> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let k = v.get("pool_key")?.as_array()?;
    let s = |i: usize| k.get(i).and_then(Value::as_str).map(str::to_string);
    Some(UpstreamKey {
        trunk: s(0)?,
        project_id: s(1)?,
        security_groups: k
            .get(2)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default(),
    })
}

fn text(code: StatusCode, body: String) -> Response {
    (code, body).into_response()
}

/// The node a trunk names: the node with that address, else a node of that name.
pub(super) async fn node_of(m: &Manager, trunk: &str) -> Result<String, String> {
    let Some(client) = &m.client else {
        return Ok(trunk.to_string());
    };
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing nodes: {e}"))?;
    let by_ip = nodes.items.iter().find(|n| {
        n.status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| a.iter().any(|a| a.address == trunk))
    });
    let by_name = nodes
        .items
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(trunk));
    by_ip
        .or(by_name)
        .and_then(|n| n.metadata.name.clone())
        .ok_or_else(|| format!("no node has the address or name {trunk}"))
}

/// What the pod drivers give an empty pod of `namespace`: the default project, network,
/// subnets and security groups (upstream's `populatePool` asked its drivers about an empty pod).
pub(super) async fn default_target(m: &Manager, namespace: &str) -> Result<PodTarget, String> {
    let Some(drivers) = &m.drivers else {
        return Err("the pod drivers are not available".into());
    };
    let pod: Pod = serde_json::from_value(serde_json::json!(
        {"metadata": {"name": "", "namespace": namespace}}
    ))
    .map_err(|e| format!("an empty pod of namespace {namespace}: {e}"))?;
    drivers.pod_target(&pod).await.map_err(|e| {
        format!(
            "the pod drivers' defaults for namespace {namespace}: {}",
            crate::error_chain(&e)
        )
    })
}

/// The node of every trunk, in order.
async fn hosts_of(m: &Manager, trunks: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(trunks.len());
    for t in trunks {
        out.push(node_of(m, t).await?);
    }
    Ok(out)
}

/// `populatePool` with upstream's body.
pub async fn populate(m: &Manager, req: TrunksRequest) -> Response {
    if req.trunks.is_empty() {
        return text(StatusCode::BAD_REQUEST, "Trunk port IP(s) missing.".into());
    }
    if let Some(refusal) = too_big(&req) {
        return text(StatusCode::BAD_REQUEST, refusal);
    }
    let target = match default_target(m, "default").await {
        Ok(t) => t,
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Error while populating pool {:?}: {e}", req.trunks),
            );
        }
    };
    let hosts = match hosts_of(m, &req.trunks).await {
        Ok(h) => h,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("Error while populating pool: {e}"),
            );
        }
    };
    for (trunk, host) in req.trunks.iter().zip(&hosts) {
        if let Err(e) = m.source.populate(host, &target, Some(req.num_ports)).await {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Error while populating pool {trunk}: {}", crate::error_chain(&e)),
            );
        }
    }
    text(
        StatusCode::OK,
        format!(
            "Ports pool at {:?} was populated with {} ports.",
            req.trunks, req.num_ports
        ),
    )
}

/// Why a request is refused for its size (upstream set no bound).
fn too_big(req: &TrunksRequest) -> Option<String> {
    if req.trunks.len() > super::MAX_TRUNKS {
        return Some(format!(
            "{} trunks is more than one request may name ({})",
            req.trunks.len(),
            super::MAX_TRUNKS
        ));
    }
    (req.num_ports == 0 || req.num_ports > super::MAX_POPULATE_PORTS).then(|| {
        format!(
            "num_ports {} is not between 1 and {}",
            req.num_ports,
            super::MAX_POPULATE_PORTS
        )
    })
}

/// `freePool` with upstream's body (no trunks: every pool).
pub async fn free(m: &Manager, req: TrunksRequest) -> Response {
    if req.trunks.len() > super::MAX_TRUNKS {
        return text(StatusCode::BAD_REQUEST, too_big(&req).unwrap_or_default());
    }
    if req.trunks.is_empty() {
        return match m.free_pools(None).await {
            Ok(_) => text(StatusCode::OK, "Ports pool belonging to all was freed.".into()),
            Err(e) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Error freeing ports pool: {}", crate::error_chain(&e)),
            ),
        };
    }
    let hosts = match hosts_of(m, &req.trunks).await {
        Ok(h) => h,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("Error freeing ports pool: {e}")),
    };
    for (trunk, host) in req.trunks.iter().zip(&hosts) {
        if let Err(e) = m.free_pools(Some(host)).await {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Error freeing ports pool {trunk}: {}", crate::error_chain(&e)),
            );
        }
    }
    text(
        StatusCode::OK,
        format!("Ports pool belonging to {:?} was freed.", req.trunks),
    )
}

/// `showPool` with upstream's key: the available ports of the node's pools of that project
/// whose security groups are exactly the given ones.
pub async fn show(m: &Manager, key: UpstreamKey) -> Response {
    let host = match node_of(m, &key.trunk).await {
        Ok(h) => h,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("Invalid pool key: {e}")),
    };
    let want = SgSet::new(key.security_groups.iter().cloned());
    let ids = m.available_with(&host, &key.project_id, &want);
    let shown = format!("({}, {}, {:?})", key.trunk, key.project_id, key.security_groups);
    if ids.is_empty() {
        text(StatusCode::OK, "Empty pool".into())
    } else {
        text(
            StatusCode::OK,
            format!("Pool {shown} ports are:\n{}", ids.join("\n")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_upstream_bodies() {
        assert_eq!(
            trunks(br#"{"trunks": ["10.0.0.5", "node-2"], "num_ports": 3}"#),
            Some(TrunksRequest {
                trunks: vec!["10.0.0.5".into(), "node-2".into()],
                num_ports: 3
            })
        );
        assert_eq!(
            trunks(br#"{"trunks": []}"#),
            Some(TrunksRequest {
                trunks: vec![],
                num_ports: 1
            })
        );
        assert_eq!(
            trunks(br#"{"host": "node-1", "project_id": "p", "network_id": "n"}"#),
            None
        );
        assert_eq!(trunks(b"not json"), None);
        assert_eq!(
            pool_key(br#"{"pool_key": ["10.0.0.5", "proj", ["sg-b", "sg-a"]]}"#),
            Some(UpstreamKey {
                trunk: "10.0.0.5".into(),
                project_id: "proj".into(),
                security_groups: vec!["sg-b".into(), "sg-a".into()]
            })
        );
        assert_eq!(pool_key(br#"{"pool_key": ["10.0.0.5"]}"#), None);
        assert_eq!(pool_key(b""), None);
    }
}
