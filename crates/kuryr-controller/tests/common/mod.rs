//! Shared helpers of the integration tests: the in-process emulated API server, the CRDs,
//! pod fixtures, polling, plain HTTP GETs and the simulated KuryrPort handler.
#![allow(dead_code)]

pub mod openstack;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::core::v1::{Namespace, Node, Pod},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use kuryr_controller::{Context, handlers::pod};
use kuryr_types::KuryrPort;
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    task::JoinHandle,
};

pub const NS: &str = "kptest";

/// A running emulated API server and a client of it.
pub struct Env {
    pub server: kube_sandbox_apiserver::RunningServer,
    pub client: Client,
    _dir: tempfile::TempDir,
}

pub async fn sandbox() -> Env {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = kube_sandbox_apiserver::start(kube_sandbox_apiserver::Config::local(
        dir.path().join("kubeconfig"),
    ))
    .await
    .expect("sandbox apiserver");
    let kc = Kubeconfig::read_from(&server.kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("client config");
    let client = Client::try_from(cfg).expect("client");
    Env {
        server,
        client,
        _dir: dir,
    }
}

/// The UID of the `kube-system` Namespace (what the derived cluster identity is made of).
pub async fn kube_system_uid(client: &Client) -> String {
    Api::<Namespace>::all(client.clone())
        .get("kube-system")
        .await
        .expect("kube-system")
        .metadata
        .uid
        .expect("uid")
}

pub async fn install_crds_and_ns(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in kuryr_types::crds::all() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
    }
    let ports: Api<KuryrPort> = Api::all(client.clone());
    wait_for("KuryrPort CRD served", Duration::from_secs(10), async || {
        ports
            .list(&ListParams::default().limit(1))
            .await
            .is_ok()
            .then_some(())
    })
    .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

/// A Ready Node object named `name` (idempotent). Pods bound to a node need it: the pools
/// close hosts that are not Nodes of the cluster.
pub async fn ready_node(client: &Client, name: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name}})).expect("node");
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("creating node {name}: {e}"),
    }
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("node status");
}

pub fn context(client: &Client) -> Arc<Context> {
    Arc::new(Context::new(
        client.clone(),
        Arc::new(kuryr_config::Config::defaults()),
        1,
    ))
}

pub fn start_handler(ctx: &Arc<Context>) -> JoinHandle<()> {
    tokio::spawn(pod::run(ctx.clone()))
}

pub fn mk_pod(name: &str, host_network: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": if name.ends_with('b') { "node-b" } else { "node-a" },
            "hostNetwork": host_network,
            "containers": [{"name": "c", "image": "busybox"}],
        },
    }))
    .expect("pod")
}

pub async fn wait_for<T>(what: &str, timeout: Duration, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Plays the KuryrPort handler's part: drops the KuryrPort finalizer (port "released").
pub async fn release_port(ports: &Api<KuryrPort>, name: &str) {
    let patch = json!({"metadata": {"finalizers": null}});
    match ports
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("releasing {name}: {e}"),
    }
}

pub async fn delete_now(pods: &Api<Pod>, name: &str) {
    let dp = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete(name, &dp).await.expect("delete pod");
}

pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.expect("read");
    let code = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status code");
    let body = buf.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (code, body)
}

pub async fn serve_local(router: axum::Router) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    kuryr_runtime::http::serve("test server", l, router);
    addr
}

/// A free loopback address, its port below the ephemeral range ([`sandbox_guard::ports`]).
pub fn free_port() -> std::net::SocketAddr {
    sandbox_guard::free_addr()
}
