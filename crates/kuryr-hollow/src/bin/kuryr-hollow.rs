//! `kuryr-hollow`: runs a fleet of hollow nodes against an API server until SIGINT/SIGTERM,
//! printing once a period what their daemons were asked (ADDs, DELs, wirings) and the
//! process's CPU and memory (for `bench/scale`).

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context;
use clap::Parser;
use kube_sandbox_node::node::parse_duration;
use kuryr_config::Role;
use kuryr_hollow::HollowNode;
use kuryr_runtime::args::{ConfigArgs, KubeArgs};

/// Hollow nodes for scale tests.
#[derive(Debug, Parser)]
#[command(name = "kuryr-hollow", version)]
struct Args {
    #[command(flatten)]
    config: ConfigArgs,
    #[command(flatten)]
    kube: KubeArgs,
    /// How many nodes.
    #[arg(long, default_value_t = 10)]
    nodes: usize,
    /// Node names are `<prefix><i>`.
    #[arg(long, default_value = "hollow-")]
    prefix: String,
    /// State of the fleet (nodes' records, daemons' state files, the CNI conf dir).
    #[arg(long, default_value = "/var/lib/kuryr-hollow")]
    state_dir: PathBuf,
    /// What each wiring takes (the real binding: a few ms).
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    wiring_delay: Duration,
    /// A model cloud to tell each plugged port (`kuryr-modelcloud`'s URL): its ports then go
    /// ACTIVE as a real node's would. Without it nothing reports plugs.
    #[arg(long)]
    model_url: Option<String>,
    /// How often the fleet's summary is printed.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    report_every: Duration,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let config = match kuryr_runtime::start("kuryr-hollow", &args.config, Role::Daemon) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match run(&args, &config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kuryr-hollow: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args, config: &kuryr_config::Config) -> anyhow::Result<()> {
    let client = kuryr_runtime::kubeclient::client(args.kube.kubeconfig.as_deref(), &config.kubernetes)
        .await
        .context("the Kubernetes client")?;
    kuryr_hollow::write_conflist(&kuryr_hollow::conf_dir(&args.state_dir))?;
    let on_plug = match &args.model_url {
        Some(url) => Some(kuryr_hollow::report::plug_reporter(url)?),
        None => None,
    };
    let mut nodes = Vec::with_capacity(args.nodes);
    for spec in kuryr_hollow::fleet(&args.prefix, args.nodes, &args.state_dir, args.wiring_delay) {
        nodes.push(HollowNode::start(client.clone(), &spec, config, on_plug.clone())?);
    }
    tracing::info!(nodes = nodes.len(), "hollow nodes started");
    let mut tick = tokio::time::interval(args.report_every);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("SIGTERM handler")?;
    loop {
        tokio::select! {
            _ = tick.tick() => report(&nodes),
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
    report(&nodes);
    Ok(())
}

/// One line: nodes alive, wirings and unwirings recorded.
fn report(nodes: &[HollowNode]) {
    let (mut connects, mut disconnects, mut stopped) = (0, 0, 0);
    for n in nodes {
        let c = n.bindings.counts();
        connects += c.connects;
        disconnects += c.disconnects;
        stopped += usize::from(n.is_finished());
    }
    println!(
        "hollow nodes={} stopped={stopped} wired={connects} unwired={disconnects}",
        nodes.len()
    );
}
