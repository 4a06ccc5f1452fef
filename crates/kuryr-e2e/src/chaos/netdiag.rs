//! Snapshots of the sandbox's data plane taken while it is broken: when a pair of long-lived
//! pods has had no answer for a few seconds, `sandbox/netdiag` (underlay addresses, routes and
//! neighbours, an underlay ping between nodes, Open vSwitch's tunnel tables, OVN's chassis) is
//! run at once and its output kept — the state that explains an outage is gone by the time the
//! run ends, and on CI a failure is all there is to read.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use tracing::{info, warn};

/// One snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// When it was taken.
    pub at: SystemTime,
    /// The pair that was dark, `from -> to`.
    pub pair: String,
    /// How long it had been dark.
    pub dark_for: Duration,
    /// Where the output was written.
    pub path: PathBuf,
    /// The output.
    pub text: String,
}

#[derive(Default)]
struct Taken {
    last: Option<Instant>,
    all: Vec<Snapshot>,
}

/// Takes snapshots when asked, at most one per `min_gap`.
pub struct Snapshots {
    script: PathBuf,
    dir: PathBuf,
    /// A pair dark this long gets a snapshot.
    pub after: Duration,
    min_gap: Duration,
    taken: Mutex<Taken>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Snapshots {
    /// Snapshots by `script` (`sandbox/netdiag`), written under `dir`: one when a pair has been
    /// dark for `after`, then none for `min_gap`.
    pub fn new(script: PathBuf, dir: &Path, after: Duration, min_gap: Duration) -> Arc<Self> {
        Arc::new(Self {
            script,
            dir: dir.to_path_buf(),
            after,
            min_gap,
            taken: Mutex::new(Taken::default()),
        })
    }

    /// `pair` has been dark for `dark_for`: takes a snapshot if that is long enough and none was
    /// taken lately. Blocks while the script runs (a few seconds): call it from a thread of
    /// its own.
    pub fn consider(&self, pair: &str, dark_for: Duration) {
        if dark_for < self.after {
            return;
        }
        {
            let mut t = lock(&self.taken);
            if t.last.is_some_and(|l| l.elapsed() < self.min_gap) {
                return;
            }
            t.last = Some(Instant::now());
        }
        let at = SystemTime::now();
        let text = match Command::new(&self.script).output() {
            Ok(o) => {
                let mut s = String::from_utf8_lossy(&o.stdout).into_owned();
                s.push_str(&String::from_utf8_lossy(&o.stderr));
                s
            }
            Err(e) => format!("{} could not run: {e}", self.script.display()),
        };
        let stamp = jiff::Timestamp::try_from(at)
            .map(|t| t.strftime("%H%M%S").to_string())
            .unwrap_or_default();
        let path = self.dir.join(format!("netdiag-{stamp}.txt"));
        let header = format!("# {pair} without an answer for {} ms\n", dark_for.as_millis());
        if let Err(e) = std::fs::write(&path, format!("{header}{text}")) {
            warn!(path = %path.display(), error = %e, "chaos: cannot write the data plane snapshot");
        }
        info!(%pair, dark_ms = dark_for.as_millis() as u64, path = %path.display(), "chaos: data plane snapshot taken");
        lock(&self.taken).all.push(Snapshot {
            at,
            pair: pair.to_string(),
            dark_for,
            path,
            text,
        });
    }

    /// The snapshots taken at or after `t`.
    pub fn since(&self, t: SystemTime) -> Vec<Snapshot> {
        lock(&self.taken)
            .all
            .iter()
            .filter(|s| s.at >= t)
            .cloned()
            .collect()
    }
}
