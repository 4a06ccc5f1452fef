//! Label selectors (`matchLabels` AND `matchExpressions`), validated once and matched many times.
//! Unlike upstream Kuryr, no label is dropped (it ignored `pod-template-hash` in `matchLabels`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::error::PolicyError;
use crate::model::Labels;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    /// `key in (values)`; `matchLabels` entries are `In` with one value.
    In(String, Vec<String>),
    /// `key notin (values)`: also true when the key is absent.
    NotIn(String, Vec<String>),
    /// The key is present.
    Exists(String),
    /// The key is absent.
    DoesNotExist(String),
}

/// A validated label selector; the empty selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Compiles a Kubernetes selector; `path` names it in errors (`spec.podSelector`).
    pub fn compile(sel: &LabelSelector, path: &str) -> Result<Self, PolicyError> {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            requirements.push(Requirement::In(k.clone(), vec![v.clone()]));
        }
        for (i, e) in sel.match_expressions.iter().flatten().enumerate() {
            let at = format!("{path}.matchExpressions[{i}]");
            let values = e.values.clone().unwrap_or_default();
            let key = e.key.clone();
            if key.is_empty() {
                return Err(PolicyError::new(at, "key is empty"));
            }
            let req = match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(PolicyError::new(
                        at,
                        format!("operator {} needs at least one value", e.operator),
                    ));
                }
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(PolicyError::new(
                        at,
                        format!("operator {} takes no values", e.operator),
                    ));
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(PolicyError::new(
                        at,
                        format!("unknown operator {other:?} (In, NotIn, Exists, DoesNotExist)"),
                    ));
                }
            };
            requirements.push(req);
        }
        Ok(Self { requirements })
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }

    /// Whether this is the empty selector.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(kv: &[(&str, &str)]) -> Labels {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions_are_anded() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "a")])),
            match_expressions: Some(vec![
                expr("tier", "NotIn", &["db"]),
                expr("pod-template-hash", "Exists", &[]),
            ]),
        };
        let s = Selector::compile(&sel, "spec.podSelector").expect("valid");
        assert!(s.matches(&labels(&[("app", "a"), ("pod-template-hash", "x")])));
        assert!(!s.matches(&labels(&[("app", "a")])), "Exists needs the key");
        assert!(!s.matches(&labels(&[
            ("app", "a"),
            ("tier", "db"),
            ("pod-template-hash", "x")
        ])));
        assert!(!s.matches(&labels(&[("app", "b"), ("pod-template-hash", "x")])));
    }

    #[test]
    fn empty_selector_matches_all_and_not_in_matches_absent_keys() {
        assert!(
            Selector::compile(&LabelSelector::default(), "p")
                .expect("valid")
                .matches(&Labels::new())
        );
        let sel = LabelSelector {
            match_expressions: Some(vec![expr("x", "NotIn", &["1"])]),
            ..Default::default()
        };
        assert!(
            Selector::compile(&sel, "p")
                .expect("valid")
                .matches(&Labels::new())
        );
        let sel = LabelSelector {
            match_expressions: Some(vec![expr("x", "DoesNotExist", &[])]),
            ..Default::default()
        };
        assert!(
            !Selector::compile(&sel, "p")
                .expect("valid")
                .matches(&labels(&[("x", "")]))
        );
    }

    #[test]
    fn bad_selectors_name_the_expression() {
        for (e, want) in [
            (expr("x", "Has", &[]), "unknown operator \"Has\""),
            (expr("x", "In", &[]), "needs at least one value"),
            (expr("x", "Exists", &["1"]), "takes no values"),
            (expr("", "Exists", &[]), "key is empty"),
        ] {
            let sel = LabelSelector {
                match_expressions: Some(vec![expr("ok", "Exists", &[]), e]),
                ..Default::default()
            };
            let err = Selector::compile(&sel, "spec.podSelector")
                .expect_err("invalid")
                .to_string();
            assert!(err.contains("spec.podSelector.matchExpressions[1]"), "{err}");
            assert!(err.contains(want), "{err}");
        }
    }
}
