//! The components as child processes: started with their logs in the run directory, read from
//! `/proc` (CPU-seconds, peak and current resident memory), stopped with SIGTERM or killed.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::Error;

/// One running component.
#[derive(Debug)]
pub struct Component {
    /// `controller`, `apiserver`, …
    pub name: String,
    child: Child,
    /// Its pid.
    pub pid: u32,
}

/// What `/proc` says of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// user + system CPU-seconds.
    pub cpu_s: f64,
    /// Peak resident memory (VmHWM), KiB.
    pub hwm_kib: u64,
    /// Resident memory now (VmRSS), KiB.
    pub rss_kib: u64,
}

/// Reads `/proc/<pid>` (zeros once the process is gone).
pub fn usage(pid: u32) -> Usage {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // CLK_TCK is 100 on Linux x86-64.
    let cpu_s = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    Usage {
        cpu_s,
        hwm_kib: kib("VmHWM:"),
        rss_kib: kib("VmRSS:"),
    }
}

impl Component {
    /// Starts `bin args…` with stderr to `<logs>/<name>.log`; stdout piped when `stdout_lines`
    /// (read with [`Component::read_lines`]), else to the log too.
    pub fn start(
        name: &str,
        bin: &Path,
        args: &[String],
        logs: &Path,
        stdout_lines: bool,
    ) -> Result<Self, Error> {
        let log = logs.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).map_err(|e| Error::io(&log, e))?;
        let err = file.try_clone().map_err(|e| Error::io(&log, e))?;
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .env(
                "RUST_LOG",
                std::env::var("SCALE_RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stderr(Stdio::from(err))
            .kill_on_drop(true);
        if stdout_lines {
            cmd.stdout(Stdio::piped());
        } else {
            cmd.stdout(Stdio::from(file));
        }
        let child = cmd.spawn().map_err(|e| Error::Start {
            what: format!("{name} ({})", bin.display()),
            message: e.to_string(),
        })?;
        let pid = child.id().unwrap_or(0);
        Ok(Component {
            name: name.to_string(),
            child,
            pid,
        })
    }

    /// Reads stdout lines until `done` says the collected lines suffice (within `timeout`).
    pub async fn read_lines(
        &mut self,
        timeout: Duration,
        done: impl Fn(&[String]) -> bool,
    ) -> Result<Vec<String>, Error> {
        let out = self.child.stdout.take().ok_or_else(|| Error::Start {
            what: self.name.clone(),
            message: "its stdout was not piped".into(),
        })?;
        let mut reader = BufReader::new(out).lines();
        let mut lines = Vec::new();
        let read = async {
            while let Ok(Some(l)) = reader.next_line().await {
                lines.push(l);
                if done(&lines) {
                    return true;
                }
            }
            false
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(true) => Ok(lines),
            _ => Err(Error::Start {
                what: self.name.clone(),
                message: format!("did not print what was expected within {timeout:?}"),
            }),
        }
    }

    /// Its usage now.
    pub fn usage(&self) -> Usage {
        usage(self.pid)
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// SIGKILL, then reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// SIGTERM, up to 10 s to exit, then SIGKILL.
    pub async fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            self.kill().await;
        }
    }
}

/// A free loopback port (bound, then released: the child binds it right after).
pub fn free_port() -> Result<u16, Error> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io(Path::new("127.0.0.1:0"), e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| Error::io(Path::new("127.0.0.1:0"), e))
}

/// The directory holding the four binaries.
#[derive(Debug, Clone)]
pub struct Bins(pub PathBuf);

impl Bins {
    /// Path of `name`, which must exist.
    pub fn get(&self, name: &str) -> Result<PathBuf, Error> {
        let p = self.0.join(name);
        if p.is_file() {
            Ok(p)
        } else {
            Err(Error::Start {
                what: name.into(),
                message: format!(
                    "no {} (build the binaries first: cargo build --release --bin kube-sandbox --bin kuryr-controller --bin kuryr-hollow --bin kuryr-modelcloud)",
                    p.display()
                ),
            })
        }
    }
}
