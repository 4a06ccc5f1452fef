//! Option types and the conversion of a written value into a typed [`Value`], following
//! oslo.config's type semantics (booleans, integers with ranges, comma lists, `k:v` dicts, ports,
//! IP addresses, choices).

use std::collections::BTreeMap;
use std::net::IpAddr;

/// The type of an option, as oslo.config declares it (`StrOpt`, `IntOpt`, …).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OptKind {
    /// `StrOpt`.
    Str,
    /// `StrOpt` with `choices`.
    Choice(&'static [&'static str]),
    /// `IntOpt` with optional bounds (inclusive).
    Int {
        /// Smallest accepted value.
        min: Option<i64>,
        /// Largest accepted value.
        max: Option<i64>,
    },
    /// `FloatOpt`.
    Float,
    /// `BoolOpt`.
    Bool,
    /// `ListOpt` of strings.
    List,
    /// `MultiStrOpt`: every occurrence accumulates (across all files).
    MultiStr,
    /// `DictOpt`: `k1:v1,k2:v2`.
    Dict,
    /// `PortOpt`: integer 0–65535.
    Port,
    /// `IPOpt`: an IPv4 or IPv6 address.
    Ip,
}

impl OptKind {
    /// What this type accepts, in words (used in error messages).
    pub fn expected(&self) -> String {
        match self {
            OptKind::Str | OptKind::MultiStr => "a string".into(),
            OptKind::Choice(c) => format!("one of {}", c.join(", ")),
            OptKind::Int { min, max } => match (min, max) {
                (Some(a), Some(b)) => format!("an integer between {a} and {b}"),
                (Some(a), None) => format!("an integer >= {a}"),
                (None, Some(b)) => format!("an integer <= {b}"),
                (None, None) => "an integer".into(),
            },
            OptKind::Float => "a number".into(),
            OptKind::Bool => "a boolean (true/false, yes/no, on/off, 1/0)".into(),
            OptKind::List => "a comma-separated list".into(),
            OptKind::Dict => "a comma-separated list of key:value pairs".into(),
            OptKind::Port => "a port number between 0 and 65535".into(),
            OptKind::Ip => "an IPv4 or IPv6 address".into(),
        }
    }

    /// `true` for types where an empty value means "no value" (oslo.config returns `None`).
    pub fn empty_means_unset(&self) -> bool {
        matches!(
            self,
            OptKind::Int { .. } | OptKind::Float | OptKind::Bool | OptKind::Port | OptKind::Ip
        )
    }
}

/// A typed option value.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Value {
    /// `Str`, `Choice`, `Ip`.
    Str(String),
    /// `Int`, `Port`.
    Int(i64),
    /// `Float`.
    Float(f64),
    /// `Bool`.
    Bool(bool),
    /// `List`, `MultiStr`.
    List(Vec<String>),
    /// `Dict`.
    Dict(BTreeMap<String, String>),
}

/// Parses an oslo.config boolean (`true/false/yes/no/on/off/1/0`, case-insensitive).
pub fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Splits a list value on commas and trims every item (including the newlines of continuation
/// lines), as oslo.config's `List` type does (no brackets, no quoting). An empty value is the
/// empty list. Empty items (`a,,b`, a trailing comma) are dropped, where oslo would keep `''`.
pub fn parse_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses `k1:v1,k2:v2` like oslo.config's `Dict` type: whitespace trimmed, the first `:` of an
/// item separates key and value, empty and duplicate keys are errors.
pub fn parse_dict(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for item in parse_list(s) {
        let Some((k, v)) = item.split_once(':') else {
            return Err(format!("item {item:?} is not key:value"));
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("item {item:?} has an empty key"));
        }
        if out.insert(k.to_string(), v.trim().to_string()).is_some() {
            return Err(format!("duplicate key {k:?}"));
        }
    }
    Ok(out)
}

/// Converts the written value of an option into its typed form. `None` means "not of this
/// type"; the caller builds the error message with [`OptKind::expected`]. Empty values of
/// scalar non-string types are handled by the caller ([`OptKind::empty_means_unset`]).
pub fn parse_value(kind: OptKind, raw: &str) -> Option<Value> {
    let t = raw.trim();
    match kind {
        OptKind::Str => Some(Value::Str(raw.to_string())),
        OptKind::Choice(choices) => choices.contains(&t).then(|| Value::Str(t.to_string())),
        OptKind::Int { min, max } => {
            let n: i64 = t.parse().ok()?;
            let out_of_range = min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m);
            (!out_of_range).then_some(Value::Int(n))
        }
        OptKind::Port => {
            let n: i64 = t.parse().ok()?;
            (0..=65535).contains(&n).then_some(Value::Int(n))
        }
        OptKind::Float => {
            let f: f64 = t.parse().ok()?;
            f.is_finite().then_some(Value::Float(f))
        }
        OptKind::Bool => parse_bool(t).map(Value::Bool),
        OptKind::List => Some(Value::List(parse_list(raw))),
        OptKind::MultiStr => Some(Value::List(vec![raw.to_string()])),
        OptKind::Dict => parse_dict(raw).ok().map(Value::Dict),
        OptKind::Ip => t.parse::<IpAddr>().ok().map(|_| Value::Str(t.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_like_oslo() {
        for t in ["true", "TRUE", "Yes", "on", "1", " true "] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for f in ["false", "No", "OFF", "0"] {
            assert_eq!(parse_bool(f), Some(false), "{f}");
        }
        assert_eq!(parse_bool("y"), None);
        assert_eq!(parse_bool("2"), None);
    }

    #[test]
    fn lists_trim_and_split() {
        assert_eq!(parse_list(" a , b,c "), vec!["a", "b", "c"]);
        assert_eq!(parse_list("a,\nb,\nc"), vec!["a", "b", "c"]);
        assert_eq!(parse_list(""), Vec::<String>::new());
        assert_eq!(parse_list("[a, b]"), vec!["[a", "b]"], "no brackets, as oslo");
        assert_eq!(
            parse_list("\"a,b\", c"),
            vec!["\"a", "b\"", "c"],
            "no quoting, as oslo"
        );
        assert_eq!(parse_list("a,,b,"), vec!["a", "b"]);
    }

    #[test]
    fn dicts() {
        let d = parse_dict("nested-vlan:nested, neutron-vif : neutron").unwrap();
        assert_eq!(d["nested-vlan"], "nested");
        assert_eq!(d["neutron-vif"], "neutron");
        assert!(parse_dict("novalue").is_err());
        assert!(parse_dict("").unwrap().is_empty());
        assert_eq!(parse_dict("a:b:c").unwrap()["a"], "b:c");
        assert!(parse_dict("a:1,a:2").is_err());
        assert!(parse_dict(":1").is_err());
    }

    #[test]
    fn ints_ports_and_ranges() {
        let k = OptKind::Int {
            min: Some(0),
            max: None,
        };
        assert_eq!(parse_value(k, " 12 "), Some(Value::Int(12)));
        assert!(parse_value(k, "-1").is_none());
        assert!(parse_value(k, "lots").is_none());
        assert!(parse_value(OptKind::Port, "65536").is_none());
        assert_eq!(parse_value(OptKind::Port, "16401"), Some(Value::Int(16401)));
        assert!(parse_value(OptKind::Float, "nan").is_none());
        assert!(parse_value(OptKind::Ip, "10.0.0.1").is_some());
        assert!(parse_value(OptKind::Ip, "::1").is_some());
        assert!(parse_value(OptKind::Ip, "host").is_none());
        assert!(parse_value(OptKind::Choice(&["public", "admin"]), "internal").is_none());
    }
}
