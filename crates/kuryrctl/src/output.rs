//! Output: aligned tables (like kubectl's) and JSON.

use std::io::Write;

use serde::Serialize;

use crate::{Error, cli::Output};

/// Rows that can be printed as a table.
pub trait Row: Serialize {
    /// Column headers.
    fn headers() -> &'static [&'static str];
    /// Cells, one per header.
    fn cells(&self) -> Vec<String>;
}

/// Renders `rows` as an aligned table (two spaces between columns, no trailing blanks).
pub fn table<R: Row>(rows: &[R]) -> String {
    let headers = R::headers();
    let cells: Vec<Vec<String>> = rows.iter().map(Row::cells).collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in &cells {
        for (i, c) in r.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(c.chars().count());
            }
        }
    }
    let line = |vals: Vec<&str>| {
        let mut s = String::new();
        for (i, v) in vals.iter().enumerate() {
            if i + 1 == vals.len() {
                s.push_str(v);
            } else {
                let pad = widths[i].saturating_sub(v.chars().count()) + 2;
                s.push_str(v);
                s.push_str(&" ".repeat(pad));
            }
        }
        s.trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    out.push('\n');
    for r in &cells {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// Prints `rows` in `format` (JSON: `{"items": [...]}` plus `extra` fields).
pub fn print<R: Row>(
    out: &mut dyn Write,
    format: Output,
    rows: &[R],
    extra: serde_json::Map<String, serde_json::Value>,
) -> Result<(), Error> {
    match format {
        Output::Table => {
            let _ = out.write_all(table(rows).as_bytes());
        }
        Output::Json => {
            let mut doc = extra;
            doc.insert("items".into(), serde_json::to_value(rows).map_err(Error::Json)?);
            let text = serde_json::to_string_pretty(&doc).map_err(Error::Json)?;
            let _ = writeln!(out, "{text}");
        }
    }
    Ok(())
}

/// `-` for empty values.
pub fn dash(s: Option<&str>) -> String {
    match s {
        Some(v) if !v.is_empty() => v.to_owned(),
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct R(&'static str, &'static str);
    impl Row for R {
        fn headers() -> &'static [&'static str] {
            &["NAME", "VALUE"]
        }
        fn cells(&self) -> Vec<String> {
            vec![self.0.into(), self.1.into()]
        }
    }

    #[test]
    fn aligned_columns() {
        let t = table(&[R("a", "1"), R("longer", "")]);
        assert_eq!(t, "NAME    VALUE\na       1\nlonger\n");
        assert_eq!(dash(Some("")), "-");
        assert_eq!(dash(None), "-");
        assert_eq!(dash(Some("x")), "x");
    }
}
