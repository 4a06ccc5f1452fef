//! Shared fixtures of the node tests: an in-process API server, a recording bash CNI plugin in a
//! temp CNI bin/conf dir, netns cleanup guards and polling helpers.

#![allow(clippy::unwrap_used, dead_code)]

use std::{
    io::Read,
    net::{TcpStream, UdpSocket},
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{Api, Client, api::ListParams};
use kube_sandbox_node::{
    netns,
    node::{NodeConfig, client_from_kubeconfig, run_node},
};
use serde_json::{Value, json};
use tokio::{sync::oneshot, task::JoinHandle};

/// Removes every netns the test plugin saw (they are all ours) and the node's recorded ones.
pub struct NetnsGuard {
    record: PathBuf,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        for line in std::fs::read_to_string(&self.record).unwrap_or_default().lines() {
            if let Ok(v) = serde_json::from_str::<Value>(line)
                && let Some(ns) = v["netns"].as_str()
                && let Some(name) = Path::new(ns).file_name().and_then(|n| n.to_str())
                && name.starts_with("cni-")
                && netns::exists(name)
            {
                let _ = std::process::Command::new("ip")
                    .args(["netns", "delete", name])
                    .status();
            }
        }
    }
}

// Field order matters: the guard must run before the temp dir (holding the record) goes.
pub struct World {
    pub _guard: NetnsGuard,
    pub _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub server: Option<kube_sandbox_apiserver::RunningServer>,
    pub client: Client,
    pub record: PathBuf,
    pub fail: PathBuf,
    pub bin: PathBuf,
    pub conf: PathBuf,
}

const PLUGIN: &str = r#"#!/bin/bash
stdin=$(cat)
exec 9>>"@DIR@/lock"
flock 9
printf '{"cmd":"%s","cid":"%s","netns":"%s","ifname":"%s","args":"%s","path":"%s","argc":%d,"ownns":"%s","stdin":%s}\n' \
  "$CNI_COMMAND" "$CNI_CONTAINERID" "$CNI_NETNS" "$CNI_IFNAME" "$CNI_ARGS" "$CNI_PATH" "$#" \
  "$(readlink /proc/self/ns/net)" "$stdin" >> "@DIR@/record"
case "$CNI_COMMAND" in
ADD)
  if [ -e "@DIR@/fail" ]; then
    echo '{"cniVersion":"1.0.0","code":11,"msg":"induced failure","details":"test"}'
    exit 1
  fi
  n=$(( $(cat "@DIR@/counter" 2>/dev/null || echo 1) + 1 ))
  echo $n > "@DIR@/counter"
  echo "{\"cniVersion\":\"1.0.0\",\"interfaces\":[{\"name\":\"eth0\",\"sandbox\":\"$CNI_NETNS\"}],\"ips\":[{\"address\":\"10.244.0.$n/32\",\"interface\":0}]}"
  ;;
DEL)
  if [ -e "@DIR@/faildel" ]; then
    echo '{"cniVersion":"1.0.0","code":11,"msg":"induced del failure"}'
    exit 1
  fi
  ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
"#;

pub async fn world() -> Result<World> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube_client=warn".into()),
        )
        .with_test_writer()
        .try_init();
    kube_sandbox_node::node::install_crypto_provider();
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().to_path_buf();
    let bin = dir.join("bin");
    let conf = dir.join("net.d");
    std::fs::create_dir_all(&bin)?;
    std::fs::create_dir_all(&conf)?;
    let plugin = bin.join("test-cni");
    std::fs::write(&plugin, PLUGIN.replace("@DIR@", &dir.display().to_string()))?;
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&plugin)
        .status()?;
    // A broken file that sorts first must be skipped; the .conflist is the network.
    std::fs::write(conf.join("00-broken.conf"), b"{not json")?;
    std::fs::write(
        conf.join("10-test.conflist"),
        serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "testnet",
            "plugins": [{"type": "test-cni", "extra": 7, "capabilities": {"portMappings": true, "bandwidth": true}}]}))?,
    )?;
    let server =
        kube_sandbox_apiserver::start(kube_sandbox_apiserver::Config::local(dir.join("kubeconfig"))).await?;
    let (client, _) = client_from_kubeconfig(&server.kubeconfig).await?;
    Ok(World {
        _guard: NetnsGuard {
            record: dir.join("record"),
        },
        record: dir.join("record"),
        fail: dir.join("fail"),
        server: Some(server),
        client,
        bin,
        conf,
        dir,
        _tmp: tmp,
    })
}

impl World {
    pub fn node_config(&self, name: &str) -> NodeConfig {
        let mut cfg = NodeConfig::new(name);
        cfg.cni_bin_dirs = vec![self.bin.clone()];
        cfg.cni_conf_dir = self.conf.clone();
        cfg.state_dir = self.dir.join("state").join(name);
        cfg.sandbox_backoff_base = Duration::from_millis(200);
        cfg.sandbox_backoff_cap = Duration::from_secs(1);
        cfg.cni_timeout = Duration::from_secs(10);
        cfg.gc_interval = Duration::from_secs(1);
        cfg.lease_interval = Duration::from_millis(300);
        cfg
    }

    pub fn start_node(&self, name: &str) -> (oneshot::Sender<()>, JoinHandle<()>) {
        let (tx, rx) = oneshot::channel::<()>();
        let client = self.client.clone();
        let cfg = self.node_config(name);
        let h = tokio::spawn(async move {
            run_node(client, cfg, async move {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        (tx, h)
    }

    pub fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn calls_of(&self, cmd: &str) -> Vec<Value> {
        self.calls().into_iter().filter(|c| c["cmd"] == cmd).collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The server stops with the runtime; make sure our namespaces go first (guard).
        let _ = self.server.take();
    }
}

pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub async fn running_pod(pods: &Api<Pod>, name: &str) -> Result<Pod> {
    wait_for("pod running and ready", Duration::from_secs(30), || async {
        let p = pods.get_opt(name).await.ok()??;
        let st = p.status.as_ref()?;
        (st.phase.as_deref() == Some("Running") && st.pod_ip.is_some() && pod_ready(&p)).then_some(p)
    })
    .await
}

pub fn ask_tcp(ns_path: PathBuf, port: u16) -> Result<String> {
    Ok(netns::run_in(&ns_path, move || -> std::io::Result<String> {
        let mut s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    })??)
}

pub fn ask_udp(ns_path: PathBuf, port: u16) -> Result<String> {
    Ok(netns::run_in(&ns_path, move || -> std::io::Result<String> {
        let s = UdpSocket::bind(("127.0.0.1", 0))?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.send_to(b"ping", ("127.0.0.1", port))?;
        let mut buf = [0u8; 128];
        let n = s.recv(&mut buf)?;
        Ok(String::from_utf8_lossy(&buf[..n]).to_string())
    })??)
}

pub fn web_pod(name: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox", "ports": [
        {"name": "http", "containerPort": 8080},
        {"containerPort": 5353, "protocol": "UDP"}]}]});
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"app": "web"}}, "spec": spec}))
        .unwrap()
}

pub async fn find_event(events: &Api<Event>, pod: &str, reason: &str) -> Result<Event> {
    wait_for(reason, Duration::from_secs(15), || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(reason) && e.involved_object.name.as_deref() == Some(pod))
    })
    .await
}

/// Deletes a netns on drop.
pub struct HostNs(pub String);

impl Drop for HostNs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}
