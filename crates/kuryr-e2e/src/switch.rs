//! The drop-in migration from upstream Kuryr-Kubernetes to kuryr-rs, measured
//! (`bench/compare-upstream --switch`, `kuryr-e2e switch-over`): pods wired while upstream ran
//! keep their Neutron ports, addresses and connectivity once kuryr-rs runs in its place on the
//! same CRDs and ports; new pods get ports and become Ready; a deleted old pod's port is
//! released (pooled or deleted), not leaked.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use kube::Client;
use serde::{Deserialize, Serialize};

use crate::{
    cluster::{Cluster, run},
    error::{Error, Result},
    neutron, pods,
    pods::PodView,
    probe,
};

/// What a pod had before the switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// `namespace/name`.
    pub pod: String,
    /// Pod UID.
    pub uid: String,
    /// Neutron port of its default VIF.
    pub port_id: String,
    /// Its address.
    pub ip: String,
}

/// Where `before` leaves what `after` compares with.
pub fn record_path(cluster: &Cluster) -> PathBuf {
    cluster.state_dir.join("switch-before.json")
}

fn pods_on_nodes(cluster: &Cluster, prefix: &str, n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            let node = &cluster.nodes[i % cluster.nodes.len()].name;
            (format!("{prefix}-{i}"), node.clone())
        })
        .collect()
}

async fn create_and_wait(
    cluster: &Cluster,
    client: &Client,
    ns: &str,
    prefix: &str,
    n: usize,
    timeout: Duration,
) -> Result<()> {
    pods::ensure_namespace(client, ns).await?;
    let mut keys = Vec::new();
    for (name, node) in pods_on_nodes(cluster, prefix, n) {
        pods::create_pod(client, ns, &name, Some(&node)).await?;
        keys.push((ns.to_string(), name));
    }
    pods::wait_ready(client, &keys, timeout).await
}

/// Upstream's binding leaves TX checksum offload on in the pod, which the sandbox's userspace
/// (netdev) datapath needs off for TCP (`../shared/notes/openstack-sandbox.md`, pitfall 6; a
/// kernel datapath does not): the harness turns it off in pods upstream wired, as kuryr-rs's
/// daemon does itself. A sandbox fix-up of the data plane, not a change to upstream.
fn sandbox_tx_offload_off(views: &[PodView]) -> Result<()> {
    // A Ready pod without eth0 is upstream's: a retried sandbox's ADD wired it, then the ADD
    // of the sandbox the runtime had given up on went on and replaced the host end of the
    // same-named veth (the pair went with it). Told, not hidden by an ethtool error.
    let bare: Vec<String> = views
        .iter()
        .filter(|v| {
            !std::process::Command::new("ip")
                .args(["-n", &v.netns, "link", "show", "eth0"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(|v| format!("{}/{} ({})", v.namespace, v.name, v.netns))
        .collect();
    if !bare.is_empty() {
        return Err(Error::Parse {
            what: "pods wired under upstream".into(),
            detail: format!(
                "Ready without eth0 in their network namespace: {}",
                bare.join(", ")
            ),
        });
    }
    for v in views {
        run(
            &format!("ethtool -K eth0 tx off in {}", v.netns),
            std::process::Command::new("ip")
                .args(["netns", "exec", &v.netns, "ethtool", "-K", "eth0", "tx", "off"]),
        )?;
    }
    Ok(())
}

fn connectivity(probes: &[probe::Probe]) -> (usize, usize) {
    (probes.iter().filter(|p| p.ok).count(), probes.len())
}

/// Phase one, under upstream: `n` pods across the nodes, Ready and connected; what each got is
/// recorded. Returns the report line.
pub async fn before(
    cluster: &Cluster,
    client: &Client,
    ns: &str,
    n: usize,
    timeout: Duration,
) -> Result<String> {
    // Warm pools first, as the burst does: the pods' ADDs then do not outlive the runtime's
    // CNI timeout while upstream fills its pools (see sandbox_tx_offload_off for what
    // upstream does when they do).
    let per_node = n.div_ceil(cluster.nodes.len().max(1));
    let warming = crate::burst::Warming {
        per_node,
        timeout,
        outside: true,
        only: &[],
        until_ready: false,
    };
    crate::burst::warm_pools(cluster, client, &format!("{ns}-warm"), &warming).await?;
    create_and_wait(cluster, client, ns, "old", n, timeout).await?;
    let views = pods::collect(cluster, client, &[ns.to_string()]).await?;
    sandbox_tx_offload_off(&views)?;
    let (ok, all) = connectivity(&probe::matrix(&views, Duration::from_secs(5), 8).await);
    let kept: Vec<Kept> = views
        .iter()
        .map(|v| Kept {
            pod: format!("{}/{}", v.namespace, v.name),
            uid: v.uid.clone(),
            port_id: v.port_id.clone(),
            ip: v.pod_ip.clone(),
        })
        .collect();
    let path = record_path(cluster);
    let text = serde_json::to_string_pretty(&kept).map_err(|e| Error::Parse {
        what: "switch record".into(),
        detail: e.to_string(),
    })?;
    std::fs::write(&path, text).map_err(|source| Error::Read { path, source })?;
    if ok != all {
        return Err(Error::Parse {
            what: "connectivity under upstream".into(),
            detail: format!("{ok}/{all} connections answered"),
        });
    }
    Ok(format!(
        "switch before impl=upstream pods={} ready={} connectivity={ok}/{all}",
        n,
        views.iter().filter(|v| v.ready).count()
    ))
}

/// What phase two found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct After {
    /// Old pods still Ready with the same UID, port and address.
    pub kept: usize,
    /// Old pods recorded.
    pub old: usize,
    /// Differences found, one per pod.
    pub changed: Vec<String>,
    /// Connections between old pods answered / tried.
    pub old_connectivity: (usize, usize),
    /// New pods Ready.
    pub new_ready: usize,
    /// New pods created.
    pub new: usize,
    /// Connections between all pods answered / tried.
    pub all_connectivity: (usize, usize),
    /// What became of a deleted old pod's port: `pooled`, `deleted` or `leaked …`.
    pub released_port: String,
}

impl After {
    /// Everything held.
    pub fn ok(&self) -> bool {
        self.kept == self.old
            && self.old_connectivity.0 == self.old_connectivity.1
            && self.new_ready == self.new
            && self.all_connectivity.0 == self.all_connectivity.1
            && !self.released_port.starts_with("leaked")
    }

    /// The report line.
    pub fn line(&self) -> String {
        format!(
            "switch after impl=kuryr-rs kept_ports={}/{} old_connectivity={}/{} new_ready={}/{} all_connectivity={}/{} released_port={} verdict={}",
            self.kept,
            self.old,
            self.old_connectivity.0,
            self.old_connectivity.1,
            self.new_ready,
            self.new,
            self.all_connectivity.0,
            self.all_connectivity.1,
            self.released_port,
            if self.ok() { "ok" } else { "FAILED" }
        )
    }
}

/// Compares the pods now with the record (pure).
pub fn compare_kept(record: &[Kept], now: &[PodView]) -> (usize, Vec<String>) {
    let by_key: BTreeMap<String, &PodView> = now
        .iter()
        .map(|v| (format!("{}/{}", v.namespace, v.name), v))
        .collect();
    let mut kept = 0;
    let mut changed = Vec::new();
    for k in record {
        match by_key.get(&k.pod) {
            None => changed.push(format!("{}: gone", k.pod)),
            Some(v) if v.uid != k.uid => changed.push(format!("{}: another pod (UID {})", k.pod, v.uid)),
            Some(v) if v.port_id != k.port_id => {
                changed.push(format!("{}: port {} -> {}", k.pod, k.port_id, v.port_id))
            }
            Some(v) if v.pod_ip != k.ip => changed.push(format!("{}: IP {} -> {}", k.pod, k.ip, v.pod_ip)),
            Some(v) if !v.ready => changed.push(format!("{}: not Ready", k.pod)),
            Some(_) => kept += 1,
        }
    }
    (kept, changed)
}

/// Phase two, once kuryr-rs runs in upstream's place: the recorded pods are compared and
/// probed, `n_new` new pods are created and probed with them, and one old pod is deleted.
pub async fn after(
    cluster: &Cluster,
    client: &Client,
    ns: &str,
    n_new: usize,
    timeout: Duration,
) -> Result<After> {
    let path = record_path(cluster);
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Read {
        path: path.clone(),
        source,
    })?;
    let record: Vec<Kept> = serde_json::from_str(&text).map_err(|e| Error::Parse {
        what: path.display().to_string(),
        detail: e.to_string(),
    })?;
    let mut a = After {
        old: record.len(),
        new: n_new,
        ..After::default()
    };
    let old_views = pods::collect(cluster, client, &[ns.to_string()]).await?;
    (a.kept, a.changed) = compare_kept(&record, &old_views);
    a.old_connectivity = connectivity(&probe::matrix(&old_views, Duration::from_secs(5), 8).await);

    create_and_wait(cluster, client, ns, "new", n_new, timeout).await?;
    let all = pods::collect(cluster, client, &[ns.to_string()]).await?;
    a.new_ready = all
        .iter()
        .filter(|v| v.name.starts_with("new-") && v.ready)
        .count();
    a.all_connectivity = connectivity(&probe::matrix(&all, Duration::from_secs(5), 8).await);

    // An old pod deleted under kuryr-rs: its port goes back to the pool or is deleted.
    if let Some(first) = record.first() {
        let (pns, name) = first.pod.split_once('/').unwrap_or((ns, first.pod.as_str()));
        pods::delete_pod(client, pns, name).await?;
        pods::wait_gone(client, &[(pns.to_string(), name.to_string())], timeout).await?;
        let ids = vec![first.port_id.clone()];
        let found = tokio::task::spawn_blocking(move || neutron::ports_by_id(&ids))
            .await
            .map_err(|e| Error::Parse {
                what: "port query".into(),
                detail: e.to_string(),
            })??;
        a.released_port = match found.first() {
            None => "deleted".into(),
            Some(p) if p.tags.contains(&cluster.tag) && p.device_owner == "compute:kuryr" => "pooled".into(),
            Some(p) => format!("leaked({},{})", p.device_owner, p.device_id),
        };
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, uid: &str, port: &str, ip: &str, ready: bool) -> PodView {
        PodView {
            namespace: "s".into(),
            name: name.into(),
            uid: uid.into(),
            port_id: port.into(),
            pod_ip: ip.into(),
            ready,
            ..PodView::default()
        }
    }

    fn kept(name: &str, uid: &str, port: &str, ip: &str) -> Kept {
        Kept {
            pod: format!("s/{name}"),
            uid: uid.into(),
            port_id: port.into(),
            ip: ip.into(),
        }
    }

    #[test]
    fn kept_pods_keep_uid_port_address_and_readiness() {
        let record = [
            kept("a", "u1", "p1", "10.0.0.1"),
            kept("b", "u2", "p2", "10.0.0.2"),
            kept("c", "u3", "p3", "10.0.0.3"),
            kept("d", "u4", "p4", "10.0.0.4"),
            kept("e", "u5", "p5", "10.0.0.5"),
        ];
        let now = [
            view("a", "u1", "p1", "10.0.0.1", true),
            view("b", "u2", "p9", "10.0.0.2", true),
            view("c", "u3", "p3", "10.0.0.3", false),
            view("d", "u8", "p4", "10.0.0.4", true),
        ];
        let (n, changed) = compare_kept(&record, &now);
        assert_eq!(n, 1);
        assert_eq!(
            changed,
            [
                "s/b: port p2 -> p9",
                "s/c: not Ready",
                "s/d: another pod (UID u8)",
                "s/e: gone"
            ]
        );
    }

    #[test]
    fn the_verdict_needs_everything() {
        let mut a = After {
            kept: 2,
            old: 2,
            old_connectivity: (2, 2),
            new_ready: 1,
            new: 1,
            all_connectivity: (6, 6),
            released_port: "pooled".into(),
            ..After::default()
        };
        assert!(a.ok(), "{}", a.line());
        a.released_port = "leaked(compute:kuryr,x)".into();
        assert!(!a.ok());
        assert!(a.line().ends_with("verdict=FAILED"));
    }
}
