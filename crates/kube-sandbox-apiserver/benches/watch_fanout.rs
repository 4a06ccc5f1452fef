//! Watch fan-out benchmark: 2,000 pods, 50 real HTTP watch connections, M sequential pod
//! updates; per event, the latency from the writer's acknowledged PUT to its arrival at each
//! watcher (and, for reference, from the moment the PUT was sent).
//!
//! Run: `cargo bench -p kube-sandbox-apiserver --bench watch_fanout` (env: `PODS`, `WATCHERS`,
//! `EVENTS`).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, client::conn::http1::SendRequest};
use hyper_util::rt::TokioIo;
use kube_sandbox_apiserver::{Config, start};
use serde_json::{Value, json};

type Sender = SendRequest<Full<Bytes>>;
/// Per watcher: (sequence number, arrival in ns since the base instant).
type Arrivals = Arc<Vec<Mutex<Vec<(usize, u64)>>>>;

async fn connect(addr: std::net::SocketAddr) -> anyhow::Result<Sender> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn call(s: &mut Sender, method: &str, path: &str, body: &Value) -> anyhow::Result<Value> {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(body)?)))?;
    s.ready().await?;
    let resp = s.send_request(req).await?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await?.to_bytes();
    anyhow::ensure!(
        status.is_success(),
        "{method} {path}: {status}: {}",
        String::from_utf8_lossy(&bytes)
    );
    Ok(serde_json::from_slice(&bytes)?)
}

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d)
}

fn seq_of(line: &[u8]) -> Option<usize> {
    const KEY: &[u8] = b"\"bench/seq\":\"";
    let pos = line.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let digits: Vec<u8> = line[pos..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .copied()
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let pods = env_usize("PODS", 2000);
    let watchers = env_usize("WATCHERS", 50);
    let events = env_usize("EVENTS", 1000);
    let dir = tempfile::tempdir()?;
    let server = start(Config::local(dir.path().join("kubeconfig"))).await?;
    let addr = server.addr;
    let mut s = connect(addr).await?;
    call(
        &mut s,
        "POST",
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "bench"}}),
    )
    .await?;

    // 2,000 pods over 16 connections.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..16 {
        tasks.push(tokio::spawn(async move {
            let mut s = connect(addr).await?;
            let mut out = Vec::new();
            for i in (c..pods).step_by(16) {
                let p = json!({"metadata": {"name": format!("pod-{i}"), "labels": {"app": "bench"},
                    "annotations": {"bench/seq": "none"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.local/app:1"}], "nodeName": format!("node-{}", i % 10)}});
                out.push((i, call(&mut s, "POST", "/api/v1/namespaces/bench/pods", &p).await?));
            }
            anyhow::Ok(out)
        }));
    }
    let mut objs: Vec<Value> = vec![Value::Null; pods];
    for t in tasks {
        for (i, o) in t.await?? {
            objs[i] = o;
        }
    }
    println!("created {pods} pods in {:?}", started.elapsed());
    let list = call(
        &mut s,
        "GET",
        "/api/v1/namespaces/bench/pods?limit=1",
        &Value::Null,
    )
    .await;
    let rv = list?["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();

    // Watchers.
    let base = Instant::now();
    let recv: Arrivals = Arc::new(
        (0..watchers)
            .map(|_| Mutex::new(Vec::with_capacity(events)))
            .collect(),
    );
    let mut wtasks = Vec::new();
    for w in 0..watchers {
        let mut ws = connect(addr).await?;
        let req = Request::builder()
            .uri(format!(
                "/api/v1/namespaces/bench/pods?watch=1&resourceVersion={rv}"
            ))
            .header("host", "localhost")
            .body(Full::new(Bytes::new()))?;
        let resp = ws.send_request(req).await?;
        anyhow::ensure!(resp.status().is_success(), "watch {w}: {}", resp.status());
        let recv = recv.clone();
        wtasks.push(tokio::spawn(async move {
            let _keep = ws;
            let mut body = resp.into_body();
            let mut buf: Vec<u8> = Vec::new();
            let mut got = 0;
            while got < events {
                let Some(Ok(frame)) = body.frame().await else {
                    break;
                };
                let Ok(data) = frame.into_data() else { continue };
                let now = base.elapsed().as_nanos() as u64;
                buf.extend_from_slice(&data);
                while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=nl).collect();
                    if let Some(seq) = seq_of(&line) {
                        if let Ok(mut v) = recv[w].lock() {
                            v.push((seq, now));
                        }
                        got += 1;
                    }
                }
            }
        }));
    }

    // Sequential updates.
    let mut sent = vec![0u64; events];
    let mut acked = vec![0u64; events];
    let wall = Instant::now();
    for seq in 0..events {
        let i = seq % pods;
        let mut p = objs[i].clone();
        p["metadata"]["annotations"]["bench/seq"] = json!(seq.to_string());
        sent[seq] = base.elapsed().as_nanos() as u64;
        let path = format!("/api/v1/namespaces/bench/pods/pod-{i}");
        objs[i] = call(&mut s, "PUT", &path, &p).await?;
        acked[seq] = base.elapsed().as_nanos() as u64;
    }
    let write_wall = wall.elapsed();
    for t in wtasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
    }
    let mut from_ack = Vec::with_capacity(events * watchers);
    let mut from_send = Vec::with_capacity(events * watchers);
    let mut missing = 0usize;
    for w in recv.iter() {
        let v = w.lock().map(|v| v.clone()).unwrap_or_default();
        missing += events.saturating_sub(v.len());
        for (seq, at) in v {
            from_ack.push(at.saturating_sub(acked[seq]) / 1000);
            from_send.push(at.saturating_sub(sent[seq]) / 1000);
        }
    }
    from_ack.sort_unstable();
    from_send.sort_unstable();
    println!(
        "{events} sequential updates in {write_wall:?} ({:.0} writes/s), {watchers} watchers, {} deliveries, {missing} missing",
        events as f64 / write_wall.as_secs_f64(),
        from_ack.len()
    );
    println!(
        "latency write-sent -> watcher:  p50={}us p99={}us max={}us",
        pct(&from_send, 0.5),
        pct(&from_send, 0.99),
        from_send.last().copied().unwrap_or(0)
    );
    println!(
        "latency write-acked -> watcher: p50={}us p99={}us max={}us (0 = arrived before the ack)",
        pct(&from_ack, 0.5),
        pct(&from_ack, 0.99),
        from_ack.last().copied().unwrap_or(0)
    );
    println!(
        "pods={pods} watchers={watchers} events={events} p50_us={} p99_us={} max_us={}",
        pct(&from_ack, 0.5),
        pct(&from_ack, 0.99),
        from_ack.last().copied().unwrap_or(0)
    );
    server.shutdown().await;
    Ok(())
}
