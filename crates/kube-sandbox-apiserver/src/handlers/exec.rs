//! `pods/{name}/exec`: checks the pod (scheduled, running, container), then relays the request
//! to the kubelet of the pod's node and splices the two upgraded connections, as the real API
//! server's upgrade-aware proxy does. The kubelet terminates the WebSocket stream protocol
//! (`v5.channel.k8s.io`); this side never looks inside it.
//!
//! Every emulated node runs on this machine, so the kubelet is dialled on loopback at the port
//! its Node publishes in `status.daemonEndpoints.kubeletEndpoint.Port`.

use std::{net::Ipv4Addr, sync::Arc, time::Duration};

use axum::{body::Body, response::Response};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header, request::Parts};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tracing::{debug, warn};

use crate::{
    app::App,
    error::{ApiError, ApiResult},
};

/// How long dialling the kubelet and reading its answer may take.
const KUBELET_TIMEOUT: Duration = Duration::from_secs(10);

/// Hop-by-hop or credential headers not passed on to the kubelet.
const DROPPED: [header::HeaderName; 3] = [header::HOST, header::AUTHORIZATION, header::CONTENT_LENGTH];

/// Relays an exec request for pod `ns/name`.
pub async fn proxy(app: &Arc<App>, ns: &str, name: &str, mut parts: Parts) -> ApiResult<Response> {
    if parts.method != Method::GET && parts.method != Method::POST {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    let (pod, node) = app.store.read(|t| {
        let pod = t.get(&(String::new(), "pods".into()), ns, name).cloned();
        let node = pod
            .as_ref()
            .and_then(|p| p["spec"]["nodeName"].as_str())
            .and_then(|n| t.get(&(String::new(), "nodes".into()), "", n).cloned());
        (pod, node)
    });
    let Some(pod) = pod else {
        return Err(match app.registry.lookup("", "v1", "pods") {
            Some(info) => ApiError::not_found(&info, name),
            None => ApiError::not_found_path(),
        });
    };
    let query = parts.uri.query().unwrap_or("").to_string();
    let container = choose_container(&pod, &query)?;
    let node_name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    let node =
        node.ok_or_else(|| ApiError::bad_request(format!("pod {name} does not have a host assigned")))?;
    let port = kubelet_port(&node)
        .ok_or_else(|| ApiError::internal(format!("node {node_name:?} publishes no kubelet endpoint")))?;

    let uri = format!("/exec/{ns}/{name}/{container}?{query}");
    let mut out = http::Request::builder().method(parts.method.clone()).uri(&uri);
    for (k, v) in &parts.headers {
        if !DROPPED.contains(k) {
            out = out.header(k, v);
        }
    }
    let out = out
        .header(header::HOST, format!("127.0.0.1:{port}"))
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| ApiError::internal(format!("building the kubelet request: {e}")))?;
    let mut resp = tokio::time::timeout(KUBELET_TIMEOUT, send(port, out))
        .await
        .map_err(|_| {
            ApiError::internal(format!(
                "error dialing backend: kubelet of node {node_name:?} did not answer"
            ))
        })?
        .map_err(|e| ApiError::internal(format!("error dialing backend: {e}")))?;

    let status = resp.status();
    let headers = resp.headers().clone();
    if status != StatusCode::SWITCHING_PROTOCOLS {
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        return Ok(relay(status, &headers, Body::from(body)));
    }
    let Some(client_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(ApiError::bad_request(
            "unable to upgrade connection: the request did not ask for an upgrade",
        ));
    };
    let kubelet_upgrade = hyper::upgrade::on(&mut resp);
    let pod_ref = format!("{ns}/{name}");
    tokio::spawn(async move {
        let (client, kubelet) = match tokio::join!(client_upgrade, kubelet_upgrade) {
            (Ok(c), Ok(k)) => (c, k),
            (c, k) => {
                debug!(pod = %pod_ref, client_ok = c.is_ok(), kubelet_ok = k.is_ok(), "exec upgrade failed");
                return;
            }
        };
        let mut client = TokioIo::new(client);
        let mut kubelet = TokioIo::new(kubelet);
        if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut kubelet).await {
            debug!(pod = %pod_ref, error = %e, "exec stream ended with error");
        }
    });
    Ok(relay(status, &headers, Body::empty()))
}

/// Sends `req` to the kubelet on loopback; the connection task keeps serving the upgrade.
async fn send(
    port: u16,
    req: http::Request<Empty<bytes::Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, Box<dyn std::error::Error + Send + Sync>> {
    let tcp = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
    let _ = tcp.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            warn!(error = %e, "kubelet connection failed");
        }
    });
    Ok(sender.send_request(req).await?)
}

fn relay(status: StatusCode, headers: &HeaderMap, body: Body) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    for (k, v) in headers {
        if k != header::CONTENT_LENGTH && k != header::TRANSFER_ENCODING {
            resp.headers_mut().append(k, v.clone());
        }
    }
    if !resp.headers().contains_key(header::CONTENT_TYPE) && status != StatusCode::SWITCHING_PROTOCOLS {
        resp.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    resp
}

/// The `container` parameter, or the pod's only container; errors as the API server words them.
fn choose_container(pod: &Value, query: &str) -> ApiResult<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let containers: Vec<&str> = pod["spec"]["containers"]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    let asked = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty());
    match asked {
        Some(c) if containers.contains(&c.as_str()) => Ok(c),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None => match containers.as_slice() {
            [one] => Ok((*one).to_string()),
            [] => Err(ApiError::bad_request(format!("pod {name} has no containers"))),
            many => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                many.join(" ")
            ))),
        },
    }
    .and_then(|c| match pod["status"]["phase"].as_str() {
        Some(p @ ("Succeeded" | "Failed")) => Err(ApiError::bad_request(format!(
            "cannot exec into a container in a completed pod; current phase is {p}"
        ))),
        _ => Ok(c),
    })
}

fn kubelet_port(node: &Value) -> Option<u16> {
    node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(containers: &[&str], phase: &str) -> Value {
        let cs: Vec<Value> = containers.iter().map(|c| json!({"name": c})).collect();
        json!({"metadata": {"name": "a"}, "spec": {"containers": cs}, "status": {"phase": phase}})
    }

    #[test]
    fn container_is_the_only_one_or_the_named_one() {
        assert_eq!(
            choose_container(&pod(&["c"], "Running"), "command=ls").unwrap(),
            "c"
        );
        assert_eq!(
            choose_container(&pod(&["c", "d"], "Running"), "container=d&command=ls").unwrap(),
            "d"
        );
        let e = choose_container(&pod(&["c", "d"], "Running"), "command=ls").unwrap_err();
        assert!(e.message.contains("choose one of: [c d]"), "{}", e.message);
        let e = choose_container(&pod(&["c"], "Running"), "container=x").unwrap_err();
        assert!(e.message.contains("container x is not valid"), "{}", e.message);
        let e = choose_container(&pod(&["c"], "Succeeded"), "").unwrap_err();
        assert!(e.message.contains("completed pod"), "{}", e.message);
    }

    #[test]
    fn kubelet_port_from_daemon_endpoints() {
        let n = json!({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 41234}}}});
        assert_eq!(kubelet_port(&n), Some(41234));
        assert_eq!(kubelet_port(&json!({})), None);
        let n = json!({"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 70000}}}});
        assert_eq!(kubelet_port(&n), None);
    }
}
