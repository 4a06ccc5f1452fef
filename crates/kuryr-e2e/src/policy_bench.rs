//! `bench/policy-enforce` (issue 14): K NetworkPolicies over N pods, then changes of the three
//! kinds a cluster sees — a pod relabel, a namespace relabel, a policy update — each made and
//! undone, timed from the change until a probe between two pods flips to the answer the policy
//! calls for and stays there. Prints one line per change and a machine-readable last line.
//!
//! The flip is timed by connection attempts started every [`ATTEMPT_EVERY`] from the client
//! pod's network namespace, each with its own timeout: the flip is the start of the first attempt
//! from which every attempt gives the new answer, so a dropped SYN's timeout does not blur it.
//!
//! Beside it, the control plane's own time: from the change until the KuryrNetworkPolicy's
//! status holds (or no longer holds) a rule whose remote prefix is the client pod's address —
//! the rules written. With `no_traffic` (a cloud without a data path: the model cloud, which
//! the calibration replays this benchmark against) only that one is measured.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use kube::{Api, Client};
use kuryr_types::KuryrNetworkPolicy;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::{
    cluster::Cluster,
    error::{Error, Result},
    metrics,
    netpol::{self, Labelled},
    pods, services,
};

/// A new attempt this often.
pub const ATTEMPT_EVERY: Duration = Duration::from_millis(100);
/// One attempt's timeout.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(500);
/// Attempts in a row that must agree after the flip.
pub const STABLE: usize = 5;
/// The server port of every pod.
pub const PORT: u16 = 8080;
const NAMESPACES: usize = 3;

/// What the benchmark does.
#[derive(Debug, Clone)]
pub struct Options {
    /// Policies (K).
    pub policies: usize,
    /// Pods (N).
    pub pods: usize,
    /// How long one change may take before the run fails.
    pub timeout: Duration,
    /// Control-plane figures only: no probes (a cloud without a data path).
    pub no_traffic: bool,
}

/// The KuryrNetworkPolicy status is read this often while a change is timed.
pub const STATUS_EVERY: Duration = Duration::from_millis(50);

/// The kinds of change timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The client pod gets (or loses) the label the policy admits.
    PodLabel,
    /// The client's namespace gets (or loses) the label the policy admits.
    NamespaceLabel,
    /// The policy gains (or loses) a peer naming the client.
    PolicyUpdate,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::PodLabel => "pod-label",
            Kind::NamespaceLabel => "namespace-label",
            Kind::PolicyUpdate => "policy-update",
        }
    }
}

fn ns_of(i: usize) -> String {
    format!("pe-{}", i % NAMESPACES)
}

fn pod_name(i: usize) -> String {
    format!("p-{i}")
}

/// Policy `j` of `k`: pods `app=app-j` admit, on [`PORT`], the pods of `app-(j+2)` (a standing
/// peer, so that groups hold rules as in a real cluster; with three policies or more), pods
/// labelled `role=client-j` anywhere and every pod of namespaces labelled `team=t-j`; with
/// `extra`, also that pod (by its `bench-client` label).
pub fn policy_spec(j: usize, k: usize, extra: Option<&str>) -> Value {
    let mut from = vec![
        json!({"namespaceSelector": {}, "podSelector": {"matchLabels": {"role": format!("client-{j}")}}}),
        json!({"namespaceSelector": {"matchLabels": {"team": format!("t-{j}")}}}),
    ];
    if k >= 3 {
        from.push(json!({"namespaceSelector": {}, "podSelector": {"matchLabels": {"app": format!("app-{}", (j + 2) % k)}}}));
    }
    if let Some(name) = extra {
        from.push(json!({"namespaceSelector": {}, "podSelector": {"matchLabels": {"bench-client": name}}}));
    }
    json!({
        "podSelector": {"matchLabels": {"app": format!("app-{j}")}},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": from, "ports": [{"port": PORT, "protocol": "TCP"}]}],
    })
}

/// The p-quantile (`p` in 0–1, nearest rank) of `v` in ms: [`crate::burst::percentile`], 0 when
/// empty.
pub fn quantile(v: &[u128], p: f64) -> u128 {
    let ms: Vec<f64> = v.iter().map(|x| *x as f64).collect();
    crate::burst::percentile(&ms, p * 100.0).unwrap_or(0.0) as u128
}

/// The flip: the first attempt from which every completed attempt matches, with at least
/// [`STABLE`] completed ones from it on and none of those pending; `None` until then.
pub fn flip_at(attempts: &[(Duration, Option<bool>)]) -> Option<Duration> {
    let mut k = attempts.len();
    // Walk back over the matching tail.
    while k > 0 && attempts[k - 1].1 != Some(false) {
        k -= 1;
    }
    // Skip leading pending attempts: the flip is at a completed, matching one.
    let tail = &attempts[k..];
    let first_done = tail.iter().position(|(_, r)| *r == Some(true))?;
    let from = &tail[first_done..];
    let settled = from.iter().take(STABLE).all(|(_, r)| *r == Some(true));
    (from.len() >= STABLE && settled).then(|| from[0].0)
}

struct Pod {
    ns: String,
    name: String,
    ip: String,
    netns: String,
}

/// Times, from `started` (the change), until `client` reaching `server` gives `allowed` (and
/// keeps giving it).
async fn time_flip(
    client: &Pod,
    server: &Pod,
    allowed: bool,
    started: Instant,
    within: Duration,
) -> Result<Duration> {
    let mut attempts: Vec<(Duration, Option<bool>)> = Vec::new();
    let mut set: JoinSet<(usize, bool)> = JoinSet::new();
    let mut tick = tokio::time::interval(ATTEMPT_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if started.elapsed() > within {
                    return Err(Error::Timeout {
                        what: format!("{}/{} -> {}/{} to be {}", client.ns, client.name, server.ns, server.name,
                            if allowed { "allowed" } else { "denied" }),
                        secs: within.as_secs(),
                    });
                }
                let i = attempts.len();
                attempts.push((started.elapsed(), None));
                let (netns, ip, name) = (client.netns.clone(), server.ip.clone(), server.name.clone());
                set.spawn(async move {
                    let a = services::tcp_answer(&netns, &ip, PORT, ATTEMPT_TIMEOUT).await;
                    (i, a == name)
                });
            }
            Some(Ok((i, connected))) = set.join_next(), if !set.is_empty() => {
                attempts[i].1 = Some(connected == allowed);
                if let Some(t) = flip_at(&attempts) {
                    return Ok(t);
                }
            }
        }
    }
}

/// Whether KuryrNetworkPolicy `ns/name`'s status admits `ip` (a rule whose remote prefix is
/// the address, as `ip` or `ip/32`); `None` while it has no status.
async fn knp_admits(api: &Api<KuryrNetworkPolicy>, name: &str, ip: &str) -> Result<Option<bool>> {
    let got = api.get_opt(name).await.map_err(|source| Error::Kube {
        what: format!("get KuryrNetworkPolicy {name}"),
        source,
    })?;
    let Some(knp) = got else {
        return Ok(None);
    };
    let Some(st) = knp.status else {
        return Ok(None);
    };
    let host = format!("{ip}/32");
    Ok(Some(st.security_group_rules.iter().any(|r| {
        r.remote_ip_prefix
            .as_deref()
            .is_some_and(|p| p == ip || p == host)
    })))
}

/// Times, from `started` (the change), until KuryrNetworkPolicy `ns/name`'s status admits
/// (`allowed`) or no longer admits `ip`.
async fn time_rules(
    client: &Client,
    (ns, name): (&str, &str),
    ip: &str,
    allowed: bool,
    started: Instant,
    within: Duration,
) -> Result<Duration> {
    let api: Api<KuryrNetworkPolicy> = Api::namespaced(client.clone(), ns);
    loop {
        if knp_admits(&api, name, ip).await? == Some(allowed) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > within {
            return Err(Error::Timeout {
                what: format!(
                    "KuryrNetworkPolicy {ns}/{name} to {} {ip}",
                    if allowed { "admit" } else { "no longer admit" }
                ),
                secs: within.as_secs(),
            });
        }
        tokio::time::sleep(STATUS_EVERY).await;
    }
}

/// The rules the policies' statuses hold (`None` while one has no status yet).
async fn knp_rules(client: &Client, policies: usize) -> Result<Option<usize>> {
    let mut n = 0;
    for j in 0..policies {
        let api: Api<KuryrNetworkPolicy> = Api::namespaced(client.clone(), &ns_of(j));
        let got = api
            .get_opt(&format!("np-{j}"))
            .await
            .map_err(|source| Error::Kube {
                what: format!("get KuryrNetworkPolicy {}/np-{j}", ns_of(j)),
                source,
            })?;
        match got.and_then(|k| k.status) {
            Some(st) if st.security_group_id.is_some() => n += st.security_group_rules.len(),
            _ => return Ok(None),
        }
    }
    Ok(Some(n))
}

/// The controller's Neutron requests so far, per operation.
async fn neutron_requests(cluster: &Cluster) -> Result<BTreeMap<String, f64>> {
    let s = metrics::scrape(&cluster.metrics_url).await?;
    let mut by_op = BTreeMap::new();
    for x in s
        .samples
        .iter()
        .filter(|x| x.name == "kuryr_neutron_requests_total")
    {
        let op = x.labels.get("operation").cloned().unwrap_or_default();
        *by_op.entry(op).or_insert(0.0) += x.value;
    }
    Ok(by_op)
}

/// Runs the benchmark on `cluster` (policy handlers on); returns the report, last line
/// machine-readable.
pub async fn run(cluster: &Cluster, client: &Client, o: &Options) -> Result<String> {
    if o.policies == 0 || o.pods < 2 || o.pods < o.policies {
        return Err(Error::Parse {
            what: "options".into(),
            detail: format!(
                "need policies >= 1 and pods >= max(2, policies) (got policies={} pods={})",
                o.policies, o.pods
            ),
        });
    }
    let nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    for n in 0..NAMESPACES.min(o.pods) {
        pods::ensure_namespace(client, &ns_of(n)).await?;
    }
    let mut keys = Vec::new();
    for i in 0..o.pods {
        let (ns, name) = (ns_of(i), pod_name(i));
        let node = nodes.get(i % nodes.len().max(1)).map(String::as_str);
        let labels = BTreeMap::from([
            ("app".to_string(), format!("app-{}", i % o.policies)),
            ("bench-client".to_string(), name.clone()),
        ]);
        pods::create_pod_labelled(client, (&ns, &name), node, &[(PORT, "TCP")], labels).await?;
        keys.push((ns, name));
    }
    pods::wait_ready(client, &keys, Duration::from_secs(300)).await?;
    let namespaces: Vec<String> = (0..NAMESPACES.min(o.pods)).map(ns_of).collect();
    let views = pods::collect(cluster, client, &namespaces).await?;
    let pod = |i: usize| -> Result<Pod> {
        let (ns, name) = (ns_of(i), pod_name(i));
        let v = views
            .iter()
            .find(|v| v.namespace == ns && v.name == name && !v.pod_ip.is_empty() && !v.netns.is_empty())
            .ok_or_else(|| Error::Parse {
                what: format!("pod {ns}/{name}"),
                detail: "no IP or network namespace".into(),
            })?;
        Ok(Pod {
            ns,
            name,
            ip: v.pod_ip.clone(),
            netns: v.netns.clone(),
        })
    };
    for j in 0..o.policies {
        netpol::apply_policy(
            client,
            &ns_of(j),
            &format!("np-{j}"),
            policy_spec(j, o.policies, None),
        )
        .await?;
    }
    // Target of policy j: pod j (app-j); client: pod j+1, in another namespace.
    let measured = o.policies.min(4);
    let pairs: Vec<(Pod, Pod)> = (0..measured)
        .map(|j| Ok((pod(j)?, pod((j + 1) % o.pods)?)))
        .collect::<Result<_>>()?;
    for (j, (target, client_pod)) in pairs.iter().enumerate() {
        let (np, settle) = (format!("np-{j}"), Duration::from_secs(120));
        let ns = ns_of(j);
        time_rules(client, (&ns, &np), &client_pod.ip, false, Instant::now(), settle).await?;
        if !o.no_traffic {
            time_flip(client_pod, target, false, Instant::now(), settle).await?;
        }
    }
    // The rules the policies hold once every group is filled (stable over two reads): in the
    // cloud's groups (not countable without a data path's cloud: the statuses' count instead).
    let count = || async {
        if o.no_traffic {
            Ok::<_, Error>(knp_rules(client, o.policies).await?.unwrap_or(0))
        } else {
            Ok(netpol::groups_tagged(&cluster.tag)?.iter().map(|g| g.rules).sum())
        }
    };
    let mut rules = count().await?;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = count().await?;
        if now == rules {
            break;
        }
        rules = now;
    }
    let status_rules = knp_rules(client, o.policies).await?;
    let mut out = String::new();
    let mut times: BTreeMap<Kind, Vec<u128>> = BTreeMap::new();
    let mut written: Vec<u128> = Vec::new();
    let before = neutron_requests(cluster).await?;
    let mut changes = 0usize;
    for kind in [Kind::PodLabel, Kind::NamespaceLabel, Kind::PolicyUpdate] {
        for (j, (target, cl)) in pairs.iter().enumerate() {
            for open in [true, false] {
                let since = Instant::now();
                match kind {
                    Kind::PodLabel => {
                        let v = format!("client-{j}");
                        let who = Labelled::Pod {
                            ns: &cl.ns,
                            name: &cl.name,
                        };
                        let labels = netpol::one_label("role", open.then_some(v.as_str()));
                        netpol::patch_labels(client, who, labels).await?;
                    }
                    Kind::NamespaceLabel => {
                        let v = format!("t-{j}");
                        let labels = netpol::one_label("team", open.then_some(v.as_str()));
                        netpol::patch_labels(client, Labelled::Namespace(&cl.ns), labels).await?;
                    }
                    Kind::PolicyUpdate => {
                        let spec = policy_spec(j, o.policies, open.then_some(cl.name.as_str()));
                        netpol::apply_policy(client, &ns_of(j), &format!("np-{j}"), spec).await?;
                    }
                }
                let (np, ns) = (format!("np-{j}"), ns_of(j));
                let rules_at = time_rules(client, (&ns, &np), &cl.ip, open, since, o.timeout);
                let (took, rules_took) = if o.no_traffic {
                    (None, rules_at.await?)
                } else {
                    let (t, r) = tokio::join!(time_flip(cl, target, open, since, o.timeout), rules_at);
                    (Some(t?), r?)
                };
                written.push(rules_took.as_millis());
                changes += 1;
                let line = format!(
                    "change {changes:>2}: {:<15} {} np-{j} ({}/{} -> {}/{}): {:>5} ms (rules written {} ms)",
                    kind.label(),
                    if open { "allow" } else { "deny " },
                    cl.ns,
                    cl.name,
                    target.ns,
                    target.name,
                    took.map_or("NA".into(), |t| t.as_millis().to_string()),
                    rules_took.as_millis()
                );
                eprintln!("{line}");
                out.push_str(&line);
                out.push('\n');
                if let Some(t) = took {
                    times.entry(kind).or_default().push(t.as_millis());
                }
            }
        }
    }
    // Let the last change's follow-up work (statuses, pool books) finish before counting.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = neutron_requests(cluster).await?;
    let per_op: Vec<(String, f64)> = after
        .iter()
        .map(|(op, n)| (op.clone(), n - before.get(op).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d > 0.0)
        .collect();
    let calls = per_op.iter().map(|(_, d)| d).sum::<f64>() / changes.max(1) as f64;
    out.push_str(&format!(
        "neutron requests over the {changes} changes: {}\n",
        per_op
            .iter()
            .map(|(op, d)| format!("{op}={d}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    let mut all: Vec<u128> = times.values().flatten().copied().collect();
    all.sort_unstable();
    for (kind, v) in &mut times {
        v.sort_unstable();
        out.push_str(&format!(
            "{:<15} n={} p50_ms={} max_ms={}\n",
            kind.label(),
            v.len(),
            quantile(v, 0.5),
            v.last().copied().unwrap_or(0)
        ));
    }
    written.sort_unstable();
    let q = |v: &[u128], p: f64| {
        if v.is_empty() {
            "NA".to_string()
        } else {
            quantile(v, p).to_string()
        }
    };
    out.push_str(&format!(
        "policies={} pods={} enforce_p50_ms={} enforce_p99_ms={} rules_written_p50_ms={} rules_written_p99_ms={} neutron_calls_per_change={:.2} sg_rules={} status_rules={}",
        o.policies,
        o.pods,
        q(&all, 0.5),
        q(&all, 0.99),
        q(&written, 0.5),
        q(&written, 0.99),
        calls,
        rules,
        status_rules.map_or("NA".into(), |n| n.to_string())
    ));
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn at(ms: u64, r: Option<bool>) -> (Duration, Option<bool>) {
        (Duration::from_millis(ms), r)
    }

    #[test]
    fn the_flip_is_the_first_attempt_of_a_stable_matching_tail() {
        let mut a = vec![at(0, Some(false)), at(100, Some(false)), at(200, Some(true))];
        assert_eq!(flip_at(&a), None, "not stable yet");
        a.extend((3..7).map(|i| at(i * 100, Some(true))));
        assert_eq!(flip_at(&a), Some(Duration::from_millis(200)));
        // A late mismatch moves it.
        a.push(at(700, Some(false)));
        assert_eq!(flip_at(&a), None);
    }

    #[test]
    fn pending_attempts_hold_the_verdict() {
        // Denials complete only at their timeout: pending ones in the window hold it back.
        let a = vec![
            at(0, Some(false)),
            at(100, Some(true)),
            at(200, None),
            at(300, Some(true)),
            at(400, Some(true)),
            at(500, Some(true)),
        ];
        assert_eq!(flip_at(&a), None);
        let a = vec![
            at(0, Some(false)),
            at(100, Some(true)),
            at(200, Some(true)),
            at(300, Some(true)),
            at(400, Some(true)),
            at(500, Some(true)),
            at(600, None),
        ];
        assert_eq!(flip_at(&a), Some(Duration::from_millis(100)));
    }

    #[test]
    fn policy_spec_names_the_extra_client() {
        let s = policy_spec(2, 10, Some("p-3"));
        assert_eq!(s["podSelector"]["matchLabels"]["app"], "app-2");
        assert_eq!(s["ingress"][0]["from"].as_array().unwrap().len(), 4);
        assert_eq!(
            s["ingress"][0]["from"][2]["podSelector"]["matchLabels"]["app"],
            "app-4"
        );
        assert_eq!(
            s["ingress"][0]["from"][3]["podSelector"]["matchLabels"]["bench-client"],
            "p-3"
        );
        assert_eq!(
            policy_spec(0, 2, None)["ingress"][0]["from"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<u128> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&[], 0.5), 0);
    }
}
