//! Neutron's v2.0 API over the fake's state, each request priced by the model: it queues for a
//! worker, holds it for the operation's fixed cost (plus its items' for writes), runs on the
//! state, then holds it for the listed entries' cost (lists). Errors are Neutron's
//! (`{"NeutronError": {"type", "message", "detail"}}` with its status codes), so the real
//! client's error handling runs as against the sandbox.
//!
//! Not served yet (404 `HTTPNotFound`): floating IPs, network and subnet tags after creation
//! (the model advertises `tag-creation`, so clients put tags in the create body).

// Handlers answer `Result<Response, Response>` (axum's usual shape): the error is an answer, not
// an error travelling far, so its size does not matter.
#![allow(clippy::result_large_err)]

use std::{future::Future, sync::Arc};

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, Query, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, put},
};
use kuryr_openstack::{Error, Neutron, ops};
use serde::Serialize;
use serde_json::{Value, json};

use crate::{Cloud, Desk, lock, wire};

type Q = Query<Vec<(String, String)>>;
type Answer = Result<Response, Response>;

const V2: &str = "/network/v2.0";

pub(crate) fn routes() -> Router<Arc<Cloud>> {
    let r = |p: &str| format!("{V2}/{p}");
    Router::new()
        .route("/network", get(versions))
        .route("/network/", get(versions))
        .route(&r("extensions"), get(extensions))
        .route(&r("ports"), get(list_ports).post(create_ports))
        .route(
            &r("ports/{id}"),
            get(get_port).put(update_port).delete(delete_port),
        )
        .route(&r("ports/{id}/tags"), put(set_port_tags))
        .route(&r("networks"), get(list_networks).post(create_network))
        .route(&r("networks/{id}"), get(get_network).delete(delete_network))
        .route(&r("subnets"), get(list_subnets).post(create_subnet))
        .route(&r("subnets/{id}"), get(get_subnet).delete(delete_subnet))
        .route(&r("subnetpools/{id}"), get(get_subnet_pool))
        .route(&r("quotas/{project}/details"), get(quota_details))
        .route(&r("routers/{id}/add_router_interface"), put(add_router_interface))
        .route(
            &r("routers/{id}/remove_router_interface"),
            put(remove_router_interface),
        )
        .route(&r("security-groups"), get(list_sgs).post(create_sg))
        .route(&r("security-groups/{id}"), axum::routing::delete(delete_sg))
        .route(
            &r("security-group-rules"),
            get(list_sg_rules).post(create_sg_rules),
        )
        .route(
            &r("security-group-rules/{id}"),
            axum::routing::delete(delete_sg_rule),
        )
        .route(&r("trunks"), get(list_trunks).post(create_trunk))
        .route(&r("trunks/{id}"), get(get_trunk).delete(delete_trunk))
        .route(&r("trunks/{id}/add_subports"), put(add_subports))
        .route(&r("trunks/{id}/remove_subports"), put(remove_subports))
}

/// A Neutron error answer.
pub fn fault(status: StatusCode, kind: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"NeutronError": {"type": kind, "message": message, "detail": ""}})),
    )
        .into_response()
}

fn bad(e: wire::WireError) -> Response {
    fault(StatusCode::BAD_REQUEST, "HTTPBadRequest", &e.0)
}

/// The answer Neutron gives for what the fake returned.
fn error_answer(e: Error) -> Response {
    let msg = e.to_string();
    match e {
        Error::NotFound { kind, message, .. } => fault(StatusCode::NOT_FOUND, &kind, &message),
        Error::Conflict { kind, message, .. } if kind == "RevisionNumberConstraintFailed" => {
            fault(StatusCode::PRECONDITION_FAILED, &kind, &message)
        }
        Error::Conflict { kind, message, .. } => fault(StatusCode::CONFLICT, &kind, &message),
        Error::OverQuota { message, .. } => fault(StatusCode::CONFLICT, "OverQuota", &message),
        Error::BadRequest {
            status,
            kind,
            message,
            ..
        } => fault(
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
            &kind,
            &message,
        ),
        Error::Unauthorized { status, message, .. } => fault(
            StatusCode::from_u16(status).unwrap_or(StatusCode::UNAUTHORIZED),
            "NotAuthorized",
            &message,
        ),
        Error::ServerError { status, message, .. } => fault(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            "HTTPInternalServerError",
            &message,
        ),
        _ => fault(StatusCode::SERVICE_UNAVAILABLE, "HTTPServiceUnavailable", &msg),
    }
}

fn body_json(body: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(body).map_err(|e| {
        fault(
            StatusCode::BAD_REQUEST,
            "HTTPBadRequest",
            &format!("The request body is not JSON: {e}"),
        )
    })
}

fn ok<T: Serialize>(status: StatusCode, key: &str, v: T) -> Response {
    (status, Json(json!({ key: v }))).into_response()
}

impl Cloud {
    /// Runs `call` as the model prices Neutron's `op` ([`Cloud::priced`] on Neutron's workers),
    /// answering Neutron's errors.
    async fn work<T, Fut>(
        &self,
        op: &'static str,
        before: usize,
        weight: f64,
        call: Fut,
        after: impl Fn(&T) -> usize,
    ) -> Result<T, Response>
    where
        Fut: Future<Output = kuryr_openstack::Result<T>>,
    {
        match self.priced(Desk::Neutron, op, before, weight, call, after).await {
            Some(r) => r.map_err(error_answer),
            None => Err(fault(
                StatusCode::SERVICE_UNAVAILABLE,
                "HTTPServiceUnavailable",
                "stopping",
            )),
        }
    }
}

/// `limit`/`marker` as Neutron pages (by ID order here), with `<collection>_links`; `fields`
/// keeps only those keys.
fn page<T: Serialize>(c: &Cloud, collection: &str, items: Vec<T>, q: &[(String, String)]) -> Response {
    let mut vals: Vec<Value> = items
        .into_iter()
        .filter_map(|i| serde_json::to_value(i).ok())
        .collect();
    let fields: Vec<&String> = q.iter().filter(|(k, _)| k == "fields").map(|(_, v)| v).collect();
    let limit = q
        .iter()
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .filter(|l| *l > 0);
    let mut links = Vec::new();
    if let Some(next) = limit.and_then(|l| crate::paginate(&mut vals, q, l)) {
        links.push(json!({"rel": "next",
            "href": format!("{}{V2}/{collection}?{next}", c.base())}));
    }
    if !fields.is_empty() {
        for v in &mut vals {
            if let Some(m) = v.as_object_mut() {
                m.retain(|k, _| fields.contains(&k));
            }
        }
    }
    let key = collection.replace('-', "_");
    let mut body = json!({ key.clone(): vals });
    if !links.is_empty() {
        body[format!("{key}_links")] = Value::Array(links);
    }
    Json(body).into_response()
}

async fn versions(State(c): State<Arc<Cloud>>) -> Json<Value> {
    Json(json!({"versions": [{"id": "v2.0", "status": "CURRENT",
        "links": [{"href": format!("{}{V2}/", c.base()), "rel": "self"}]}]}))
}

async fn extensions(State(c): State<Arc<Cloud>>) -> Answer {
    let mut exts = c
        .work(ops::EXTENSION_LIST, 0, 1.0, c.neutron.extensions(), |_| 0)
        .await?;
    // The model takes tags in every create body (the fake keeps them), as Neutron with
    // `tag-creation` does.
    exts.push("tag-creation".into());
    let list: Vec<Value> = exts
        .iter()
        .map(|a| json!({"alias": a, "name": a, "description": "", "updated": "2026-01-01T00:00:00-00:00", "links": []}))
        .collect();
    Ok(ok(StatusCode::OK, "extensions", list))
}

async fn list_ports(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let f = wire::port_filter(&q);
    let ports = c
        .work(ops::PORT_LIST, 0, 1.0, c.neutron.list_ports(&f), Vec::len)
        .await?;
    Ok(page(&c, "ports", ports, &q))
}

async fn get_port(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let p = c
        .work(ops::PORT_GET, 0, 1.0, c.neutron.get_port(&id), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "port", p))
}

async fn create_ports(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let v = body_json(&body)?;
    let (items, single) = match (v.get("ports"), v.get("port")) {
        (Some(Value::Array(a)), _) => (a.iter().collect::<Vec<_>>(), false),
        (_, Some(p)) => (vec![p], true),
        _ => {
            return Err(bad(wire::WireError(
                "Resource body required: no 'port' object or 'ports' list".into(),
            )));
        }
    };
    let reqs = items
        .into_iter()
        .map(wire::port_create)
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    // IPAM collisions: every other bulk on the same network in flight adds the model's share.
    let nets: std::collections::BTreeSet<String> = reqs.iter().map(|p| p.network_id.clone()).collect();
    let others = {
        let mut b = lock(&c.bulks);
        let mut most = 0;
        for n in &nets {
            let e = b.entry(n.clone()).or_default();
            most = most.max(*e);
            *e += 1;
        }
        most
    };
    let weight = 1.0 + c.model.ipam_collision * others as f64;
    let r = c
        .work(
            ops::PORT_BULK_CREATE,
            reqs.len(),
            weight,
            c.neutron.create_ports_bulk(&reqs),
            |_| 0,
        )
        .await;
    {
        let mut b = lock(&c.bulks);
        for n in &nets {
            if let Some(e) = b.get_mut(n) {
                *e = e.saturating_sub(1);
            }
        }
        b.retain(|_, n| *n > 0);
    }
    let mut ports = r?;
    if single {
        let p = ports.pop();
        return Ok(ok(StatusCode::CREATED, "port", p));
    }
    Ok(ok(StatusCode::CREATED, "ports", ports))
}

async fn update_port(
    State(c): State<Arc<Cloud>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let v = body_json(&body)?;
    let if_match = headers.get("if-match").and_then(|h| h.to_str().ok());
    let u = wire::port_update(&v, if_match).map_err(bad)?;
    let p = c
        .work(ops::PORT_UPDATE, 0, 1.0, c.neutron.update_port(&id, &u), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "port", p))
}

async fn delete_port(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    c.work(ops::PORT_DELETE, 0, 1.0, c.neutron.delete_port(&id), |_| 0)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn set_port_tags(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let tags = wire::tags_body(&body_json(&body)?).map_err(bad)?;
    c.work(
        ops::PORT_SET_TAGS,
        0,
        1.0,
        c.neutron.set_port_tags(&id, &tags),
        |_| 0,
    )
    .await?;
    Ok((StatusCode::OK, Json(json!({"tags": tags}))).into_response())
}

async fn list_networks(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let f = wire::resource_filter(&q);
    let v = c
        .work(ops::NETWORK_LIST, 0, 1.0, c.neutron.list_networks(&f), Vec::len)
        .await?;
    Ok(page(&c, "networks", v, &q))
}

async fn get_network(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let v = c
        .work(ops::NETWORK_GET, 0, 1.0, c.neutron.get_network(&id), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "network", v))
}

async fn create_network(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let n = wire::network_create(&body_json(&body)?).map_err(bad)?;
    let v = c
        .work(ops::NETWORK_CREATE, 0, 1.0, c.neutron.create_network(&n), |_| 0)
        .await?;
    Ok(ok(StatusCode::CREATED, "network", v))
}

async fn delete_network(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    c.work(ops::NETWORK_DELETE, 0, 1.0, c.neutron.delete_network(&id), |_| 0)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_subnets(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let f = wire::resource_filter(&q);
    let v = c
        .work(ops::SUBNET_LIST, 0, 1.0, c.neutron.list_subnets(&f), Vec::len)
        .await?;
    Ok(page(&c, "subnets", v, &q))
}

async fn get_subnet(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let v = c
        .work(ops::SUBNET_GET, 0, 1.0, c.neutron.get_subnet(&id), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "subnet", v))
}

async fn create_subnet(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let s = wire::subnet_create(&body_json(&body)?).map_err(bad)?;
    let v = c
        .work(ops::SUBNET_CREATE, 0, 1.0, c.neutron.create_subnet(&s), |_| 0)
        .await?;
    Ok(ok(StatusCode::CREATED, "subnet", v))
}

async fn delete_subnet(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    c.work(ops::SUBNET_DELETE, 0, 1.0, c.neutron.delete_subnet(&id), |_| 0)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn get_subnet_pool(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let v = c
        .work(ops::SUBNETPOOL_GET, 0, 1.0, c.neutron.get_subnet_pool(&id), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "subnetpool", v))
}

async fn quota_details(State(c): State<Arc<Cloud>>, Path(project): Path<String>) -> Answer {
    let v = c
        .work(
            ops::QUOTA_DETAILS,
            0,
            1.0,
            c.neutron.quota_details(&project),
            |_| 0,
        )
        .await?;
    Ok(ok(StatusCode::OK, "quota", v))
}

fn subnet_of(body: &Bytes) -> Result<String, Response> {
    body_json(body)?
        .get("subnet_id")
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or_else(|| {
            bad(wire::WireError(
                "Invalid input: no 'subnet_id' in the request body".into(),
            ))
        })
}

async fn add_router_interface(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let subnet = subnet_of(&body)?;
    let port = c
        .work(
            ops::ROUTER_ADD_INTERFACE,
            0,
            1.0,
            c.neutron.add_router_interface(&id, &subnet),
            |_| 0,
        )
        .await?;
    Ok(Json(json!({"id": id, "subnet_id": subnet, "port_id": port})).into_response())
}

async fn remove_router_interface(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let subnet = subnet_of(&body)?;
    c.work(
        ops::ROUTER_REMOVE_INTERFACE,
        0,
        1.0,
        c.neutron.remove_router_interface(&id, &subnet),
        |_| 0,
    )
    .await?;
    Ok(Json(json!({"id": id, "subnet_id": subnet})).into_response())
}

async fn list_sgs(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let f = wire::sg_filter(&q);
    let v = c
        .work(ops::SG_LIST, 0, 1.0, c.neutron.list_security_groups(&f), Vec::len)
        .await?;
    Ok(page(&c, "security-groups", v, &q))
}

async fn create_sg(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let g = wire::sg_create(&body_json(&body)?).map_err(bad)?;
    let v = c
        .work(ops::SG_CREATE, 0, 1.0, c.neutron.create_security_group(&g), |_| 0)
        .await?;
    Ok(ok(StatusCode::CREATED, "security_group", v))
}

async fn delete_sg(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    c.work(
        ops::SG_DELETE,
        0,
        1.0,
        c.neutron.delete_security_group(&id),
        |_| 0,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_sg_rules(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let f = wire::sg_rule_filter(&q);
    let v = c
        .work(
            ops::SG_RULE_LIST,
            0,
            1.0,
            c.neutron.list_security_group_rules(&f),
            Vec::len,
        )
        .await?;
    Ok(page(&c, "security-group-rules", v, &q))
}

async fn create_sg_rules(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let v = body_json(&body)?;
    let single = v.get("security_group_rule").is_some();
    let rules = wire::sg_rules_create(&v).map_err(bad)?;
    let mut made = c
        .work(
            ops::SG_RULE_BULK_CREATE,
            rules.len(),
            1.0,
            c.neutron.create_security_group_rules(&rules),
            |_| 0,
        )
        .await?;
    if single {
        return Ok(ok(StatusCode::CREATED, "security_group_rule", made.pop()));
    }
    Ok(ok(StatusCode::CREATED, "security_group_rules", made))
}

async fn delete_sg_rule(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    c.work(
        ops::SG_RULE_DELETE,
        0,
        1.0,
        c.neutron.delete_security_group_rule(&id),
        |_| 0,
    )
    .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_trunks(State(c): State<Arc<Cloud>>, Query(q): Q) -> Answer {
    let f = wire::resource_filter(&q);
    let v = c
        .work(ops::TRUNK_LIST, 0, 1.0, c.neutron.list_trunks(&f), Vec::len)
        .await?;
    Ok(page(&c, "trunks", v, &q))
}

async fn get_trunk(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    let v = c
        .work(ops::TRUNK_GET, 0, 1.0, c.neutron.get_trunk(&id), |_| 0)
        .await?;
    Ok(ok(StatusCode::OK, "trunk", v))
}

async fn create_trunk(State(c): State<Arc<Cloud>>, body: Bytes) -> Answer {
    let t = wire::trunk_create(&body_json(&body)?).map_err(bad)?;
    let v = c
        .work(
            ops::TRUNK_CREATE,
            t.sub_ports.len(),
            1.0,
            c.neutron.create_trunk(&t),
            |_| 0,
        )
        .await?;
    Ok(ok(StatusCode::CREATED, "trunk", v))
}

async fn delete_trunk(State(c): State<Arc<Cloud>>, Path(id): Path<String>) -> Answer {
    c.work(ops::TRUNK_DELETE, 0, 1.0, c.neutron.delete_trunk(&id), |_| 0)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn add_subports(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let subs = wire::subports(&body_json(&body)?).map_err(bad)?;
    let t = c
        .work(
            ops::TRUNK_ADD_SUBPORTS,
            subs.len(),
            1.0,
            c.neutron.add_subports(&id, &subs),
            |_| 0,
        )
        .await?;
    // Neutron answers a trunk action with the trunk itself, unwrapped.
    Ok(Json(t).into_response())
}

async fn remove_subports(State(c): State<Arc<Cloud>>, Path(id): Path<String>, body: Bytes) -> Answer {
    let ids = wire::subport_ids(&body_json(&body)?).map_err(bad)?;
    let t = c
        .work(
            ops::TRUNK_REMOVE_SUBPORTS,
            ids.len(),
            1.0,
            c.neutron.remove_subports(&id, &ids),
            |_| 0,
        )
        .await?;
    Ok(Json(t).into_response())
}
