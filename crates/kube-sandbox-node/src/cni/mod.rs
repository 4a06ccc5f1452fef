//! The container-runtime side of CNI: config selection ([`config`]), plugin execution
//! ([`exec`]), result parsing ([`result`]) and whole-network ADD/DEL over a plugin list.

pub mod cache;
pub mod config;
pub mod exec;
pub mod result;

use std::path::PathBuf;

use serde_json::Value;

pub use config::NetworkConfigList;
pub use exec::{Command, HostView, Invocation, PluginFailure, PluginRunner, Plugins};
pub use result::CniResult;

/// Errors of CNI operations.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The conf dir could not be read.
    #[error("cannot read CNI conf dir {dir}")]
    ReadConfDir {
        /// The dir.
        dir: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// No valid network config: the runtime's network is not ready.
    #[error("cni config uninitialized: no valid network config found in {dir} ({rejected})")]
    NoNetworkConfig {
        /// The dir.
        dir: PathBuf,
        /// Files seen and why they were rejected.
        rejected: String,
    },
    /// A plugin failed.
    #[error("plugin type=\"{plugin_type}\" failed ({verb}): {source}")]
    Plugin {
        /// Plugin `type`.
        plugin_type: String,
        /// `add`, `delete`, `check`.
        verb: &'static str,
        /// What went wrong.
        #[source]
        source: PluginFailure,
    },
    /// A plugin's stdout was not a valid result.
    #[error("plugin type=\"{plugin_type}\" returned an invalid result: {reason}")]
    InvalidResult {
        /// Plugin `type`.
        plugin_type: String,
        /// Why.
        reason: String,
    },
}

/// Runs ADD through every plugin of the list in order, chaining `prevResult`; returns the final
/// result.
pub async fn add_network(
    runner: &dyn Plugins,
    list: &NetworkConfigList,
    inv: &Invocation,
) -> Result<CniResult, Error> {
    let mut prev: Option<CniResult> = None;
    for idx in 0..list.plugins.len() {
        let ty = list.plugin_type(idx);
        let stdin = config::plugin_stdin(list, idx, prev.as_ref().map(|r| &r.raw), &inv.capability_args);
        let out = runner
            .exec(ty, Command::Add, inv, &stdin)
            .await
            .map_err(|e| exec::failed(ty, Command::Add, e))?;
        let parsed = result::parse_result(&out).map_err(|reason| Error::InvalidResult {
            plugin_type: ty.to_string(),
            reason,
        })?;
        prev = Some(parsed);
    }
    prev.ok_or_else(|| Error::InvalidResult {
        plugin_type: String::new(),
        reason: "network has no plugins".into(),
    })
}

/// Runs DEL through every plugin of the list in reverse order, passing the cached result as
/// `prevResult` when the version takes one.
pub async fn del_network(
    runner: &dyn Plugins,
    list: &NetworkConfigList,
    inv: &Invocation,
    cached: Option<&Value>,
) -> Result<(), Error> {
    let prev = cached.filter(|_| config::del_takes_prev_result(&list.cni_version));
    for idx in (0..list.plugins.len()).rev() {
        let ty = list.plugin_type(idx);
        let stdin = config::plugin_stdin(list, idx, prev, &inv.capability_args);
        runner
            .exec(ty, Command::Del, inv, &stdin)
            .await
            .map_err(|e| exec::failed(ty, Command::Del, e))?;
    }
    Ok(())
}
