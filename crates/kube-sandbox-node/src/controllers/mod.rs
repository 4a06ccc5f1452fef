//! Control-plane loops that a real cluster runs beside the API server: the scheduler (binds pods
//! to Ready nodes) and the endpoints controller (Endpoints + EndpointSlices from Ready pods).

/// Command-line arguments of `kube-sandbox controllers`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Kubeconfig of the API server.
    #[arg(long, env = "KUBECONFIG", default_value = "/var/lib/kube-sandbox/kubeconfig")]
    pub kubeconfig: std::path::PathBuf,
}

/// Runs the scheduler and the endpoints controller until interrupted.
pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!("controllers not implemented yet (args: {args:?})")
}
