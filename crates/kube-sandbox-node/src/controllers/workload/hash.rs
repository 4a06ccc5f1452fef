//! The stable hash of a pod template that names a Deployment's ReplicaSets (`pod-template-hash`)
//! and marks a DaemonSet's pods (`controller-revision-hash`).
//!
//! Like `controller.ComputeHash` upstream it is a 32-bit FNV-1a hash (collision count appended
//! when there is one) printed in decimal and passed through `rand.SafeEncodeString`, so values
//! look the same (e.g. `7c5ddbdf54`). What is hashed differs: upstream hashes the Go struct as
//! printed by `spew`, which cannot be reproduced outside Go; here it is the template's JSON with
//! keys sorted. The same template therefore gets a different value than on a real cluster, but
//! always the same value here.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

/// 32-bit FNV-1a of `bytes`, continuing from `state` (start with [`FNV_OFFSET`]).
pub fn fnv32a(state: u32, bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(state, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// FNV-1a's offset basis.
pub const FNV_OFFSET: u32 = 0x811c_9dc5;

/// `rand.SafeEncodeString`: every character mapped into an alphabet without vowels (so no
/// words) and without characters that look alike.
pub fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char)
        .collect()
}

/// JSON with object keys sorted at every level (independent of serde_json's map order).
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        v => out.push_str(&v.to_string()),
    }
}

/// The hash of `template` (and of `collision_count`, when set), safe-encoded.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut text = String::new();
    canonical(&serde_json::to_value(template).unwrap_or(Value::Null), &mut text);
    let mut h = fnv32a(FNV_OFFSET, text.as_bytes());
    if let Some(c) = collision_count {
        h = fnv32a(h, &c.to_le_bytes());
    }
    safe_encode(&h.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(json!({"metadata": {"labels": {"app": "web", "b": "x"}},
            "spec": {"containers": [{"name": "c", "image": image}]}}))
        .unwrap()
    }

    #[test]
    fn fnv_reference_values() {
        assert_eq!(fnv32a(FNV_OFFSET, b""), 0x811c_9dc5);
        assert_eq!(fnv32a(FNV_OFFSET, b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(FNV_OFFSET, b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn stable_and_sensitive() {
        let a = template_hash(&template("nginx:1"), None);
        assert_eq!(a, template_hash(&template("nginx:1"), None));
        assert_ne!(a, template_hash(&template("nginx:2"), None));
        assert_ne!(a, template_hash(&template("nginx:1"), Some(1)));
        assert!(a.len() <= 10 && !a.is_empty());
        assert!(
            a.bytes().all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)),
            "{a}"
        );
        // Key order does not matter.
        let mut s1 = String::new();
        let mut s2 = String::new();
        canonical(&json!({"a": 1, "b": [{"y": 1, "x": 2}]}), &mut s1);
        canonical(&json!({"b": [{"x": 2, "y": 1}], "a": 1}), &mut s2);
        assert_eq!(s1, s2);
        assert_eq!(safe_encode("0123456789"), "456789bcdf");
    }
}
