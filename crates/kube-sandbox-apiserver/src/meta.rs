//! Object-metadata helpers: timestamps, names (validation and `generateName`), and typed access
//! to `metadata` fields of JSON objects.

use serde_json::{Map, Value, json};

/// `now` as RFC 3339 with second precision (`2026-11-22T05:30:00Z`).
pub fn now() -> String {
    at_offset(0)
}

/// `now + secs` as RFC 3339 with second precision.
pub fn at_offset(secs: i64) -> String {
    let s = jiff::Timestamp::now().as_second() + secs;
    jiff::Timestamp::from_second(s)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| jiff::Timestamp::UNIX_EPOCH.to_string())
}

/// A fresh UID.
pub fn uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `prefix` + 5 random characters from the Kubernetes alphabet.
pub fn generate_name(prefix: &str) -> String {
    let mut s = prefix.chars().take(58).collect::<String>();
    for _ in 0..5 {
        s.push(ALPHABET[fastrand::usize(..ALPHABET.len())] as char);
    }
    s
}

fn is_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

/// DNS-1123 label check; `None` when valid, else the real server's message.
pub fn dns1123_label(name: &str) -> Option<String> {
    if name.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok =
        !name.is_empty() && name.chars().all(is_label_char) && !name.starts_with('-') && !name.ends_with('-');
    (!ok).then(|| "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".into())
}

/// DNS-1035 label check (Service names).
pub fn dns1035_label(name: &str) -> Option<String> {
    if name.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    let ok = !name.is_empty()
        && name.chars().all(is_label_char)
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-');
    (!ok).then(|| "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".into())
}

/// DNS-1123 subdomain check.
pub fn dns1123_subdomain(name: &str) -> Option<String> {
    if name.len() > 253 {
        return Some("must be no more than 253 characters".into());
    }
    let ok = kube_sandbox_machinery::selectors::is_dns1123_subdomain(name);
    (!ok).then(|| "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into())
}

/// Path-segment name check used for kinds without DNS rules (events, leases, ...).
pub fn path_segment(name: &str) -> Option<String> {
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    if name.contains('/') || name.contains('%') {
        return Some("may not contain '/' or '%'".into());
    }
    None
}

/// The `metadata` map, created if missing.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let map = obj.as_object_mut().expect("object ensured above");
    let m = map.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut().expect("object ensured above")
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

/// `metadata.name` (empty when missing).
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

/// `metadata.namespace` (empty when missing).
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace").unwrap_or("")
}

/// `metadata.uid` (empty when missing).
pub fn uid_of(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(|f| f.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Replaces `metadata.finalizers` (removing the field when empty).
pub fn set_finalizers(obj: &mut Value, f: &[String]) {
    let m = metadata_mut(obj);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(f));
    }
}

/// True when `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// `metadata.ownerReferences` uids (with their `blockOwnerDeletion`).
pub fn owner_uids(obj: &Value) -> Vec<(String, bool)> {
    obj.get("metadata")
        .and_then(|m| m.get("ownerReferences"))
        .and_then(|f| f.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    Some((
                        r.get("uid")?.as_str()?.to_string(),
                        r.get("blockOwnerDeletion").and_then(|b| b.as_bool()) == Some(true),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The object without `metadata` and `status` (what bumps `generation`).
pub fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(dns1123_label("abc-1").is_none());
        assert!(dns1123_label("Abc").is_some());
        assert!(dns1123_label("-a").is_some());
        assert!(dns1123_subdomain("a.b-c.d").is_none());
        assert!(dns1123_subdomain("a..b").is_some());
        assert!(dns1035_label("1abc").is_some());
        assert!(dns1035_label("abc").is_none());
        let g = generate_name("web-");
        assert_eq!(g.len(), 9);
        assert!(g[4..].bytes().all(|b| ALPHABET.contains(&b)));
    }

    #[test]
    fn timestamps_are_second_precision() {
        let n = now();
        assert!(n.ends_with('Z'));
        assert_eq!(n.len(), "2026-11-22T05:30:00Z".len(), "{n}");
    }
}
