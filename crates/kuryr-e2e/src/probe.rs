//! Connectivity proven by real TCP connections: from inside one pod's network namespace to
//! another pod's IP and declared port, where the emulated node answers the pod's name.

use std::time::{Duration, Instant};

use futures::{StreamExt, stream};

use crate::pods::{POD_PORT, PodView};

/// Result of one connection attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// Index of the client pod in the list given to [`matrix`].
    pub from: usize,
    /// Index of the server pod.
    pub to: usize,
    /// The server answered its own name.
    pub ok: bool,
    /// What came back, or why nothing did.
    pub detail: String,
    /// Time taken.
    pub millis: u128,
}

/// How a pair of pods relates, for the matrix summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathKind {
    /// Same namespace, same node.
    SameNamespaceSameNode,
    /// Same namespace, different nodes (geneve between chassis).
    SameNamespaceCrossNode,
    /// Different namespaces (through the router when namespaces have their own subnets).
    CrossNamespaceSameNode,
    /// Different namespaces and nodes.
    CrossNamespaceCrossNode,
}

impl PathKind {
    /// Classifies a pair.
    pub fn of(a: &PodView, b: &PodView) -> Self {
        match (a.namespace == b.namespace, a.node == b.node) {
            (true, true) => PathKind::SameNamespaceSameNode,
            (true, false) => PathKind::SameNamespaceCrossNode,
            (false, true) => PathKind::CrossNamespaceSameNode,
            (false, false) => PathKind::CrossNamespaceCrossNode,
        }
    }

    /// Human label.
    pub fn label(self) -> &'static str {
        match self {
            PathKind::SameNamespaceSameNode => "same namespace, same node",
            PathKind::SameNamespaceCrossNode => "same namespace, across nodes",
            PathKind::CrossNamespaceSameNode => "across namespaces, same node",
            PathKind::CrossNamespaceCrossNode => "across namespaces and nodes",
        }
    }
}

/// Connects from network namespace `netns` to `ip:port` and reads as many bytes as `expect`
/// has; `ok` when they are `expect`.
pub async fn tcp_probe(netns: &str, ip: &str, port: u16, expect: &str, timeout: Duration) -> (bool, String) {
    if netns.is_empty() {
        return (false, "client pod has no network namespace".into());
    }
    if ip.is_empty() {
        return (false, "server pod has no IP".into());
    }
    let script = "exec 3<>/dev/tcp/$1/$2 && head -c \"$3\" <&3";
    let out = tokio::process::Command::new("ip")
        .args(["netns", "exec", netns, "timeout"])
        .arg(format!("{}", timeout.as_secs_f64()))
        .args(["bash", "-c", script, "probe", ip])
        .arg(port.to_string())
        .arg(expect.len().to_string())
        .kill_on_drop(true)
        .output()
        .await;
    match out {
        Err(e) => (false, format!("cannot run ip netns exec: {e}")),
        Ok(o) => {
            let answer = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if answer == expect {
                (true, answer)
            } else {
                let stderr = String::from_utf8_lossy(&o.stderr);
                let err = stderr.trim().lines().last().unwrap_or_default().to_string();
                let why = if o.status.code() == Some(124) {
                    "timed out".to_string()
                } else if err.is_empty() {
                    format!("exit {}", o.status)
                } else {
                    err
                };
                (false, format!("answer {answer:?}: {why}"))
            }
        }
    }
}

/// Probes every ordered pair of distinct pods (from each pod's netns to the other's IP),
/// `parallel` at a time.
pub async fn matrix(pods: &[PodView], timeout: Duration, parallel: usize) -> Vec<Probe> {
    let pairs: Vec<(usize, usize)> = (0..pods.len())
        .flat_map(|a| (0..pods.len()).filter(move |b| *b != a).map(move |b| (a, b)))
        .collect();
    let mut out: Vec<Probe> = stream::iter(pairs)
        .map(|(a, b)| async move {
            let start = Instant::now();
            let (ok, detail) =
                tcp_probe(&pods[a].netns, &pods[b].pod_ip, POD_PORT, &pods[b].name, timeout).await;
            Probe {
                from: a,
                to: b,
                ok,
                detail,
                millis: start.elapsed().as_millis(),
            }
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    out.sort_by_key(|p| (p.from, p.to));
    out
}
