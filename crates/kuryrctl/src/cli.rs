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
    /// Port pools: list them (the default), create ports in a node's pool (subports on a
    /// worker VM's trunk for nested pools), free a node's pools, show a pool's ports. Asks the
    /// controller's pool manager socket (`[kubernetes] enable_manager`); listing falls back to
    /// pools derived from Neutron and the KuryrPorts when nothing answers there.
    #[command(args_conflicts_with_subcommands = true)]
    Pools {
        /// Listing options (bare `kuryrctl pools` is `kuryrctl pools list`).
        #[command(flatten)]
        list: PoolsList,
        /// What to do.
        #[command(subcommand)]
        action: Option<PoolsAction>,
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

/// Options of `kuryrctl pools list`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PoolsList {
    /// Tag of the cluster's resources (as for `ports`; used when no pool manager answers).
    #[arg(long)]
    pub cluster_tag: Option<String>,
    /// Pool-manager socket (default: `[pool_manager] sock_file`).
    #[arg(long)]
    pub socket: Option<PathBuf>,
}

/// The nodes a pools command works on: by address (a worker VM's IP names its trunk, as in
/// upstream's `subports.py`) or by name.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PoolNodes {
    /// A node by its address: a worker VM's IP, whose trunk gets the subports (repeatable).
    #[arg(long = "trunk", visible_alias = "trunks", value_name = "VM_IP")]
    pub trunks: Vec<String>,
    /// A node by its name (repeatable).
    #[arg(long = "host", value_name = "NODE")]
    pub hosts: Vec<String>,
}

/// `kuryrctl pools` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum PoolsAction {
    /// Pools with their counters (available, in use, cooling, creating, waiting).
    List(PoolsList),
    /// Creates ports in each node's pool and waits for them: subports on the node VM's trunk
    /// (nested pools), bound ports otherwise. The pool's project, network, subnets and
    /// security groups default to what the controller's drivers give a pod of `--namespace`.
    #[command(group(clap::ArgGroup::new("node").required(true).multiple(true).args(["trunks", "hosts"])))]
    Create {
        /// The nodes.
        #[command(flatten)]
        nodes: PoolNodes,
        /// Ports to create in each node's pool (bounded by `[vif_pool] ports_pool_max`).
        #[arg(short = 'n', long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4094))]
        num_ports: u32,
        /// Project of the ports (default: the project driver's).
        #[arg(long)]
        project: Option<String>,
        /// Network of the ports (default: the subnets driver's).
        #[arg(long)]
        network: Option<String>,
        /// Subnet of the ports (repeatable; default: the subnets driver's).
        #[arg(long = "subnet")]
        subnets: Vec<String>,
        /// Security group of the ports (repeatable; default: the security groups driver's).
        #[arg(long = "security-group")]
        security_groups: Vec<String>,
        /// Namespace whose pods the defaults are for (default: `default`).
        #[arg(long)]
        namespace: Option<String>,
        /// Pool-manager socket (default: `[pool_manager] sock_file`).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Frees the pools of each node: their available ports are taken off the trunk and
    /// deleted (ports of running pods stay). A pool below `ports_pool_min` is filled again
    /// when a pod next needs it.
    #[command(group(clap::ArgGroup::new("node").required(true).multiple(true).args(["trunks", "hosts", "all"])))]
    Delete {
        /// The nodes.
        #[command(flatten)]
        nodes: PoolNodes,
        /// Every pool of every node.
        #[arg(long, conflicts_with_all = ["trunks", "hosts"])]
        all: bool,
        /// Pool-manager socket (default: `[pool_manager] sock_file`).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// The ports of pools, one row per port with its state (available, in use, cooling,
    /// deleting): every pool, or those of the given node, project and network.
    Show {
        /// A node by its address (a worker VM's IP).
        #[arg(long, value_name = "VM_IP", conflicts_with = "host")]
        trunk: Option<String>,
        /// A node by its name.
        #[arg(long, value_name = "NODE")]
        host: Option<String>,
        /// Only pools of this project.
        #[arg(long)]
        project: Option<String>,
        /// Only pools of this network.
        #[arg(long)]
        network: Option<String>,
        /// Pool-manager socket (default: `[pool_manager] sock_file`).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
}
