//! Octavia's v2 API over the fake's state, as kuryr-rs calls it: the version document, load
//! balancers (fully populated create, cascade delete, the status tree, lists filtered by name,
//! project, VIP and tags), listeners, pools, health monitors and batch member updates. Each
//! request is priced on Octavia's API workers; a write answers at once with its load balancer
//! `PENDING_*`, and the model's provisioning turns it `ACTIVE` later ([`Cloud::provision`]) —
//! a write meanwhile is refused with 409 as Octavia refuses it. Errors are Octavia's
//! (`{"faultcode", "faultstring", "debuginfo"}`).
//!
//! Lists are paged as Octavia pages them: at most `[api_settings] pagination_max_limit` (1 000
//! by default) entries an answer, then a `<collection>_links` `next` link with a `marker`. A
//! client that reads only the first page sees only the first 1 000 load balancers.
//!
//! Not modelled: VIP ports in Neutron (the VIP address is the requested one; its port ID is the
//! fake's), operating statuses (members `NO_MONITOR`), amphorae.

// Handlers answer `Result<Response, Response>` (axum's usual shape).
#![allow(clippy::result_large_err)]

use std::{future::Future, sync::Arc};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, put},
};
use kuryr_openstack::{
    Error,
    octavia::{
        FullListener, HealthMonitorCreate, HealthMonitorSettings, LbCreate, LbFilter, ListenerCreate,
        MemberSpec, Octavia, PoolCreate,
    },
    ops,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{Cloud, Desk};

type Q = Query<Vec<(String, String)>>;
type Answer = Result<Response, Response>;

const V2: &str = "/load-balancer/v2";
/// Octavia's `[api_settings] pagination_max_limit` default.
pub const PAGE_MAX: usize = 1000;
/// The API version the model speaks.
pub const VERSION: &str = "v2.26";

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    let r = |p: &str| format!("{V2}/lbaas/{p}");
    Router::new()
        .route("/load-balancer", get(versions))
        .route("/load-balancer/", get(versions))
        .route(&r("loadbalancers"), get(list_lbs).post(create_lb))
        .route(&r("loadbalancers/{id}"), get(get_lb).delete(delete_lb))
        .route(&r("loadbalancers/{id}/status"), get(status_tree))
        .route(&r("listeners"), get(list_listeners).post(create_listener))
        .route(&r("listeners/{id}"), put(update_listener).delete(delete_listener))
        .route(&r("pools"), get(list_pools).post(create_pool))
        .route(&r("pools/{id}"), put(update_pool).delete(delete_pool))
        .route(&r("pools/{id}/members"), put(replace_members))
        .route(&r("healthmonitors"), axum::routing::post(create_hm))
        .route(&r("healthmonitors/{id}"), get(get_hm).delete(delete_hm))
}

/// An Octavia error answer.
pub fn fault(status: StatusCode, message: &str) -> Response {
    let code = if status.is_server_error() {
        "Server"
    } else {
        "Client"
    };
    (
        status,
        Json(json!({"faultcode": code, "faultstring": message, "debuginfo": null})),
    )
        .into_response()
}

fn error_answer(e: Error) -> Response {
    let msg = e.to_string();
    match e {
        Error::NotFound { message, .. } => fault(StatusCode::NOT_FOUND, &message),
        Error::Conflict { message, .. } => fault(StatusCode::CONFLICT, &message),
        Error::BadRequest { status, message, .. } => fault(
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
            &message,
        ),
        _ => fault(StatusCode::SERVICE_UNAVAILABLE, &msg),
    }
}

fn bad(message: String) -> Response {
    fault(StatusCode::BAD_REQUEST, &message)
}

impl Cloud {
    /// Runs `call` as the model prices Octavia's `op` on its API workers.
    async fn octavia_work<T, Fut>(
        &self,
        op: &'static str,
        call: Fut,
        listed: impl Fn(&T) -> usize,
    ) -> Result<T, Response>
    where
        Fut: Future<Output = kuryr_openstack::Result<T>>,
    {
        match self.priced(Desk::Octavia, op, 0, 1.0, call, listed).await {
            Some(r) => r.map_err(error_answer),
            None => Err(fault(StatusCode::SERVICE_UNAVAILABLE, "stopping")),
        }
    }
}

fn ok<T: Serialize>(status: StatusCode, key: &str, v: T) -> Response {
    (status, Json(json!({ key: v }))).into_response()
}

/// The object under `key` of a JSON body.
fn object<'a>(body: &'a Value, key: &str) -> Result<&'a serde_json::Map<String, Value>, Response> {
    body.get(key)
        .and_then(Value::as_object)
        .ok_or_else(|| bad(format!("Invalid input: the body has no '{key}' object")))
}

fn parse(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body).map_err(|e| bad(format!("Invalid input: the body is not JSON: {e}")))
}

fn text(m: &serde_json::Map<String, Value>, key: &str) -> Result<String, Response> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(v) => Err(bad(format!(
            "Invalid input for field/attribute {key}. Value: {v}. Value should be string"
        ))),
    }
}

fn required(m: &serde_json::Map<String, Value>, key: &str) -> Result<String, Response> {
    let v = text(m, key)?;
    if v.is_empty() {
        return Err(bad(format!(
            "Invalid input for field/attribute {key}. Mandatory field missing."
        )));
    }
    Ok(v)
}

fn int(m: &serde_json::Map<String, Value>, key: &str) -> Result<Option<i64>, Response> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            bad(format!(
                "Invalid input for field/attribute {key}. Value: {v}. Value should be integer"
            ))
        }),
    }
}

fn port_of(m: &serde_json::Map<String, Value>, key: &str) -> Result<i32, Response> {
    int(m, key)?
        .and_then(|p| i32::try_from(p).ok())
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| {
            bad(format!(
                "Invalid input for field/attribute {key}. Value should be a port in 1-65535"
            ))
        })
}

fn strings(m: &serde_json::Map<String, Value>, key: &str) -> Result<Option<Vec<String>>, Response> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| {
                bad(format!(
                    "Invalid input for field/attribute {key}: a list of strings expected"
                ))
            }),
        Some(v) => Err(bad(format!(
            "Invalid input for field/attribute {key}. Value: {v}. Value should be a list"
        ))),
    }
}

fn source_ip(m: &serde_json::Map<String, Value>) -> bool {
    m.get("session_persistence")
        .and_then(|s| s.get("type"))
        .and_then(Value::as_str)
        == Some("SOURCE_IP")
}

fn listener_create(m: &serde_json::Map<String, Value>) -> Result<ListenerCreate, Response> {
    Ok(ListenerCreate {
        loadbalancer_id: text(m, "loadbalancer_id")?,
        name: text(m, "name")?,
        protocol: required(m, "protocol")?,
        protocol_port: port_of(m, "protocol_port")?,
        timeout_client_data: int(m, "timeout_client_data")?,
        timeout_member_data: int(m, "timeout_member_data")?,
        allowed_cidrs: strings(m, "allowed_cidrs")?,
        tags: strings(m, "tags")?.unwrap_or_default(),
    })
}

fn pool_create(m: &serde_json::Map<String, Value>) -> Result<PoolCreate, Response> {
    Ok(PoolCreate {
        listener_id: text(m, "listener_id")?,
        name: text(m, "name")?,
        protocol: required(m, "protocol")?,
        lb_algorithm: required(m, "lb_algorithm")?,
        source_ip_persistence: source_ip(m),
        tags: strings(m, "tags")?.unwrap_or_default(),
    })
}

fn member(v: &Value) -> Result<MemberSpec, Response> {
    let m = v
        .as_object()
        .ok_or_else(|| bad(format!("Invalid input: a member must be an object, not {v}")))?;
    let subnet = text(m, "subnet_id")?;
    Ok(MemberSpec {
        address: required(m, "address")?,
        protocol_port: port_of(m, "protocol_port")?,
        name: text(m, "name")?,
        subnet_id: (!subnet.is_empty()).then_some(subnet),
    })
}

fn members(v: Option<&Value>) -> Result<Vec<MemberSpec>, Response> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a.iter().map(member).collect(),
        Some(v) => Err(bad(format!(
            "Invalid input for field/attribute members. Value: {v}. Value should be a list"
        ))),
    }
}

fn lb_create(m: &serde_json::Map<String, Value>) -> Result<LbCreate, Response> {
    let mut listeners = Vec::new();
    for l in m.get("listeners").and_then(Value::as_array).into_iter().flatten() {
        let lm = l
            .as_object()
            .ok_or_else(|| bad("Invalid input: a listener must be an object".into()))?;
        let listener = listener_create(lm)?;
        let (pool, ms) = match lm.get("default_pool").and_then(Value::as_object) {
            Some(pm) => (pool_create(pm)?, members(pm.get("members"))?),
            None => (PoolCreate::default(), Vec::new()),
        };
        listeners.push(FullListener {
            listener,
            pool,
            members: ms,
        });
    }
    let opt = |k: &str| text(m, k).map(|s| (!s.is_empty()).then_some(s));
    Ok(LbCreate {
        name: text(m, "name")?,
        description: text(m, "description")?,
        project_id: text(m, "project_id")?,
        vip_subnet_id: required(m, "vip_subnet_id")?,
        vip_address: opt("vip_address")?,
        provider: opt("provider")?,
        tags: strings(m, "tags")?.unwrap_or_default(),
        listeners,
    })
}

/// One page of `items` (by ID) as Octavia answers a list: `limit` capped at [`PAGE_MAX`],
/// `marker` the last ID of the previous page, a `next` link when more remain.
fn page<T: Serialize>(c: &Cloud, collection: &str, items: Vec<T>, q: &[(String, String)]) -> Response {
    let mut vals: Vec<Value> = items
        .into_iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect();
    let limit = q
        .iter()
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .map_or(PAGE_MAX, |l| l.min(PAGE_MAX));
    let mut body = json!({});
    if let Some(next) = crate::paginate(&mut vals, q, limit) {
        body[format!("{collection}_links")] = json!([{"rel": "next",
            "href": format!("{}{V2}/lbaas/{collection}?{next}", c.base())}]);
    }
    body[collection] = Value::Array(vals);
    Json(body).into_response()
}

async fn versions(State(c): State<Arc<Cloud>>) -> Json<Value> {
    let href = format!("{}{V2}", c.base());
    Json(json!({"versions": [
        {"id": "v2.0", "status": "SUPPORTED", "updated": "2016-12-11T00:00:00Z",
         "links": [{"href": href, "rel": "self"}]},
        {"id": VERSION, "status": "CURRENT", "updated": "2023-05-08T00:00:00Z",
         "links": [{"href": href, "rel": "self"}]},
    ]}))
}

async fn list_lbs(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let filter = LbFilter {
        name: get("name"),
        project_id: get("project_id"),
        vip_address: get("vip_address"),
        tags: get("tags")
            .map(|t| t.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
    };
    let lbs = c
        .octavia_work(ops::LB_LIST, c.octavia.list_load_balancers(&filter), Vec::len)
        .await?;
    Ok(page(&c, "loadbalancers", lbs, &q))
}

async fn get_lb(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let lb = c
        .octavia_work(ops::LB_GET, c.octavia.get_load_balancer(&id), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "loadbalancer", lb))
}

async fn create_lb(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let v = parse(&body)?;
    let req = lb_create(object(&v, "loadbalancer")?)?;
    let items = req.listeners.len() + req.listeners.iter().map(|l| l.members.len()).sum::<usize>();
    let lb = c
        .octavia_work(ops::LB_CREATE, c.octavia.create_load_balancer(&req), |_| 0)
        .await?;
    c.provision(ops::LB_CREATE, Some(lb.id.clone()), items);
    Ok(ok(StatusCode::CREATED, "loadbalancer", lb))
}

async fn delete_lb(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let known = c.octavia.lb_of(&id).is_some();
    c.octavia_work(ops::LB_DELETE, c.octavia.delete_load_balancer(&id), |_| 0)
        .await?;
    if known {
        c.provision(ops::LB_DELETE, None, 0);
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        // Octavia answers 404 for an unknown load balancer (the client takes it as gone).
        Err(fault(
            StatusCode::NOT_FOUND,
            &format!("Load Balancer {id} not found."),
        ))
    }
}

async fn status_tree(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let tree = c
        .octavia_work(ops::LB_STATUS, c.octavia.status_tree(&id), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "statuses", json!({ "loadbalancer": tree })))
}

fn lb_query(q: &[(String, String)]) -> Option<String> {
    q.iter()
        .find(|(k, _)| k == "loadbalancer_id")
        .map(|(_, v)| v.clone())
}

async fn list_listeners(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let Some(lb) = lb_query(&q) else {
        return Err(bad(
            "the model serves listener lists by loadbalancer_id only".into()
        ));
    };
    let ls = c
        .octavia_work(ops::LISTENER_LIST, c.octavia.list_listeners(&lb), Vec::len)
        .await?;
    Ok(page(&c, "listeners", ls, &q))
}

async fn list_pools(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let Some(lb) = lb_query(&q) else {
        return Err(bad("the model serves pool lists by loadbalancer_id only".into()));
    };
    let ps = c
        .octavia_work(ops::POOL_LIST, c.octavia.list_pools(&lb), Vec::len)
        .await?;
    Ok(page(&c, "pools", ps, &q))
}

/// Runs write `op` on the load balancer that holds `target` (a listener, pool or health
/// monitor, or the load balancer itself), then starts its provisioning.
async fn write<T, Fut>(
    c: &Arc<Cloud>,
    op: &'static str,
    target: &str,
    items: usize,
    call: Fut,
) -> Result<T, Response>
where
    Fut: Future<Output = kuryr_openstack::Result<T>>,
{
    let lb = c.octavia.lb_of(target);
    let r = c.octavia_work(op, call, |_| 0).await?;
    c.provision(op, lb, items);
    Ok(r)
}

async fn create_listener(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let v = parse(&body)?;
    let req = listener_create(object(&v, "listener")?)?;
    let id = write(
        &c,
        ops::LISTENER_CREATE,
        &req.loadbalancer_id,
        1,
        c.octavia.create_listener(&req),
    )
    .await?;
    Ok(ok(
        StatusCode::CREATED,
        "listener",
        json!({"id": id, "name": req.name, "protocol": req.protocol, "protocol_port": req.protocol_port,
               "loadbalancers": [{"id": req.loadbalancer_id}], "provisioning_status": "PENDING_CREATE"}),
    ))
}

async fn update_listener(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let v = parse(&body)?;
    let m = object(&v, "listener")?;
    if m.keys().any(|k| k != "allowed_cidrs") {
        return Err(bad("the model updates a listener's allowed_cidrs only".into()));
    }
    let cidrs = strings(m, "allowed_cidrs")?;
    write(
        &c,
        ops::LISTENER_UPDATE,
        &id,
        1,
        c.octavia.update_listener_allowed_cidrs(&id, cidrs.as_deref()),
    )
    .await?;
    Ok(ok(
        StatusCode::OK,
        "listener",
        json!({"id": id, "allowed_cidrs": cidrs}),
    ))
}

async fn delete_listener(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    write(&c, ops::LISTENER_DELETE, &id, 1, c.octavia.delete_listener(&id)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn create_pool(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let v = parse(&body)?;
    let req = pool_create(object(&v, "pool")?)?;
    let id = write(
        &c,
        ops::POOL_CREATE,
        &req.listener_id,
        1,
        c.octavia.create_pool(&req),
    )
    .await?;
    Ok(ok(
        StatusCode::CREATED,
        "pool",
        json!({"id": id, "name": req.name, "protocol": req.protocol, "lb_algorithm": req.lb_algorithm,
               "listeners": [{"id": req.listener_id}], "provisioning_status": "PENDING_CREATE"}),
    ))
}

async fn update_pool(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let v = parse(&body)?;
    let m = object(&v, "pool")?;
    if m.keys().any(|k| k != "session_persistence") {
        return Err(bad("the model updates a pool's session_persistence only".into()));
    }
    let on = source_ip(m);
    write(
        &c,
        ops::POOL_UPDATE,
        &id,
        1,
        c.octavia.update_pool_persistence(&id, on),
    )
    .await?;
    Ok(ok(StatusCode::OK, "pool", json!({"id": id})))
}

async fn delete_pool(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    write(&c, ops::POOL_DELETE, &id, 1, c.octavia.delete_pool(&id)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn replace_members(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let v = parse(&body)?;
    let Some(list) = v.get("members") else {
        return Err(bad("Invalid input: the body has no 'members' list".into()));
    };
    let ms = members(Some(list))?;
    write(
        &c,
        ops::MEMBER_BATCH_UPDATE,
        &id,
        ms.len(),
        c.octavia.replace_members(&id, &ms),
    )
    .await?;
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn create_hm(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let v = parse(&body)?;
    let m = object(&v, "healthmonitor")?;
    let req = HealthMonitorCreate {
        pool_id: required(m, "pool_id")?,
        name: text(m, "name")?,
        settings: HealthMonitorSettings {
            type_: required(m, "type")?,
            delay: int(m, "delay")?.unwrap_or(0),
            timeout: int(m, "timeout")?.unwrap_or(0),
            max_retries: int(m, "max_retries")?.unwrap_or(0),
            max_retries_down: int(m, "max_retries_down")?.unwrap_or(3),
        },
        tags: strings(m, "tags")?.unwrap_or_default(),
    };
    let id = write(
        &c,
        ops::HM_CREATE,
        &req.pool_id,
        1,
        c.octavia.create_health_monitor(&req),
    )
    .await?;
    Ok(ok(
        StatusCode::CREATED,
        "healthmonitor",
        json!({"id": id, "pool_id": req.pool_id}),
    ))
}

async fn get_hm(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let s = c
        .octavia_work(ops::HM_GET, c.octavia.get_health_monitor(&id), |_| 0)
        .await?;
    let mut v = serde_json::to_value(s).unwrap_or_default();
    v["id"] = json!(id);
    Ok(ok(StatusCode::OK, "healthmonitor", v))
}

async fn delete_hm(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    write(&c, ops::HM_DELETE, &id, 1, c.octavia.delete_health_monitor(&id)).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
