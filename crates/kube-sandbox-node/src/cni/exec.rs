//! Running CNI plugin binaries with the real protocol: `CNI_*` environment, config on stdin,
//! result or error on stdout, a timeout, optionally inside the node's host netns (`nsenter`).
//! A node with a host-path map runs its plugins as a real node's runtime does — on the node's
//! host: in its netns and with its host paths ([`HostView`], through `kube-sandbox
//! run-container`), so that a plugin reaches what its node's host-network pods put there (the
//! node daemon's unix socket under `/run/kuryr`).

use std::{path::PathBuf, process::Stdio, time::Duration};

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::{
    Error,
    result::{CniError, parse_error},
};

/// A CNI operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `ADD`
    Add,
    /// `DEL`
    Del,
    /// `CHECK`
    Check,
}

impl Command {
    /// The `CNI_COMMAND` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Del => "DEL",
            Command::Check => "CHECK",
        }
    }
    /// Lower-case verb for messages (`plugin type="x" failed (add)`).
    pub fn verb(self) -> &'static str {
        match self {
            Command::Add => "add",
            Command::Del => "delete",
            Command::Check => "check",
        }
    }
}

/// The runtime parameters of one invocation.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// Sandbox (container) id.
    pub container_id: String,
    /// Netns path.
    pub netns: PathBuf,
    /// Interface name in the container.
    pub ifname: String,
    /// `CNI_ARGS`.
    pub args: String,
    /// Capability args (`portMappings`, …) offered to plugins that declare them.
    pub capability_args: serde_json::Map<String, Value>,
}

/// Finds and executes plugins.
#[derive(Debug, Clone)]
pub struct PluginRunner {
    /// Directories searched for plugin binaries (also `CNI_PATH`).
    pub bin_dirs: Vec<PathBuf>,
    /// Run plugins inside this netns (path) through `nsenter`.
    pub host_netns: Option<PathBuf>,
    /// Per-invocation timeout.
    pub timeout: Duration,
    /// The node's host paths, when it has a map: plugins see them.
    pub host_view: Option<HostView>,
}

/// What a plugin sees of its node's host when the node maps host paths (`--host-path`).
#[derive(Debug, Clone)]
pub struct HostView {
    /// `kube-sandbox`, which runs `run-container`.
    pub launcher: PathBuf,
    /// Node path → the machine's directory holding it.
    pub host_paths: Vec<(PathBuf, PathBuf)>,
    /// Where the launch specs of plugin runs are written.
    pub spec_dir: PathBuf,
}

impl HostView {
    /// The bind mounts of a plugin run: every mapped directory that exists on the machine, at
    /// its node path when that exists on the machine too or lies under `/run` (a mount point
    /// made there is gone with the machine's tmpfs; nothing is created elsewhere).
    fn mounts(&self) -> Vec<crate::containers::launch::Mount> {
        self.host_paths
            .iter()
            .filter(|(node, machine)| machine.is_dir() && (node.is_dir() || node.starts_with("/run")))
            .map(|(node, machine)| crate::containers::launch::Mount {
                source: machine.clone(),
                target: node.clone(),
                read_only: false,
            })
            .collect()
    }
}

/// A failed plugin invocation as the runtime reports it.
#[derive(Debug, thiserror::Error)]
pub enum PluginFailure {
    /// The plugin binary is not in any bin dir.
    #[error("failed to find plugin {0:?} in path {1}")]
    NotFound(String, String),
    /// Spawning or talking to the process failed.
    #[error("failed to execute plugin: {0}")]
    Exec(#[source] std::io::Error),
    /// The plugin did not finish in time.
    #[error("plugin timed out after {0:?}")]
    Timeout(Duration),
    /// The plugin returned an error object.
    #[error("{0}")]
    Plugin(CniError),
    /// The plugin exited non-zero without a parsable error.
    #[error("netplugin failed with no error message: {0}")]
    NoMessage(String),
}

/// Runs one plugin of a network's chain. [`PluginRunner`] executes the plugin's executable, as
/// a container runtime does; a hollow node (kubemark's idea: the node's logic without its
/// machine) runs its plugins in-process.
pub trait Plugins: Send + Sync {
    /// Runs `plugin_type` for `command` with `stdin`; its stdout (a result) on success.
    fn exec<'a>(
        &'a self,
        plugin_type: &'a str,
        command: Command,
        inv: &'a Invocation,
        stdin: &'a Value,
    ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, PluginFailure>>;
}

impl Plugins for PluginRunner {
    fn exec<'a>(
        &'a self,
        plugin_type: &'a str,
        command: Command,
        inv: &'a Invocation,
        stdin: &'a Value,
    ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, PluginFailure>> {
        Box::pin(PluginRunner::exec(self, plugin_type, command, inv, stdin))
    }
}

impl PluginRunner {
    fn cni_path(&self) -> String {
        self.bin_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    }

    fn find(&self, plugin_type: &str) -> Option<PathBuf> {
        self.bin_dirs
            .iter()
            .map(|d| d.join(plugin_type))
            .find(|p| p.is_file())
    }

    /// Executes `plugin_type` with `stdin`; returns its stdout on success.
    pub async fn exec(
        &self,
        plugin_type: &str,
        command: Command,
        inv: &Invocation,
        stdin: &Value,
    ) -> Result<Vec<u8>, PluginFailure> {
        let bin = self
            .find(plugin_type)
            .ok_or_else(|| PluginFailure::NotFound(plugin_type.to_string(), self.cni_path()))?;
        let env = [
            ("CNI_COMMAND", command.as_str().to_string()),
            ("CNI_CONTAINERID", inv.container_id.clone()),
            ("CNI_NETNS", inv.netns.display().to_string()),
            ("CNI_IFNAME", inv.ifname.clone()),
            ("CNI_ARGS", inv.args.clone()),
            ("CNI_PATH", self.cni_path()),
        ];
        let mut spec_file = None;
        let mut cmd = match (&self.host_view, &self.host_netns) {
            (Some(view), _) => {
                let mut vars: Vec<(String, String)> =
                    env.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
                vars.push(("PATH".into(), std::env::var("PATH").unwrap_or_default()));
                let spec = crate::containers::launch::LaunchSpec {
                    program: bin.clone(),
                    args: Vec::new(),
                    env: vars,
                    working_dir: "/".into(),
                    netns: self.host_netns.clone(),
                    mounts: view.mounts(),
                    // A runtime runs plugins unconfined, as root.
                    security: Default::default(),
                };
                let path = view.spec_dir.join(format!(
                    "{}-{}-{}.json",
                    command.as_str(),
                    inv.container_id,
                    SPEC_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&view.spec_dir).map_err(PluginFailure::Exec)?;
                std::fs::write(&path, serde_json::to_vec(&spec).unwrap_or_default())
                    .map_err(PluginFailure::Exec)?;
                let mut c = tokio::process::Command::new(&view.launcher);
                c.arg("run-container").arg(&path);
                spec_file = Some(path);
                c
            }
            (None, Some(ns)) => {
                let mut c = tokio::process::Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("--").arg(&bin);
                c
            }
            (None, None) => tokio::process::Command::new(&bin),
        };
        cmd.envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(PluginFailure::Exec)?;
        let input = serde_json::to_vec(stdin).unwrap_or_default();
        let run = async {
            if let Some(mut pipe) = child.stdin.take() {
                // A plugin may exit without reading stdin; a broken pipe is not our failure.
                let _ = pipe.write_all(&input).await;
                drop(pipe);
            }
            child.wait_with_output().await
        };
        let out = tokio::time::timeout(self.timeout, run).await;
        if let Some(p) = spec_file {
            let _ = std::fs::remove_file(p);
        }
        let out = out
            .map_err(|_| PluginFailure::Timeout(self.timeout))?
            .map_err(PluginFailure::Exec)?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        if let Some(e) = parse_error(&out.stdout) {
            return Err(PluginFailure::Plugin(e));
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(PluginFailure::NoMessage(if stderr.is_empty() {
            out.status.to_string()
        } else {
            stderr
        }))
    }
}

/// Makes the launch spec files of concurrent plugin runs distinct.
static SPEC_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Builds the error for a failed plugin of a network operation.
pub(crate) fn failed(plugin_type: &str, command: Command, source: PluginFailure) -> Error {
    Error::Plugin {
        plugin_type: plugin_type.to_string(),
        verb: command.verb(),
        source,
    }
}
