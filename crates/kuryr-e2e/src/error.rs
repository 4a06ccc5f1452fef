//! The harness's error type: one variant per step that can fail, naming what to look at.

use std::path::PathBuf;

/// What went wrong in the harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command (script, `ip netns exec`, python) could not be started.
    #[error("running {what}")]
    Spawn {
        /// The command.
        what: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A command exited non-zero.
    #[error("{what} failed ({status}); output:\n{output}")]
    Command {
        /// The command.
        what: String,
        /// Exit status.
        status: String,
        /// Its stdout and stderr.
        output: String,
    },
    /// A file of the cluster could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A file or answer was not what was expected.
    #[error("parsing {what}: {detail}")]
    Parse {
        /// What was parsed.
        what: String,
        /// Why it is wrong.
        detail: String,
    },
    /// The kubeconfig could not be turned into a client.
    #[error("kube client from {path}")]
    Kubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {what}")]
    Kube {
        /// The call.
        what: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
    /// A condition did not hold in time.
    #[error("timed out after {secs} s waiting for {what}")]
    Timeout {
        /// The condition.
        what: String,
        /// The bound.
        secs: u64,
    },
    /// An HTTP scrape failed.
    #[error("GET {url}")]
    Http {
        /// The URL.
        url: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Shorthand.
pub type Result<T, E = Error> = std::result::Result<T, E>;
