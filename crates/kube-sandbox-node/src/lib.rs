//! Emulated node side of kube-sandbox: [`node`] (kubelet + container runtime driving a real CNI
//! plugin on real network namespaces) and [`controllers`] (scheduler, endpoints, ReplicaSet,
//! Deployment and DaemonSet controllers, pod garbage collector).
//! Both talk to the API server only through the Kubernetes API, like their real counterparts.
//!
//! Entry points: [`node::run`] / [`node::run_node`] (one node), [`controllers::run`] /
//! [`controllers::run_with_client`] (every control-plane loop). The CRI-runtime side of
//! CNI (config selection, plugin protocol, results) is in [`cni`]; network namespaces and
//! in-namespace socket binding in [`netns`]; the emulated containers in [`responder`]; the
//! node's persistent state and CNI result cache in [`state`]; Event recording in [`events`]; the
//! in-pod connectivity probe `kubectl exec` runs in [`probe`].

pub mod cni;
pub mod containers;
pub mod controllers;
pub mod events;
pub mod netns;
pub mod node;
pub mod probe;
pub mod responder;
pub mod state;

/// A timestamp as Kubernetes writes `metav1.Time`: RFC 3339 with whole seconds, UTC.
pub(crate) fn k8s_time(ts: jiff::Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", ts).unwrap_or_else(|_| ts.to_string())
}

/// Now, as [`k8s_time`].
pub(crate) fn k8s_now() -> String {
    k8s_time(jiff::Timestamp::now())
}

/// Now, RFC 3339 UTC with microseconds (fixed width, so string order is time order): the
/// node's own records, which benchmarks read at sub-second precision.
pub(crate) fn precise_now() -> String {
    format!("{:.6}", jiff::Timestamp::now())
}

/// A time from the node's records (any RFC 3339) as [`k8s_time`]; unparsable text as it is.
pub(crate) fn to_k8s_time(rfc3339: &str) -> String {
    rfc3339
        .parse::<jiff::Timestamp>()
        .map(k8s_time)
        .unwrap_or_else(|_| rfc3339.to_owned())
}
