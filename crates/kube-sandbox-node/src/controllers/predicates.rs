//! Node predicates shared by the scheduler and the DaemonSet controller: readiness, taints and
//! tolerations, `nodeSelector`, and required node affinity (`nodeSelectorTerms` ORed, each
//! term's `matchExpressions` on labels and `matchFields` on `metadata.name` ANDed; operators In,
//! NotIn, Exists, DoesNotExist, Gt, Lt), as upstream's `nodeaffinity.GetRequiredNodeAffinity`
//! and `v1helper.FindMatchingUntoleratedTaint` evaluate them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use kube::ResourceExt;

/// Taint key the node lifecycle controller puts on NotReady nodes.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Taint key of nodes whose status is Unknown.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// Taint key of cordoned nodes (`spec.unschedulable`).
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The node's `Ready` condition is `True`.
pub fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// A taint with `key` and `effect` (and no value).
pub fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        ..Default::default()
    }
}

/// Whether one of `tolerations` tolerates `taint` (`Toleration.ToleratesTaint`).
pub fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == taint.effect);
        let key_ok = match t.key.as_deref() {
            None | Some("") => t.operator.as_deref() == Some("Exists"),
            Some(k) => k == taint.key,
        };
        let value_ok = match t.operator.as_deref() {
            Some("Exists") => true,
            _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        };
        effect_ok && key_ok && value_ok
    })
}

/// The first of `taints` with one of `effects` that `tolerations` do not tolerate.
pub fn untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| effects.contains(&t.effect.as_str()))
        .find(|t| !tolerates(tolerations, t))
}

/// The node's taints.
pub fn node_taints(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Whether a label (or field) value satisfies one requirement.
fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [want]) = (value.and_then(number), values) else {
                return false;
            };
            let Some(want) = number(want) else { return false };
            if req.operator == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}

/// One `nodeSelectorTerm`: all its requirements hold; a term without any matches nothing.
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.labels();
    let name = node.name_any();
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then_some(name.as_str());
            r.key == "metadata.name" && requirement_matches(r, value)
        })
}

/// `nodeSelector` (every label equal) and the required node affinity (some term matches).
pub fn fits_node_affinity(spec: &PodSpec, node: &Node) -> bool {
    let labels: &BTreeMap<String, String> = node.labels();
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    selector_ok && required.is_none_or(|r| r.node_selector_terms.iter().any(|t| term_matches(t, node)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(name: &str, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    }

    fn spec(extra: serde_json::Value) -> PodSpec {
        let mut s = json!({"containers": [{"name": "c"}]});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        serde_json::from_value(s).unwrap()
    }

    fn affinity(terms: serde_json::Value) -> serde_json::Value {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": terms}}}})
    }

    #[test]
    fn match_fields_on_name() {
        let s = spec(affinity(json!([{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["a"]}]}])));
        assert!(fits_node_affinity(&s, &node("a", json!({}))));
        assert!(!fits_node_affinity(&s, &node("b", json!({}))));
        let other_field = spec(affinity(json!([{"matchFields": [
            {"key": "spec.podCIDR", "operator": "Exists"}]}])));
        assert!(!fits_node_affinity(&other_field, &node("a", json!({}))));
    }

    #[test]
    fn match_expressions_and_terms() {
        let s = spec(affinity(json!([
            {"matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["x", "y"]},
                {"key": "gpu", "operator": "DoesNotExist"},
                {"key": "tier", "operator": "NotIn", "values": ["db"]}]},
            {"matchExpressions": [{"key": "special", "operator": "Exists"}]},
            {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}])));
        assert!(fits_node_affinity(&s, &node("n", json!({"zone": "x"}))));
        assert!(fits_node_affinity(
            &s,
            &node("n", json!({"zone": "y", "tier": "web"}))
        ));
        assert!(!fits_node_affinity(
            &s,
            &node("n", json!({"zone": "x", "gpu": "1"}))
        ));
        assert!(!fits_node_affinity(
            &s,
            &node("n", json!({"zone": "x", "tier": "db"}))
        ));
        assert!(!fits_node_affinity(&s, &node("n", json!({"zone": "z"}))));
        assert!(fits_node_affinity(&s, &node("n", json!({"special": ""}))));
        assert!(fits_node_affinity(&s, &node("n", json!({"cores": "16"}))));
        assert!(!fits_node_affinity(&s, &node("n", json!({"cores": "4"}))));
        // An empty term matches nothing; no affinity matches everything.
        let empty = spec(affinity(json!([{}])));
        assert!(!fits_node_affinity(&empty, &node("n", json!({}))));
        assert!(fits_node_affinity(&spec(json!({})), &node("n", json!({}))));
    }

    #[test]
    fn selector_and_affinity_both_apply() {
        let mut extra = affinity(json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]));
        extra["nodeSelector"] = json!({"os": "linux"});
        let s = spec(extra);
        assert!(fits_node_affinity(
            &s,
            &node("n", json!({"os": "linux", "zone": "a"}))
        ));
        assert!(!fits_node_affinity(&s, &node("n", json!({"zone": "a"}))));
        assert!(!fits_node_affinity(&s, &node("n", json!({"os": "linux"}))));
    }

    #[test]
    fn taints_and_tolerations() {
        let taints = vec![
            taint("a", "NoSchedule"),
            taint("b", "NoExecute"),
            taint("c", "PreferNoSchedule"),
        ];
        let tol: Vec<Toleration> =
            serde_json::from_value(json!([{"key": "a", "operator": "Exists"}])).unwrap();
        assert_eq!(
            untolerated_taint(&taints, &tol, &["NoSchedule", "NoExecute"]).map(|t| t.key.as_str()),
            Some("b")
        );
        assert!(untolerated_taint(&taints, &tol, &["NoSchedule"]).is_none());
        let all: Vec<Toleration> = serde_json::from_value(json!([{"operator": "Exists"}])).unwrap();
        assert!(untolerated_taint(&taints, &all, &["NoSchedule", "NoExecute"]).is_none());
        let wrong_effect: Vec<Toleration> =
            serde_json::from_value(json!([{"key": "b", "operator": "Exists", "effect": "NoSchedule"}]))
                .unwrap();
        assert!(!tolerates(&wrong_effect, &taints[1]));
    }
}
