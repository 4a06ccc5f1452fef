//! Label and field selectors: parsing the query-string syntax exactly as the real API server
//! accepts it, and matching objects against the result.
//!
//! Label selectors support `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a)`, `k` (exists),
//! `!k` (does not exist) and the numeric `k>5` / `k<5`; requirements are joined by commas
//! (AND) and whitespace around tokens is ignored. Keys and values are validated like the real
//! server (qualified names, label values). `!=` and `notin` also match objects without the label.
//!
//! Field selectors support `path=v`, `path==v`, `path!=v` joined by commas, with `\` escaping
//! `,`, `=`, `!` and `\` inside values. A path is looked up with dots on the JSON object; a missing
//! field compares as the empty string, booleans and numbers as their JSON text.

use std::collections::BTreeSet;

use serde_json::Value;

/// A selector could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum SelectorError {
    /// Bad `labelSelector`.
    #[error("invalid label selector {selector:?}: {reason}")]
    Label {
        /// The selector text.
        selector: String,
        /// What is wrong.
        reason: String,
    },
    /// Bad `fieldSelector`.
    #[error("invalid field selector {selector:?}: {reason}")]
    Field {
        /// The selector text.
        selector: String,
        /// What is wrong.
        reason: String,
    },
}

/// The operator of one label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelOp {
    /// `k=v` / `k==v` / `k in (v...)`: present with one of the values.
    In(BTreeSet<String>),
    /// `k!=v` / `k notin (v...)`: absent, or present with none of the values.
    NotIn(BTreeSet<String>),
    /// `k`: present.
    Exists,
    /// `!k`: absent.
    DoesNotExist,
    /// `k>n`: present and an integer greater than `n`.
    Gt(i64),
    /// `k<n`: present and an integer less than `n`.
    Lt(i64),
}

/// One label requirement (`key` + operator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// What the label must satisfy.
    pub op: LabelOp,
}

impl LabelRequirement {
    /// True when `labels` (the object's `metadata.labels`, possibly absent) satisfy this requirement.
    fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let value = labels
            .and_then(|l| l.get(&self.key))
            .map(|v| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string()));
        match (&self.op, value) {
            (LabelOp::In(set), Some(v)) => set.contains(&v),
            (LabelOp::In(_), None) => false,
            (LabelOp::NotIn(set), Some(v)) => !set.contains(&v),
            (LabelOp::NotIn(_), None) => true,
            (LabelOp::Exists, v) => v.is_some(),
            (LabelOp::DoesNotExist, v) => v.is_none(),
            (LabelOp::Gt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x > *n),
            (LabelOp::Lt(n), Some(v)) => v.parse::<i64>().is_ok_and(|x| x < *n),
            (LabelOp::Gt(_) | LabelOp::Lt(_), None) => false,
        }
    }
}

/// A parsed `labelSelector` (`=`, `==`, `!=`, `in`, `notin`, exists, `!`).
#[derive(Debug, Clone, Default)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
}

/// Tokens of the label selector grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Eq,
    DoubleEq,
    NotEq,
    Not,
    Gt,
    Lt,
    In,
    NotInKw,
    Open,
    Close,
    Comma,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("identifier {s:?}"),
            Tok::Eq => "'='".into(),
            Tok::DoubleEq => "'=='".into(),
            Tok::NotEq => "'!='".into(),
            Tok::Not => "'!'".into(),
            Tok::Gt => "'>'".into(),
            Tok::Lt => "'<'".into(),
            Tok::In => "'in'".into(),
            Tok::NotInKw => "'notin'".into(),
            Tok::Open => "'('".into(),
            Tok::Close => "')'".into(),
            Tok::Comma => "','".into(),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn lex(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let (tok, len) = match (c, next) {
            ('=', Some('=')) => (Tok::DoubleEq, 2),
            ('=', _) => (Tok::Eq, 1),
            ('!', Some('=')) => (Tok::NotEq, 2),
            ('!', _) => (Tok::Not, 1),
            ('>', _) => (Tok::Gt, 1),
            ('<', _) => (Tok::Lt, 1),
            ('(', _) => (Tok::Open, 1),
            (')', _) => (Tok::Close, 1),
            (',', _) => (Tok::Comma, 1),
            _ => {
                let start = i;
                let mut j = i;
                while j < chars.len() && !chars[j].is_whitespace() && !is_special(chars[j]) {
                    j += 1;
                }
                let word: String = chars[start..j].iter().collect();
                let tok = match word.as_str() {
                    "in" => Tok::In,
                    "notin" => Tok::NotInKw,
                    _ => Tok::Ident(word),
                };
                (tok, j - start)
            }
        };
        out.push(tok);
        i += len;
    }
    out
}

/// Label-value rule of the real server: empty, or ≤ 63 characters of alphanumerics, `-`, `_`,
/// `.`, starting and ending with an alphanumeric.
pub fn validate_label_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Ok(());
    }
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !is_name_part(v) {
        errs.push(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
             or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or \
             'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .to_string(),
        );
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!("Invalid value: {v:?}: {}", errs.join(", ")))
    }
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// DNS-1123 subdomain: ≤ 253 characters, lowercase alphanumerics, `-` and `.`, alphanumeric at
/// both ends of every label.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
                && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

/// Qualified-name rule of the real server for label keys: an optional DNS subdomain prefix and
/// `/`, then a name part of ≤ 63 characters.
pub fn validate_label_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".to_string());
        } else if !is_dns1123_subdomain(p) {
            errs.push(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case \
                 alphanumeric characters, '-' or '.', and must start and end with an alphanumeric \
                 character"
                    .to_string(),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".to_string());
        }
        if !is_name_part(name) {
            errs.push(
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must \
                 start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or \
                 '123-abc', regex used for validation is \
                 '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                    .to_string(),
            );
        }
    }
    if name.contains('/') {
        errs.push("a qualified name must consist of at most one '/'".to_string());
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(format!("Invalid value: {k:?}: {}", errs.join(", ")))
    }
}

struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn requirement(&mut self) -> Result<LabelRequirement, String> {
        let negated = if self.peek() == Some(&Tok::Not) {
            self.pos += 1;
            true
        } else {
            false
        };
        let key = match self.next() {
            Some(Tok::Ident(k)) => k,
            Some(t) => return Err(format!("found {}, expected: identifier", t.describe())),
            None => return Err("found '', expected: identifier".into()),
        };
        validate_label_key(&key).map_err(|e| format!("key: {e}"))?;
        if negated {
            return match self.peek() {
                None | Some(Tok::Comma) => Ok(LabelRequirement {
                    key,
                    op: LabelOp::DoesNotExist,
                }),
                Some(t) => Err(format!(
                    "found {}, expected: ',' or end of string after '!{key}'",
                    t.describe()
                )),
            };
        }
        let op_tok = match self.peek() {
            None | Some(Tok::Comma) => {
                return Ok(LabelRequirement {
                    key,
                    op: LabelOp::Exists,
                });
            }
            Some(_) => self.next(),
        };
        let op = match op_tok {
            Some(Tok::Eq | Tok::DoubleEq) => LabelOp::In(self.single_value(&key)?),
            Some(Tok::NotEq) => LabelOp::NotIn(self.single_value(&key)?),
            Some(Tok::In) => LabelOp::In(self.value_set(&key)?),
            Some(Tok::NotInKw) => LabelOp::NotIn(self.value_set(&key)?),
            Some(t @ (Tok::Gt | Tok::Lt)) => {
                let v = match self.next() {
                    Some(Tok::Ident(v)) => v,
                    _ => return Err(format!("expected an integer after {}", t.describe())),
                };
                let n: i64 = v.parse().map_err(|_| {
                    format!("for 'Gt', 'Lt' operators, the value must be an integer, got {v:?}")
                })?;
                if t == Tok::Gt {
                    LabelOp::Gt(n)
                } else {
                    LabelOp::Lt(n)
                }
            }
            Some(t) => {
                return Err(format!(
                    "found {}, expected: in, notin, =, ==, !=, gt, lt",
                    t.describe()
                ));
            }
            None => unreachable!("peeked a token above"),
        };
        Ok(LabelRequirement { key, op })
    }

    /// The value after `=`/`==`/`!=`: an identifier, or nothing (empty value).
    fn single_value(&mut self, key: &str) -> Result<BTreeSet<String>, String> {
        let v = match self.peek() {
            None | Some(Tok::Comma) => String::new(),
            Some(Tok::Ident(v)) => {
                let v = v.clone();
                self.pos += 1;
                v
            }
            // Keywords are valid values after an equality operator.
            Some(Tok::In) => {
                self.pos += 1;
                "in".into()
            }
            Some(Tok::NotInKw) => {
                self.pos += 1;
                "notin".into()
            }
            Some(t) => return Err(format!("found {}, expected: identifier", t.describe())),
        };
        validate_label_value(&v).map_err(|e| format!("values[0][{key}]: {e}"))?;
        Ok(BTreeSet::from([v]))
    }

    /// `( v1, v2, ... )`; `()` is the set holding the empty string, as in the real parser.
    fn value_set(&mut self, key: &str) -> Result<BTreeSet<String>, String> {
        match self.next() {
            Some(Tok::Open) => {}
            Some(t) => return Err(format!("found {}, expected: '('", t.describe())),
            None => return Err("found '', expected: '('".into()),
        }
        let mut set = BTreeSet::new();
        let mut expect_value = true;
        loop {
            match self.next() {
                Some(Tok::Close) => {
                    if expect_value {
                        set.insert(String::new());
                    }
                    break;
                }
                Some(Tok::Comma) => {
                    if expect_value {
                        set.insert(String::new());
                    }
                    expect_value = true;
                }
                Some(Tok::Ident(v)) if expect_value => {
                    validate_label_value(&v).map_err(|e| format!("values[{}][{key}]: {e}", set.len()))?;
                    set.insert(v);
                    expect_value = false;
                }
                Some(Tok::In) if expect_value => {
                    set.insert("in".into());
                    expect_value = false;
                }
                Some(Tok::NotInKw) if expect_value => {
                    set.insert("notin".into());
                    expect_value = false;
                }
                Some(t) => {
                    return Err(format!("found {}, expected: ',' or ')'", t.describe()));
                }
                None => return Err("found '', expected: ')'".into()),
            }
        }
        Ok(set)
    }
}

impl LabelSelector {
    /// Parses the query-string form; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let err = |reason: String| SelectorError::Label {
            selector: s.into(),
            reason,
        };
        let toks = lex(s);
        let mut p = Parser { toks: &toks, pos: 0 };
        let mut requirements = Vec::new();
        if toks.is_empty() {
            return Ok(Self { requirements });
        }
        loop {
            let r = p
                .requirement()
                .map_err(|e| err(format!("unable to parse requirement: {e}")))?;
            requirements.push(r);
            match p.next() {
                None => break,
                Some(Tok::Comma) => {
                    if p.peek().is_none() {
                        return Err(err("found '', expected: identifier after ','".into()));
                    }
                }
                Some(t) => {
                    return Err(err(format!(
                        "found {}, expected: ',' or end of string",
                        t.describe()
                    )));
                }
            }
        }
        Ok(Self { requirements })
    }

    /// True when the object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.matches_labels(labels)
    }

    /// True when a label map (absent = no labels) satisfies every requirement.
    pub fn matches_labels(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True when it selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The parsed requirements, in selector order.
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }
}

/// One field requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldRequirement {
    path: String,
    value: String,
    negated: bool,
}

/// A parsed `fieldSelector` (`=`, `==`, `!=` on dotted paths such as `metadata.name`, `spec.nodeName`).
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

/// Splits on unescaped `sep`, keeping escapes in the pieces.
fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            cur.push(c);
            if let Some(n) = chars.next() {
                cur.push(n);
            }
        } else if c == sep {
            parts.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    parts.push(cur);
    parts
}

/// Finds the first unescaped operator in a term: returns (lhs, op, rhs).
fn split_field_term(term: &str) -> Option<(&str, &'static str, &str)> {
    let b = term.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        for op in ["!=", "==", "="] {
            if term[i..].starts_with(op) {
                return Some((&term[..i], op, &term[i + op.len()..]));
            }
        }
        i += 1;
    }
    None
}

fn unescape_field_value(v: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('\\' | ',' | '=' | '!')) => out.push(n),
                Some(n) => return Err(format!("invalid escape sequence: \\{n}")),
                None => return Err("unterminated escape sequence".into()),
            },
            ',' | '=' => return Err(format!("unescaped {c:?} in value {v:?}")),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The string form of the field at a dotted `path`: strings as-is, booleans and numbers as their
/// JSON text, missing (or null) as the empty string.
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

impl FieldSelector {
    /// Parses the query-string form; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let err = |reason: String| SelectorError::Field {
            selector: s.into(),
            reason,
        };
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { requirements });
        }
        for term in split_unescaped(s, ',') {
            let (lhs, op, rhs) = split_field_term(&term)
                .ok_or_else(|| err(format!("invalid selector: '{s}'; can't understand '{term}'")))?;
            let path = lhs.trim();
            if path.is_empty() {
                return Err(err(format!(
                    "invalid selector: '{s}'; empty field name in '{term}'"
                )));
            }
            let value = unescape_field_value(rhs).map_err(err)?;
            requirements.push(FieldRequirement {
                path: path.to_string(),
                value,
                negated: op == "!=",
            });
        }
        Ok(Self { requirements })
    }

    /// True when the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements
            .iter()
            .all(|r| (field_value(obj, &r.path) == r.value) != r.negated)
    }

    /// The field paths used, so the caller can reject ones the resource does not support.
    pub fn fields(&self) -> Vec<&str> {
        self.requirements.iter().map(|r| r.path.as_str()).collect()
    }

    /// True when it selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The value required for `path` by an `=`/`==` requirement, if any (e.g. to index by
    /// `spec.nodeName`).
    pub fn equals_value(&self, path: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.path == path && !r.negated)
            .map(|r| r.value.as_str())
    }
}

#[cfg(test)]
mod tests;
