//! Test helpers: run the real `kuryr-cni` binary and play kuryr-daemon over TCP or a unix socket.
#![allow(clippy::unwrap_used, dead_code)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

pub const BIN: &str = env!("CARGO_BIN_EXE_kuryr-cni");

/// What the fake daemon received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub body: Vec<u8>,
}

/// A canned reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub chunked: bool,
    /// Never answer (timeout tests).
    pub hang: bool,
}

impl Reply {
    pub fn new(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            body: body.into(),
            chunked: false,
            hang: false,
        }
    }
}

pub type Handler = Arc<dyn Fn(&Received) -> Reply + Send + Sync>;

pub struct FakeDaemon {
    /// `host:port` or `unix:/path`.
    pub address: String,
    pub received: Arc<Mutex<Vec<Received>>>,
    _dir: Option<tempfile::TempDir>,
}

fn serve_one(stream: &mut (impl Read + Write), handler: &Handler, received: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(&mut *stream);
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut len = 0usize;
    let mut expect_continue = false;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap();
            }
            expect_continue |=
                k.eq_ignore_ascii_case("expect") && v.trim().eq_ignore_ascii_case("100-continue");
        }
    }
    // As kuryr-daemon's HTTP server does when its handler reads the body.
    if expect_continue
        && reader
            .get_mut()
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .is_err()
    {
        return;
    }
    let mut body = vec![0; len];
    reader.read_exact(&mut body).unwrap();
    let req = Received { method, path, body };
    let reply = handler(&req);
    received.lock().unwrap().push(req);
    if reply.hang {
        std::thread::sleep(std::time::Duration::from_secs(30));
        return;
    }
    let mut out = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status).into_bytes();
    if reply.chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        for c in reply.body.chunks(7) {
            out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            out.extend_from_slice(c);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
    } else {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", reply.body.len()).as_bytes());
        out.extend_from_slice(&reply.body);
    }
    let _ = stream.write_all(&out);
}

impl FakeDaemon {
    pub fn tcp(handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Self {
        Self::tcp_at("127.0.0.1:0", handler)
    }

    /// A daemon listening on `addr` (e.g. one that a plugin already tries to reach).
    pub fn tcp_at(addr: &str, handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Self {
        let handler: Handler = Arc::new(handler);
        let l = TcpListener::bind(addr).unwrap();
        let address = l.local_addr().unwrap().to_string();
        let received = Arc::new(Mutex::new(Vec::new()));
        let r = received.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let (h, r) = (handler.clone(), r.clone());
                std::thread::spawn(move || serve_one(&mut s, &h, &r));
            }
        });
        Self {
            address,
            received,
            _dir: None,
        }
    }

    pub fn unix(handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Self {
        let handler: Handler = Arc::new(handler);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cni.sock");
        let l = UnixListener::bind(&path).unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let r = received.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let (h, r) = (handler.clone(), r.clone());
                std::thread::spawn(move || serve_one(&mut s, &h, &r));
            }
        });
        Self {
            address: format!("unix:{}", path.display()),
            received,
            _dir: Some(dir),
        }
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// The output of one plugin run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("stdout not JSON ({e}): {self:?}"))
    }

    /// Asserts a CNI error with `code` and exit 1, and no panic.
    pub fn assert_error(&self, code: u64) -> serde_json::Value {
        assert!(!self.stderr.contains("panicked"), "panic: {self:?}");
        assert_eq!(self.code, 1, "{self:?}");
        let v = self.json();
        assert_eq!(v["code"].as_u64(), Some(code), "{self:?}");
        assert!(v["msg"].is_string(), "{self:?}");
        v
    }

    pub fn assert_ok_empty(&self) {
        assert_eq!(self.code, 0, "{self:?}");
        assert_eq!(self.stdout, "", "{self:?}");
    }
}

/// Runs the plugin with exactly `env` and `stdin`.
pub fn run_plugin(env: &[(&str, OsString)], stdin: Vec<u8>) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn cni_env(command: &str, netns: &str) -> Vec<(&'static str, OsString)> {
    vec![
        ("CNI_COMMAND", command.into()),
        ("CNI_CONTAINERID", "f0e1d2c3b4a5".into()),
        ("CNI_NETNS", netns.into()),
        ("CNI_IFNAME", "eth0".into()),
        ("CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=demo;K8S_POD_INFRA_CONTAINER_ID=f0e1d2c3b4a5".into()),
        ("CNI_PATH", "/opt/cni/bin".into()),
    ]
}

pub fn conf(version: &str, daemon: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "cniVersion": version, "name": "kuryr", "type": "kuryr-cni",
        "kuryr_conf": "/nonexistent/kuryr.conf", "debug": true, "daemon_address": daemon,
    }))
    .unwrap()
}

pub fn vif() -> Vec<u8> {
    include_bytes!("../vif_ovs.json").to_vec()
}
