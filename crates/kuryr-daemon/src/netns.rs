//! Running code inside a network namespace: every netlink conversation happens on a dedicated
//! OS thread (never on tokio's worker threads, whose namespace must not change), optionally moved
//! into a target namespace with `setns(2)`, driving a single-threaded tokio runtime of its own.

use std::{fs::File, future::Future, path::Path, path::PathBuf};

use nix::sched::{CloneFlags, setns};

/// Why namespace work could not run.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The namespace file cannot be opened (the sandbox is gone or the path is wrong).
    #[error("opening network namespace {path}")]
    Open {
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// `setns` failed.
    #[error("entering network namespace {path}")]
    Enter {
        /// The path.
        path: PathBuf,
        /// Cause.
        #[source]
        source: nix::Error,
    },
    /// The worker thread or its runtime could not be created.
    #[error("starting the namespace worker thread")]
    Thread(#[source] std::io::Error),
    /// The worker thread panicked.
    #[error("the namespace worker thread panicked")]
    Panicked,
}

/// Opens a namespace file (for `setns` or for moving a link into it).
pub fn open(path: &Path) -> Result<File, NetnsError> {
    File::open(path).map_err(|source| NetnsError::Open {
        path: path.to_owned(),
        source,
    })
}

/// Moves the calling thread into the namespace of `file` (opened from `path`).
pub fn enter(file: &File, path: &Path) -> Result<(), NetnsError> {
    setns(file, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Enter {
        path: path.to_owned(),
        source,
    })
}

/// Runs `f` on a fresh OS thread with a current-thread tokio runtime. The thread starts in the
/// daemon's own (host) namespace; `f` may call [`enter`] to switch — the thread ends with `f`,
/// so no other code ever runs in the switched namespace.
pub async fn on_thread<T, F, Fut>(f: F) -> Result<T, NetnsError>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("kuryr-netns".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
            let out = match rt {
                Ok(rt) => Ok(rt.block_on(f())),
                Err(e) => Err(NetnsError::Thread(e)),
            };
            let _ = tx.send(out);
        })
        .map_err(NetnsError::Thread)?;
    rx.await.map_err(|_| NetnsError::Panicked)?
}
