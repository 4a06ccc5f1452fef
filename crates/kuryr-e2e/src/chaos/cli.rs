//! `kuryr-e2e chaos` and `kuryr-e2e chaos-proxy`: the command lines of the suite (used by
//! `bench/chaos`) and of the fault-injecting Neutron proxy.

use std::{net::SocketAddr, time::Duration};

use super::{
    ChaosConfig,
    audit::Limits,
    churn::ChurnConfig,
    faults::{Intensity, Scenario},
    proxy::FaultProxy,
    report,
};
use crate::cluster::Cluster;

/// `kuryr-e2e chaos`.
#[derive(Debug, Clone, clap::Args)]
pub struct ChaosArgs {
    /// Scenarios, comma-separated, in order (baseline, controller-kill, daemon-kill,
    /// apiserver-restart, slow-neutron, cloud-api-down, node-lost; default: all).
    #[arg(long, value_delimiter = ',')]
    pub scenarios: Vec<String>,
    /// Iterations of each scenario (default 3, 1 with --short).
    #[arg(long)]
    pub iterations: Option<u32>,
    /// The short version (CI): 1 iteration, 20 s outages, 2 controller kills (an explicit
    /// --iterations or --outage-s still counts).
    #[arg(long)]
    pub short: bool,
    /// Seconds the cloud's APIs stay down / Neutron stays slow (default 60, 20 with --short).
    #[arg(long)]
    pub outage_s: Option<u64>,
    /// Milliseconds between two churned pods.
    #[arg(long, default_value_t = 1000)]
    pub pod_interval_ms: u64,
    /// Seconds a churned pod lives.
    #[arg(long, default_value_t = 10)]
    pub pod_lifetime_s: u64,
    /// Seconds between two churned Services (0: no Services).
    #[arg(long, default_value_t = 10)]
    pub service_interval_s: u64,
    /// Seconds a churned Service lives.
    #[arg(long, default_value_t = 20)]
    pub service_lifetime_s: u64,
    /// Long-lived, probed pods per node.
    #[arg(long, default_value_t = 2)]
    pub stable_per_node: usize,
    /// Seconds of churn before each fault.
    #[arg(long, default_value_t = 5)]
    pub warm_up_s: u64,
    /// Upper bound of convergence after a fault, in seconds.
    #[arg(long, default_value_t = 240)]
    pub converge_timeout_s: u64,
    /// `[vif_pool] ports_pool_max` of the cluster (0: none), for the audit.
    #[arg(long, default_value_t = 0)]
    pub pool_max: usize,
    /// The chaos proxy the controller reaches Neutron through (`kuryr-e2e chaos-proxy`), for
    /// slow-neutron.
    #[arg(long)]
    pub proxy: Option<SocketAddr>,
}

impl ChaosArgs {
    /// The suite's configuration (`tag`: the cluster's).
    pub fn config(&self, tag: &str) -> Result<ChaosConfig, String> {
        let scenarios = if self.scenarios.is_empty() {
            Scenario::ALL.to_vec()
        } else {
            self.scenarios
                .iter()
                .map(|s| {
                    Scenario::parse(s.trim()).ok_or_else(|| {
                        let names: Vec<&str> = Scenario::ALL.iter().map(|x| x.name()).collect();
                        format!("unknown scenario {s:?} (one of {})", names.join(", "))
                    })
                })
                .collect::<Result<_, _>>()?
        };
        if self.pod_interval_ms == 0 || self.stable_per_node == 0 {
            return Err("--pod-interval-ms and --stable-per-node must be positive".into());
        }
        let outage = Duration::from_secs(self.outage_s.unwrap_or(if self.short { 20 } else { 60 }));
        Ok(ChaosConfig {
            scenarios,
            iterations: self.iterations.unwrap_or(if self.short { 1 } else { 3 }).max(1),
            churn: ChurnConfig {
                pod_interval: Duration::from_millis(self.pod_interval_ms),
                pod_lifetime: Duration::from_secs(self.pod_lifetime_s),
                service_interval: Duration::from_secs(self.service_interval_s),
                service_lifetime: Duration::from_secs(self.service_lifetime_s),
            },
            intensity: Intensity {
                controller_kills: if self.short { 2 } else { 3 },
                kill_every: Duration::from_secs(4),
                outage,
            },
            stable_per_node: self.stable_per_node,
            warm_up: Duration::from_secs(self.warm_up_s),
            converge_timeout: Duration::from_secs(self.converge_timeout_s),
            min_window: Duration::from_secs(30),
            limits: Limits {
                ready: Duration::from_secs(90),
                terminating: Duration::from_secs(90),
                pool_max: self.pool_max,
            },
            tag: tag.to_string(),
        })
    }
}

/// Runs the suite on the cluster and prints the report; true when no iteration found anything.
pub async fn run(cluster: &Cluster, args: &ChaosArgs) -> anyhow::Result<bool> {
    let cfg = args.config(&cluster.tag).map_err(anyhow::Error::msg)?;
    let r = super::run(cluster, &cfg, args.proxy).await?;
    print!("{}", report::render(&r));
    let clean = r.iterations.iter().all(|i| {
        i.findings.clean() && i.converged_after.is_some() && !i.controller_crashed && i.fault_error.is_none()
    }) && r.sandbox_crashes.is_empty();
    Ok(clean)
}

/// `kuryr-e2e chaos-proxy`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProxyArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:19696")]
    pub listen: SocketAddr,
    /// Neutron's API.
    #[arg(long, default_value = "127.0.0.1:9696")]
    pub upstream: SocketAddr,
}

/// Serves the proxy until SIGINT/SIGTERM.
pub async fn proxy(args: &ProxyArgs) -> anyhow::Result<bool> {
    let p = FaultProxy::start(args.listen, args.upstream).await?;
    eprintln!(
        "chaos proxy: {} -> {} (faults: PUT {}{}faults)",
        p.addr,
        args.upstream,
        p.addr,
        super::proxy::CONTROL
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        chaos: ChaosArgs,
    }

    fn config(args: &[&str]) -> ChaosConfig {
        let cmd = Cmd::try_parse_from(std::iter::once("chaos").chain(args.iter().copied())).expect("parses");
        cmd.chaos.config("tag").expect("config")
    }

    #[test]
    fn short_sets_defaults_that_explicit_options_override() {
        let c = config(&[]);
        assert_eq!((c.iterations, c.intensity.outage.as_secs()), (3, 60));
        let c = config(&["--short"]);
        assert_eq!((c.iterations, c.intensity.outage.as_secs()), (1, 20));
        let c = config(&["--short", "--iterations", "3", "--outage-s", "30"]);
        assert_eq!((c.iterations, c.intensity.outage.as_secs()), (3, 30));
        assert_eq!(config(&["--iterations", "0"]).iterations, 1);
    }
}
