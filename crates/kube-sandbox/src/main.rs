//! `kube-sandbox` binary: parses the command line and runs one of the emulated components.
//!
//! `apiserver` also runs the control-plane loops (scheduler, endpoints, ReplicaSet, Deployment and
//! DaemonSet controllers, pod garbage collector) in the same process (as one small control plane)
//! unless `--no-controllers` is given; `controllers` runs them on their own.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use kube_sandbox_apiserver as apiserver;
use kube_sandbox_node::{controllers, node, probe};
use tracing::{info, warn};

#[derive(Parser)]
#[command(
    name = "kube-sandbox",
    version,
    about = "Emulated Kubernetes control plane and nodes for kuryr-rs tests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// In-memory Kubernetes API server (plus the control-plane loops unless disabled).
    Apiserver(ApiserverCmd),
    /// One emulated node: kubelet + container runtime driving a CNI plugin.
    Node(Box<node::Args>),
    /// The control-plane loops as a separate process (for `apiserver --no-controllers`).
    Controllers(controllers::Args),
    /// Connectivity probe run inside a pod (`kubectl exec POD -- kube-sandbox probe …`): one line
    /// `<target> connected|timeout|refused|error …` per target; exits 0 when all connected.
    Probe(ProbeCmd),
    /// Used by the node to start one container: enters its namespaces, mounts its volumes and
    /// execs its command (`<spec>`: the JSON launch spec the node wrote).
    #[command(hide = true)]
    RunContainer {
        /// Launch spec file.
        spec: std::path::PathBuf,
    },
}

#[derive(clap::Args)]
struct ProbeCmd {
    /// How long one target may take (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_parser = node::parse_duration)]
    timeout: std::time::Duration,
    /// Serve rounds from stdin instead: each line's targets answered by a line per target and
    /// a line `end` (one `kubectl exec -i` for many rounds).
    #[arg(long, conflicts_with = "targets")]
    stdin: bool,
    /// Targets: `tcp:IP:PORT`, `udp:IP:PORT` or `IP:PORT` (TCP).
    #[arg(required_unless_present = "stdin")]
    targets: Vec<probe::Target>,
}

#[derive(clap::Args)]
struct ApiserverCmd {
    #[command(flatten)]
    server: apiserver::Args,
    /// Do not run the control-plane loops (scheduler, controllers) in this process.
    #[arg(long)]
    no_controllers: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    // Before any runtime thread exists: entering namespaces needs a single-threaded process.
    if let Command::RunContainer { spec } = &cli.command {
        let spec = kube_sandbox_node::containers::launch::read_spec(spec)?;
        let err = kube_sandbox_node::containers::launch::exec(&spec);
        eprintln!("kube-sandbox run-container: {err}");
        std::process::exit(128);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(async_main(cli))
}

async fn async_main(cli: Cli) -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match cli.command {
        Command::Apiserver(cmd) if cmd.no_controllers => apiserver::run(cmd.server).await,
        Command::Apiserver(cmd) => run_control_plane(cmd.server).await,
        Command::Node(args) => node::run(*args).await,
        Command::Controllers(args) => controllers::run(args).await,
        Command::Probe(cmd) if cmd.stdin => {
            let input = tokio::io::BufReader::new(tokio::io::stdin());
            probe::serve_lines(input, tokio::io::stdout(), cmd.timeout)
                .await
                .context("probe --stdin")
        }
        Command::RunContainer { .. } => unreachable!("handled before the runtime starts"),
        Command::Probe(cmd) => {
            let results = probe::probe_all(&cmd.targets, cmd.timeout).await;
            let all = results
                .iter()
                .all(|(_, o)| matches!(o, probe::Outcome::Connected(_)));
            for (t, o) in &results {
                println!("{t} {o}");
            }
            std::process::exit(if all { 0 } else { 1 });
        }
    }
}

/// API server + control-plane loops until SIGTERM/ctrl-c.
async fn run_control_plane(args: apiserver::Args) -> Result<()> {
    let server = apiserver::start(apiserver::Config::from(args)).await?;
    info!(url = %server.url, kubeconfig = %server.kubeconfig.display(), "API server ready");
    let (client, _) = node::client_from_kubeconfig(&server.kubeconfig)
        .await
        .context("connecting the in-process controllers to the API server")?;
    let result = controllers::run_with_client(client, node::shutdown_signal()).await;
    if let Err(e) = &result {
        warn!(error = %e, "controllers stopped");
    }
    server.shutdown().await;
    result.map_err(Into::into)
}
