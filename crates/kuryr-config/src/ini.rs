//! The oslo.config flavour of INI: turns the text of one file into `(group, key, value, line)`
//! entries. Knows nothing about option types; syntax errors are collected, never fatal to the
//! rest of the file.
//!
//! Rules (as oslo.config's own INI parser applies them):
//! * blank lines and lines starting with `#` or `;` (at column 0) are ignored;
//! * `[name]` starts a group; `[DEFAULT]` is the default group; other group names are
//!   case-insensitive (lower-cased);
//! * a value made of a single quote character, or wrapped in matching quotes, loses them;
//! * `key = value` or `key: value`, split at the first `=` or `:`; key and value are trimmed and
//!   one pair of matching surrounding quotes (`"…"` or `'…'`) is removed from the value;
//! * a line starting with a space or a tab continues the value of the previous key (joined with
//!   `\n`); a blank line or any non-indented line ends the value;
//! * `-` in keys is the same as `_` (oslo option names such as `log-file` have `log_file` as their
//!   destination).

use crate::error::{ConfigError, Origin};
use std::sync::Arc;

/// The name oslo.config uses for the default group.
pub const DEFAULT_GROUP: &str = "DEFAULT";

/// One `key = value` assignment read from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    /// Group (section) name, normalised (`DEFAULT` or lower case).
    pub group: String,
    /// Option name as written, normalised (`-` → `_`, lower case).
    pub key: String,
    /// The value with continuation lines joined by `\n`.
    pub value: String,
    /// Where the assignment starts.
    pub origin: Origin,
}

/// One parsed file: its entries in file order, the lines where each group header appeared,
/// and any syntax errors.
#[derive(Debug, Clone, Default)]
pub struct ParsedFile {
    /// Name of the file (path as given), used in diagnostics.
    pub name: Arc<str>,
    /// Assignments in the order they appear.
    pub entries: Vec<RawEntry>,
    /// `(group, line)` of every group header, in order.
    pub groups: Vec<(String, usize)>,
    /// Syntax errors (the rest of the file is still parsed).
    pub errors: Vec<ConfigError>,
}

/// Normalises a group name the way oslo.config does: exactly `DEFAULT` is the default group,
/// every other name is lower-cased (so `[default]` is a group named `default`, not `DEFAULT`).
pub fn normalize_group(name: &str) -> String {
    let name = name.trim();
    if name == DEFAULT_GROUP {
        DEFAULT_GROUP.to_string()
    } else {
        name.to_ascii_lowercase()
    }
}

/// Normalises an option name: trimmed, lower case, `-` replaced by `_`.
pub fn normalize_key(name: &str) -> String {
    name.trim().to_ascii_lowercase().replace('-', "_")
}

struct Pending {
    key: String,
    lines: Vec<String>,
    line: usize,
}

/// Parses the text of one configuration file. Never panics; every problem becomes an entry of
/// [`ParsedFile::errors`] with the file name and line number.
pub fn parse_str(name: &str, text: &str) -> ParsedFile {
    let file: Arc<str> = Arc::from(name);
    let mut out = ParsedFile {
        name: file.clone(),
        ..ParsedFile::default()
    };
    let mut group: Option<String> = None;
    let mut pending: Option<Pending> = None;

    let flush = |pending: &mut Option<Pending>, group: &Option<String>, out: &mut ParsedFile| {
        if let Some(p) = pending.take() {
            let origin = Origin {
                file: file.clone(),
                line: p.line,
            };
            match group {
                Some(g) => out.entries.push(RawEntry {
                    group: g.clone(),
                    key: p.key,
                    value: p.lines.join("\n"),
                    origin,
                }),
                None => out.errors.push(ConfigError::Syntax {
                    origin,
                    message: format!("`{}` appears before any [group] header", p.key),
                }),
            }
        }
    };

    for (idx, raw_line) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = raw_line.trim_end();
        if line.is_empty() {
            flush(&mut pending, &group, &mut out);
            continue;
        }
        if line.starts_with([' ', '\t']) {
            match pending.as_mut() {
                Some(p) => p.lines.push(line.trim_start().to_string()),
                None => {
                    // oslo.config rejects an indented line that continues nothing; an indented
                    // comment is harmless, so tolerate that one case.
                    let t = line.trim_start();
                    if !t.starts_with(['#', ';']) {
                        out.errors.push(ConfigError::Syntax {
                            origin: Origin {
                                file: file.clone(),
                                line: lineno,
                            },
                            message: format!("unexpected continuation line `{t}`"),
                        });
                    }
                }
            }
            continue;
        }
        flush(&mut pending, &group, &mut out);
        if line.starts_with('[') {
            let origin = Origin {
                file: file.clone(),
                line: lineno,
            };
            if !line.ends_with(']') {
                out.errors.push(ConfigError::Syntax {
                    origin,
                    message: format!("group header `{line}` has no closing `]`"),
                });
                // Keep the previous group: better than attributing the following options to a
                // guessed name.
                continue;
            }
            let inner = &line[1..line.len() - 1];
            if inner.trim().is_empty() {
                out.errors.push(ConfigError::Syntax {
                    origin,
                    message: "empty group name `[]`".to_string(),
                });
                continue;
            }
            let g = normalize_group(inner);
            out.groups.push((g.clone(), lineno));
            group = Some(g);
            continue;
        }
        if line.starts_with(['#', ';']) {
            continue;
        }
        let split = line.find(['=', ':']);
        let Some(pos) = split else {
            out.errors.push(ConfigError::Syntax {
                origin: Origin {
                    file: file.clone(),
                    line: lineno,
                },
                message: format!("`{line}` is not `key = value`"),
            });
            continue;
        };
        let key = normalize_key(&line[..pos]);
        if key.is_empty() {
            out.errors.push(ConfigError::Syntax {
                origin: Origin {
                    file: file.clone(),
                    line: lineno,
                },
                message: format!("`{line}` has an empty option name"),
            });
            continue;
        }
        let value = unquote(line[pos + 1..].trim());
        pending = Some(Pending {
            key,
            lines: vec![value.to_string()],
            line: lineno,
        });
    }
    flush(&mut pending, &group, &mut out);
    out
}

/// Removes one pair of matching surrounding quotes, as oslo.config does (a lone quote
/// character becomes the empty string there too).
fn unquote(value: &str) -> &str {
    let b = value.as_bytes();
    match b {
        [q] if *q == b'"' || *q == b'\'' => "",
        [q, .., l] if (*q == b'"' || *q == b'\'') && l == q => &value[1..value.len() - 1],
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_groups_keys_and_comments() {
        let p = parse_str(
            "a.conf",
            "# comment\n[DEFAULT]\ndebug = true\n; other comment\n[Kubernetes]\napi_root: https://x:6443\nport-debug=\"yes\"\n",
        );
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        let got: Vec<_> = p
            .entries
            .iter()
            .map(|e| (e.group.as_str(), e.key.as_str(), e.value.as_str(), e.origin.line))
            .collect();
        assert_eq!(
            got,
            vec![
                ("DEFAULT", "debug", "true", 3),
                ("kubernetes", "api_root", "https://x:6443", 6),
                ("kubernetes", "port_debug", "yes", 7),
            ]
        );
    }

    #[test]
    fn continuation_lines_join_with_newline() {
        let p = parse_str(
            "a.conf",
            "[kubernetes]\nenabled_handlers = vif,\n   endpoints,\n\tservice\nport_debug = true\n",
        );
        assert!(p.errors.is_empty());
        assert_eq!(p.entries[0].value, "vif,\nendpoints,\nservice");
        assert_eq!(p.entries[0].origin.line, 2);
        assert_eq!(p.entries[1].key, "port_debug");
    }

    #[test]
    fn blank_line_ends_a_value_and_comment_flushes() {
        let p = parse_str("a.conf", "[g]\na = 1\n\n  b\n");
        assert_eq!(p.entries.len(), 1);
        assert_eq!(p.errors.len(), 1);
        assert!(matches!(&p.errors[0], ConfigError::Syntax { origin, .. } if origin.line == 4));
    }

    #[test]
    fn syntax_errors_have_lines() {
        let p = parse_str("x.conf", "orphan = 1\n[broken\n[]\n[g]\nnovalue\n = 3\n");
        let lines: Vec<usize> = p
            .errors
            .iter()
            .filter_map(|e| e.origin().map(|o| o.line))
            .collect();
        assert_eq!(lines, vec![1, 2, 3, 5, 6]);
    }

    #[test]
    fn first_separator_wins() {
        let p = parse_str("a.conf", "[g]\nurl = http://h:1/x\nk: a=b\n");
        assert_eq!(p.entries[0].value, "http://h:1/x");
        assert_eq!(p.entries[1].value, "a=b");
    }

    #[test]
    fn quotes_are_removed_once() {
        assert_eq!(unquote("\"a\""), "a");
        assert_eq!(unquote("'a'"), "a");
        assert_eq!(unquote("\"a'"), "\"a'");
        assert_eq!(unquote("\""), "");
        assert_eq!(unquote("''"), "");
    }

    #[test]
    fn never_panics_on_garbage() {
        // A small deterministic generator (xorshift) instead of a property-testing crate.
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let alphabet: &[u8] = b"[]=:#; \t\n\r\"'abcDEF-_0123456789\xc3\xa9";
        for _ in 0..2000 {
            let mut bytes = Vec::new();
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 120) as usize;
            for _ in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                bytes.push(alphabet[(state % alphabet.len() as u64) as usize]);
            }
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_str("fuzz.conf", &text);
        }
    }
}
