//! Running CNI plugin binaries with the real protocol: `CNI_*` environment, config on stdin,
//! result or error on stdout, a timeout, optionally inside the node's host netns (`nsenter`).

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
        let mut cmd = match &self.host_netns {
            Some(ns) => {
                let mut c = tokio::process::Command::new("nsenter");
                c.arg(format!("--net={}", ns.display())).arg("--").arg(&bin);
                c
            }
            None => tokio::process::Command::new(&bin),
        };
        cmd.env("CNI_COMMAND", command.as_str())
            .env("CNI_CONTAINERID", &inv.container_id)
            .env("CNI_NETNS", &inv.netns)
            .env("CNI_IFNAME", &inv.ifname)
            .env("CNI_ARGS", &inv.args)
            .env("CNI_PATH", self.cni_path())
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
        let out = tokio::time::timeout(self.timeout, run)
            .await
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

/// Builds the error for a failed plugin of a network operation.
pub(crate) fn failed(plugin_type: &str, command: Command, source: PluginFailure) -> Error {
    Error::Plugin {
        plugin_type: plugin_type.to_string(),
        verb: command.verb(),
        source,
    }
}
