//! `kuryr-scale` (run by `bench/scale`): steps of growing size, each in a fresh world of four
//! processes, printing the table and the last line of issue 39.

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{Context, bail};
use clap::Parser;
use kuryr_scale::{
    procs::Bins,
    report::{StepSpec, render, run_step},
};

/// kuryr-rs measured at growing sizes on hollow nodes and the model cloud.
#[derive(Debug, Parser)]
#[command(name = "kuryr-scale", version)]
struct Args {
    /// Steps as `PODS:NODES[:SERVICES]`, comma-separated (SERVICES ClusterIP Services over the
    /// pods once they are Ready; none when absent).
    #[arg(
        long,
        default_value = "1000:50:100,3000:100:300,10000:250:1000,30000:500:3000"
    )]
    steps: String,
    /// Directory of kube-sandbox, kuryr-controller, kuryr-hollow and kuryr-modelcloud.
    #[arg(long)]
    bin_dir: PathBuf,
    /// The run's directory (logs and state of each step).
    #[arg(long, default_value = "/var/lib/kuryr-scale")]
    dir: PathBuf,
    /// The model cloud's service times as a fraction of the sandbox's (one Neutron API worker;
    /// 0.01: a Neutron a hundred times the sandbox's).
    #[arg(long, default_value_t = 0.01)]
    time_scale: f64,
    /// Pod creations in flight.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Pods a namespace.
    #[arg(long, default_value_t = 500)]
    per_namespace: usize,
    /// A JSON file replacing parts of the model cloud's model (see kuryr-modelcloud's
    /// `src/model.rs`), e.g. `{"neutron_workers": 8}`.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Seconds a step's burst (and its fail-over) may take.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
}

/// One step: pods, nodes, Services.
type Step = (usize, usize, usize);

fn steps(s: &str) -> anyhow::Result<Vec<Step>> {
    s.split(',')
        .map(|p| {
            let parts: Vec<&str> = p.trim().split(':').collect();
            let num = |i: usize, what: &str| -> anyhow::Result<usize> {
                parts
                    .get(i)
                    .map_or(Ok(0), |v| v.parse())
                    .with_context(|| format!("--steps {p:?}: {what}"))
            };
            if !(2..=3).contains(&parts.len()) {
                bail!("--steps {p:?}: expected PODS:NODES or PODS:NODES:SERVICES");
            }
            let (pods, nodes, services) = (num(0, "pods")?, num(1, "nodes")?, num(2, "services")?);
            if pods == 0 || nodes == 0 {
                bail!("--steps {p:?}: pods and nodes must be positive");
            }
            Ok((pods, nodes, services))
        })
        .collect()
}

#[tokio::main]
async fn main() -> ExitCode {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kuryr-scale: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let steps = steps(&args.steps)?;
    if !(args.time_scale.is_finite() && args.time_scale >= 0.0) {
        bail!("--time-scale must be a finite number >= 0");
    }
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let mut rows = Vec::new();
    for (pods, nodes, services) in steps {
        eprintln!(
            "[{}] step: {pods} pods on {nodes} hollow nodes, {services} Services",
            now()
        );
        let row = run_step(&StepSpec {
            pods,
            nodes,
            bins: Bins(args.bin_dir.clone()),
            dir: args.dir.clone(),
            time_scale: args.time_scale,
            concurrency: args.concurrency,
            per_namespace: args.per_namespace,
            services,
            model: args.model.clone(),
            timeout: Duration::from_secs(args.timeout),
        })
        .await
        .with_context(|| format!("the step of {pods} pods on {nodes} nodes"))?;
        eprintln!("[{}] step done: {row:?}", now());
        rows.push(row);
        // Every step so far, in case a later one fails.
        eprint!("{}", render(&rows, args.time_scale));
    }
    print!("{}", render(&rows, args.time_scale));
    Ok(())
}

fn now() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{:02}:{:02}:{:02}", (t / 3600) % 24, (t / 60) % 60, t % 60)
}
