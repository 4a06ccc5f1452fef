//! `pods/{name}/log`: checks the pod and the container (app or init), then relays the request
//! to the kubelet of the pod's node (`/containerLogs/{ns}/{pod}/{container}`) and streams its
//! answer back, so `kubectl logs [-f] [--previous] [--tail N]` works as on a real cluster.

use std::{net::Ipv4Addr, sync::Arc, time::Duration};

use axum::{body::Body, response::Response};
use http::{HeaderValue, Method, StatusCode, header, request::Parts};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tracing::warn;

use crate::{
    app::App,
    error::{ApiError, ApiResult},
};

const KUBELET_TIMEOUT: Duration = Duration::from_secs(10);

/// The `container` parameter (an app or init container), or the pod's only app container.
fn container(pod: &Value, query: &str) -> ApiResult<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let names = |field: &str| -> Vec<String> {
        pod["spec"][field]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter_map(|c| c["name"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (apps, inits) = (names("containers"), names("initContainers"));
    let asked = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "container")
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty());
    match asked {
        Some(c) if apps.contains(&c) || inits.contains(&c) => Ok(c),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None => match apps.as_slice() {
            [one] => Ok(one.clone()),
            _ => Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}] or one of the init containers: [{}]",
                apps.join(" "),
                inits.join(" ")
            ))),
        },
    }
}

/// Relays a log request for pod `ns/name`.
pub async fn proxy(app: &Arc<App>, ns: &str, name: &str, parts: Parts) -> ApiResult<Response> {
    if parts.method != Method::GET {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    let (pod, port) = app.store.read(|t| {
        let pod = t.get(&(String::new(), "pods".into()), ns, name).cloned();
        let port = pod
            .as_ref()
            .and_then(|p| p["spec"]["nodeName"].as_str())
            .and_then(|n| t.get(&(String::new(), "nodes".into()), "", n))
            .and_then(|n| n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0);
        (pod, port)
    });
    let Some(pod) = pod else {
        return Err(match app.registry.lookup("", "v1", "pods") {
            Some(info) => ApiError::not_found(&info, name),
            None => ApiError::not_found_path(),
        });
    };
    let query = parts.uri.query().unwrap_or("").to_string();
    let c = container(&pod, &query)?;
    let Some(port) = port else {
        return Err(ApiError::bad_request(format!(
            "container \"{c}\" in pod \"{name}\" is waiting to start: ContainerCreating"
        )));
    };
    let req = http::Request::builder()
        .method(Method::GET)
        .uri(format!("/containerLogs/{ns}/{name}/{c}?{query}"))
        .header(header::HOST, format!("127.0.0.1:{port}"))
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| ApiError::internal(format!("building the kubelet request: {e}")))?;
    let resp = tokio::time::timeout(KUBELET_TIMEOUT, async {
        let tcp = tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                warn!(error = %e, "kubelet log connection failed");
            }
        });
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(sender.send_request(req).await?)
    })
    .await
    .map_err(|_| ApiError::internal("error dialing backend: the kubelet did not answer".to_string()))?
    .map_err(|e| ApiError::internal(format!("error dialing backend: {e}")))?;
    let status = resp.status();
    let ctype = resp.headers().get(header::CONTENT_TYPE).cloned();
    let mut out = Response::new(Body::new(resp.into_body()));
    *out.status_mut() = status;
    let default = if status == StatusCode::OK {
        "text/plain"
    } else {
        "application/json"
    };
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        ctype.unwrap_or_else(|| HeaderValue::from_static(default)),
    );
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn init_containers_have_logs_too() {
        let pod = json!({"metadata": {"name": "a"},
            "spec": {"containers": [{"name": "daemon"}], "initContainers": [{"name": "install"}]}});
        assert_eq!(container(&pod, "").unwrap(), "daemon");
        assert_eq!(container(&pod, "container=install").unwrap(), "install");
        assert!(container(&pod, "container=x").is_err());
    }
}
