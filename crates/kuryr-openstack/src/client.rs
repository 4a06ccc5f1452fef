//! [`OpenStackNeutron`]: the real [`Neutron`] over openstack_sdk. Every call goes through one
//! [`RestEndpoint`] request type (so the SDK still does catalog lookup, token handling and 401
//! re-authentication) and one helper that applies the request timeout, maps HTTP errors to
//! [`Error`], reports to the [`RequestObserver`] and re-discovers the endpoint once when a
//! versionless URL 404s (the SDK drops discovered URLs on a full re-login).

mod neutron_impl;
mod security_groups;

use crate::api::{BoxFuture, Neutron};
use crate::connect::{ConnectOptions, cloud_config, connect_session};
use crate::error::{Error, NeutronFault, Result};
use crate::floating_ip::{FloatingIp, FloatingIpCreate, FloatingIpFilter};
use crate::model::{NetworkCreate, PortCreate, PortFilter, PortUpdate, Query, ResourceFilter, SubnetCreate};
use crate::observe::{NoopObserver, RequestObserver, observed, ops};
use bytes::Bytes;
use http::Method;
use kuryr_config::CloudAuth;
use kuryr_core::neutron::{EXT_TAG_CREATION, Network, Port, QuotaUsage, Subnet, SubnetPool, TagMode};
use openstack_sdk::AsyncOpenStack;
use openstack_sdk::api::{BodyError, QueryAsync, QueryParams, RestEndpoint, raw};
use openstack_sdk::types::ServiceType;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

/// Most port IDs sent in one `GET /v2.0/ports?id=…` (~4 KB of URL). The sandbox's Neutron
/// answered 200 IDs and refused 400 with `414 URI Too Long`; proxies in front of real clouds
/// often cap at 8 KB.
pub const MAX_IDS_PER_REQUEST: usize = 100;

/// Most security-group rules created in one bulk request. ML2/OVN writes each rule's ACL in its
/// own OVN transaction, ~100 ms a rule on the sandbox (2 cores; measured 2026-11-25: 10 rules
/// 0.65 s, 50 rules 5.4 s), so 100 rules stay well inside a 30 s request timeout and far under
/// oslo.middleware's 114 688-byte body limit.
pub const MAX_RULES_PER_REQUEST: usize = 100;

/// One request (Neutron's or Octavia's), as openstack_sdk's escape hatch wants it.
#[derive(Clone)]
struct Request {
    service: ServiceType,
    method: Method,
    path: String,
    query: Query,
    body: Option<Vec<u8>>,
    /// Extra request headers (`If-Match` of a revision-guarded update).
    headers: Option<http::HeaderMap>,
}

impl RestEndpoint for Request {
    fn method(&self) -> Method {
        self.method.clone()
    }
    fn endpoint(&self) -> Cow<'static, str> {
        Cow::Owned(self.path.clone())
    }
    fn service_type(&self) -> ServiceType {
        self.service.clone()
    }
    fn parameters(&self) -> QueryParams<'_> {
        let mut p = QueryParams::default();
        for (k, v) in &self.query {
            p.push(k.as_str(), v.as_str());
        }
        p
    }
    fn body(&self) -> Result<Option<(&'static str, Vec<u8>)>, BodyError> {
        Ok(self.body.clone().map(|b| ("application/json", b)))
    }
    fn request_headers(&self) -> Option<&http::HeaderMap> {
        self.headers.as_ref()
    }
}

/// The real Neutron client.
#[derive(Clone)]
pub struct OpenStackNeutron {
    transport: Transport,
    extensions: Arc<Vec<String>>,
    /// How port tags travel: see [`PortTagging`]; shared by clones, learnt at most once.
    port_tagging: Arc<AtomicU8>,
    tag_creation: bool,
    /// Port updates that change security groups hold it shared, security-group deletions
    /// exclusively (shared by clones). ML2/OVN (Neutron 21, Debian bookworm) applies a port's
    /// group change to OVN after committing it: a group deleted in between loses its OVN port
    /// group first, the port's OVN update then fails ("Port group … does not exist") and the
    /// port keeps its old ACLs for good — even the maintenance task fails on it. Seen by the
    /// NetworkPolicy conformance suite: a pod stayed isolated after its policy was deleted.
    sg_barrier: Arc<tokio::sync::RwLock<()>>,
}

impl std::fmt::Debug for OpenStackNeutron {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenStackNeutron")
            .field("request_timeout", &self.transport.request_timeout)
            .field("tag_mode", &self.tag_mode())
            .finish_non_exhaustive()
    }
}

/// Percent-encodes one path segment (IDs come from Kubernetes objects and must not change the path).
pub(crate) fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn decode<T: DeserializeOwned>(op: &'static str, body: &Bytes, key: &str) -> Result<T> {
    let mut v: Value = serde_json::from_slice(body).map_err(|e| Error::Decode {
        op,
        message: e.to_string(),
    })?;
    take_key(op, &mut v, key)
}

/// [`decode`] of an answer already parsed (the rest of `v` stays readable: a list's links).
pub(crate) fn take_key<T: DeserializeOwned>(op: &'static str, v: &mut Value, key: &str) -> Result<T> {
    let inner = v.get_mut(key).map(Value::take).ok_or_else(|| Error::Decode {
        op,
        message: format!("no {key:?} in the answer"),
    })?;
    serde_json::from_value(inner).map_err(|e| Error::Decode {
        op,
        message: format!("{key}: {e}"),
    })
}

/// How port tags travel to Neutron. Detection by extension alias alone is not enough: Neutron 21
/// (Zed) with the ML2 `tag_ports_during_bulk_creation` driver accepts `tags` in port create bodies
/// without advertising the alias, and saving one `PUT .../tags` per pool port matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum PortTagging {
    /// Not known yet: send tags in the body; a 400 naming the attribute switches to `AfterCreate`.
    Probe = 0,
    /// Tags ride in the create body (zero extra writes).
    InBody = 1,
    /// One `PUT /v2.0/ports/{id}/tags` per created port.
    AfterCreate = 2,
}

impl PortTagging {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::InBody,
            2 => Self::AfterCreate,
            _ => Self::Probe,
        }
    }
}

/// Whether Neutron refused the request because it does not know the `tags` attribute.
fn rejects_tags(e: &Error) -> bool {
    matches!(e, Error::BadRequest { message, .. } if message.contains("Unrecognized attribute") && message.contains("tags"))
}

impl OpenStackNeutron {
    /// Connects (see [`connect_session`]) and reads Neutron's extensions to choose the
    /// [`TagMode`]. Requests are reported to `observer`.
    pub async fn connect(
        auth: &CloudAuth,
        opts: &ConnectOptions,
        observer: Arc<dyn RequestObserver>,
    ) -> Result<Self> {
        let cfg = cloud_config(auth, opts)?;
        let session = connect_session(&cfg, opts).await?;
        Self::from_session(session, opts.request_timeout, observer).await
    }

    /// Wraps an already authenticated session (shared with other clients, e.g. Octavia's) and
    /// reads Neutron's extensions (one request, under `request_timeout` like every request).
    pub async fn from_session(
        session: AsyncOpenStack,
        request_timeout: Duration,
        observer: Arc<dyn RequestObserver>,
    ) -> Result<Self> {
        let mut client = OpenStackNeutron {
            transport: Transport::new(session, ServiceType::Network, request_timeout, observer),
            extensions: Arc::new(Vec::new()),
            port_tagging: Arc::new(AtomicU8::new(PortTagging::Probe as u8)),
            tag_creation: false,
            sg_barrier: Arc::new(tokio::sync::RwLock::new(())),
        };
        let exts = client.fetch_extensions().await?;
        if TagMode::from_extensions(exts.iter().map(String::as_str)) == TagMode::InCreateBody {
            client
                .port_tagging
                .store(PortTagging::InBody as u8, Ordering::Relaxed);
        }
        client.tag_creation = exts.iter().any(|a| a == EXT_TAG_CREATION);
        client.extensions = Arc::new(exts);
        tracing::info!(tag_mode = ?client.tag_mode(), extensions = client.extensions.len(), "connected to Neutron");
        Ok(client)
    }

    /// How many times a versionless 404 made this client re-discover the network endpoint.
    pub fn rediscoveries(&self) -> u64 {
        self.transport.rediscoveries.load(Ordering::Relaxed)
    }

    /// [`connect`](Self::connect) without an observer.
    pub async fn connect_unobserved(auth: &CloudAuth, opts: &ConnectOptions) -> Result<Self> {
        Self::connect(auth, opts, Arc::new(NoopObserver)).await
    }

    /// The underlying SDK session (for typed SDK calls such as Octavia's).
    pub fn session(&self) -> &AsyncOpenStack {
        &self.transport.session
    }

    /// Extension aliases read at connection time.
    pub fn known_extensions(&self) -> &[String] {
        &self.extensions
    }

    async fn fetch_extensions(&self) -> Result<Vec<String>> {
        #[derive(serde::Deserialize)]
        struct Ext {
            alias: String,
        }
        let body = self
            .call(
                ops::EXTENSION_LIST,
                Method::GET,
                "extensions".into(),
                Query::new(),
                None,
            )
            .await?;
        let exts: Vec<Ext> = decode(ops::EXTENSION_LIST, &body, "extensions")?;
        Ok(exts.into_iter().map(|e| e.alias).collect())
    }

    /// One observed request; non-2xx answers become errors.
    async fn call(
        &self,
        op: &'static str,
        method: Method,
        path: String,
        query: Query,
        body: Option<Value>,
    ) -> Result<Bytes> {
        self.transport.call(op, method, path, query, body).await
    }

    /// Like [`call`](Self::call) for deletes and detaches: 404 is success.
    async fn call_gone_ok(
        &self,
        op: &'static str,
        method: Method,
        path: String,
        body: Option<Value>,
    ) -> Result<()> {
        match self.call(op, method, path, Query::new(), body).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => {
                tracing::debug!(operation = op, "already gone");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn set_tags(&self, op: &'static str, collection: &str, id: &str, tags: &[String]) -> Result<()> {
        let path = format!("{collection}/{}/tags", seg(id));
        self.call(op, Method::PUT, path, Query::new(), Some(json!({ "tags": tags })))
            .await
            .map(|_| ())
    }

    async fn bulk_create(&self, ports: &[PortCreate]) -> Result<Vec<Port>> {
        if ports.is_empty() {
            return Ok(Vec::new());
        }
        let tagging = PortTagging::from_u8(self.port_tagging.load(Ordering::Relaxed));
        let wants_tags = ports.iter().any(|p| !p.tags.is_empty());
        let mut in_body = tagging != PortTagging::AfterCreate;
        let body = match self.post_ports(ports, in_body).await {
            // Neutron without the ML2 `tag_ports_during_bulk_creation` driver rejects the attribute:
            // learn it once and tag after creation from now on (nothing was created).
            Err(e) if in_body && wants_tags && tagging == PortTagging::Probe && rejects_tags(&e) => {
                tracing::info!("Neutron does not take tags in port create bodies; tagging after create");
                self.port_tagging
                    .store(PortTagging::AfterCreate as u8, Ordering::Relaxed);
                in_body = false;
                self.post_ports(ports, false).await?
            }
            other => other?,
        };
        let mut created: Vec<Port> = decode(ops::PORT_BULK_CREATE, &body, "ports")?;
        if in_body && wants_tags {
            // Tags in the body work although the alias may not be advertised (seen on Neutron 21
            // with the ML2 driver enabled); confirm from the answer, fall back if they were dropped.
            let kept = created
                .iter()
                .zip(ports)
                .all(|(c, p)| p.tags.iter().all(|t| c.tags.contains(t)));
            if kept {
                if tagging == PortTagging::Probe {
                    self.port_tagging
                        .store(PortTagging::InBody as u8, Ordering::Relaxed);
                }
                return Ok(created);
            }
            self.port_tagging
                .store(PortTagging::AfterCreate as u8, Ordering::Relaxed);
        } else if in_body {
            return Ok(created);
        }
        for (i, port) in created.iter_mut().enumerate() {
            let tags = ports.get(i).map(|p| p.tags.clone()).unwrap_or_default();
            if tags.is_empty() {
                continue;
            }
            if let Err(e) = self.set_tags(ops::PORT_SET_TAGS, "ports", &port.id, &tags).await {
                tracing::warn!(error = %e, "tagging new ports failed; deleting them");
                for p in &created_ids(&body) {
                    if let Err(d) = self.delete(ops::PORT_DELETE, "ports", p).await {
                        tracing::warn!(port_id = %p, error = %d, "cleanup of an untagged port failed");
                    }
                }
                return Err(e);
            }
            port.tags = tags;
        }
        Ok(created)
    }

    /// One `POST /v2.0/ports` with all `ports`, tags in the body or not.
    async fn post_ports(&self, ports: &[PortCreate], tags_in_body: bool) -> Result<Bytes> {
        let items: Vec<Value> = ports.iter().map(|p| p.to_json(tags_in_body)).collect();
        self.transport
            .call_bulk(
                ops::PORT_BULK_CREATE,
                Method::POST,
                "ports".into(),
                json!({ "ports": items }),
                ports.len(),
            )
            .await
    }

    /// How tags reach new ports right now (see [`PortTagging`]).
    pub(crate) fn current_tag_mode(&self) -> TagMode {
        match PortTagging::from_u8(self.port_tagging.load(Ordering::Relaxed)) {
            PortTagging::AfterCreate => TagMode::AfterCreate,
            PortTagging::Probe | PortTagging::InBody => TagMode::InCreateBody,
        }
    }

    async fn delete(&self, op: &'static str, collection: &str, id: &str) -> Result<()> {
        self.call_gone_ok(op, Method::DELETE, format!("{collection}/{}", seg(id)), None)
            .await
    }

    async fn get<T: DeserializeOwned>(
        &self,
        op: &'static str,
        collection: &str,
        key: &str,
        id: &str,
    ) -> Result<T> {
        let body = self
            .call(
                op,
                Method::GET,
                format!("{collection}/{}", seg(id)),
                Query::new(),
                None,
            )
            .await?;
        decode(op, &body, key)
    }

    async fn list<T: DeserializeOwned>(
        &self,
        op: &'static str,
        collection: &str,
        query: Query,
    ) -> Result<Vec<T>> {
        self.list_keyed(op, collection, collection, query).await
    }

    /// A list whose answer key differs from its path (`security-groups` → `security_groups`).
    async fn list_keyed<T: DeserializeOwned>(
        &self,
        op: &'static str,
        path: &str,
        key: &str,
        query: Query,
    ) -> Result<Vec<T>> {
        let body = self.call(op, Method::GET, path.into(), query, None).await?;
        decode(op, &body, key)
    }

    /// Creates one resource, then tags it when the create body could not carry tags.
    async fn create_tagged<T: DeserializeOwned>(
        &self,
        ops: (&'static str, &'static str),
        collection: &str,
        key: &str,
        body: Value,
        tags: &[String],
    ) -> Result<T> {
        let raw = self
            .call(ops.0, Method::POST, collection.into(), Query::new(), Some(body))
            .await?;
        let mut v: Value = decode(ops.0, &raw, key)?;
        if !self.tag_creation && !tags.is_empty() {
            let id = v
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if let Err(e) = self.set_tags(ops.1, collection, &id, tags).await {
                if let Err(d) = self.delete(ops.0, collection, &id).await {
                    tracing::warn!(id = %id, error = %d, "cleanup of an untagged resource failed");
                }
                return Err(e);
            }
            v["tags"] = json!(tags);
        }
        serde_json::from_value(v).map_err(|e| Error::Decode {
            op: ops.0,
            message: e.to_string(),
        })
    }
}

/// One service's requests on a session: the timeout, the observer, endpoint re-discovery.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) session: AsyncOpenStack,
    service: ServiceType,
    pub(crate) request_timeout: Duration,
    observer: Arc<dyn RequestObserver>,
    pub(crate) rediscoveries: Arc<AtomicU64>,
}

impl Transport {
    pub(crate) fn new(
        session: AsyncOpenStack,
        service: ServiceType,
        request_timeout: Duration,
        observer: Arc<dyn RequestObserver>,
    ) -> Self {
        Transport {
            session,
            service,
            request_timeout,
            observer,
            rediscoveries: Arc::new(AtomicU64::new(0)),
        }
    }

    /// One observed request; non-2xx answers become errors.
    pub(crate) async fn call(
        &self,
        op: &'static str,
        method: Method,
        path: String,
        query: Query,
        body: Option<Value>,
    ) -> Result<Bytes> {
        self.call_with_headers(op, method, path, query, body, None).await
    }

    /// [`call`](Self::call) with extra request headers.
    pub(crate) async fn call_with_headers(
        &self,
        op: &'static str,
        method: Method,
        path: String,
        query: Query,
        body: Option<Value>,
        headers: Option<http::HeaderMap>,
    ) -> Result<Bytes> {
        let req = self.request(method, path, query, body, headers);
        self.send(op, &req, self.request_timeout).await
    }

    /// [`call`](Self::call) for a bulk request of `items` items, under
    /// [`bulk_timeout`]`(request_timeout, items)`.
    pub(crate) async fn call_bulk(
        &self,
        op: &'static str,
        method: Method,
        path: String,
        body: Value,
        items: usize,
    ) -> Result<Bytes> {
        let req = self.request(method, path, Query::new(), Some(body), None);
        self.send(op, &req, bulk_timeout(self.request_timeout, items))
            .await
    }

    fn request(
        &self,
        method: Method,
        path: String,
        query: Query,
        body: Option<Value>,
        headers: Option<http::HeaderMap>,
    ) -> Request {
        Request {
            service: self.service.clone(),
            method,
            path,
            query,
            body: body.map(|b| b.to_string().into_bytes()),
            headers,
        }
    }

    async fn send(&self, op: &'static str, req: &Request, timeout: Duration) -> Result<Bytes> {
        let send = send(&self.session, timeout, &self.rediscoveries, op, req);
        observed(self.observer.as_ref(), op, send).await
    }
}

/// The timeout of one bulk request of `items` items: `request` (`[neutron] timeout`) plus a
/// tenth of it for every item after the first (30 s: 57 s for a pool batch of 10 ports, 327 s
/// for 100 security-group rules).
///
/// Neutron creates a bulk's items one after the other in the request (ML2/OVN: one OVN
/// transaction each, ~0.4 s a port on the busy sandbox), so its answer comes in a time
/// proportional to the batch. A flat timeout abandoned healthy requests: the controller gave
/// up at 30 s on pool batches Neutron was still creating, and the pods waiting for them
/// waited for a retry and the adoption of the ports made anyway instead. Upstream had no
/// client-side timeout at all (keystoneauth's default).
pub fn bulk_timeout(request: Duration, items: usize) -> Duration {
    let extra = u32::try_from(items.saturating_sub(1)).unwrap_or(u32::MAX);
    request.saturating_add((request / 10).saturating_mul(extra))
}

/// Whether a 404 body comes from the service's API (its own error document) rather than from a
/// URL outside it (a versionless path after the SDK forgot the discovered endpoint).
fn is_api_404(service: &ServiceType, body: &[u8]) -> bool {
    match service {
        ServiceType::Network => NeutronFault::parse(body).is_neutron,
        // Octavia answers `{"faultcode": ..., "faultstring": ...}`.
        _ => serde_json::from_slice::<Value>(body)
            .map(|v| v.get("faultstring").is_some())
            .unwrap_or(false),
    }
}

/// Sends `req` on `session` under `timeout`; non-2xx answers become errors. A 404 from outside
/// the service's API makes the session re-discover the service endpoint once (counted in
/// `rediscoveries`) and retry.
async fn send(
    session: &AsyncOpenStack,
    timeout: Duration,
    rediscoveries: &AtomicU64,
    op: &'static str,
    req: &Request,
) -> Result<Bytes> {
    let mut rediscovered = false;
    loop {
        // `skip_error_check`: we map error statuses ourselves (error documents, 404 retry).
        let endpoint = raw(req.clone()).skip_error_check(true);
        let fut = QueryAsync::<http::Response<Bytes>, _>::query_async(&endpoint, session);
        let rsp = match tokio::time::timeout(timeout, fut).await {
            Err(_) => return Err(Error::Timeout { op, after: timeout }),
            Ok(Err(e)) => {
                return Err(Error::Transport {
                    op,
                    source: Box::new(e),
                });
            }
            Ok(Ok(rsp)) => rsp,
        };
        let status = rsp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(rsp.into_body());
        }
        if status == 404 && !rediscovered && !is_api_404(&req.service, rsp.body()) {
            rediscovered = true;
            rediscoveries.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                operation = op,
                service = %req.service,
                "404 outside the service's API; re-discovering its endpoint"
            );
            match tokio::time::timeout(timeout, session.discover_service_endpoint(&req.service)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "re-discovery failed"),
                Err(_) => return Err(Error::Timeout { op, after: timeout }),
            }
            continue;
        }
        return Err(Error::from_status(op, status, rsp.body()));
    }
}

fn created_ids(body: &Bytes) -> Vec<String> {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("ports").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|p| p.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(seg("3e5f2a1b-7c8d"), "3e5f2a1b-7c8d");
        assert_eq!(seg("../x y"), "..%2Fx%20y");
    }

    #[test]
    fn a_bulk_request_gets_a_tenth_of_the_timeout_more_per_further_item() {
        let t = Duration::from_secs(30);
        assert_eq!(bulk_timeout(t, 0), t);
        assert_eq!(bulk_timeout(t, 1), t);
        assert_eq!(bulk_timeout(t, 10), Duration::from_secs(57));
        assert_eq!(bulk_timeout(t, 100), Duration::from_secs(327));
        assert_eq!(
            bulk_timeout(Duration::from_millis(500), 3),
            Duration::from_millis(600)
        );
        // Never overflows, whatever the batch.
        assert_eq!(bulk_timeout(Duration::MAX, usize::MAX), Duration::MAX);
    }

    #[test]
    fn created_ids_tolerates_garbage() {
        assert!(created_ids(&Bytes::from_static(b"nope")).is_empty());
        let ids = created_ids(&Bytes::from_static(br#"{"ports":[{"id":"a"},{"id":"b"}]}"#));
        assert_eq!(ids, ["a", "b"]);
    }

    #[test]
    fn a_400_naming_the_tags_attribute_switches_to_tagging_after_create() {
        let refused = Error::BadRequest {
            op: ops::PORT_BULK_CREATE,
            status: 400,
            kind: "HTTPBadRequest".into(),
            message: "Unrecognized attribute(s) 'tags'".into(),
        };
        assert!(rejects_tags(&refused));
        let other = Error::BadRequest {
            op: ops::PORT_BULK_CREATE,
            status: 400,
            kind: "HTTPBadRequest".into(),
            message: "Invalid input for security_groups".into(),
        };
        assert!(!rejects_tags(&other));
        for t in [PortTagging::Probe, PortTagging::InBody, PortTagging::AfterCreate] {
            assert_eq!(PortTagging::from_u8(t as u8), t);
        }
    }
}
