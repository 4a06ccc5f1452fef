//! Shared helpers for the HTTP-level tests: an in-process server on port 0 and a kube-rs client
//! built from the kubeconfig it writes.
#![allow(dead_code)]

use std::time::Duration;

use kube::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};
use kube_sandbox_apiserver::{Config, RunningServer, start};

/// A running server, its temp dir and a client.
pub struct Env {
    pub server: RunningServer,
    pub client: Client,
    pub dir: tempfile::TempDir,
}

pub async fn client_for(path: &std::path::Path) -> anyhow::Result<Client> {
    let kc = Kubeconfig::read_from(path)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(cfg)?)
}

pub async fn env_with(f: impl FnOnce(&mut Config)) -> anyhow::Result<Env> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir()?;
    let mut cfg = Config::local(dir.path().join("kubeconfig"));
    f(&mut cfg);
    let server = start(cfg).await?;
    let client = client_for(&server.kubeconfig).await?;
    Ok(Env { server, client, dir })
}

pub async fn env() -> anyhow::Result<Env> {
    env_with(|_| {}).await
}

/// The API error's Status, or a panic.
pub fn status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `f` until it returns true (5 s).
pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Raw HTTP GET returning (status, body) over plain HTTP.
pub async fn raw(
    server: &RunningServer,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let (ct, b) = body.unwrap_or(("application/json", ""));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text[9..12].parse().expect("status code");
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_string())
        .unwrap_or_default();
    (code, body)
}
