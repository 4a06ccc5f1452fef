//! The CNI plugins of a hollow node, in-process: `kuryr-cni` becomes a call of the node's
//! daemon ([`kuryr_daemon::server::call`], the body the real plugin would send over the
//! socket), its ADD answer turned into a CNI result as the plugin turns it; any other plugin of
//! the chain passes the previous result on.

use std::sync::Arc;

use futures::future::BoxFuture;
use kube_sandbox_node::cni::{Command, Invocation, PluginFailure, Plugins, result::CniError as RuntimeError};
use kuryr_cni_api::{CniError, CniResult, CniVersion, Verb, VifInfo};
use kuryr_daemon::daemon::Daemon;
use serde_json::{Value, json};

/// The plugin type kuryr-rs installs.
pub const KURYR_TYPE: &str = "kuryr-cni";

/// A node's plugins, served by its daemon.
pub struct InProcess {
    /// The node's daemon.
    pub daemon: Arc<Daemon>,
}

fn runtime_error(e: CniError) -> PluginFailure {
    PluginFailure::Plugin(RuntimeError {
        code: u64::from(e.code.code()),
        msg: e.msg,
        details: e.details,
    })
}

impl InProcess {
    async fn kuryr(
        &self,
        command: Command,
        inv: &Invocation,
        stdin: &Value,
    ) -> Result<Vec<u8>, PluginFailure> {
        let verb = match command {
            Command::Add => Verb::Add,
            Command::Del => Verb::Del,
            Command::Check => Verb::Check,
        };
        let netns = inv.netns.display().to_string();
        let body = json!({
            "CNI_COMMAND": command.as_str(),
            "CNI_CONTAINERID": inv.container_id,
            "CNI_NETNS": netns,
            "CNI_IFNAME": inv.ifname,
            "CNI_ARGS": inv.args,
            "CNI_PATH": "",
            "config_kuryr": stdin,
        });
        let body = serde_json::to_vec(&body).map_err(|e| PluginFailure::NoMessage(e.to_string()))?;
        let answer = kuryr_daemon::server::call(&self.daemon, verb, &body)
            .await
            .map_err(runtime_error)?;
        let (Verb::Add, Some(vif)) = (verb, answer) else {
            return Ok(Vec::new());
        };
        let version = stdin
            .get("cniVersion")
            .and_then(Value::as_str)
            .and_then(CniVersion::parse)
            .unwrap_or(CniVersion::V1_0_0);
        let vif = VifInfo::from_primitive(&vif).map_err(runtime_error)?;
        let result = CniResult::from_vif(&vif, &inv.ifname, &netns).map_err(runtime_error)?;
        serde_json::to_vec(&result.to_json(version)).map_err(|e| PluginFailure::NoMessage(e.to_string()))
    }
}

impl Plugins for InProcess {
    fn exec<'a>(
        &'a self,
        plugin_type: &'a str,
        command: Command,
        inv: &'a Invocation,
        stdin: &'a Value,
    ) -> BoxFuture<'a, Result<Vec<u8>, PluginFailure>> {
        Box::pin(async move {
            if plugin_type == KURYR_TYPE {
                return self.kuryr(command, inv, stdin).await;
            }
            // Another plugin of the chain (portmap, bandwidth …): nothing to do here, the
            // previous result goes on.
            Ok(match (command, stdin.get("prevResult")) {
                (Command::Add, Some(prev)) => serde_json::to_vec(prev).unwrap_or_default(),
                _ => Vec::new(),
            })
        })
    }
}
