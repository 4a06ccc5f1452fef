//! Crash record of the sandbox cloud: `sandbox/supervise` runs every daemon of the sandbox cloud
//! (Open vSwitch, OVN, Neutron, Octavia, Keystone, MariaDB) and appends one tab-separated line
//! to `$KURYR_SANDBOX_HOME/logs/crashes.log` whenever one of them ends without being asked to.
//! A crash of a sandbox daemon is a bug, never flakiness: a test takes a [`CrashGuard`] when it
//! starts and fails, naming the daemon and the log line that tells why, when one crashed while
//! it ran. Deliberate kills are announced first with [`expect_exit`].
//!
//! Tests that drive the sandbox run one at a time (nextest group `sandbox`), so a crash between a
//! guard's creation and its check happened during that test.

pub mod ports;

pub use ports::{free_addr, free_port};

use std::{
    fmt,
    fs::File,
    io::{Read, Seek, SeekFrom},
    path::{Path, PathBuf},
};

/// What can go wrong reading the record.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The record exists but cannot be read.
    #[error("reading the sandbox crash record {path}")]
    Read {
        /// The record.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A deliberate kill could not be announced.
    #[error("announcing the deliberate exit of {component} ({path})")]
    Announce {
        /// The component.
        component: String,
        /// The marker file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// One or more sandbox daemons crashed.
    #[error("{}", describe(.0))]
    Crashed(Vec<Crash>),
}

/// The sandbox's state root (`KURYR_SANDBOX_HOME`, default `/var/lib/kuryr-sandbox`).
pub fn sandbox_home() -> PathBuf {
    std::env::var_os("KURYR_SANDBOX_HOME")
        .map_or_else(|| PathBuf::from("/var/lib/kuryr-sandbox"), PathBuf::from)
}

/// The crash record of the sandbox at `home`.
pub fn record_path(home: &Path) -> PathBuf {
    home.join("logs").join("crashes.log")
}

/// One crash of a sandbox daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crash {
    /// When the supervisor saw it end (UTC, RFC 3339).
    pub when: String,
    /// The component (`sandbox/status` names), e.g. `ovs-vswitchd-node-1`.
    pub component: String,
    /// Its pid.
    pub pid: String,
    /// How it ended: `signal ABRT`, `exit 1`, ...
    pub ended: String,
    /// Its log file.
    pub log: String,
    /// The log line that tells why (an assertion, a panic, the last line).
    pub line: String,
}

impl Crash {
    /// Parses one line of the record; `None` for a line that is not a record.
    pub fn parse(line: &str) -> Option<Crash> {
        let mut f = line.splitn(6, '\t');
        let when = f.next()?.to_string();
        let component = f.next()?.to_string();
        let pid = f.next()?.to_string();
        let ended = f.next()?.to_string();
        let log = f.next()?.to_string();
        let line = f.next().unwrap_or_default().to_string();
        (!component.is_empty()).then_some(Crash {
            when,
            component,
            pid,
            ended,
            log,
            line,
        })
    }
}

impl fmt::Display for Crash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (pid {}) ended by {} at {}: {} (log: {})",
            self.component, self.pid, self.ended, self.when, self.line, self.log
        )
    }
}

fn describe(crashes: &[Crash]) -> String {
    let mut s = format!(
        "sandbox daemons crashed {} time(s) (a bug, never flakiness; `sandbox/crashes` lists them all):",
        crashes.len()
    );
    for c in crashes {
        s.push_str("\n  ");
        s.push_str(&c.to_string());
    }
    s
}

/// A position in the record: crashes after it are new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark(pub u64);

/// The record of one sandbox.
#[derive(Debug, Clone)]
pub struct Record {
    path: PathBuf,
}

impl Default for Record {
    fn default() -> Self {
        Record::at(&sandbox_home())
    }
}

impl Record {
    /// The record of the sandbox at `home`.
    pub fn at(home: &Path) -> Self {
        Record {
            path: record_path(home),
        }
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the record ends now (no record yet: 0).
    pub fn mark(&self) -> Mark {
        Mark(std::fs::metadata(&self.path).map_or(0, |m| m.len()))
    }

    /// The crashes recorded after `mark`. A record shorter than the mark was reset (the
    /// sandbox was purged): all of it is new.
    pub fn since(&self, mark: Mark) -> Result<Vec<Crash>, Error> {
        let read_err = |source| Error::Read {
            path: self.path.clone(),
            source,
        };
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(read_err(e)),
        };
        let len = file.metadata().map_err(read_err)?.len();
        let start = if mark.0 <= len { mark.0 } else { 0 };
        file.seek(SeekFrom::Start(start)).map_err(read_err)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(read_err)?;
        Ok(String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(Crash::parse)
            .collect())
    }

    /// `Ok` when nothing crashed after `mark`, else [`Error::Crashed`] listing the crashes.
    pub fn check_since(&self, mark: Mark) -> Result<(), Error> {
        let crashes = self.since(mark)?;
        if crashes.is_empty() {
            Ok(())
        } else {
            Err(Error::Crashed(crashes))
        }
    }
}

/// Announces a deliberate kill of sandbox component `component` (as `sandbox/crashes --expect`):
/// its supervisor logs its next exit as expected instead of recording a crash, and restarts it
/// at once.
pub fn expect_exit(home: &Path, component: &str) -> Result<(), Error> {
    let path = home.join("run").join(format!("{component}.expect-exit"));
    std::fs::write(&path, b"").map_err(|source| Error::Announce {
        component: component.to_string(),
        path,
        source,
    })
}

/// Fails the test that holds it when a sandbox daemon crashed after its creation: call
/// [`CrashGuard::check`] at the end for a `Result`, or let it drop — it then panics with the
/// crashes (unless the test is already failing, whose own message then stands).
#[derive(Debug)]
pub struct CrashGuard {
    record: Record,
    mark: Mark,
    checked: bool,
}

impl Default for CrashGuard {
    fn default() -> Self {
        CrashGuard::new()
    }
}

impl CrashGuard {
    /// A guard over the default sandbox's record, from now on.
    pub fn new() -> Self {
        CrashGuard::over(Record::default())
    }

    /// A guard over `record`, from now on.
    pub fn over(record: Record) -> Self {
        let mark = record.mark();
        CrashGuard {
            record,
            mark,
            checked: false,
        }
    }

    /// Checks now; a later drop does not check again.
    pub fn check(mut self) -> Result<(), Error> {
        self.checked = true;
        self.record.check_since(self.mark)
    }
}

impl Drop for CrashGuard {
    fn drop(&mut self) {
        if self.checked || std::thread::panicking() {
            return;
        }
        if let Err(e) = self.record.check_since(self.mark) {
            panic!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(home: &Path, line: &str) {
        std::fs::create_dir_all(home.join("logs")).expect("logs dir");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(record_path(home))
            .expect("open record");
        writeln!(f, "{line}").expect("append");
    }

    const LINE: &str = "2026-11-24T17:40:12Z\tovs-vswitchd-node-1\t4242\tsignal ABRT\t/l/ovs.log\tovs-vswitchd: ../lib/conntrack.c:1063: assertion failed";

    #[test]
    fn parses_a_record_line() {
        let c = Crash::parse(LINE).expect("a record");
        assert_eq!(c.component, "ovs-vswitchd-node-1");
        assert_eq!(c.ended, "signal ABRT");
        assert!(c.line.contains("conntrack.c:1063"));
        assert!(
            c.to_string()
                .contains("ovs-vswitchd-node-1 (pid 4242) ended by signal ABRT")
        );
        assert_eq!(Crash::parse(""), None);
        assert_eq!(Crash::parse("just text"), None);
    }

    #[test]
    fn only_crashes_after_the_mark_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rec = Record::at(dir.path());
        assert!(rec.since(Mark(0)).expect("no record is empty").is_empty());
        append(dir.path(), LINE);
        let mark = rec.mark();
        assert!(rec.check_since(mark).is_ok());
        append(dir.path(), &LINE.replace("node-1", "node-2"));
        match rec.check_since(mark) {
            Err(Error::Crashed(c)) => {
                assert_eq!(c.len(), 1);
                assert_eq!(c[0].component, "ovs-vswitchd-node-2");
            }
            other => panic!("expected one crash, got {other:?}"),
        }
        // A purged (shorter) record: everything in it is new.
        std::fs::write(record_path(dir.path()), format!("{LINE}\n")).expect("rewrite");
        assert_eq!(rec.since(Mark(10_000)).expect("read").len(), 1);
    }

    #[test]
    fn guard_panics_on_drop_when_a_daemon_crashed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let guard = CrashGuard::over(Record::at(dir.path()));
        append(dir.path(), LINE);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(guard)));
        let msg = r.expect_err("the guard must panic");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("ovs-vswitchd-node-1"), "{msg}");
        assert!(msg.contains("conntrack.c:1063"), "{msg}");
    }

    #[test]
    fn guard_is_quiet_without_crashes_and_checks_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        append(dir.path(), LINE);
        let guard = CrashGuard::over(Record::at(dir.path()));
        assert!(guard.check().is_ok());
    }

    #[test]
    fn announced_exit_leaves_a_marker_for_the_supervisor() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("run")).expect("run dir");
        expect_exit(dir.path(), "ovs-vswitchd-node-1").expect("announce");
        assert!(dir.path().join("run/ovs-vswitchd-node-1.expect-exit").exists());
    }
}
