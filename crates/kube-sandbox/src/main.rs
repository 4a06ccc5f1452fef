//! `kube-sandbox` binary: parses the command line and runs one of the emulated components.

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kube-sandbox",
    about = "Emulated Kubernetes control plane and nodes for kuryr-rs tests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// In-memory Kubernetes API server (plus scheduler and endpoints controller unless disabled).
    Apiserver(kube_sandbox_apiserver::Args),
    /// One emulated node: kubelet + container runtime driving a CNI plugin.
    Node(kube_sandbox_node::node::Args),
    /// Scheduler and endpoints controller as a separate process (when the apiserver runs without them).
    Controllers(kube_sandbox_node::controllers::Args),
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Apiserver(args) => kube_sandbox_apiserver::run(args).await,
        Command::Node(args) => kube_sandbox_node::node::run(args).await,
        Command::Controllers(args) => kube_sandbox_node::controllers::run(args).await,
    }
}
