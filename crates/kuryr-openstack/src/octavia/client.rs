//! [`OpenStackOctavia`]: the real [`Octavia`] over openstack_sdk's session (shared with
//! Neutron's client: one Keystone login), through the same request helper as Neutron's calls.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use openstack_sdk::AsyncOpenStack;
use openstack_sdk::types::ServiceType;
use serde_json::{Value, json};

use super::Octavia;
use super::model::{
    ApiVersion, HealthMonitorCreate, HealthMonitorSettings, LbCreate, LbFilter, Listener, ListenerCreate,
    LoadBalancer, MemberSpec, Pool, PoolCreate, StatusTree,
};
use crate::api::BoxFuture;
use crate::client::{Transport, decode, seg, take_key};
use crate::error::{Error, Result};
use crate::model::Query;
use crate::observe::{RequestObserver, ops};

/// The real Octavia client.
#[derive(Clone)]
pub struct OpenStackOctavia {
    transport: Transport,
    version: ApiVersion,
}

impl std::fmt::Debug for OpenStackOctavia {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStackOctavia")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl OpenStackOctavia {
    /// Wraps an authenticated session (Neutron's: [`OpenStackNeutron::session`](crate::OpenStackNeutron::session))
    /// and reads Octavia's version document (one request).
    pub async fn from_session(
        session: AsyncOpenStack,
        request_timeout: Duration,
        observer: Arc<dyn RequestObserver>,
    ) -> Result<Self> {
        let mut c = OpenStackOctavia {
            transport: Transport::new(session, ServiceType::LoadBalancer, request_timeout, observer),
            version: ApiVersion::default(),
        };
        c.version = c.fetch_version().await?;
        tracing::info!(version = %c.version, "connected to Octavia");
        Ok(c)
    }

    /// The highest `v2.N` of the version document (`CURRENT` and `SUPPORTED` entries).
    async fn fetch_version(&self) -> Result<ApiVersion> {
        // The discovered endpoint is `…/v2`; the version document is one level up.
        let body = self
            .transport
            .call(ops::LB_VERSIONS, Method::GET, "../".into(), Query::new(), None)
            .await?;
        let v: Value = serde_json::from_slice(&body).map_err(|e| Error::Decode {
            op: ops::LB_VERSIONS,
            message: e.to_string(),
        })?;
        let best = v
            .get("versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("id").and_then(Value::as_str).and_then(ApiVersion::parse))
            .max();
        best.ok_or_else(|| Error::Decode {
            op: ops::LB_VERSIONS,
            message: "no v2.N in Octavia's version document".into(),
        })
    }

    /// Every entry of a list, page after page: Octavia answers at most `[api_settings]
    /// pagination_max_limit` entries (1 000 by default) with a `<key>_links` `next` link whose
    /// `marker` is the last entry's ID. Reading only the first page missed every load balancer
    /// past the thousandth (found by the model cloud, issue 39). At most 1 000 pages.
    async fn list_all<T: serde::de::DeserializeOwned>(
        &self,
        op: &'static str,
        path: &str,
        query: Query,
        key: &str,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        let mut marker: Option<String> = None;
        for _ in 0..1000 {
            let mut q = query.clone();
            if let Some(m) = &marker {
                q.push(("marker".into(), m.clone()));
            }
            let body = self.transport.call(op, Method::GET, path.into(), q, None).await?;
            let mut v: Value = serde_json::from_slice(&body).map_err(|e| Error::Decode {
                op,
                message: e.to_string(),
            })?;
            let page: Vec<T> = take_key(op, &mut v, key)?;
            out.extend(page);
            marker = next_marker(&v, key);
            if marker.is_none() {
                return Ok(out);
            }
        }
        Err(Error::Decode {
            op,
            message: format!("{key}: more than 1 000 pages"),
        })
    }

    async fn delete(&self, op: &'static str, path: String, query: Query) -> Result<()> {
        match self.transport.call(op, Method::DELETE, path, query, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn create_id(&self, op: &'static str, collection: &str, key: &str, body: Value) -> Result<String> {
        let raw = self
            .transport
            .call(
                op,
                Method::POST,
                format!("lbaas/{collection}"),
                Query::new(),
                Some(body),
            )
            .await?;
        let v: Value = decode(op, &raw, key)?;
        v.get("id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Error::Decode {
                op,
                message: format!("{key} without an id"),
            })
    }
}

/// The `marker` of the `next` link of a list answer, if any.
fn next_marker(answer: &Value, key: &str) -> Option<String> {
    let links = answer.get(format!("{key}_links"))?.as_array()?;
    let href = links
        .iter()
        .find(|l| l.get("rel").and_then(Value::as_str) == Some("next"))?
        .get("href")?
        .as_str()?;
    let (_, query) = href.split_once('?')?;
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("marker="))
        .filter(|m| !m.is_empty())
        .map(str::to_string)
}

impl Octavia for OpenStackOctavia {
    fn version(&self) -> ApiVersion {
        self.version
    }

    fn list_load_balancers<'a>(&'a self, filter: &'a LbFilter) -> BoxFuture<'a, Result<Vec<LoadBalancer>>> {
        Box::pin(self.list_all(
            ops::LB_LIST,
            "lbaas/loadbalancers",
            filter.query(),
            "loadbalancers",
        ))
    }

    fn get_load_balancer<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LoadBalancer>> {
        Box::pin(async move {
            let path = format!("lbaas/loadbalancers/{}", seg(id));
            let body = self
                .transport
                .call(ops::LB_GET, Method::GET, path, Query::new(), None)
                .await?;
            decode(ops::LB_GET, &body, "loadbalancer")
        })
    }

    fn create_load_balancer<'a>(&'a self, lb: &'a LbCreate) -> BoxFuture<'a, Result<LoadBalancer>> {
        Box::pin(async move {
            let body = lb.to_json(self.version);
            let raw = self
                .transport
                .call(
                    ops::LB_CREATE,
                    Method::POST,
                    "lbaas/loadbalancers".into(),
                    Query::new(),
                    Some(body),
                )
                .await?;
            decode(ops::LB_CREATE, &raw, "loadbalancer")
        })
    }

    fn delete_load_balancer<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        let path = format!("lbaas/loadbalancers/{}", seg(id));
        Box::pin(self.delete(ops::LB_DELETE, path, vec![("cascade".into(), "true".into())]))
    }

    fn status_tree<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StatusTree>> {
        Box::pin(async move {
            let path = format!("lbaas/loadbalancers/{}/status", seg(id));
            let body = self
                .transport
                .call(ops::LB_STATUS, Method::GET, path, Query::new(), None)
                .await?;
            let statuses: Value = decode(ops::LB_STATUS, &body, "statuses")?;
            let lb = statuses.get("loadbalancer").cloned().unwrap_or(Value::Null);
            serde_json::from_value(lb).map_err(|e| Error::Decode {
                op: ops::LB_STATUS,
                message: format!("statuses.loadbalancer: {e}"),
            })
        })
    }

    fn list_listeners<'a>(&'a self, lb_id: &'a str) -> BoxFuture<'a, Result<Vec<Listener>>> {
        let q = vec![("loadbalancer_id".to_string(), lb_id.to_string())];
        Box::pin(self.list_all(ops::LISTENER_LIST, "lbaas/listeners", q, "listeners"))
    }

    fn create_listener<'a>(&'a self, l: &'a ListenerCreate) -> BoxFuture<'a, Result<String>> {
        Box::pin(self.create_id(
            ops::LISTENER_CREATE,
            "listeners",
            "listener",
            l.to_json(self.version),
        ))
    }

    fn delete_listener<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(
            ops::LISTENER_DELETE,
            format!("lbaas/listeners/{}", seg(id)),
            Query::new(),
        ))
    }

    fn update_listener_allowed_cidrs<'a>(
        &'a self,
        id: &'a str,
        cidrs: Option<&'a [String]>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let body = json!({ "listener": { "allowed_cidrs": cidrs } });
            let path = format!("lbaas/listeners/{}", seg(id));
            self.transport
                .call(ops::LISTENER_UPDATE, Method::PUT, path, Query::new(), Some(body))
                .await
                .map(|_| ())
        })
    }

    fn list_pools<'a>(&'a self, lb_id: &'a str) -> BoxFuture<'a, Result<Vec<Pool>>> {
        let q = vec![("loadbalancer_id".to_string(), lb_id.to_string())];
        Box::pin(self.list_all(ops::POOL_LIST, "lbaas/pools", q, "pools"))
    }

    fn update_pool_persistence<'a>(&'a self, id: &'a str, source_ip: bool) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let persistence = source_ip.then(|| json!({ "type": "SOURCE_IP" }));
            let body = json!({ "pool": { "session_persistence": persistence } });
            let path = format!("lbaas/pools/{}", seg(id));
            self.transport
                .call(ops::POOL_UPDATE, Method::PUT, path, Query::new(), Some(body))
                .await
                .map(|_| ())
        })
    }

    fn create_health_monitor<'a>(&'a self, hm: &'a HealthMonitorCreate) -> BoxFuture<'a, Result<String>> {
        Box::pin(self.create_id(
            ops::HM_CREATE,
            "healthmonitors",
            "healthmonitor",
            hm.to_json(self.version),
        ))
    }

    fn get_health_monitor<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<HealthMonitorSettings>> {
        Box::pin(async move {
            let path = format!("lbaas/healthmonitors/{}", seg(id));
            let body = self
                .transport
                .call(ops::HM_GET, Method::GET, path, Query::new(), None)
                .await?;
            decode(ops::HM_GET, &body, "healthmonitor")
        })
    }

    fn delete_health_monitor<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(
            ops::HM_DELETE,
            format!("lbaas/healthmonitors/{}", seg(id)),
            Query::new(),
        ))
    }

    fn create_pool<'a>(&'a self, p: &'a PoolCreate) -> BoxFuture<'a, Result<String>> {
        Box::pin(self.create_id(ops::POOL_CREATE, "pools", "pool", p.to_json(self.version)))
    }

    fn delete_pool<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(self.delete(ops::POOL_DELETE, format!("lbaas/pools/{}", seg(id)), Query::new()))
    }

    fn replace_members<'a>(
        &'a self,
        pool_id: &'a str,
        members: &'a [MemberSpec],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let items: Vec<Value> = members.iter().map(MemberSpec::to_json).collect();
            let path = format!("lbaas/pools/{}/members", seg(pool_id));
            self.transport
                .call(
                    ops::MEMBER_BATCH_UPDATE,
                    Method::PUT,
                    path,
                    Query::new(),
                    Some(json!({ "members": items })),
                )
                .await
                .map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn the_next_marker_comes_from_the_next_link_only() {
        let a = json!({"loadbalancers": [], "loadbalancers_links": [
            {"rel": "previous", "href": "http://o/v2/lbaas/loadbalancers?marker=a"},
            {"rel": "next", "href": "http://o/v2/lbaas/loadbalancers?tags=x&limit=2&marker=b7"}]});
        assert_eq!(super::next_marker(&a, "loadbalancers").as_deref(), Some("b7"));
        assert_eq!(
            super::next_marker(&json!({"loadbalancers": []}), "loadbalancers"),
            None
        );
        let last = json!({"pools": [], "pools_links": [{"rel": "previous", "href": "x?marker=a"}]});
        assert_eq!(super::next_marker(&last, "pools"), None);
    }
}
