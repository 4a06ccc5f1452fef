//! Diagnostics of configuration loading: where a value came from ([`Origin`]), the errors that
//! stop a process before it touches anything ([`ConfigError`], collected in [`ConfigErrors`]),
//! and the warnings it logs and carries on with ([`Warning`]).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// The file and 1-based line a value (or a problem) comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// File name as given on the command line (or the name passed to `parse_str`).
    pub file: Arc<str>,
    /// 1-based line number.
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One reason why the configuration cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A `--config-file` (or a file of a `--config-dir`) could not be read.
    #[error("{path}: cannot read configuration file: {message}")]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// The I/O error, as text (keeps the error `Clone`/`PartialEq`).
        message: String,
    },
    /// A `--config-dir` could not be listed.
    #[error("{path}: cannot read configuration directory: {message}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error, as text.
        message: String,
    },
    /// A line that is not valid oslo.config INI.
    #[error("{origin}: {message}")]
    Syntax {
        /// Where.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
    /// A value that does not parse as the option's type (or is out of range).
    #[error("{origin}: [{group}] {option} = {value:?}: expected {expected}")]
    WrongType {
        /// Where the value was set.
        origin: Origin,
        /// Option group.
        group: String,
        /// Option name.
        option: String,
        /// The value as written.
        value: String,
        /// What the option accepts, e.g. "an integer" or "one of public, admin, internal".
        expected: String,
    },
    /// A value the selected configuration needs is not set (or set to an empty value).
    #[error("{}[{group}] {option} is required {reason}, but {}", origin.as_ref().map(|o| format!("{o}: ")).unwrap_or_default(), match origin { Some(_) => "it is set to an empty value".to_string(), None => format!("no configuration file sets it (read: {})", if files.is_empty() { "none".to_string() } else { files.join(", ") }) })]
    MissingRequired {
        /// Option group.
        group: String,
        /// Option name.
        option: String,
        /// Why it is required, e.g. "by kuryr-controller when pod_subnets_driver = default".
        reason: String,
        /// Where it was set to an empty value, if it was.
        origin: Option<Origin>,
        /// The files that were read (for the message).
        files: Vec<String>,
    },
    /// OpenStack credentials could not be determined.
    #[error("no OpenStack credentials: {0}")]
    NoCredentials(String),
    /// A value upstream accepts that kuryr-rs recognises but does not implement yet: refused
    /// rather than accepted and silently not done.
    #[error("{}[{group}] {option} = {value}: {what}", origin.as_ref().map(|o| format!("{o}: ")).unwrap_or_default())]
    NotImplemented {
        /// Where it was set.
        origin: Option<Origin>,
        /// Option group.
        group: &'static str,
        /// Option name.
        option: &'static str,
        /// The value (or the part of it) that is not implemented.
        value: String,
        /// What is missing, and what kuryr-rs does implement.
        what: String,
    },
}

impl ConfigError {
    /// The file and line of the problem, when it has one.
    pub fn origin(&self) -> Option<&Origin> {
        match self {
            ConfigError::Syntax { origin, .. } | ConfigError::WrongType { origin, .. } => Some(origin),
            ConfigError::MissingRequired { origin, .. } | ConfigError::NotImplemented { origin, .. } => {
                origin.as_ref()
            }
            _ => None,
        }
    }
}

/// All errors found while loading (every one is reported, not just the first).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} configuration error(s)", self.0.len())?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// What kind of thing a [`Warning`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarningKind {
    /// The option is not known in its group (typo, or an option of a newer/older upstream).
    UnknownOption,
    /// The whole group is unknown.
    UnknownGroup,
    /// A group read by libraries upstream (os-vif, privsep, oslo.cache …) that kuryr-rs ignores.
    IgnoredGroup,
    /// The option was set under a deprecated name.
    DeprecatedName,
    /// The option is deprecated for removal upstream.
    DeprecatedOption,
    /// A typed option was set to an empty value; the default is used (oslo.config would use
    /// `None`).
    EmptyValue,
    /// The option takes effect only with a feature kuryr-rs does not implement yet, and
    /// upstream ignores it too without that feature (e.g. `[octavia_defaults]` without the
    /// service handlers).
    NotInEffect,
}

/// Something worth logging that does not stop the process.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// What kind of problem.
    pub kind: WarningKind,
    /// File and line.
    pub origin: Origin,
    /// Option group.
    pub group: String,
    /// Option name as written (empty for group-level warnings).
    pub option: String,
    /// Human-readable explanation.
    pub message: String,
}

impl Warning {
    /// Logs the warning through `tracing` at WARN level with structured fields
    /// (`file`, `line`, `group`, `option`, `kind`).
    pub fn log(&self) {
        tracing::warn!(
            file = %self.origin.file,
            line = self.origin.line,
            group = %self.group,
            option = %self.option,
            kind = ?self.kind,
            "{}",
            self.message
        );
    }
}

/// Logs every warning (see [`Warning::log`]).
pub fn log_warnings(warnings: &[Warning]) {
    for w in warnings {
        w.log();
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.option.is_empty() {
            write!(f, "{}: [{}]: {}", self.origin, self.group, self.message)
        } else {
            write!(
                f,
                "{}: [{}] {}: {}",
                self.origin, self.group, self.option, self.message
            )
        }
    }
}
