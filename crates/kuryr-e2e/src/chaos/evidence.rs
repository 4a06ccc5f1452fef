//! What the controller said about an iteration's findings: the lines of its log that name a
//! leaked, stuck or doubled resource (its UUID) or the host it was pooled for, so that a failure
//! seen only in CI's excerpt of the output carries its own explanation (the log's tail is
//! usually about something else by the time the audit gives up).

use super::audit::Findings;

/// How many of the controller's lines an iteration keeps.
pub const MAX_LINES: usize = 40;

/// The words to look for: every UUID in the findings, and every host a leaked port was pooled
/// for (`pooled for node-2,`), with the controller's own phrases about lost nodes.
pub fn needles(f: &Findings) -> Vec<String> {
    fn push(out: &mut Vec<String>, s: String) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    let mut out: Vec<String> = Vec::new();
    for line in f.leaked.iter().chain(&f.stuck).chain(&f.duplicates) {
        for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
            if is_uuid(word) {
                push(&mut out, word.to_string());
            }
        }
        if let Some(rest) = line.split("pooled for ").nth(1)
            && let Some(host) = rest.split([',', ')', ' ']).next()
            && !host.is_empty()
        {
            push(&mut out, format!("host={host}"));
            push(&mut out, format!("pool={host}/"));
            push(&mut out, format!("\"{host}\""));
        }
    }
    if !out.is_empty() {
        for phrase in ["node gone", "node back", "timed-out bulk", "node watch"] {
            push(&mut out, phrase.to_string());
        }
    }
    out
}

fn is_uuid(w: &str) -> bool {
    let parts: Vec<&str> = w.split('-').collect();
    parts.len() == 5
        && parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The lines of `log` containing any of `needles`, at most `max`: the first half and the last
/// half when there are more (how it began and where it stands).
pub fn matching(log: &str, needles: &[String], max: usize) -> Vec<String> {
    if needles.is_empty() {
        return Vec::new();
    }
    let hits: Vec<&str> = log
        .lines()
        .filter(|l| needles.iter().any(|n| l.contains(n.as_str())))
        .collect();
    if hits.len() <= max {
        return hits.into_iter().map(str::to_string).collect();
    }
    let head = max / 2;
    let tail = max - head;
    let mut out: Vec<String> = hits[..head].iter().map(|s| s.to_string()).collect();
    out.push(format!("… {} lines more …", hits.len() - max));
    out.extend(hits[hits.len() - tail..].iter().map(|s| s.to_string()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaked(s: &str) -> Findings {
        Findings {
            leaked: vec![s.into()],
            ..Findings::default()
        }
    }

    #[test]
    fn needles_are_the_uuids_and_the_pool_host() {
        let f = leaked(
            "port 0d43af2b-0b3d-406c-9aac-c978b8829a19 (pooled for node-2, a node that no longer exists)",
        );
        let n = needles(&f);
        assert!(n.contains(&"0d43af2b-0b3d-406c-9aac-c978b8829a19".to_string()));
        assert!(n.contains(&"host=node-2".to_string()));
        assert!(n.contains(&"node gone".to_string()));
        assert!(needles(&Findings::default()).is_empty());
        assert!(!is_uuid("tapdeadbeef-00"));
    }

    #[test]
    fn many_matches_keep_the_beginning_and_the_end() {
        let log: String = (0..100).map(|i| format!("line {i} node gone\n")).collect();
        let m = matching(&log, &["node gone".into()], 10);
        assert_eq!(m.len(), 11);
        assert_eq!(m[0], "line 0 node gone");
        assert_eq!(m[10], "line 99 node gone");
        assert!(matching(&log, &[], 10).is_empty());
    }
}
