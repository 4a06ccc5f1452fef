//! Layering and typing: turns the parsed files (in command-line order) into one value per
//! registered option, with the file and line it came from, plus the warnings (unknown or
//! deprecated options, ignored groups) and type errors found on the way.
//!
//! Precedence follows oslo.config: a later file overrides an earlier one and, within a file, the
//! last assignment wins; `MultiStr` options accumulate every assignment of every file; within the
//! newest file that sets an option, its current name beats a deprecated one; unset options take
//! their default.

use crate::error::{ConfigError, Origin, Warning, WarningKind};
use crate::ini::{DEFAULT_GROUP, ParsedFile, RawEntry};
use crate::registry::{self, DEFAULT_API_ROOT, OPTIONS, OptSpec};
use crate::value::{OptKind, Value, parse_value};
use std::collections::{BTreeMap, BTreeSet};

/// The effective value of one option.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedOpt {
    /// The option's registry entry.
    pub spec: &'static OptSpec,
    /// Typed value; `None` when unset and without default.
    pub value: Option<Value>,
    /// Where the value was set; `None` when it is the default (or comes from the environment).
    pub origin: Option<Origin>,
}

/// Every registered option with its effective value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resolved {
    opts: BTreeMap<(&'static str, &'static str), ResolvedOpt>,
    /// Names of the files that were read, in order.
    pub files: Vec<String>,
}

/// Result of [`resolve`]: values, warnings and errors (errors do not stop the resolution of
/// other options, so every problem is reported).
#[derive(Debug, Clone, Default)]
pub struct Resolution {
    /// The values.
    pub resolved: Resolved,
    /// Warnings to log.
    pub warnings: Vec<Warning>,
    /// Errors; the configuration must not be used when this is not empty.
    pub errors: Vec<ConfigError>,
}

impl Resolved {
    /// The effective value of `[group] name`, if the option is registered.
    pub fn get(&self, group: &str, name: &str) -> Option<&ResolvedOpt> {
        let spec = registry::find(group, name)?;
        self.opts.get(&(spec.group, spec.name))
    }

    /// Every option with its value, in registry order of groups then names.
    pub fn iter(&self) -> impl Iterator<Item = &ResolvedOpt> {
        self.opts.values()
    }

    pub(crate) fn str_opt(&self, group: &str, name: &str) -> Option<String> {
        match self.get(group, name).and_then(|o| o.value.as_ref()) {
            Some(Value::Str(s)) => Some(s.clone()),
            _ => None,
        }
    }

    pub(crate) fn string(&self, group: &str, name: &str) -> String {
        self.str_opt(group, name).unwrap_or_default()
    }

    pub(crate) fn int(&self, group: &str, name: &str) -> i64 {
        match self.get(group, name).and_then(|o| o.value.as_ref()) {
            Some(Value::Int(n)) => *n,
            _ => 0,
        }
    }

    pub(crate) fn float_opt(&self, group: &str, name: &str) -> Option<f64> {
        match self.get(group, name).and_then(|o| o.value.as_ref()) {
            Some(Value::Float(f)) => Some(*f),
            _ => None,
        }
    }

    pub(crate) fn bool(&self, group: &str, name: &str) -> bool {
        matches!(
            self.get(group, name).and_then(|o| o.value.as_ref()),
            Some(Value::Bool(true))
        )
    }

    pub(crate) fn list(&self, group: &str, name: &str) -> Vec<String> {
        match self.get(group, name).and_then(|o| o.value.as_ref()) {
            Some(Value::List(l)) => l.clone(),
            _ => Vec::new(),
        }
    }

    pub(crate) fn dict(&self, group: &str, name: &str) -> BTreeMap<String, String> {
        match self.get(group, name).and_then(|o| o.value.as_ref()) {
            Some(Value::Dict(d)) => d.clone(),
            _ => BTreeMap::new(),
        }
    }
}

struct Candidate<'a> {
    entry: &'a RawEntry,
    deprecated: bool,
}

/// Resolves the options from parsed files (in order). `env` looks up environment variables (only
/// `K8S_API`, the upstream default of `[kubernetes] api_root`); pass `|_| None` in tests.
pub fn resolve(files: &[ParsedFile], env: &dyn Fn(&str) -> Option<String>) -> Resolution {
    let mut out = Resolution::default();
    out.resolved.files = files.iter().map(|f| f.name.to_string()).collect();
    for f in files {
        out.errors.extend(f.errors.iter().cloned());
    }

    // `[neutron] auth_section = X` moves the auth plugin options to group X (keystoneauth).
    let auth_section = files
        .iter()
        .flat_map(|f| &f.entries)
        .rfind(|e| e.group == "neutron" && e.key == "auth_section")
        .map(|e| crate::ini::normalize_group(&e.value))
        .filter(|g| !g.is_empty());

    let mut candidates: BTreeMap<(&'static str, &'static str), Vec<Candidate<'_>>> = BTreeMap::new();
    let mut warned_groups: BTreeSet<(String, String)> = BTreeSet::new();

    for f in files {
        // Empty groups still deserve a warning when unknown.
        for (g, line) in &f.groups {
            let origin = Origin {
                file: f.name.clone(),
                line: *line,
            };
            group_warning(g, &origin, auth_section.as_deref(), &mut warned_groups, &mut out);
        }
        for e in &f.entries {
            let in_auth_section = auth_section.as_deref() == Some(e.group.as_str()) && e.group != "neutron";
            let lookup_group = if in_auth_section && registry::is_auth_option(&e.key) {
                "neutron"
            } else {
                e.group.as_str()
            };
            match registry::find_any(lookup_group, &e.key) {
                Some((spec, deprecated)) => {
                    if deprecated {
                        out.warnings.push(Warning {
                            kind: WarningKind::DeprecatedName,
                            origin: e.origin.clone(),
                            group: e.group.clone(),
                            option: e.key.clone(),
                            message: format!("deprecated name; use `{}` instead", spec.name),
                        });
                    }
                    if spec.deprecated_for_removal {
                        out.warnings.push(Warning {
                            kind: WarningKind::DeprecatedOption,
                            origin: e.origin.clone(),
                            group: e.group.clone(),
                            option: e.key.clone(),
                            message: "deprecated for removal upstream".to_string(),
                        });
                    }
                    candidates
                        .entry((spec.group, spec.name))
                        .or_default()
                        .push(Candidate { entry: e, deprecated });
                }
                None => {
                    let known_group = registry::is_known_group(&e.group) || in_auth_section;
                    if known_group || e.group == DEFAULT_GROUP {
                        let elsewhere: Vec<&str> = OPTIONS
                            .iter()
                            .filter(|o| o.name == e.key && o.group != e.group)
                            .map(|o| o.group)
                            .collect();
                        let message = if elsewhere.is_empty() {
                            "unknown option, ignored".to_string()
                        } else {
                            format!(
                                "unknown option in this group, ignored (it exists in [{}])",
                                elsewhere.join("], [")
                            )
                        };
                        out.warnings.push(Warning {
                            kind: WarningKind::UnknownOption,
                            origin: e.origin.clone(),
                            group: e.group.clone(),
                            option: e.key.clone(),
                            message,
                        });
                    }
                    // Options of unknown or ignored groups were covered by the group warning.
                }
            }
        }
    }

    for spec in OPTIONS {
        let cands = candidates.remove(&(spec.group, spec.name)).unwrap_or_default();
        let r = resolve_one(spec, &cands, env, &mut out);
        out.resolved.opts.insert((spec.group, spec.name), r);
    }
    // Report in reading order: file by file, line by line.
    let file_index = |o: Option<&Origin>| {
        o.map(|o| {
            let i = files.iter().position(|f| f.name == o.file).unwrap_or(usize::MAX);
            (i, o.line)
        })
    };
    out.warnings.sort_by_key(|w| file_index(Some(&w.origin)));
    out.errors.sort_by_key(|e| file_index(e.origin()));
    out
}

fn group_warning(
    group: &str,
    origin: &Origin,
    auth_section: Option<&str>,
    warned: &mut BTreeSet<(String, String)>,
    out: &mut Resolution,
) {
    if group == DEFAULT_GROUP || registry::is_known_group(group) || auth_section == Some(group) {
        return;
    }
    if !warned.insert((origin.file.to_string(), group.to_string())) {
        return;
    }
    let (kind, message) = if registry::IGNORED_GROUPS.contains(&group) {
        (
            WarningKind::IgnoredGroup,
            "read by an upstream library (os-vif, privsep, oslo.cache …); ignored by kuryr-rs",
        )
    } else {
        (
            WarningKind::UnknownGroup,
            "unknown group, its options are ignored",
        )
    };
    out.warnings.push(Warning {
        kind,
        origin: origin.clone(),
        group: group.to_string(),
        option: String::new(),
        message: message.to_string(),
    });
}

fn default_value(spec: &'static OptSpec, env: &dyn Fn(&str) -> Option<String>) -> Option<Value> {
    if spec.group == "kubernetes" && spec.name == "api_root" {
        return Some(Value::Str(
            env("K8S_API").unwrap_or_else(|| DEFAULT_API_ROOT.to_string()),
        ));
    }
    spec.default.and_then(|d| parse_value(spec.kind, d))
}

fn resolve_one(
    spec: &'static OptSpec,
    cands: &[Candidate<'_>],
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut Resolution,
) -> ResolvedOpt {
    let mut r = ResolvedOpt {
        spec,
        value: None,
        origin: None,
    };
    if spec.kind == OptKind::MultiStr {
        // Current name first, deprecated names only when the current name is never used.
        let use_dep = cands.iter().all(|c| c.deprecated);
        let chosen: Vec<_> = cands.iter().filter(|c| c.deprecated == use_dep).collect();
        if chosen.is_empty() {
            r.value = default_value(spec, env);
        } else {
            r.value = Some(Value::List(
                chosen.iter().map(|c| c.entry.value.clone()).collect(),
            ));
            r.origin = chosen.last().map(|c| c.entry.origin.clone());
        }
        return r;
    }
    // oslo.config looks at the newest file holding the option under any of its names; within
    // that file the current name beats a deprecated one, and the last assignment wins.
    let newest_file = cands.last().map(|c| c.entry.origin.file.clone());
    let in_newest = || {
        cands
            .iter()
            .rev()
            .filter(|c| Some(&c.entry.origin.file) == newest_file.as_ref())
    };
    let chosen = in_newest().find(|c| !c.deprecated).or_else(|| in_newest().next());
    let Some(c) = chosen else {
        r.value = default_value(spec, env);
        return r;
    };
    let raw = c.entry.value.as_str();
    if raw.trim().is_empty() && spec.kind.empty_means_unset() {
        out.warnings.push(Warning {
            kind: WarningKind::EmptyValue,
            origin: c.entry.origin.clone(),
            group: c.entry.group.clone(),
            option: c.entry.key.clone(),
            message: format!(
                "empty value, using the default ({})",
                spec.default.unwrap_or("none")
            ),
        });
        r.value = default_value(spec, env);
        return r;
    }
    match parse_value(spec.kind, raw) {
        Some(v) => {
            r.value = Some(v);
            r.origin = Some(c.entry.origin.clone());
        }
        None => {
            let expected = match spec.kind {
                OptKind::Dict => match crate::value::parse_dict(raw) {
                    Err(why) => format!("{} ({why})", spec.kind.expected()),
                    Ok(_) => spec.kind.expected(),
                },
                k => k.expected(),
            };
            out.errors.push(ConfigError::WrongType {
                origin: c.entry.origin.clone(),
                group: spec.group.to_string(),
                option: spec.name.to_string(),
                value: if spec.secret {
                    "<secret>".to_string()
                } else {
                    raw.to_string()
                },
                expected,
            });
            r.value = default_value(spec, env);
        }
    }
    r
}
