//! `bench/scale` (issue 39): kuryr-rs measured at growing sizes with every component in its own
//! process — the model cloud ([`world`]: `kuryr-modelcloud`), the emulated API server
//! (`kube-sandbox apiserver`), the controller (`kuryr-controller`) and the hollow fleet
//! (`kuryr-hollow`) — from outside, as an operator would: `/proc` for CPU and memory, the API
//! server's and the model's request counts, watches for latencies ([`burst`] of pods,
//! [`services`] over them).

pub mod burst;
pub mod http;
pub mod procs;
pub mod report;
pub mod services;
pub mod stats;
pub mod world;

use std::path::Path;

/// What stops a scale run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A component did not start or answer.
    #[error("{what}: {message}")]
    Start {
        /// Which.
        what: String,
        /// Why.
        message: String,
    },
    /// A file of the run.
    #[error("{path}: {message}")]
    Io {
        /// Which.
        path: String,
        /// Why.
        message: String,
    },
    /// The API server refused or failed a request.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// A step did not finish.
    #[error("{0}")]
    Timeout(String),
}

impl Error {
    pub(crate) fn io(path: &Path, e: impl std::fmt::Display) -> Self {
        Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Error::Kube { what, source }
    }
}
