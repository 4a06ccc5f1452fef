//! `metav1.LabelSelector` matching (`matchLabels` and `matchExpressions` with In, NotIn, Exists,
//! DoesNotExist), as `metav1.LabelSelectorAsSelector` does it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects an object with `labels`. An empty selector selects everything
/// (callers that must refuse empty selectors check that themselves); an unknown operator selects
/// nothing.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    labels_ok
        && selector.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

/// Whether every label of `want` is in `labels` with the same value (`labels.SelectorFromSet`,
/// what `fullyLabeledReplicas` counts).
pub fn labels_match(want: Option<&BTreeMap<String, String>>, labels: &BTreeMap<String, String>) -> bool {
    want.into_iter().flatten().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "web")])),
            match_expressions: Some(vec![
                req("tier", "In", &["a", "b"]),
                req("canary", "DoesNotExist", &[]),
                req("zone", "NotIn", &["x"]),
                req("app", "Exists", &[]),
            ]),
        };
        assert!(selector_matches(&sel, &labels(&[("app", "web"), ("tier", "a")])));
        assert!(selector_matches(
            &sel,
            &labels(&[("app", "web"), ("tier", "b"), ("zone", "y")])
        ));
        assert!(!selector_matches(&sel, &labels(&[("app", "web"), ("tier", "c")])));
        assert!(!selector_matches(
            &sel,
            &labels(&[("app", "web"), ("tier", "a"), ("canary", "1")])
        ));
        assert!(!selector_matches(
            &sel,
            &labels(&[("app", "web"), ("tier", "a"), ("zone", "x")])
        ));
        assert!(!selector_matches(&sel, &labels(&[("tier", "a")])));
        assert!(selector_matches(&LabelSelector::default(), &labels(&[])));
        let bad = LabelSelector {
            match_expressions: Some(vec![req("a", "Gt", &["1"])]),
            ..Default::default()
        };
        assert!(!selector_matches(&bad, &labels(&[("a", "2")])));
    }

    #[test]
    fn full_labels() {
        let want = labels(&[("app", "web"), ("v", "1")]);
        assert!(labels_match(
            Some(&want),
            &labels(&[("app", "web"), ("v", "1"), ("x", "y")])
        ));
        assert!(!labels_match(Some(&want), &labels(&[("app", "web")])));
        assert!(labels_match(None, &labels(&[])));
    }
}
