//! Fuzzing of the pool manager's requests (bodies and queries, kuryr-rs' and upstream's shapes)
//! through its real router over pools on the fake Neutron: never a panic, every refusal a 4xx
//! or 5xx that says what was wrong, and no request creating more ports than one may ask for.

use std::sync::Arc;

use axum::{body::Body, http::Request};
use http_body_util::BodyExt;
use kuryr_openstack::{Neutron, fake::FakeNeutron};
use tower::ServiceExt;

use super::{MAX_POPULATE_PORTS, MAX_TRUNKS, Manager, router};
use crate::{
    metrics::Metrics,
    pool::{PoolMode, VifPool, source::Pooled, tests::settings},
};

/// Sends one request; returns its status and body.
async fn send(m: &Manager, method: &str, uri: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let Ok(req) = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::from(body.to_vec()))
    else {
        return (0, Vec::new());
    };
    let resp = match router(m.clone()).oneshot(req).await {
        Ok(r) => r,
        Err(e) => match e {},
    };
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec())
        .unwrap_or_default();
    (status, bytes)
}

/// A refusal names what was wrong: `{error: "..."}` (kuryr-rs) or a sentence (upstream).
fn told(status: u16, body: &[u8], what: &str) {
    assert!(
        matches!(status, 400 | 404 | 405 | 413 | 415 | 422 | 500 | 503),
        "{what}: status {status}: {}",
        String::from_utf8_lossy(body)
    );
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(e) = v.get("error")
    {
        assert!(e.as_str().is_some_and(|s| !s.trim().is_empty()), "{what}: {v}");
    }
}

#[test]
fn pool_manager_requests() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let fake = FakeNeutron::new();
    let (net, _) = fake.add_network("pods", "10.0.0.0/24");
    let neutron: Arc<dyn Neutron> = Arc::new(fake.clone());
    let pool = VifPool::new(settings(PoolMode::Neutron), neutron, Arc::new(Metrics::default()));
    let m = Manager {
        pools: vec![pool.clone()],
        source: Arc::new(Pooled(pool)),
        drivers: None,
        client: None,
    };
    let real_net = format!(
        r#"{{"host": "node-1", "project_id": "proj", "network_id": "{}", "security_groups": ["sg-1"], "num_ports": 2}}"#,
        net.id
    );
    let r = kuryr_fuzz::run("pool_manager", vec![real_net.into_bytes()], |b| {
        rt.block_on(async {
            let before = fake.ports().len();
            let mut accepted = false;
            let (s, body) = send(&m, "POST", "/populatePool", b).await;
            if s == 200 {
                accepted = true;
                let made = fake.ports().len().saturating_sub(before);
                assert!(
                    made <= MAX_POPULATE_PORTS as usize * MAX_TRUNKS,
                    "one request made {made} ports"
                );
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body)
                    && let Some(n) = v.get("created").and_then(serde_json::Value::as_u64)
                {
                    assert!(n <= u64::from(MAX_POPULATE_PORTS), "{v}");
                }
            } else {
                told(s, &body, "populatePool");
            }
            for (method, path) in [("GET", "/showPool"), ("POST", "/freePool")] {
                let (s, body) = send(&m, method, path, b).await;
                if s == 200 {
                    accepted = true;
                } else {
                    told(s, &body, path);
                }
            }
            // The same bytes as a query string, where they can be one.
            if let Ok(q) = std::str::from_utf8(b) {
                let (s, body) = send(&m, "GET", &format!("/listPools?{q}"), b"").await;
                if s == 200 {
                    accepted = true;
                    let rows: serde_json::Value =
                        serde_json::from_slice(&body).expect("listPools answers JSON");
                    assert!(rows.is_array(), "{rows}");
                } else if s != 0 {
                    told(s, &body, "listPools");
                }
            }
            // Nothing piles up from one case to the next.
            let _ = m.free_pools(None).await;
            accepted
        })
    });
    eprintln!("pool_manager: {r:?}");
    assert!(r.accepted > 0);
}
