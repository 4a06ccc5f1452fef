//! The demo's NetworkPolicy step: a policy that lets the pods of one namespace admit only each
//! other, proven by connections from every pod to every pod (each flips to what the policy
//! says, with the time it took), then deleted (everything open again).

use std::time::{Duration, Instant};

use kube::Client;
use serde_json::json;

use crate::{
    cluster::Cluster,
    error::Result,
    netpol::{self, Expect},
    pods,
};

/// The demo's web pods listen here.
const PORT: u16 = 8080;

/// Applies `isolate` in `protected`, probes every pair among the pods of `namespaces`, deletes
/// the policy and probes again. `Ok(false)`: some pair never gave the expected answer.
pub async fn run(cluster: &Cluster, client: &Client, protected: &str, namespaces: &[String]) -> Result<bool> {
    let say = |s: &str| eprintln!("[{}] demo: {s}", jiff::Zoned::now().strftime("%H:%M:%S"));
    let views = pods::collect(cluster, client, namespaces).await?;
    let policy = json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]});
    say(&format!(
        "NetworkPolicy {protected}/isolate: the pods of {protected} admit only each other \
         (podSelector {{}}, ingress from podSelector {{}})"
    ));
    let t = Instant::now();
    netpol::apply_policy(client, protected, "isolate", policy).await?;
    let ok_with = probe_all(&views, protected, t, true).await;
    let t = Instant::now();
    netpol::delete_policy(client, protected, "isolate").await?;
    say(&format!(
        "NetworkPolicy {protected}/isolate deleted: every connection open again"
    ));
    let ok_without = probe_all(&views, protected, t, false).await;
    Ok(ok_with && ok_without)
}

/// Every pod to every other, all at once (each time is from the change); with the policy, pods
/// outside `protected` are refused by those in it. Prints one line per pair.
async fn probe_all(views: &[pods::PodView], protected: &str, since: Instant, policy: bool) -> bool {
    let pairs: Vec<(&pods::PodView, &pods::PodView, Expect)> = views
        .iter()
        .flat_map(|from| views.iter().map(move |to| (from, to)))
        .filter(|(from, to)| from.name != to.name || from.namespace != to.namespace)
        .map(|(from, to)| {
            let denied = policy && to.namespace == protected && from.namespace != protected;
            (from, to, if denied { Expect::Denied } else { Expect::Allowed })
        })
        .collect();
    let results = futures::future::join_all(pairs.iter().map(|(from, to, want)| {
        netpol::converge(
            &from.netns,
            &to.pod_ip,
            PORT,
            &to.name,
            *want,
            since,
            Duration::from_secs(30),
        )
    }))
    .await;
    let mut ok = true;
    for ((from, to, want), r) in pairs.iter().zip(results) {
        let line = match &r {
            Ok(d) => format!(
                "{:<8} {:>5} ms after the change",
                format!("{want:?}").to_lowercase(),
                d.as_millis()
            ),
            Err(e) => {
                ok = false;
                format!("FAILED: {e}")
            }
        };
        println!(
            "  {}/{} -> {}/{}: {line}",
            from.namespace, from.name, to.namespace, to.name
        );
    }
    ok
}
