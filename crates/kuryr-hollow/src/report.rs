//! Telling a model cloud what the hollow bindings plug (`POST {url}/__model/plugged`), as
//! OVN's chassis binding tells Neutron: the port goes ACTIVE after the model's delay. Reports
//! are queued (the binding never waits on HTTP) and sent by one task, at most
//! [`IN_FLIGHT`] at a time; a failed report is logged, and the pod then waits for its port as
//! it would for a port that never goes ACTIVE.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use kuryr_daemon::binding::record::OnPlug;
use tokio::sync::{Semaphore, mpsc};

/// Reports in flight at once.
pub const IN_FLIGHT: usize = 64;

/// An [`OnPlug`] reporting to the model cloud at `url` (`http://host:port`). Must be called
/// inside a Tokio runtime (it starts the sending task).
pub fn plug_reporter(url: &str) -> Result<OnPlug, crate::Error> {
    let endpoint: http::Uri = format!("{}/__model/plugged", url.trim_end_matches('/'))
        .parse()
        .map_err(|e| crate::Error::Io {
            what: format!("--model-url {url:?}"),
            message: format!("not a URL: {e}"),
        })?;
    if endpoint.scheme_str() != Some("http") {
        return Err(crate::Error::Io {
            what: format!("--model-url {url:?}"),
            message: "the model cloud is served over plain http on loopback".into(),
        });
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    tokio::spawn(async move {
        while let Some(port) = rx.recv().await {
            let Ok(slot) = slots.clone().acquire_owned().await else {
                return;
            };
            let (client, endpoint) = (client.clone(), endpoint.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let body = serde_json::json!({ "port_id": port }).to_string();
                let req = http::Request::post(endpoint)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(body)));
                let outcome = match req {
                    Ok(req) => client
                        .request(req)
                        .await
                        .map(|r| r.status())
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match outcome {
                    Ok(s) if s.is_success() => {}
                    Ok(s) => tracing::warn!(%port, status = %s, "the model cloud refused a plug report"),
                    Err(e) => {
                        tracing::warn!(%port, error = %e, "a plug report did not reach the model cloud")
                    }
                }
            });
        }
    });
    Ok(Arc::new(move |port: &str| {
        // Fails only once the sending task is gone (runtime shutting down).
        let _ = tx.send(port.to_string());
    }))
}
