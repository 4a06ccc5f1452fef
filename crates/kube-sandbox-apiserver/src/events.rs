//! Core `v1` Events and `events.k8s.io/v1` Events are one stored resource (in the core form),
//! converted per request version like the real server does.

use serde_json::{Value, json};

use crate::registry::ResourceInfo;

/// `(core v1 field, events.k8s.io/v1 field)` pairs; everything else has the same name.
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// True for the `events.k8s.io` view.
pub fn is_events_v1(info: &ResourceInfo) -> bool {
    info.group == "events.k8s.io" && info.plural == "events"
}

fn rename(obj: &Value, to_v1: bool, api_version: &str) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        for (core, v1) in RENAMES {
            let (from, to) = if to_v1 { (core, v1) } else { (v1, core) };
            if let Some(v) = m.remove(*from) {
                m.insert((*to).to_string(), v);
            }
        }
        m.insert("apiVersion".into(), json!(api_version));
        m.insert("kind".into(), json!("Event"));
    }
    o
}

/// The stored (core) form → `events.k8s.io/v1`.
pub fn to_events_v1(core: &Value) -> Value {
    rename(core, true, "events.k8s.io/v1")
}

/// `events.k8s.io/v1` → the stored (core) form.
pub fn to_core(v1: &Value) -> Value {
    rename(v1, false, "v1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Pod", "name": "p"}, "note": "hi", "reason": "Created",
            "reportingController": "kuryr", "series": {"count": 2}});
        let core = to_core(&v1);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "kuryr");
        assert_eq!(to_events_v1(&core), v1);
    }
}
