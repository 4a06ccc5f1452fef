//! The kubelet's own HTTP endpoint, which the API server dials for `pods/{name}/exec`:
//! `GET|POST /exec/{namespace}/{pod}/{container}` upgraded to WebSocket ([`super::exec`]).
//! Bound on loopback of the machine's root namespace (every emulated node and the API server
//! share the machine; the port goes into the Node's `daemonEndpoints`). Like a kubelet reached
//! only through the API server, it trusts its caller: the API server has checked the client.

use std::{net::Ipv4Addr, sync::Arc};

use axum::{
    Router,
    extract::{Path, RawQuery, State, WebSocketUpgrade, ws::rejection::WebSocketUpgradeRejection},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::json;
use tokio::{net::TcpListener, task::JoinHandle};
use tracing::{info, warn};

use super::{Ctx, Error, exec};

/// Binds the endpoint on `127.0.0.1:<port>` (0: any free port); returns the port.
pub async fn bind(port: u16) -> Result<(TcpListener, u16), Error> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
        .await
        .map_err(|source| Error::Kubelet { source })?;
    let port = l.local_addr().map_err(|source| Error::Kubelet { source })?.port();
    Ok((l, port))
}

/// Serves until the task is aborted.
pub(crate) fn serve(listener: TcpListener, ctx: Arc<Ctx>) -> JoinHandle<()> {
    let app = Router::new()
        .route(
            "/exec/{namespace}/{pod}/{container}",
            get(exec_handler).post(exec_handler),
        )
        .route(
            "/containerLogs/{namespace}/{pod}/{container}",
            get(super::logs::handler),
        )
        .with_state(ctx);
    tokio::spawn(async move {
        if let Ok(a) = listener.local_addr() {
            info!(addr = %a, "kubelet endpoint serving exec");
        }
        if let Err(e) = axum::serve(listener, app).await {
            warn!(error = %e, "kubelet endpoint stopped");
        }
    })
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code.as_u16(),
    });
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn exec_handler(
    State(ctx): State<Arc<Ctx>>,
    Path((namespace, pod, container)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let req = match exec::ExecRequest::parse(query.as_deref().unwrap_or("")) {
        Ok(r) => r,
        Err(m) => return status(StatusCode::BAD_REQUEST, "BadRequest", m),
    };
    // The running sandbox of the pod (the newest, if a restart left an older record).
    let rec = {
        let st = ctx.state.lock().unwrap_or_else(|p| p.into_inner());
        st.sandboxes
            .values()
            .filter(|r| r.namespace == namespace && r.name == pod && r.started.is_some())
            .max_by(|a, b| a.started.cmp(&b.started))
            .cloned()
    };
    let Some(rec) = rec else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("container {container:?} of pod {namespace}/{pod} is not running on this node"),
        );
    };
    let no_ws = |what: &str| {
        let want = exec::PROTOCOLS.join(", ");
        status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("{what}; exec is served over WebSocket with one of {want} (no SPDY)"),
        )
    };
    let Ok(ws) = ws else {
        return no_ws("the request asks for no WebSocket upgrade");
    };
    let ws = ws.protocols(exec::PROTOCOLS);
    if ws.selected_protocol().is_none() {
        return no_ws("none of the offered WebSocket sub-protocols is served");
    }
    let path = ctx.netns_path(&rec.netns);
    let who = format!("{namespace}/{pod}");
    ws.on_upgrade(move |socket| exec::run(socket, path, req, who))
}
