//! Container logs kept while an app's pods go away: the emulated kubelet removes a pod's
//! directory (and its `logs/<container>/<n>.log`) when the pod is deleted, so what a
//! controller logged during an uninstall is gone by the time the test can tell that something
//! was left. A [`LogKeeper`] copies the logs of one container of every pod on every node a few
//! times a second until it is stopped.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread::JoinHandle,
    time::Duration,
};

/// Copies `<node state>/pods/*/logs/<container>/*.log` until [`LogKeeper::stop`].
pub struct LogKeeper {
    stop: Arc<AtomicBool>,
    kept: Arc<Mutex<BTreeMap<PathBuf, String>>>,
    thread: Option<JoinHandle<()>>,
}

fn copy_logs(nodes_dir: &Path, container: &str, kept: &Mutex<BTreeMap<PathBuf, String>>) {
    let dirs = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    for node in dirs(nodes_dir) {
        for pod in dirs(&node.join("pods")) {
            for log in dirs(&pod.join("logs").join(container)) {
                // A file read while its pod is being removed may come back short or empty:
                // only a longer text replaces what is kept.
                let Ok(text) = std::fs::read_to_string(&log) else {
                    continue;
                };
                let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
                let e = kept.entry(log).or_default();
                if text.len() > e.len() {
                    *e = text;
                }
            }
        }
    }
}

impl LogKeeper {
    /// Starts keeping `container`'s logs of the pods under `nodes_dir` (`<cluster state>/nodes`).
    pub fn start(nodes_dir: PathBuf, container: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let kept = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, k, c) = (stop.clone(), kept.clone(), container.to_owned());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                copy_logs(&nodes_dir, &c, &k);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Self {
            stop,
            kept,
            thread: Some(thread),
        }
    }

    /// Stops copying; returns, per log file kept, its last `lines` lines.
    pub fn stop(mut self, lines: usize) -> String {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        for (path, text) in kept.iter() {
            let all: Vec<&str> = text.lines().collect();
            out.push_str(&format!(
                "--- {} (last {} of {} lines)\n",
                path.display(),
                lines.min(all.len()),
                all.len()
            ));
            for l in &all[all.len().saturating_sub(lines)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        if out.is_empty() {
            out.push_str("(no container log was seen)\n");
        }
        out
    }
}

impl Drop for LogKeeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
