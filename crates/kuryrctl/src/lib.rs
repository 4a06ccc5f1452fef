//! kuryrctl: the admin CLI of kuryr-rs.
//!
//! * [`cli`] — the command line;
//! * [`access`] — Kubernetes client, configuration and Neutron client;
//! * [`classify`] — pure decisions: port classification, pool grouping, status checks;
//! * [`output`] — tables and JSON;
//! * [`commands`] — one module per command.

pub mod access;
pub mod classify;
pub mod cli;
pub mod commands;
pub mod output;

/// A failed step of a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig could not be read or used.
    #[error("reading kubeconfig {path}")]
    Kubeconfig {
        /// Path.
        path: String,
        /// Cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No Kubernetes client configuration was found.
    #[error("finding a Kubernetes configuration (use --kubeconfig or KUBECONFIG)")]
    InferConfig(#[source] kube::config::InferConfigError),
    /// The Kubernetes client could not be built.
    #[error("building the Kubernetes client")]
    Client(#[source] kube::Error),
    /// A Kubernetes list failed.
    #[error("listing {what}")]
    List {
        /// What was listed.
        what: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// The kuryr.conf files are invalid.
    #[error("reading the configuration")]
    Config(#[source] Box<kuryr_config::ConfigErrors>),
    /// No OpenStack credentials.
    #[error("finding OpenStack credentials (use --config-file or OS_CLOUD)")]
    CloudAuth(#[source] Box<kuryr_config::ConfigError>),
    /// The configured tags are invalid.
    #[error("invalid tags")]
    Tags(#[source] kuryr_core::config::ConfigError),
    /// Neutron failed.
    #[error("asking Neutron for {what}")]
    Neutron {
        /// What was asked.
        what: &'static str,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Without tags, kuryr's ports cannot be told from others.
    #[error("no tags: pass --cluster-tag or set [neutron_defaults] resource_tags/cluster_tag")]
    NoTags,
    /// Writing JSON failed.
    #[error("writing JSON")]
    Json(#[source] serde_json::Error),
}

impl Error {
    /// Exit code: 255 for everything that stopped a command (as upstream's status command
    /// for unexpected failures), distinct from `status`'s 0/1/2 results.
    pub fn exit_code(&self) -> u8 {
        255
    }
}

/// An error and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Runs `cli`; returns the exit code.
pub async fn run(cli: cli::Cli) -> Result<u8, Error> {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let mut out = std::io::stdout().lock();
    commands::run(&cli, &mut out).await
}
