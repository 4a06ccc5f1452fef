//! Pure decisions of the KuryrNetwork handler: the next step from a KuryrNetwork's state,
//! the names and descriptions of the Neutron resources it creates, and the status patches.

use crate::handlers::scaffold::{self, Then};
use kube::ResourceExt;
use kuryr_core::ownership::{Claim, claim_of, is_kuryr_owner};
use kuryr_types::{KuryrNetwork, constants::KURYRNETWORK_FINALIZER};
use serde_json::{Value, json};

/// Longest Neutron resource name.
pub const MAX_NAME: usize = 255;

/// What the handler does next with a KuryrNetwork (one Neutron or API write each; the
/// handler repeats until [`Step::Done`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Deleted: release pools, detach, delete the network, drop the finalizer.
    Finalize,
    /// Deleted and our finalizer is gone already: nothing to do.
    Gone,
    /// Created by someone else without our finalizer: add it before creating anything.
    AddFinalizer,
    /// No `status.netId`.
    CreateNetwork,
    /// No `status.subnetId`.
    CreateSubnet,
    /// No `status.routerId`.
    AttachRouter,
    /// `status.nsLabels` differs from `spec.nsLabels`.
    SyncLabels,
    /// Complete in `status`, but its subnet is gone from Neutron (deleted by hand, or an old
    /// status): clear the recorded IDs so that the steps above build the network again.
    Rebuild,
    /// Everything exists.
    Done,
}

fn set(v: Option<&String>) -> bool {
    v.is_some_and(|s| !s.is_empty())
}

/// The handler's plan for `kn`: its next step (each step records its result in `status`, and
/// the scaffold plans again from the written object), nothing once done or gone;
/// `subnet_missing`: Neutron said the recorded subnet does not exist.
pub fn plan(kn: &KuryrNetwork, subnet_missing: bool) -> scaffold::Plan<Step> {
    let step = match next_step(kn) {
        Step::Done | Step::SyncLabels if subnet_missing => Step::Rebuild,
        s => s,
    };
    match step {
        Step::Done => scaffold::Plan::nothing("namespace network complete", Then::Periodic),
        Step::Gone => scaffold::Plan::nothing("deleted, our finalizer gone", Then::AwaitChange),
        step => scaffold::Plan::steps("next recorded step", vec![step], Then::Periodic),
    }
}

/// The next step for `kn` (upstream resumes from the status fields in this order).
pub fn next_step(kn: &KuryrNetwork) -> Step {
    let has_finalizer = kn.finalizers().iter().any(|f| f == KURYRNETWORK_FINALIZER);
    if kn.metadata.deletion_timestamp.is_some() {
        return if has_finalizer { Step::Finalize } else { Step::Gone };
    }
    if !has_finalizer {
        return Step::AddFinalizer;
    }
    let st = kn.status.clone().unwrap_or_default();
    if !set(st.net_id.as_ref()) {
        Step::CreateNetwork
    } else if !set(st.subnet_id.as_ref()) {
        Step::CreateSubnet
    } else if !set(st.router_id.as_ref()) {
        Step::AttachRouter
    } else if st.ns_labels.as_ref() != Some(&kn.spec.ns_labels) {
        Step::SyncLabels
    } else {
        Step::Done
    }
}

/// Name of a namespace's network and subnet (upstream: `<namespace UID>/<namespace>`, cut
/// to 255 characters by shortening the namespace part).
pub fn resource_name(ns_uid: Option<&str>, ns: &str) -> String {
    let prefix = ns_uid.map(|u| format!("{u}/")).unwrap_or_default();
    let room = MAX_NAME.saturating_sub(prefix.len());
    let name: String = ns.chars().take(room).collect();
    format!("{prefix}{name}")
}

/// Names a pre-existing network of the namespace may have (reused instead of creating a
/// second one): the current one, then upstream's legacy `ns/<namespace>-net`.
pub fn candidate_network_names(ns_uid: Option<&str>, ns: &str) -> Vec<String> {
    let mut v = Vec::new();
    if ns_uid.is_some() {
        v.push(resource_name(ns_uid, ns));
    }
    v.push(format!("ns/{ns}-net"));
    v
}

/// Whether `name` is `<UID>/<ns>` (a UID: 36 characters of hex digits and dashes).
pub fn is_namespace_network_name(name: &str, ns: &str) -> bool {
    match name.split_once('/') {
        Some((uid, rest)) => {
            rest == ns && uid.len() == 36 && uid.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        }
        None => false,
    }
}

/// Description of created resources: the comma-joined tags, as upstream (its GC read it).
pub fn description(tags: &[String]) -> Option<String> {
    (!tags.is_empty()).then(|| tags.join(","))
}

/// Merge patch clearing what [`Step::Rebuild`] builds again.
pub fn status_cleared() -> Value {
    json!({"status": {"netId": null, "subnetId": null, "subnetCIDR": null, "routerId": null, "populated": null}})
}

/// Merge patch of `status.netId`.
pub fn status_net(net_id: &str) -> Value {
    json!({"status": {"netId": net_id}})
}

/// Merge patch of `status.subnetId` and `status.subnetCIDR`.
pub fn status_subnet(subnet_id: &str, cidr: &str) -> Value {
    json!({"status": {"subnetId": subnet_id, "subnetCIDR": cidr}})
}

/// Merge patch of `status.routerId` (and `populated: false`: the new subnet's pools are to
/// be filled by the population handler).
pub fn status_router(router_id: &str) -> Value {
    json!({"status": {"routerId": router_id, "populated": false}})
}

/// Merge patch setting `status.nsLabels` to `spec.nsLabels`: keys no longer in the spec are
/// nulled (a merge patch merges maps key by key).
pub fn status_labels(kn: &KuryrNetwork) -> Value {
    let mut labels = serde_json::Map::new();
    if let Some(old) = kn.status.as_ref().and_then(|s| s.ns_labels.as_ref()) {
        for k in old.keys() {
            labels.insert(k.clone(), Value::Null);
        }
    }
    for (k, v) in &kn.spec.ns_labels {
        labels.insert(k.clone(), json!(v));
    }
    json!({"status": {"nsLabels": labels}})
}

/// Merge patch of `status.populated`.
pub fn status_populated(populated: bool) -> Value {
    json!({"status": {"populated": populated}})
}

/// The finalizer list of `kn` without ours.
pub fn finalizers_without_ours(kn: &KuryrNetwork) -> Vec<String> {
    kn.finalizers()
        .iter()
        .filter(|f| *f != KURYRNETWORK_FINALIZER)
        .cloned()
        .collect()
}

/// A leftover port that blocks a network's deletion and may be deleted with it: one with a
/// device owner of kuryr's (pod ports, trunk subports) that is ours by `tags` or untagged
/// (upstream's). Upstream also deleted ports with an empty device owner — what ports users
/// make usually have: such a port, or one with another cluster's tags, blocks the deletion
/// instead (the finalizer retries and the log names it).
pub fn is_deletable_leftover(p: &kuryr_openstack::Port, tags: &[String]) -> bool {
    is_kuryr_owner(&p.device_owner) && claim_of(tags, &p.tags) != Claim::Foreign
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kuryr_types::{KuryrNetworkSpec, KuryrNetworkStatus};
    use std::collections::BTreeMap;

    fn kn() -> KuryrNetwork {
        let mut kn = KuryrNetwork::new(
            "ns1",
            KuryrNetworkSpec {
                ns_name: "ns1".into(),
                project_id: "p".into(),
                ns_labels: BTreeMap::from([("a".into(), "b".into())]),
            },
        );
        kn.metadata.finalizers = Some(vec![KURYRNETWORK_FINALIZER.into()]);
        kn
    }

    #[test]
    fn steps_follow_status_in_upstream_order() {
        let mut k = kn();
        k.metadata.finalizers = None;
        assert_eq!(next_step(&k), Step::AddFinalizer);
        let mut k = kn();
        assert_eq!(next_step(&k), Step::CreateNetwork);
        k.status = Some(KuryrNetworkStatus {
            net_id: Some("n".into()),
            ..Default::default()
        });
        assert_eq!(next_step(&k), Step::CreateSubnet);
        let st = k.status.as_mut().unwrap();
        st.subnet_id = Some("s".into());
        st.subnet_cidr = Some("10.10.1.0/24".into());
        assert_eq!(next_step(&k), Step::AttachRouter);
        k.status.as_mut().unwrap().router_id = Some("r".into());
        assert_eq!(next_step(&k), Step::SyncLabels);
        k.status.as_mut().unwrap().ns_labels = Some(k.spec.ns_labels.clone());
        assert_eq!(next_step(&k), Step::Done);
        k.spec.ns_labels.insert("c".into(), "d".into());
        assert_eq!(next_step(&k), Step::SyncLabels);
        k.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(next_step(&k), Step::Finalize);
        k.metadata.finalizers = Some(vec!["other".into()]);
        assert_eq!(next_step(&k), Step::Gone);
        assert_eq!(finalizers_without_ours(&k), vec!["other".to_string()]);
    }

    #[test]
    fn a_complete_network_whose_subnet_is_gone_is_built_again() {
        let mut k = kn();
        k.status = Some(KuryrNetworkStatus {
            net_id: Some("n".into()),
            subnet_id: Some("s".into()),
            subnet_cidr: Some("10.10.1.0/24".into()),
            router_id: Some("r".into()),
            ns_labels: Some(k.spec.ns_labels.clone()),
            ..Default::default()
        });
        assert!(plan(&k, false).steps.is_empty(), "complete");
        assert_eq!(plan(&k, true).steps, vec![Step::Rebuild]);
        // Being deleted: finalized as always (a missing subnet is fine there).
        k.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(plan(&k, true).steps, vec![Step::Finalize]);
        assert_eq!(
            status_cleared(),
            json!({"status": {"netId": null, "subnetId": null, "subnetCIDR": null, "routerId": null, "populated": null}})
        );
    }

    #[test]
    fn names_and_descriptions() {
        assert_eq!(resource_name(Some("u-1"), "ns1"), "u-1/ns1");
        assert_eq!(resource_name(None, "ns1"), "ns1");
        let long = "x".repeat(300);
        assert_eq!(resource_name(Some("u"), &long).len(), MAX_NAME);
        assert_eq!(candidate_network_names(Some("u"), "a"), vec!["u/a", "ns/a-net"]);
        assert_eq!(candidate_network_names(None, "a"), vec!["ns/a-net"]);
        let uid = "581601bf-509c-4123-ad20-0c9968e20ccf";
        assert!(is_namespace_network_name(&format!("{uid}/kn"), "kn"));
        assert!(!is_namespace_network_name(&format!("{uid}/kn"), "k"));
        assert!(!is_namespace_network_name("x/kn", "kn"));
        assert!(!is_namespace_network_name("ns/kn-net", "kn"));
        assert_eq!(description(&["a".into(), "b".into()]).as_deref(), Some("a,b"));
        assert_eq!(description(&[]), None);
        let ours = ["kuryr-cluster=a".to_string()];
        let port = |owner: &str, tags: &[&str]| kuryr_openstack::Port {
            device_owner: owner.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        };
        assert!(is_deletable_leftover(
            &port("compute:kuryr", &["kuryr-cluster=a"]),
            &ours
        ));
        assert!(is_deletable_leftover(&port("trunk:subport", &[]), &ours));
        assert!(!is_deletable_leftover(
            &port("compute:kuryr", &["kuryr-cluster=b"]),
            &ours
        ));
        assert!(!is_deletable_leftover(&port("", &[]), &ours));
        assert!(!is_deletable_leftover(
            &port("network:router_interface", &[]),
            &ours
        ));
    }

    #[test]
    fn status_patches() {
        assert_eq!(status_net("n"), json!({"status": {"netId": "n"}}));
        assert_eq!(
            status_router("r"),
            json!({"status": {"routerId": "r", "populated": false}})
        );
        let mut k = kn();
        assert_eq!(status_labels(&k), json!({"status": {"nsLabels": {"a": "b"}}}));
        k.status = Some(KuryrNetworkStatus {
            ns_labels: Some(BTreeMap::from([
                ("old".into(), "x".into()),
                ("a".into(), "z".into()),
            ])),
            ..Default::default()
        });
        assert_eq!(
            status_labels(&k),
            json!({"status": {"nsLabels": {"a": "b", "old": null}}})
        );
        assert_eq!(status_populated(true), json!({"status": {"populated": true}}));
    }
}
