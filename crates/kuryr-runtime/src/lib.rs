//! kuryr-runtime: what every kuryr-rs process needs before and around its own work, written once.
//!
//! * [`args`] — the common command-line arguments (`--config-file`, `--config-dir`,
//!   `--kubeconfig`, `--health-bind`, `--metrics-bind`), flattened into each binary's own;
//! * [`start`] — loads kuryr.conf (every error listed, nothing touched when it is wrong), starts
//!   logging from its `[DEFAULT]` options, logs the configuration warnings, installs the TLS
//!   provider;
//! * [`logging`] — the tracing subscriber from `[DEFAULT] debug`, `log_file`/`log_dir`,
//!   `use_json`, `use_stderr` (and `RUST_LOG`, which wins);
//! * [`kubeclient`] — the Kubernetes client: `--kubeconfig`, else `[kubernetes] api_root` with
//!   `token_file` and the TLS options, else `KUBECONFIG`/in-cluster;
//! * [`http`] — binding (`[::]` with an IPv4 fallback) and serving the health and metrics
//!   servers, `/ready` + `/alive` over a [`http::Probe`], `/metrics` over an [`http::Exposition`];
//! * [`identity`] — this cluster's identity tag on OpenStack: configured, or derived from the
//!   `kube-system` Namespace's UID;
//! * [`uninstall`] — at shutdown, whether kuryr-rs is being removed (its workload gone) or
//!   only restarted;
//! * [`shutdown_signal`] and [`error_chain`].

pub mod args;
pub mod http;
pub mod identity;
pub mod kubeclient;
pub mod logging;
pub mod uninstall;

use std::process::ExitCode;

pub use args::{ConfigArgs, KubeArgs, ServeArgs, WorkloadArgs};
use kuryr_config::{Config, ConfigErrors, ConfigSources, Role};
use tracing::info;

/// An error and its `source()` chain on one line (`outer: cause: root cause`), for logs, Events
/// and exit messages. A cause whose text is already in the line is skipped: several libraries
/// (openstack_sdk, reqwest) put their source into their own message too, which otherwise
/// repeated a whole URL three times in one Event.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// Loads kuryr.conf for `role` from the files and directories of `args`, with the process
/// environment for `${VAR}`-style lookups. Returns the warnings to log once logging runs.
pub fn load_config(
    args: &ConfigArgs,
    role: Role,
) -> Result<(Config, Vec<kuryr_config::Warning>), ConfigErrors> {
    let sources = ConfigSources {
        config_files: args.config_file.clone(),
        config_dirs: args.config_dir.clone(),
    };
    kuryr_config::load_for(&sources, role, &|k| std::env::var(k).ok())
}

/// The start of every kuryr-rs daemon: loads kuryr.conf for `role` (on errors prints them all
/// to stderr and returns exit code 2: nothing was touched), starts logging from its
/// `[DEFAULT]` options (exit code 2 when the log file cannot be opened), logs the
/// configuration's warnings with file and line, and installs the process-wide rustls provider
/// that kube and the OpenStack client share.
pub fn start(component: &'static str, args: &ConfigArgs, role: Role) -> Result<Config, ExitCode> {
    let (config, warnings) = match load_config(args, role) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{component}: {e}");
            return Err(ExitCode::from(2));
        }
    };
    if let Err(e) = logging::init(component, &config.default, std::env::var("RUST_LOG").ok()) {
        eprintln!("{component}: {}", error_chain(&e));
        return Err(ExitCode::from(2));
    }
    kuryr_config::log_warnings(&warnings);
    install_crypto();
    info!(component, version = env!("CARGO_PKG_VERSION"), "starting");
    Ok(config)
}

/// Installs the process-wide rustls provider (idempotent).
pub fn install_crypto() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    info!("shutdown requested");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn error_chain_joins_causes() {
        let e = Outer(std::io::Error::other("root cause"));
        assert_eq!(error_chain(&e), "outer: root cause");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("request failed: {0}")]
    struct Folding(#[source] std::io::Error);

    #[test]
    fn error_chain_skips_causes_already_in_the_message() {
        let e = Outer(std::io::Error::other(Folding(std::io::Error::other("refused"))));
        assert_eq!(error_chain(&e), "outer: request failed: refused");
    }
}
