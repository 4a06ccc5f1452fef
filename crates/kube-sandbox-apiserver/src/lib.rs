//! The emulated Kubernetes API server: HTTP(S) front, in-memory store with watch fan-out, and the
//! semantics clients rely on (resourceVersion, selectors, patches, finalizers, GC, CRDs).
//!
//! Pure building blocks (selectors, patches, CRD schemas, tables, ClusterIPs, certificates) live in
//! `kube-sandbox-machinery`; this crate owns the store, the HTTP front and the lifecycle rules.

use std::{net::SocketAddr, path::PathBuf};

/// Command-line arguments of `kube-sandbox apiserver`.
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Address to listen on (loopback only is the intended use).
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Serve HTTPS with a generated CA (written next to the kubeconfig).
    #[arg(long)]
    pub tls: bool,
    /// Require this bearer token on every request (kubeconfig carries it).
    #[arg(long)]
    pub token: Option<String>,
    /// Service ClusterIP range; match it to the Neutron service subnet.
    #[arg(long, default_value = "10.96.0.0/16")]
    pub service_cidr: ipnet::IpNet,
    /// Where to write the kubeconfig for clients.
    #[arg(long, default_value = "/var/lib/kube-sandbox/kubeconfig")]
    pub kubeconfig: PathBuf,
}

/// Runs the API server until interrupted.
pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::bail!("apiserver not implemented yet (args: {args:?})")
}
