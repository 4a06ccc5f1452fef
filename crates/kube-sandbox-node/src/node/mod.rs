//! One emulated node: registers and heartbeats its Node, runs pods bound to it by creating network
//! namespaces and calling the CNI plugin exactly as a CRI runtime does, serves the pods' ports.

/// Command-line arguments of `kube-sandbox node`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Node name (also the OVN chassis hostname / Neutron binding host).
    #[arg(long)]
    pub name: String,
    /// Kubeconfig of the API server.
    #[arg(long, env = "KUBECONFIG", default_value = "/var/lib/kube-sandbox/kubeconfig")]
    pub kubeconfig: std::path::PathBuf,
}

/// Runs the node until interrupted.
pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!("node not implemented yet (args: {args:?})")
}
