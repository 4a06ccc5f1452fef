//! Configuration of kuryr-rs: reads upstream Kuryr-Kubernetes' `kuryr.conf` unchanged.
//!
//! The file format is oslo.config's INI dialect, and it is parsed by hand here because no Rust
//! crate implements oslo.config's semantics: several `--config-file`s and `--config-dir`s
//! (`*.conf`, sorted) layered so that later files override earlier ones, indented continuation
//! lines, `[DEFAULT]`, `#`/`;` comments, `key = value` and `key: value`, last assignment wins
//! except for multi-valued options which accumulate, deprecated option names, and oslo's value
//! types (booleans `true/false/yes/no/on/off/1/0`, comma lists, `k:v` dicts, ports, ranges).
//! Generic INI crates get continuation lines, duplicate keys or layering wrong, and none carries
//! the file and line of every value, which the diagnostics need.
//!
//! Layers, from text to typed structs:
//! * [`ini`] — text → `(group, key, value, file:line)` entries;
//! * [`registry`] — the static table of upstream's options ([`registry::OPTIONS`]);
//! * [`resolve`] — layering, typing, warnings and type errors;
//! * [`groups`] — typed structs per group (`config.kubernetes.pod_vif_driver`, …);
//! * [`required`] — what each process role cannot start without;
//! * [`supported`] — values whose feature kuryr-rs does not implement yet: refused, never
//!   accepted and silently not done;
//! * [`auth`] — which OpenStack credentials to use ([`CloudAuth`]);
//! * [`sample`] — a commented sample `kuryr.conf` from the registry.
//!
//! Unknown options are [`Warning`]s (file, line, group, option); a wrong type, a syntax error, a
//! missing file or a missing required value is a [`ConfigError`] naming file, line, option and
//! what was expected. All errors are collected in [`ConfigErrors`].

pub mod auth;
pub mod config;
pub mod error;
pub mod groups;
pub mod ini;
pub mod registry;
pub mod required;
pub mod resolve;
pub mod sample;
pub mod supported;
pub mod value;

pub use auth::{CloudAuth, KeystoneAuth, resolve_cloud_auth};
pub use config::{Config, ConfigSources, expand_sources, from_strs, load, load_for};
pub use error::{ConfigError, ConfigErrors, Origin, Warning, WarningKind, log_warnings};
pub use groups::*;
pub use ini::parse_str;
pub use required::Role;
pub use sample::sample_config;
pub use value::{OptKind, Value};
