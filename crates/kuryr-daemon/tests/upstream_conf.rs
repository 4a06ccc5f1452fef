//! An upstream-style kuryr.conf, as upstream's DaemonSet mounts it inside a pod: no kubeconfig,
//! `[kubernetes] api_root` with `token_file` and `ssl_ca_crt_file` against an HTTPS API server
//! that demands the bearer token. The daemon must connect with them and become ready; with a
//! wrong token it must not. Also `[DEFAULT] debug`, `log_file` and `use_json` take effect.
//! (Upstream's daemon used `api_root` as a plain URL and ignored the token and the CA; kuryr-rs
//! did the same until the one runtime crate replaced its copy of the client.) The API server
//! runs in the test's own runtime: multi-threaded, since the probes below block a thread.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::PostParams,
    config::{KubeConfigOptions, Kubeconfig},
};
use sandbox_guard::free_port;

const DAEMON: &str = env!("CARGO_BIN_EXE_kuryr-daemon");
const TOKEN: &str = "upstream-style-token";

/// `(status, body)` of `GET path` on the loopback `port`.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, buf.split("\r\n\r\n").nth(1).unwrap_or_default().to_string()))
}

fn http_status(port: u16, path: &str) -> Option<u16> {
    http_get(port, path).map(|(c, _)| c)
}

struct Daemon {
    child: Child,
    health: u16,
    log: std::path::PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(dir: &Path, conf: &Path) -> Daemon {
    let health = free_port();
    let log = dir.join("stderr.log");
    let child = Command::new(DAEMON)
        .arg("--config-file")
        .arg(conf)
        .args(["--node-name", "upstream-node"])
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--bind-address", &format!("127.0.0.1:{}", free_port())])
        .args(["--health-bind", &format!("127.0.0.1:{health}")])
        .args(["--metrics-bind", &format!("127.0.0.1:{}", free_port())])
        .env_remove("RUST_LOG")
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn kuryr-daemon");
    Daemon { child, health, log }
}

async fn server(dir: &Path) -> (kube_sandbox_apiserver::RunningServer, Client) {
    let mut cfg = kube_sandbox_apiserver::Config::local(dir.join("kubeconfig"));
    cfg.tls = true;
    cfg.token = Some(TOKEN.into());
    let server = kube_sandbox_apiserver::start(cfg).await.expect("apiserver");
    let kc = Kubeconfig::read_from(&server.kubeconfig).unwrap();
    let client = Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in kuryr_types::crds::all() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
    }
    (server, client)
}

fn conf(dir: &Path, server: &kube_sandbox_apiserver::RunningServer, token: &str) -> std::path::PathBuf {
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, server.ca_pem.as_deref().expect("HTTPS server has a CA")).unwrap();
    let token_file = dir.join("token");
    std::fs::write(&token_file, token).unwrap();
    let path = dir.join("kuryr.conf");
    std::fs::write(
        &path,
        format!(
            "[DEFAULT]\ndebug = True\nuse_json = True\nlog_dir = {dir}\nlog_file = kuryr-daemon.log\n\n\
             [kubernetes]\napi_root = {url}\ntoken_file = {token}\nssl_ca_crt_file = {ca}\nssl_verify_server_crt = True\n",
            dir = dir.display(),
            url = server.url,
            token = token_file.display(),
            ca = ca.display(),
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_becomes_ready_with_api_root_token_file_and_ca() {
    kuryr_runtime::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let (server, _client) = server(dir.path()).await;
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let conf = conf(dir.path(), &server, TOKEN);
    let mut d = spawn(dir.path(), &conf);
    let deadline = Instant::now() + Duration::from_secs(30);
    let log = dir.path().join("kuryr-daemon.log");
    loop {
        if http_status(d.health, "/ready") == Some(200) {
            break;
        }
        if let Ok(Some(st)) = d.child.try_wait() {
            panic!(
                "kuryr-daemon exited with {st}: {}{}",
                std::fs::read_to_string(&d.log).unwrap_or_default(),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "not ready in 30 s: /ready answers {:?}",
            http_get(d.health, "/ready")
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // [DEFAULT] log_dir + log_file + use_json + debug: JSON lines with debug records in the
    // file, nothing on stderr (use_stderr is off).
    let text = std::fs::read_to_string(&log).expect("the log file exists");
    let records: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert!(!records.is_empty(), "empty log file");
    assert!(
        records.iter().any(|r| r["level"] == "DEBUG"),
        "[DEFAULT] debug = True logged no debug record:\n{text}"
    );
    let stderr = std::fs::read_to_string(&d.log).unwrap_or_default();
    assert!(
        stderr.trim().is_empty(),
        "stderr should be empty with a log_file: {stderr}"
    );
    let _ = d.child.kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_keeps_the_daemon_unready() {
    kuryr_runtime::install_crypto();
    let dir = tempfile::tempdir().unwrap();
    let (server, _client) = server(dir.path()).await;
    let conf = conf(dir.path(), &server, "not-the-token");
    let d = spawn(dir.path(), &conf);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        assert_ne!(
            http_status(d.health, "/ready"),
            Some(200),
            "ready with a wrong token"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
