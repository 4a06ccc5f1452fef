//! The loaded configuration ([`Config`]) and how it is loaded: from the `--config-file` and
//! `--config-dir` sources ([`ConfigSources`], [`load`]) or, for tests, from strings
//! ([`from_strs`]). Reading files is the only I/O in this crate.

use crate::error::{ConfigError, ConfigErrors, Warning};
use crate::groups::Groups;
use crate::ini::{ParsedFile, parse_str};
use crate::required::{Role, check_required};
use crate::resolve::{Resolved, resolve};
use crate::supported::check_supported;
use std::path::{Path, PathBuf};

/// Where to read the configuration from, as given on the command line (upstream:
/// `--config-file` (repeatable) and `--config-dir` (repeatable)). Files are read in order, then
/// the `*.conf` files of each directory in lexical order; later values override earlier ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSources {
    /// `--config-file` paths, in order.
    pub config_files: Vec<PathBuf>,
    /// `--config-dir` paths, in order.
    pub config_dirs: Vec<PathBuf>,
}

/// The loaded configuration: typed groups plus every option's value and origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Typed groups.
    pub groups: Groups,
    /// Every registered option with its effective value and where it was set.
    pub resolved: Resolved,
}

impl std::ops::Deref for Config {
    type Target = Groups;
    fn deref(&self) -> &Groups {
        &self.groups
    }
}

impl Config {
    /// Only the defaults (no file), with `K8S_API` ignored.
    pub fn defaults() -> Self {
        let res = resolve(&[], &|_| None);
        Config {
            groups: Groups::from_resolved(&res.resolved),
            resolved: res.resolved,
        }
    }
}

/// Lists the files `sources` designates, in the order they are read. Missing files or
/// directories are errors.
pub fn expand_sources(sources: &ConfigSources) -> Result<Vec<PathBuf>, ConfigErrors> {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    files.extend(sources.config_files.iter().cloned());
    for dir in &sources.config_dirs {
        match list_conf_dir(dir) {
            Ok(mut found) => files.append(&mut found),
            Err(message) => errors.push(ConfigError::ReadDir {
                path: dir.clone(),
                message,
            }),
        }
    }
    if errors.is_empty() {
        Ok(files)
    } else {
        Err(ConfigErrors(errors))
    }
}

fn list_conf_dir(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path();
        let is_conf = path.extension().is_some_and(|e| e == "conf");
        if is_conf && path.is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// Reads and checks the configuration for a process playing `role`: type errors, syntax errors,
/// missing files and values `role` requires are all errors (all of them reported); unknown or
/// deprecated options are returned as warnings for the caller to log. `env` is consulted for
/// `K8S_API` only.
pub fn load_for(
    sources: &ConfigSources,
    role: Role,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    let paths = expand_sources(sources)?;
    let mut parsed = Vec::with_capacity(paths.len());
    let mut errors = Vec::new();
    for p in &paths {
        match std::fs::read(p) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                parsed.push(parse_str(&p.display().to_string(), &text));
            }
            Err(e) => errors.push(ConfigError::ReadFile {
                path: p.clone(),
                message: e.to_string(),
            }),
        }
    }
    let (config, warnings, mut errs) = build(&parsed, role, env);
    errors.append(&mut errs);
    if errors.is_empty() {
        Ok((config, warnings))
    } else {
        Err(ConfigErrors(errors))
    }
}

/// [`load_for`] with [`Role::Any`] (no role-specific requirements) and the process
/// environment.
pub fn load(sources: &ConfigSources) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    load_for(sources, Role::Any, &|k| std::env::var(k).ok())
}

/// Pure variant for tests: `(name, text)` pairs are parsed in order as if they were files.
pub fn from_strs(
    files: &[(&str, &str)],
    role: Role,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    let parsed: Vec<ParsedFile> = files.iter().map(|(n, t)| parse_str(n, t)).collect();
    let (config, warnings, errors) = build(&parsed, role, env);
    if errors.is_empty() {
        Ok((config, warnings))
    } else {
        Err(ConfigErrors(errors))
    }
}

fn build(
    parsed: &[ParsedFile],
    role: Role,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Config, Vec<Warning>, Vec<ConfigError>) {
    let res = resolve(parsed, env);
    let config = Config {
        groups: Groups::from_resolved(&res.resolved),
        resolved: res.resolved,
    };
    let mut errors = res.errors;
    let mut warnings = res.warnings;
    errors.extend(check_required(&config, role));
    let (unsupported, not_in_effect) = check_supported(&config, role);
    errors.extend(unsupported);
    warnings.extend(not_in_effect);
    (config, warnings, errors)
}
