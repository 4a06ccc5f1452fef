//! A fault-injecting HTTP proxy in front of Neutron's API for the chaos suite's "slow Neutron"
//! scenario: the controller reaches Neutron only through it (`[neutron] endpoint_override`), and
//! while faults are on it delays every request, answers some with 503 (an overloaded API behind a
//! load balancer) and leaves some unanswered until the client gives up. Written here with hyper
//! rather than taken from Debian or PyPI (toxiproxy is not packaged for bookworm, and TCP-level
//! proxies cannot fail single HTTP requests on a kept-alive connection); a new upstream
//! connection per request keeps it simple. It runs as a process of its own
//! (`kuryr-e2e chaos-proxy`, started before the controller that goes through it) and takes its
//! faults over HTTP on its own listener: `PUT /__chaos/faults` with [`Faults`] as JSON
//! ([`set_faults`]), `GET /__chaos/stats`.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode, body::Incoming};
use hyper_util::rt::TokioIo;

/// What the proxy does to requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Faults {
    /// Forwards at once.
    #[default]
    Off,
    /// Every request waits `latency`; one in `every` is answered 503 and another one in
    /// `every` is held for `hang` and then dropped unanswered.
    On {
        /// Added to every request.
        latency: Duration,
        /// One request in this many fails each way (0: none fail).
        every: u64,
        /// How long an unanswered request is held.
        hang: Duration,
    },
}

/// Counters of what the proxy did.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Requests received.
    pub requests: AtomicU64,
    /// Answered 503 by the proxy.
    pub failed: AtomicU64,
    /// Held and dropped unanswered.
    pub dropped: AtomicU64,
    /// Upstream could not be reached or answered with a transport error.
    pub upstream_errors: AtomicU64,
}

/// The running proxy.
pub struct FaultProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    faults: Arc<Mutex<Faults>>,
    /// What it did.
    pub stats: Arc<ProxyStats>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on `listen` and forwards to `upstream`.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> std::io::Result<Self> {
        let l = tokio::net::TcpListener::bind(listen).await?;
        let addr = l.local_addr()?;
        let faults = Arc::new(Mutex::new(Faults::Off));
        let stats = Arc::new(ProxyStats::default());
        let (f, s) = (faults.clone(), stats.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((conn, _)) = l.accept().await else { continue };
                let (f, s) = (f.clone(), s.clone());
                tokio::spawn(async move {
                    let svc =
                        hyper::service::service_fn(move |req| handle(req, upstream, f.clone(), s.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(conn), svc)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            faults,
            stats,
            task,
        })
    }

    /// Sets what happens to the next requests.
    pub fn set(&self, faults: Faults) {
        *self
            .faults
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = faults;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Answer = Result<Response<Full<Bytes>>, std::io::Error>;

/// The path prefix of the proxy's own control endpoints.
pub const CONTROL: &str = "/__chaos/";

async fn handle(
    req: Request<Incoming>,
    upstream: SocketAddr,
    faults: Arc<Mutex<Faults>>,
    stats: Arc<ProxyStats>,
) -> Answer {
    if req.uri().path().starts_with(CONTROL) {
        return Ok(control(req, &faults, &stats).await);
    }
    let n = stats.requests.fetch_add(1, Ordering::Relaxed);
    let faults = *faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Faults::On { latency, every, hang } = faults {
        tokio::time::sleep(latency).await;
        if every > 0 && n % every == 0 {
            stats.failed.fetch_add(1, Ordering::Relaxed);
            return Ok(plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "chaos proxy: injected 503",
            ));
        }
        if every > 1 && n % every == every / 2 {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(hang).await;
            return Err(std::io::Error::other("chaos proxy: request dropped unanswered"));
        }
    }
    match forward(req, upstream).await {
        Ok(r) => Ok(r),
        Err(e) => {
            stats.upstream_errors.fetch_add(1, Ordering::Relaxed);
            Ok(plain(
                StatusCode::BAD_GATEWAY,
                &format!("chaos proxy: upstream {upstream}: {e}"),
            ))
        }
    }
}

async fn control(
    req: Request<Incoming>,
    faults: &Mutex<Faults>,
    stats: &ProxyStats,
) -> Response<Full<Bytes>> {
    match (
        req.method().as_str(),
        req.uri().path().trim_start_matches(CONTROL),
    ) {
        ("PUT", "faults") => {
            let body = match req.into_body().collect().await {
                Ok(b) => b.to_bytes(),
                Err(e) => return plain(StatusCode::BAD_REQUEST, &format!("reading the body: {e}")),
            };
            match serde_json::from_slice::<Faults>(&body) {
                Ok(f) => {
                    *faults.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = f;
                    tracing::info!(faults = ?f, "chaos proxy: faults set");
                    plain(StatusCode::OK, "ok")
                }
                Err(e) => plain(StatusCode::BAD_REQUEST, &format!("faults: {e}")),
            }
        }
        ("GET", "stats") => plain(
            StatusCode::OK,
            &serde_json::json!({
                "requests": stats.requests.load(Ordering::Relaxed),
                "failed": stats.failed.load(Ordering::Relaxed),
                "dropped": stats.dropped.load(Ordering::Relaxed),
                "upstream_errors": stats.upstream_errors.load(Ordering::Relaxed),
            })
            .to_string(),
        ),
        _ => plain(StatusCode::NOT_FOUND, "PUT /__chaos/faults or GET /__chaos/stats"),
    }
}

/// Sets the faults of the proxy listening at `addr` (its control endpoint).
pub async fn set_faults(
    addr: SocketAddr,
    faults: Faults,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let req = Request::builder()
        .method("PUT")
        .uri(format!("{CONTROL}faults"))
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&faults)?)))?;
    let resp = sender.send_request(req).await?;
    if resp.status() != StatusCode::OK {
        return Err(format!("the chaos proxy at {addr} answered {}", resp.status()).into());
    }
    Ok(())
}

fn plain(code: StatusCode, text: &str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(text.to_owned())));
    *r.status_mut() = code;
    r
}

async fn forward(
    req: Request<Incoming>,
    upstream: SocketAddr,
) -> Result<Response<Full<Bytes>>, Box<dyn std::error::Error + Send + Sync>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    let stream = tokio::net::TcpStream::connect(upstream).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let out = Request::from_parts(parts, Full::new(body));
    let resp = sender.send_request(out).await?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Response::from_parts(parts, Full::new(body)))
}
