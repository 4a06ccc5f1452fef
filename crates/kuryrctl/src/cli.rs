//! The command line of `kuryrctl` (clap).

use std::path::PathBuf;

/// Admin CLI of kuryr-rs.
#[derive(Debug, clap::Parser)]
#[command(
    name = "kuryrctl",
    version,
    about = "Inspect kuryr-rs: pod VIFs, namespace networks, Neutron ports and pools, load balancers, network policies, upgrade checks"
)]
pub struct Cli {
    /// Kubeconfig (default: `$KUBECONFIG`, `~/.kube/config`, in-cluster).
    #[arg(long, global = true, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// kuryr.conf for Neutron credentials and tags (repeatable); without it `OS_CLOUD` /
    /// `OS_*` and clouds.yaml are used.
    #[arg(long = "config-file", global = true)]
    pub config_file: Vec<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns.
    Table,
    /// One JSON document.
    Json,
}

/// Commands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Pods and their VIFs (from KuryrPorts): node, port ID, IP, MAC, active.
    Vifs {
        /// Namespace (default: `default`).
        #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
        namespace: Option<String>,
        /// All namespaces.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only pods matching this label selector.
        #[arg(short = 'l', long)]
        selector: Option<String>,
    },
    /// KuryrNetworks and their Neutron network, subnet and router (checked in Neutron when
    /// credentials are available).
    Networks {
        /// Do not ask Neutron, show the CRDs only.
        #[arg(long)]
        no_neutron: bool,
    },
    /// Tagged Neutron ports classified as in use (by a KuryrPort), pooled or orphan.
    Ports {
        /// Tag of the cluster's resources (default: `[neutron_defaults] resource_tags` and
        /// `cluster_tag` of the kuryr.conf).
        #[arg(long)]
        cluster_tag: Option<String>,
        /// Only orphans.
        #[arg(long)]
        orphans: bool,
    },
    /// Port pools: from the controller's pool-manager socket when it answers, else derived
    /// from Neutron and the KuryrPorts.
    Pools {
        /// Tag of the cluster's resources (as for `ports`).
        #[arg(long)]
        cluster_tag: Option<String>,
        /// Pool-manager socket (default: `[pool_manager] sock_file`).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Services' load balancers: Service → KuryrLoadBalancer → Octavia (VIP, floating IP,
    /// provider, listeners, members, provisioning and operating status), and the load
    /// balancers carrying the cluster's tags that no KuryrLoadBalancer owns (orphans). Exit 1
    /// when one is missing, not ACTIVE, or orphaned.
    Lbs {
        /// Tag of the cluster's resources (as for `ports`).
        #[arg(long)]
        cluster_tag: Option<String>,
        /// Do not ask Octavia, show the CRDs only.
        #[arg(long)]
        no_octavia: bool,
    },
    /// NetworkPolicies: KuryrNetworkPolicy → security group → rules (wanted, applied, in
    /// Neutron) → the pods each selects; the cluster's open-direction groups and the tagged
    /// groups no policy owns (orphans). Exit 1 when a policy is not enforced as its spec says,
    /// its group is missing or differs, or a group is orphaned.
    Policies {
        /// Tag of the cluster's resources (as for `ports`).
        #[arg(long)]
        cluster_tag: Option<String>,
        /// Do not ask Neutron, show the CRDs and pods only.
        #[arg(long)]
        no_neutron: bool,
    },
    /// Upgrade checks in the spirit of `kuryr-k8s-status upgrade check`: exit 0 (success),
    /// 1 (warnings) or 2 (failures).
    Status,
}
