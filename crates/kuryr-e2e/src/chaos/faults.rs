//! The faults the chaos suite injects, each a scenario with its own name: what is broken, for how
//! long, and how it is put back. Every injector returns once the fault is over (the component
//! runs again); the runner then waits for convergence and audits.

use std::{
    process::Command,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams},
};
use tracing::info;

use crate::{
    chaos::proxy::{Faults, set_faults},
    cluster::{Cluster, repo_root, run},
    error::{Error, Result},
};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// No fault: the churn alone for as long as an outage, the reference the others are read
    /// against (what the probe loses to churn by itself).
    Baseline,
    /// `kill -9` of kuryr-controller, several times a few seconds apart (started again at once,
    /// as its Deployment would).
    ControllerKill,
    /// `kill -9` of one node's kuryr-daemon while its pods carry traffic and new pods come.
    DaemonKill,
    /// Neutron's and Octavia's APIs stopped for a while, then started.
    CloudApiDown,
    /// The API server killed and started again (its objects kept: `--data-dir`).
    ApiserverRestart,
    /// A node lost for good: its kubelet and daemon killed, its pods force-deleted, its Node
    /// deleted; afterwards a node of the same name joins again.
    NodeLost,
    /// Neutron answering slowly and failing some requests (through [`FaultProxy`]).
    SlowNeutron,
}

impl Scenario {
    /// Every scenario, in the order the suite runs them.
    pub const ALL: [Scenario; 7] = [
        Scenario::Baseline,
        Scenario::ControllerKill,
        Scenario::DaemonKill,
        Scenario::ApiserverRestart,
        Scenario::SlowNeutron,
        Scenario::CloudApiDown,
        Scenario::NodeLost,
    ];

    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Baseline => "baseline",
            Scenario::ControllerKill => "controller-kill",
            Scenario::DaemonKill => "daemon-kill",
            Scenario::CloudApiDown => "cloud-api-down",
            Scenario::ApiserverRestart => "apiserver-restart",
            Scenario::NodeLost => "node-lost",
            Scenario::SlowNeutron => "slow-neutron",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Whether running pods must keep their connectivity through this fault (the issue's
    /// target: only the control plane is hit).
    pub fn keeps_connectivity(self) -> bool {
        matches!(
            self,
            Scenario::Baseline
                | Scenario::ControllerKill
                | Scenario::ApiserverRestart
                | Scenario::DaemonKill
                | Scenario::SlowNeutron
        )
    }
}

/// How hard the faults hit.
#[derive(Debug, Clone, Copy)]
pub struct Intensity {
    /// Controller kills per iteration.
    pub controller_kills: u32,
    /// Pause between two kills.
    pub kill_every: Duration,
    /// How long the cloud's APIs stay down / Neutron stays slow.
    pub outage: Duration,
}

/// What the injectors need.
pub struct FaultCtx<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Its client.
    pub client: &'a Client,
    /// The nodes the churn may use (a lost node is taken out).
    pub live_nodes: &'a Arc<Mutex<Vec<String>>>,
    /// The chaos proxy in front of Neutron, when the controller goes through one.
    pub proxy: Option<std::net::SocketAddr>,
    /// How hard.
    pub intensity: Intensity,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `f` on the blocking pool (the scripts and `kill` block).
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::Parse {
        what: "a blocking step".into(),
        detail: e.to_string(),
    })?
}

fn sandbox_script(name: &str, args: &[&str]) -> Result<String> {
    let mut cmd = Command::new(repo_root().join("sandbox").join(name));
    cmd.args(args);
    run(&format!("sandbox/{name} {}", args.join(" ")), &mut cmd)
}

/// Injects `scenario`'s fault for iteration `i` and returns once it is over.
pub async fn inject(scenario: Scenario, i: u32, ctx: &FaultCtx<'_>) -> Result<String> {
    let state = ctx.cluster.state_dir.clone();
    let restart = |component: String, kill: bool| {
        let state = state.clone();
        blocking(move || Cluster::attach(&state)?.restart(&component, kill))
    };
    match scenario {
        Scenario::Baseline => {
            tokio::time::sleep(ctx.intensity.outage).await;
            Ok(format!("no fault, {} s of churn", ctx.intensity.outage.as_secs()))
        }
        Scenario::ControllerKill => {
            for k in 0..ctx.intensity.controller_kills {
                if k > 0 {
                    tokio::time::sleep(ctx.intensity.kill_every).await;
                }
                restart("controller".into(), true).await?;
            }
            Ok(format!("{} kills", ctx.intensity.controller_kills))
        }
        Scenario::DaemonKill => {
            let nodes = lock(ctx.live_nodes).clone();
            let node = nodes
                .get(i as usize % nodes.len().max(1))
                .cloned()
                .unwrap_or_else(|| "node-1".into());
            let component = format!("daemon-{}", node.trim_start_matches("node-"));
            restart(component.clone(), true).await?;
            Ok(format!("{component} killed and started"))
        }
        Scenario::ApiserverRestart => {
            restart("apiserver".into(), true).await?;
            Ok("apiserver killed and started".into())
        }
        Scenario::CloudApiDown => {
            blocking(|| sandbox_script("down", &["--component", "neutron"])).await?;
            let stopped = blocking(|| sandbox_script("down", &["--component", "octavia-api"])).await;
            tokio::time::sleep(ctx.intensity.outage).await;
            blocking(|| sandbox_script("up", &["--nodes", "2"])).await?;
            stopped?;
            Ok(format!(
                "neutron and octavia-api down for {} s",
                ctx.intensity.outage.as_secs()
            ))
        }
        Scenario::SlowNeutron => {
            let Some(proxy) = ctx.proxy else {
                return Ok("skipped: the controller does not reach Neutron through the chaos proxy".into());
            };
            let set = |f| async move {
                set_faults(proxy, f).await.map_err(|e| Error::Parse {
                    what: format!("setting the faults of the chaos proxy at {proxy}"),
                    detail: e.to_string(),
                })
            };
            set(Faults::On {
                latency: Duration::from_millis(1500),
                every: 8,
                hang: Duration::from_secs(35),
            })
            .await?;
            tokio::time::sleep(ctx.intensity.outage).await;
            set(Faults::Off).await?;
            Ok(format!(
                "Neutron +1.5 s per request, 1 in 8 answered 503 and 1 in 8 unanswered, for {} s",
                ctx.intensity.outage.as_secs()
            ))
        }
        Scenario::NodeLost => node_lost(ctx).await,
    }
}

/// The last node goes away for good: kubelet and daemon killed (no goodbye), its pods
/// force-deleted and its Node deleted, as a cloud controller manager does for a deleted VM; then
/// a node of the same name joins again (a replacement VM).
async fn node_lost(ctx: &FaultCtx<'_>) -> Result<String> {
    let node = {
        let mut nodes = lock(ctx.live_nodes);
        if nodes.len() < 2 {
            return Ok("skipped: needs two nodes".into());
        }
        nodes.pop().unwrap_or_default()
    };
    let i = node.trim_start_matches("node-").to_string();
    for component in [format!("node-{i}"), format!("daemon-{i}")] {
        if let Some(pid) = ctx.cluster.pid(&component) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    let pods = Api::<Pod>::all(ctx.client.clone());
    let on_node = pods
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(|source| Error::Kube {
            what: format!("list pods on {node}"),
            source,
        })?;
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    let mut deleted = 0;
    for p in &on_node.items {
        let ns = p.namespace().unwrap_or_default();
        if Api::<Pod>::namespaced(ctx.client.clone(), &ns)
            .delete(&p.name_any(), &force)
            .await
            .is_ok()
        {
            deleted += 1;
        }
    }
    let _ = Api::<Node>::all(ctx.client.clone())
        .delete(&node, &DeleteParams::default())
        .await;
    info!(%node, pods = deleted, "node lost: pods force-deleted, Node deleted");
    Ok(format!(
        "{node} lost ({deleted} pods force-deleted, Node deleted)"
    ))
}

/// After [`Scenario::NodeLost`]'s convergence: the lost node joins again (the same name, a new
/// kubelet and daemon) and takes churn again.
pub async fn node_returns(ctx: &FaultCtx<'_>, node: &str) -> Result<()> {
    let state = ctx.cluster.state_dir.clone();
    let component = format!("node-{}", node.trim_start_matches("node-"));
    blocking(move || Cluster::attach(&state)?.restart(&component, false)).await?;
    let mut nodes = lock(ctx.live_nodes);
    if !nodes.iter().any(|n| n == node) {
        nodes.push(node.to_string());
        nodes.sort();
    }
    Ok(())
}
