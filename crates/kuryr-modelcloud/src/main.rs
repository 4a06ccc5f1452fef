//! `kuryr-modelcloud`: serves a model cloud (Keystone, Neutron, Octavia) for scale runs and
//! prints what a kuryr.conf needs to use it.

use std::{net::SocketAddr, path::PathBuf};

use anyhow::{Context, bail};
use clap::Parser;
use kuryr_modelcloud::{Cloud, Model, serve};
use kuryr_openstack::fake::FakeNeutron;

/// A model cloud for scale tests only (issue 39): Keystone, Neutron and Octavia as kuryr-rs
/// calls them, priced by a queueing model calibrated against the real sandbox.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// A JSON file replacing parts of the model (see `src/model.rs`).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Multiply every service time by this (1: the sandbox's).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// A network with one subnet to create at start, `NAME=CIDR` (repeatable).
    #[arg(long = "network")]
    networks: Vec<String>,
    /// A subnet pool, `ID=CIDR/DEFAULT_PREFIXLEN`, e.g. `pool=10.128.0.0/14/24` (repeatable).
    #[arg(long = "subnet-pool")]
    pools: Vec<String>,
    /// An Open vSwitch database to follow, e.g. `unix:/run/openvswitch/db.sock` (repeatable): an
    /// interface that appears there with `external_ids:iface-id=<port>` plugs that port, as
    /// ovn-controller's claim does on a real node (for real daemons against the model).
    #[arg(long = "plugs-from-ovsdb")]
    ovsdbs: Vec<String>,
    /// The share (0–1) of each service time spent on this machine's CPU rather than asleep:
    /// 1 when the model stands in for a cloud that shares the machine (the calibration).
    #[arg(long)]
    cpu_share: Option<f64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let mut model = match &args.model {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading --model {}", p.display()))?;
            serde_json::from_str::<Model>(&text).with_context(|| format!("--model {}", p.display()))?
        }
        None => Model::default(),
    };
    if !(args.time_scale.is_finite() && args.time_scale >= 0.0) {
        bail!(
            "--time-scale must be a finite number >= 0, not {}",
            args.time_scale
        );
    }
    if args.time_scale != 1.0 {
        model = model.scaled(args.time_scale);
    }
    if let Some(c) = args.cpu_share {
        model.cpu_share = c;
    }
    if !(0.0..=1.0).contains(&model.cpu_share) {
        bail!(
            "the CPU share (--cpu-share, or cpu_share in --model) must be between 0 and 1, not {}",
            model.cpu_share
        );
    }
    let fake = FakeNeutron::new();
    let mut made = Vec::new();
    for n in &args.networks {
        let Some((name, cidr)) = n.split_once('=') else {
            bail!("--network {n:?}: expected NAME=CIDR");
        };
        let (net, subnet) = fake.add_network(name, cidr);
        if subnet.gateway_ip.is_none() {
            bail!("--network {n:?}: {cidr:?} is not an IPv4 CIDR");
        }
        made.push(format!("network name={name} id={} subnet={}", net.id, subnet.id));
    }
    for p in &args.pools {
        let parsed = p
            .split_once('=')
            .and_then(|(id, rest)| rest.rsplit_once('/').map(|(cidr, len)| (id, cidr, len)))
            .and_then(|(id, cidr, len)| len.parse::<u8>().ok().map(|l| (id, cidr, l)));
        let Some((id, cidr, len)) = parsed else {
            bail!("--subnet-pool {p:?}: expected ID=CIDR/DEFAULT_PREFIXLEN");
        };
        fake.add_subnet_pool(id, cidr, len);
        made.push(format!("subnetpool id={id}"));
    }
    let running = serve(Cloud::new(fake, model), args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let mut monitors = Vec::new();
    for db in &args.ovsdbs {
        let (child, _thread) =
            kuryr_modelcloud::ovs::follow(running.cloud.clone(), db, tokio::runtime::Handle::current())?;
        monitors.push(child);
        made.push(format!("following ovsdb={db}"));
    }
    println!("modelcloud url={} auth_url={}", running.url, running.auth_url());
    for m in made {
        println!("{m}");
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let ended = tokio::select! {
        r = running.task => r.context("the server task"),
        r = tokio::signal::ctrl_c() => r.context("waiting for ctrl-c"),
        _ = term.recv() => Ok(()),
    };
    // The monitors are this process's children: they end with it.
    for mut m in monitors {
        let _ = m.kill();
        let _ = m.wait();
    }
    ended
}
