//! The tracing subscriber of a kuryr-rs process, from upstream's oslo.log options in
//! `[DEFAULT]`: `debug` (debug level instead of info), `log_file` (relative to `log_dir` when
//! that is set, as oslo.log joins them) instead of stderr, `use_stderr` (stderr as well as the
//! file), `use_json` (one JSON object per line). `RUST_LOG`, when set, chooses the levels
//! instead of `debug`. `use_syslog` and `use_journal` are not supported: a warning says so.
//! `openstack_sdk` logs at `warn` unless `RUST_LOG` names it (at `info` it logs every request
//! with its headers; the Neutron client has its own metrics and error reports).

use std::{
    fs::{File, OpenOptions},
    path::PathBuf,
    sync::Mutex,
};

use kuryr_config::DefaultConf;
use tracing_subscriber::{EnvFilter, fmt::writer::MakeWriterExt};

/// Why logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// `[DEFAULT] log_file` cannot be opened for appending.
    #[error("[DEFAULT] log_file: cannot open {path} for appending")]
    OpenLogFile {
        /// The file (joined with `log_dir`).
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A global subscriber was installed already (a second `init` in one process).
    #[error("logging was started twice")]
    AlreadyStarted,
}

/// Where the log goes and how it looks, derived from `[DEFAULT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPlan {
    /// The filter directives.
    pub filter: String,
    /// The log file, if any.
    pub file: Option<PathBuf>,
    /// Also (or only, without a file) to stderr.
    pub stderr: bool,
    /// JSON lines.
    pub json: bool,
    /// Options given that are not supported, to warn about once logging runs.
    pub unsupported: Vec<&'static str>,
}

impl LogPlan {
    /// The plan for `conf`, with `RUST_LOG` (if set and not blank) choosing the levels.
    pub fn new(conf: &DefaultConf, rust_log: Option<String>) -> Self {
        let base = rust_log
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| if conf.debug { "debug".into() } else { "info".into() });
        let filter = if base.contains("openstack_sdk") {
            base
        } else {
            format!("{base},openstack_sdk=warn")
        };
        let file = conf.log_file.as_deref().filter(|f| !f.is_empty()).map(|f| {
            match conf.log_dir.as_deref().filter(|d| !d.is_empty()) {
                Some(dir) => PathBuf::from(dir).join(f),
                None => PathBuf::from(f),
            }
        });
        let mut unsupported = Vec::new();
        if conf.use_syslog {
            unsupported.push("use_syslog");
        }
        if conf.use_journal {
            unsupported.push("use_journal");
        }
        LogPlan {
            stderr: file.is_none() || conf.use_stderr,
            filter,
            file,
            json: conf.use_json,
            unsupported,
        }
    }
}

/// Starts logging for `component` as `conf` says (see the module docs).
pub fn init(component: &str, conf: &DefaultConf, rust_log: Option<String>) -> Result<(), LogError> {
    let plan = LogPlan::new(conf, rust_log);
    let filter = EnvFilter::try_new(&plan.filter).unwrap_or_else(|e| {
        eprintln!(
            "{component}: RUST_LOG {:?} is not a valid filter ({e}); using info",
            plan.filter
        );
        EnvFilter::new("info,openstack_sdk=warn")
    });
    let file = match &plan.file {
        Some(path) => Some(open(path)?),
        None => None,
    };
    let ansi = plan.file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi);
    // Four shapes (JSON or text, file or not): the writer types differ, hence the repetition.
    let result = match (file, plan.json) {
        (Some(f), true) if plan.stderr => builder
            .json()
            .with_writer(Mutex::new(f).and(std::io::stderr))
            .try_init(),
        (Some(f), true) => builder.json().with_writer(Mutex::new(f)).try_init(),
        (Some(f), false) if plan.stderr => builder.with_writer(Mutex::new(f).and(std::io::stderr)).try_init(),
        (Some(f), false) => builder.with_writer(Mutex::new(f)).try_init(),
        (None, true) => builder.json().with_writer(std::io::stderr).try_init(),
        (None, false) => builder.with_writer(std::io::stderr).try_init(),
    };
    result.map_err(|_| LogError::AlreadyStarted)?;
    for option in &plan.unsupported {
        tracing::warn!(
            group = "DEFAULT",
            option,
            "not supported by kuryr-rs: logging goes to log_file or stderr"
        );
    }
    Ok(())
}

fn open(path: &PathBuf) -> Result<File, LogError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(dir);
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| LogError::OpenLogFile {
            path: path.clone(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf() -> DefaultConf {
        kuryr_config::Config::defaults().groups.default
    }

    #[test]
    fn debug_chooses_the_level_unless_rust_log_is_set() {
        let mut c = conf();
        assert_eq!(LogPlan::new(&c, None).filter, "info,openstack_sdk=warn");
        c.debug = true;
        assert_eq!(LogPlan::new(&c, None).filter, "debug,openstack_sdk=warn");
        assert_eq!(
            LogPlan::new(&c, Some("warn".into())).filter,
            "warn,openstack_sdk=warn"
        );
        assert_eq!(
            LogPlan::new(&c, Some("  ".into())).filter,
            "debug,openstack_sdk=warn"
        );
        assert_eq!(
            LogPlan::new(&c, Some("info,openstack_sdk=debug".into())).filter,
            "info,openstack_sdk=debug"
        );
    }

    #[test]
    fn log_file_is_joined_with_log_dir_and_replaces_stderr() {
        let mut c = conf();
        assert_eq!(LogPlan::new(&c, None).file, None);
        assert!(LogPlan::new(&c, None).stderr);
        c.log_file = Some("kuryr.log".into());
        c.log_dir = Some("/var/log/kuryr".into());
        let p = LogPlan::new(&c, None);
        assert_eq!(p.file, Some(PathBuf::from("/var/log/kuryr/kuryr.log")));
        assert!(!p.stderr);
        c.use_stderr = true;
        assert!(LogPlan::new(&c, None).stderr);
        c.log_dir = None;
        assert_eq!(LogPlan::new(&c, None).file, Some(PathBuf::from("kuryr.log")));
    }

    #[test]
    fn json_and_unsupported_options() {
        let mut c = conf();
        c.use_json = true;
        c.use_syslog = true;
        let p = LogPlan::new(&c, None);
        assert!(p.json);
        assert_eq!(p.unsupported, vec!["use_syslog"]);
    }

    #[test]
    fn an_unwritable_log_file_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A directory cannot be opened as the log file.
        let e = open(&dir.path().to_path_buf()).expect_err("a directory is not a log file");
        assert!(e.to_string().contains("[DEFAULT] log_file"), "{e}");
    }
}
