//! Command-line arguments every kuryr-rs binary shares (flattened into its own `clap` parser).

use std::{net::SocketAddr, path::PathBuf};

/// Where kuryr.conf comes from (oslo.config style).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConfigArgs {
    /// A kuryr.conf file; repeatable, later files override earlier ones.
    #[arg(long = "config-file")]
    pub config_file: Vec<PathBuf>,
    /// A directory of `*.conf` files read after the config files; repeatable.
    #[arg(long = "config-dir")]
    pub config_dir: Vec<PathBuf>,
}

/// How to reach Kubernetes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeArgs {
    /// A kubeconfig; without it `[kubernetes] api_root` with its token and TLS options, else
    /// `KUBECONFIG` / in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// Where the health and metrics servers listen (defaults: the kuryr.conf ports on `[::]`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// Listen address of the health server (default `[::]:<health port of kuryr.conf>`).
    #[arg(long)]
    pub health_bind: Option<SocketAddr>,
    /// Listen address of the metrics server (default `[::]:<exporter port of kuryr.conf>`).
    #[arg(long)]
    pub metrics_bind: Option<SocketAddr>,
}

/// The workload this process runs as (Kubernetes deployments), checked at shutdown to tell an
/// uninstall from a restart ([`crate::uninstall`]). Absent: no check, nothing released.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct WorkloadArgs {
    /// `deployment/NAME` or `daemonset/NAME`: when it is gone at shutdown, kuryr-rs is being
    /// uninstalled and this process releases what it holds for itself.
    #[arg(long, env = "KURYR_WORKLOAD")]
    pub workload: Option<String>,
    /// Namespace of `--workload` (the pod's, from the downward API).
    #[arg(long, env = "POD_NAMESPACE")]
    pub workload_namespace: Option<String>,
}

impl WorkloadArgs {
    /// The workload, when one is named.
    pub fn resolve(&self) -> Result<Option<crate::uninstall::Workload>, crate::uninstall::WorkloadError> {
        let Some(spec) = self.workload.as_deref().filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let ns = self.workload_namespace.as_deref().unwrap_or("default");
        crate::uninstall::Workload::parse(spec, ns).map(Some)
    }
}
