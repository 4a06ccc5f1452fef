//! Values rendered the way the real server prints them in `Invalid value: ...` causes (Go's
//! `%#v` of the internal types), so 422 messages read like a real cluster's.

use serde_json::Value;

/// A Go string literal (`%q` for the strings clients send).
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// `map[string]string{"a":"1", "b":"2"}` (sorted keys), `map[string]string(nil)` when absent.
pub fn string_map(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        None => "map[string]string(nil)".into(),
        Some(m) => {
            let mut entries: Vec<(&String, String)> = m
                .iter()
                .map(|(k, v)| (k, v.as_str().map(String::from).unwrap_or_else(|| v.to_string())))
                .collect();
            entries.sort();
            let parts: Vec<String> = entries
                .iter()
                .map(|(k, v)| format!("{}:{}", quote(k), quote(v)))
                .collect();
            format!("map[string]string{{{}}}", parts.join(", "))
        }
    }
}

/// `[]string{"a", "b"}`, `[]string(nil)` when absent.
pub fn string_slice(v: Option<&Value>) -> String {
    match v.and_then(Value::as_array) {
        None => "[]string(nil)".into(),
        Some(a) => {
            let parts: Vec<String> = a.iter().map(|x| quote(x.as_str().unwrap_or_default())).collect();
            format!("[]string{{{}}}", parts.join(", "))
        }
    }
}

/// `v1.LabelSelector{MatchLabels:..., MatchExpressions:...}`.
pub fn label_selector(sel: &Value) -> String {
    let exprs = match sel.get("matchExpressions").and_then(Value::as_array) {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(a) => {
            let parts: Vec<String> = a
                .iter()
                .map(|e| {
                    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default();
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{}}}",
                        quote(s("key")),
                        quote(s("operator")),
                        string_slice(e.get("values"))
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", parts.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{exprs}}}",
        string_map(sel.get("matchLabels"))
    )
}

/// `intstr.IntOrString{Type:0, IntVal:1, StrVal:""}` (Type 1 for strings).
pub fn int_or_string(v: &Value) -> String {
    match v {
        Value::String(s) => format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{}}}", quote(s)),
        v => format!(
            "intstr.IntOrString{{Type:0, IntVal:{}, StrVal:\"\"}}",
            v.as_i64().unwrap_or(0)
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn formats_like_go() {
        assert_eq!(
            string_map(Some(&json!({"b": "2", "a": "1"}))),
            r#"map[string]string{"a":"1", "b":"2"}"#
        );
        assert_eq!(string_map(None), "map[string]string(nil)");
        assert_eq!(
            label_selector(&json!({"matchLabels": {"app": "web"}})),
            r#"v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
        );
        assert_eq!(
            label_selector(&json!({"matchExpressions": [{"key": "k", "operator": "In", "values": ["a"]}]})),
            r#"v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"k", Operator:"In", Values:[]string{"a"}}}}"#
        );
        assert_eq!(
            int_or_string(&json!(0)),
            r#"intstr.IntOrString{Type:0, IntVal:0, StrVal:""}"#
        );
        assert_eq!(
            int_or_string(&json!("150%")),
            r#"intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}"#
        );
    }
}
