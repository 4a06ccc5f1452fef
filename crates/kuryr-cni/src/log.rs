//! Optional plugin log file (`log_file` in the network config; `debug: true` adds request
//! details). Never stdout (stdout is the CNI protocol) and never stderr noise by default.
//!
//! A few lines of std instead of `tracing-subscriber`: the plugin runs once per pod operation
//! and writes at most a handful of lines; keeping it dependency-free keeps it small and fast.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// A line logger to an optional file.
#[derive(Debug, Default)]
pub struct Log {
    file: Option<File>,
    debug: bool,
}

impl Log {
    /// Opens `path` for appending; failures to open silently disable logging (a log problem
    /// must never fail a CNI call).
    pub fn open(path: Option<&str>, debug: bool) -> Self {
        let file = path
            .filter(|p| !p.is_empty())
            .and_then(|p| OpenOptions::new().create(true).append(true).open(p).ok());
        Self { file, debug }
    }

    fn write(&mut self, level: &str, msg: &str) {
        if let Some(f) = self.file.as_mut() {
            let ts = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            // One write(2) per line: appends of concurrent plugin runs then never interleave
            // on a local file system, and a file on a network share (9p, NFS) costs one round
            // trip per line instead of one per formatted fragment.
            let line = format!("{ts:.3} kuryr-cni[{}] {level} {msg}\n", std::process::id());
            let _ = f.write_all(line.as_bytes());
        }
    }

    /// Always logged (when a file is configured).
    pub fn info(&mut self, msg: &str) {
        self.write("INFO", msg);
    }

    /// Logged with `debug: true` only.
    pub fn debug(&mut self, msg: &str) {
        if self.debug {
            self.write("DEBUG", msg);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_appended_whole_and_debug_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cni.log");
        let p = path.to_str().unwrap();
        Log::open(Some(p), false).info("verb=ADD container=a ok");
        let mut log = Log::open(Some(p), false);
        log.debug("not written");
        log.info("verb=DEL container=a ok");
        Log::open(Some(p), true).debug("details");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let pid = format!(" kuryr-cni[{}] ", std::process::id());
        for (line, tail) in lines.iter().zip([
            "INFO verb=ADD container=a ok",
            "INFO verb=DEL container=a ok",
            "DEBUG details",
        ]) {
            assert!(line.contains(&pid) && line.ends_with(tail), "{line}");
        }
        assert!(text.ends_with('\n'));
        // No file configured, or one that cannot be opened: nothing fails.
        Log::open(None, true).info("x");
        Log::open(Some("/nonexistent/dir/cni.log"), true).info("x");
    }
}
