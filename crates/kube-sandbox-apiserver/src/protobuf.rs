//! Decoding of the Kubernetes protobuf envelope for the few kinds kubectl's typed generators send
//! as protobuf (`kubectl create configmap|secret|namespace|serviceaccount`) and the
//! DeleteOptions client-go sends with a DELETE (Helm purging its release Secrets). Only the
//! fields those clients set are understood; anything else is answered with 415 by the caller.

use base64::Engine as _;
use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.b.split_first()?;
            self.b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn next_field(&mut self) -> Option<Option<(u64, Field<'a>)>> {
        if self.b.is_empty() {
            return Some(None);
        }
        let key = self.varint()?;
        let f = match key & 7 {
            0 => Field::Varint(self.varint()?),
            2 => {
                let len = usize::try_from(self.varint()?).ok()?;
                if len > self.b.len() {
                    return None;
                }
                let (d, rest) = self.b.split_at(len);
                self.b = rest;
                Field::Bytes(d)
            }
            1 => {
                self.b = self.b.get(8..)?;
                Field::Other
            }
            5 => {
                self.b = self.b.get(4..)?;
                Field::Other
            }
            _ => return None,
        };
        Some(Some((key >> 3, f)))
    }
}

/// Visits every field; `None` on malformed input.
fn fields<'a>(b: &'a [u8], mut f: impl FnMut(u64, Field<'a>) -> Option<()>) -> Option<()> {
    let mut r = Reader { b };
    while let Some((n, v)) = r.next_field()? {
        f(n, v)?;
    }
    Some(())
}

fn string(b: &[u8]) -> Option<String> {
    String::from_utf8(b.to_vec()).ok()
}

/// A `map<string, string|bytes>` entry.
fn map_entry(b: &[u8], bytes_value: bool) -> Option<(String, Value)> {
    let mut k = String::new();
    let mut v = Value::String(String::new());
    fields(b, |n, f| {
        if let Field::Bytes(d) = f {
            match n {
                1 => k = string(d)?,
                2 if bytes_value => v = json!(base64::engine::general_purpose::STANDARD.encode(d)),
                2 => v = json!(string(d)?),
                _ => {}
            }
        }
        Some(())
    })?;
    Some((k, v))
}

fn owner_reference(b: &[u8]) -> Option<Value> {
    let mut o = Map::new();
    fields(b, |n, f| {
        match (n, f) {
            (1, Field::Bytes(d)) => {
                o.insert("kind".into(), json!(string(d)?));
            }
            (3, Field::Bytes(d)) => {
                o.insert("name".into(), json!(string(d)?));
            }
            (4, Field::Bytes(d)) => {
                o.insert("uid".into(), json!(string(d)?));
            }
            (5, Field::Bytes(d)) => {
                o.insert("apiVersion".into(), json!(string(d)?));
            }
            (6, Field::Varint(v)) => {
                o.insert("controller".into(), json!(v != 0));
            }
            (7, Field::Varint(v)) => {
                o.insert("blockOwnerDeletion".into(), json!(v != 0));
            }
            _ => {}
        }
        Some(())
    })?;
    Some(Value::Object(o))
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut owners = Vec::new();
    let mut finalizers = Vec::new();
    fields(b, |n, f| {
        match (n, f) {
            (1, Field::Bytes(d)) => {
                m.insert("name".into(), json!(string(d)?));
            }
            (2, Field::Bytes(d)) => {
                m.insert("generateName".into(), json!(string(d)?));
            }
            (3, Field::Bytes(d)) => {
                m.insert("namespace".into(), json!(string(d)?));
            }
            (5, Field::Bytes(d)) => {
                m.insert("uid".into(), json!(string(d)?));
            }
            (6, Field::Bytes(d)) => {
                m.insert("resourceVersion".into(), json!(string(d)?));
            }
            (11, Field::Bytes(d)) => {
                let (k, v) = map_entry(d, false)?;
                labels.insert(k, v);
            }
            (12, Field::Bytes(d)) => {
                let (k, v) = map_entry(d, false)?;
                annotations.insert(k, v);
            }
            (13, Field::Bytes(d)) => owners.push(owner_reference(d)?),
            (14, Field::Bytes(d)) => finalizers.push(json!(string(d)?)),
            _ => {}
        }
        Some(())
    })?;
    // Go encodes unset strings as empty ones.
    m.retain(|_, v| v.as_str() != Some(""));
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !owners.is_empty() {
        m.insert("ownerReferences".into(), Value::Array(owners));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Some(Value::Object(m))
}

fn body(kind: &str, raw: &[u8]) -> Option<Value> {
    let mut o = Map::new();
    let mut data = Map::new();
    let mut extra = Map::new();
    fields(raw, |n, f| {
        match (kind, n, f) {
            (_, 1, Field::Bytes(d)) => {
                o.insert("metadata".into(), object_meta(d)?);
            }
            ("ConfigMap", 2, Field::Bytes(d)) => {
                let (k, v) = map_entry(d, false)?;
                data.insert(k, v);
            }
            ("ConfigMap", 3, Field::Bytes(d)) => {
                let (k, v) = map_entry(d, true)?;
                extra.insert(k, v);
            }
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                o.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 2, Field::Bytes(d)) => {
                let (k, v) = map_entry(d, true)?;
                data.insert(k, v);
            }
            ("Secret", 3, Field::Bytes(d)) if !d.is_empty() => {
                o.insert("type".into(), json!(string(d)?));
            }
            ("Secret", 4, Field::Bytes(d)) => {
                let (k, v) = map_entry(d, false)?;
                extra.insert(k, v);
            }
            ("Namespace", 2, Field::Bytes(_)) | ("Namespace", 3, Field::Bytes(_)) => {}
            ("ServiceAccount", 4, Field::Varint(v)) => {
                o.insert("automountServiceAccountToken".into(), json!(v != 0));
            }
            ("ConfigMap" | "Secret" | "Namespace" | "ServiceAccount", _, _) => {}
            // meta/v1 DeleteOptions: its fields start at 1 (there is no metadata).
            ("DeleteOptions", 1, Field::Varint(v)) => {
                o.insert("gracePeriodSeconds".into(), json!(v as i64));
            }
            ("DeleteOptions", 2, Field::Bytes(d)) => {
                let mut pre = Map::new();
                fields(d, |n, f| {
                    if let Field::Bytes(b) = f {
                        match n {
                            1 => {
                                pre.insert("uid".into(), json!(string(b)?));
                            }
                            2 => {
                                pre.insert("resourceVersion".into(), json!(string(b)?));
                            }
                            _ => {}
                        }
                    }
                    Some(())
                })?;
                o.insert("preconditions".into(), Value::Object(pre));
            }
            ("DeleteOptions", 3, Field::Varint(v)) => {
                o.insert("orphanDependents".into(), json!(v != 0));
            }
            ("DeleteOptions", 4, Field::Bytes(d)) => {
                o.insert("propagationPolicy".into(), json!(string(d)?));
            }
            ("DeleteOptions", 5, Field::Bytes(d)) => {
                let entry = o.entry("dryRun").or_insert_with(|| json!([]));
                if let Value::Array(a) = entry {
                    a.push(json!(string(d)?));
                }
            }
            ("DeleteOptions", _, _) => {}
            _ => return None,
        }
        Some(())
    })?;
    if !data.is_empty() {
        o.insert("data".into(), Value::Object(data));
    }
    if !extra.is_empty() {
        let field = if kind == "Secret" {
            "stringData"
        } else {
            "binaryData"
        };
        o.insert(field.into(), Value::Object(extra));
    }
    Some(Value::Object(o))
}

/// Decodes a protobuf request body of a supported kind into its JSON form.
pub fn decode(b: &[u8]) -> Option<Value> {
    let rest = b.strip_prefix(MAGIC)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    fields(rest, |n, f| {
        match (n, f) {
            (1, Field::Bytes(tm)) => fields(tm, |n, f| {
                if let Field::Bytes(d) = f {
                    match n {
                        1 => api_version = string(d)?,
                        2 => kind = string(d)?,
                        _ => {}
                    }
                }
                Some(())
            })?,
            (2, Field::Bytes(d)) => raw = Some(d),
            (3 | 4, Field::Bytes(d)) if !d.is_empty() && n == 3 => return None,
            _ => {}
        }
        Some(())
    })?;
    let mut obj = body(&kind, raw.unwrap_or_default())?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Some(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(field: u64, d: &[u8]) -> Vec<u8> {
        let mut v = vec![(field << 3 | 2) as u8, d.len() as u8];
        v.extend_from_slice(d);
        v
    }

    #[test]
    fn delete_options_envelope() {
        let tm = [ld(1, b"v1"), ld(2, b"DeleteOptions")].concat();
        let pre = [ld(1, b"u-1"), ld(2, b"42")].concat();
        let raw = [vec![1 << 3, 30], ld(2, &pre), ld(4, b"Background"), ld(5, b"All")].concat();
        let env = [MAGIC.to_vec(), ld(1, &tm), ld(2, &raw)].concat();
        assert_eq!(
            decode(&env).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 30,
                   "preconditions": {"uid": "u-1", "resourceVersion": "42"},
                   "propagationPolicy": "Background", "dryRun": ["All"]})
        );
        // client-go's empty DeleteOptions.
        let env = [MAGIC.to_vec(), ld(1, &tm), ld(2, b"")].concat();
        assert_eq!(
            decode(&env).expect("decodes"),
            json!({"apiVersion": "v1", "kind": "DeleteOptions"})
        );
    }

    #[test]
    fn configmap_envelope() {
        let tm = [ld(1, b"v1"), ld(2, b"ConfigMap")].concat();
        let meta = [ld(1, b"cm"), ld(11, &[ld(1, b"app"), ld(2, b"x")].concat())].concat();
        let raw = [ld(1, &meta), ld(2, &[ld(1, b"k"), ld(2, b"v")].concat())].concat();
        let env = [MAGIC.to_vec(), ld(1, &tm), ld(2, &raw)].concat();
        let v = decode(&env).expect("decodes");
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cm", "labels": {"app": "x"}}, "data": {"k": "v"}})
        );
        assert!(decode(b"{}").is_none());
    }
}
