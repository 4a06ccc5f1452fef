//! kuryrctl: the admin CLI of kuryr-rs.
//!
//! * [`cli`] — the command line;
//! * [`access`] — Kubernetes client, configuration and Neutron client;
//! * [`classify`] — pure decisions: port classification, pool grouping, status checks;
//! * [`output`] — tables and JSON;
//! * [`manager`] — the client of the controller's pool manager socket;
//! * [`commands`] — one module per command.

pub mod access;
pub mod classify;
pub mod cli;
pub mod commands;
pub mod manager;
pub mod output;

/// A failed step of a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No Kubernetes client (`--kubeconfig`, `[kubernetes] api_root` of the kuryr.conf,
    /// `KUBECONFIG`, in-cluster).
    #[error("connecting to Kubernetes")]
    Kube(#[source] kuryr_runtime::kubeclient::Error),
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
    /// The cluster's identity could not be found.
    #[error(transparent)]
    Identity(kuryr_runtime::identity::Error),
    /// Nothing listens on the pool manager socket.
    #[error(
        "no pool manager answers at {}: run kuryr-controller with [kubernetes] enable_manager = true, or pass --socket",
        socket.display()
    )]
    NoPoolManager {
        /// The socket.
        socket: std::path::PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The connection to the pool manager broke.
    #[error("talking to the pool manager at {} ({request})", socket.display())]
    PoolManagerIo {
        /// The socket.
        socket: std::path::PathBuf,
        /// The request.
        request: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The pool manager did not answer in time.
    #[error("the pool manager at {} did not answer {request} within {secs} s", socket.display())]
    PoolManagerTimeout {
        /// The socket.
        socket: std::path::PathBuf,
        /// The request.
        request: String,
        /// The time allowed.
        secs: u64,
    },
    /// The pool manager refused or failed a request.
    #[error("the pool manager at {} answered {request} with {status}: {message}", socket.display())]
    PoolManagerAnswer {
        /// The socket.
        socket: std::path::PathBuf,
        /// The request.
        request: String,
        /// Its status.
        status: String,
        /// What it said.
        message: String,
    },
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

pub use kuryr_runtime::error_chain;

/// Runs `cli`; returns the exit code.
pub async fn run(cli: cli::Cli) -> Result<u8, Error> {
    kuryr_runtime::install_crypto();
    let mut out = std::io::stdout().lock();
    commands::run(&cli, &mut out).await
}
