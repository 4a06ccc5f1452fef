//! The option registry: every option upstream Kuryr-Kubernetes registers with oslo.config (its
//! own, kuryr-lib's, keystoneauth's in `[neutron]`, oslo.log's in `[DEFAULT]`), with upstream's
//! names, types, defaults and deprecated names, as one static table ([`OPTIONS`]).
//!
//! Defaults are written in oslo's textual form and parsed by the same code as file values (a unit
//! test checks they all parse). Where kuryr-rs is stricter than upstream (non-negative counts and
//! timeouts, port-valued integers limited to 0–65535) the bound is in the [`OptKind::Int`]
//! of the entry.

use crate::value::OptKind;

/// Which project registers the option upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum OptSource {
    /// `kuryr_kubernetes` itself.
    KuryrKubernetes,
    /// The `kuryr-lib` dependency (`kuryr.lib.config`).
    KuryrLib,
    /// keystoneauth session and auth-plugin options (registered in `[neutron]`).
    Keystoneauth,
    /// oslo.log, in `[DEFAULT]`.
    OsloLog,
    /// Not in upstream: an option kuryr-rs adds (documented as such in the sample).
    KuryrRs,
}

/// One option: group, name, type, default and metadata.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptSpec {
    /// Group (`DEFAULT` or a lower-case name).
    pub group: &'static str,
    /// Option name (normalised: `_`, lower case).
    pub name: &'static str,
    /// Type.
    pub kind: OptKind,
    /// Default in oslo's textual form; `None` means the option has no value unless set.
    pub default: Option<&'static str>,
    /// Older names still accepted (with a warning), in the same group.
    pub deprecated_names: &'static [&'static str],
    /// Deprecated for removal upstream (setting it gives a warning).
    pub deprecated_for_removal: bool,
    /// Never print the value (passwords, tokens, secrets).
    pub secret: bool,
    /// Who registers it upstream.
    pub source: OptSource,
    /// One-line description.
    pub help: &'static str,
}

const fn opt(
    group: &'static str,
    name: &'static str,
    kind: OptKind,
    default: Option<&'static str>,
    help: &'static str,
) -> OptSpec {
    OptSpec {
        group,
        name,
        kind,
        default,
        deprecated_names: &[],
        deprecated_for_removal: false,
        secret: false,
        source: OptSource::KuryrKubernetes,
        help,
    }
}

impl OptSpec {
    const fn deprecated(mut self, names: &'static [&'static str]) -> Self {
        self.deprecated_names = names;
        self
    }
    const fn for_removal(mut self) -> Self {
        self.deprecated_for_removal = true;
        self
    }
    const fn secret(mut self) -> Self {
        self.secret = true;
        self
    }
    const fn from(mut self, source: OptSource) -> Self {
        self.source = source;
        self
    }
}

const STR: OptKind = OptKind::Str;
const BOOL: OptKind = OptKind::Bool;
const INT: OptKind = OptKind::Int { min: None, max: None };
/// Counts, timeouts and periods: upstream accepts negative values, kuryr-rs does not.
const UINT: OptKind = OptKind::Int {
    min: Some(0),
    max: None,
};
/// Upstream `IntOpt`s that hold a TCP port.
const PORTINT: OptKind = OptKind::Int {
    min: Some(0),
    max: Some(65535),
};
const LIST: OptKind = OptKind::List;
const DICT: OptKind = OptKind::Dict;
const FLOAT: OptKind = OptKind::Float;

use OptSource::{Keystoneauth as KS, KuryrLib as LIB, KuryrRs as RS, OsloLog as LOG};

/// Default of `[kubernetes] api_root` when neither a file nor the `K8S_API` environment variable
/// sets it (upstream reads `K8S_API` at import time).
pub const DEFAULT_API_ROOT: &str = "https://localhost:6443";

/// Every option kuryr-rs knows, grouped as upstream registers them (one line per option).
#[rustfmt::skip]
pub static OPTIONS: &[OptSpec] = &[
    // ---- [DEFAULT] kuryr-kubernetes and kuryr-lib core options
    opt("DEFAULT", "pybasedir", STR, None, "Directory where the upstream Python module is installed (unused)."),
    opt("DEFAULT", "bindir", STR, Some("/usr/libexec/kuryr"), "Directory for Kuryr vif binding executables (unused).").from(LIB),
    opt("DEFAULT", "subnetpool_name_prefix", STR, Some("kuryrPool"), "Neutron subnetpool name prefix (unused).").from(LIB),
    opt("DEFAULT", "deployment_type", STR, Some("baremetal"), "baremetal or nested-containers (unused).").from(LIB),
    // ---- [DEFAULT] oslo.log
    opt("DEFAULT", "debug", BOOL, Some("false"), "Log at debug level.").from(LOG),
    opt("DEFAULT", "log_config_append", STR, None, "Python logging configuration file (ignored by kuryr-rs).").from(LOG).deprecated(&["log_config"]),
    opt("DEFAULT", "log_date_format", STR, Some("%Y-%m-%d %H:%M:%S"), "Date format of log records.").from(LOG),
    opt("DEFAULT", "log_file", STR, None, "Log to this file instead of stderr.").from(LOG).deprecated(&["logfile"]),
    opt("DEFAULT", "log_dir", STR, None, "Base directory of relative log_file paths.").from(LOG).deprecated(&["logdir"]),
    opt("DEFAULT", "watch_log_file", BOOL, Some("false"), "Reopen the log file when it is moved.").from(LOG),
    opt("DEFAULT", "use_syslog", BOOL, Some("false"), "Log to syslog.").from(LOG),
    opt("DEFAULT", "use_journal", BOOL, Some("false"), "Log to the systemd journal.").from(LOG),
    opt("DEFAULT", "syslog_log_facility", STR, Some("LOG_USER"), "Syslog facility.").from(LOG),
    opt("DEFAULT", "use_json", BOOL, Some("false"), "Log as JSON.").from(LOG),
    opt("DEFAULT", "use_stderr", BOOL, Some("false"), "Log to stderr.").from(LOG),
    opt("DEFAULT", "log_color", BOOL, Some("false"), "Colour log levels.").from(LOG),
    opt("DEFAULT", "log_rotate_interval", INT, Some("1"), "Log rotation interval.").from(LOG),
    opt("DEFAULT", "log_rotate_interval_type", STR, Some("days"), "Log rotation interval unit.").from(LOG),
    opt("DEFAULT", "max_logfile_count", INT, Some("30"), "Rotated log files to keep.").from(LOG),
    opt("DEFAULT", "max_logfile_size_mb", INT, Some("200"), "Log file size before rotation (MiB).").from(LOG),
    opt("DEFAULT", "log_rotation_type", STR, Some("none"), "Log rotation type (interval, size, none).").from(LOG),
    opt("DEFAULT", "logging_context_format_string", STR, None, "oslo.log format string (ignored by kuryr-rs).").from(LOG),
    opt("DEFAULT", "logging_default_format_string", STR, None, "oslo.log format string (ignored by kuryr-rs).").from(LOG),
    opt("DEFAULT", "logging_debug_format_suffix", STR, None, "oslo.log format string (ignored by kuryr-rs).").from(LOG),
    opt("DEFAULT", "logging_exception_prefix", STR, None, "oslo.log format string (ignored by kuryr-rs).").from(LOG),
    opt("DEFAULT", "logging_user_identity_format", STR, None, "oslo.log format string (ignored by kuryr-rs).").from(LOG),
    opt("DEFAULT", "default_log_levels", LIST, None, "Per-logger levels, `logger=LEVEL` items.").from(LOG),
    opt("DEFAULT", "publish_errors", BOOL, Some("false"), "Publish error events (ignored).").from(LOG),
    opt("DEFAULT", "instance_format", STR, None, "oslo.log instance format (ignored).").from(LOG),
    opt("DEFAULT", "instance_uuid_format", STR, None, "oslo.log instance format (ignored).").from(LOG),
    opt("DEFAULT", "rate_limit_interval", INT, Some("0"), "Log rate limiting interval (s).").from(LOG),
    opt("DEFAULT", "rate_limit_burst", INT, Some("0"), "Log records per rate_limit_interval.").from(LOG),
    opt("DEFAULT", "rate_limit_except_level", STR, Some("CRITICAL"), "Level not rate limited.").from(LOG),
    opt("DEFAULT", "fatal_deprecations", BOOL, Some("false"), "Make deprecations fatal.").from(LOG),
    // ---- [cni_daemon]
    opt("cni_daemon", "bind_address", STR, Some("unix:/run/kuryr/cni.sock"), "Address of the CNI daemon's API: unix:PATH (kuryr-rs's default: a root-only socket whose callers must be root) or host:port over TCP (upstream's default 127.0.0.1:5036, served to any local process: a start-up warning says so)."),
    opt("cni_daemon", "worker_num", OptKind::Int { min: Some(1), max: None }, Some("30"), "Maximum number of workers serving CNI requests."),
    opt("cni_daemon", "vif_annotation_timeout", UINT, Some("60"), "Seconds to wait for the KuryrPort VIFs (and their activation)."),
    opt("cni_daemon", "pyroute2_timeout", UINT, Some("10"), "Netlink operation timeout (s)."),
    opt("cni_daemon", "docker_mode", BOOL, Some("false"), "Daemon runs in a container: network namespaces are under netns_proc_dir."),
    opt("cni_daemon", "netns_proc_dir", STR, None, "Where the host's /proc is mounted when docker_mode is set."),
    opt("cni_daemon", "cni_failures_count", UINT, Some("3"), "Consecutive failures before the daemon reports unhealthy."),
    // ---- [kubernetes]
    opt("kubernetes", "api_root", STR, None, "Root URL of the Kubernetes API (default: $K8S_API or https://localhost:6443; empty: in-cluster)."),
    opt("kubernetes", "ssl_client_crt_file", STR, None, "Client certificate for the Kubernetes API."),
    opt("kubernetes", "ssl_client_key_file", STR, None, "Client key for the Kubernetes API."),
    opt("kubernetes", "ssl_ca_crt_file", STR, Some("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"), "CA certificate of the Kubernetes API."),
    opt("kubernetes", "ssl_verify_server_crt", BOOL, Some("false"), "Verify the Kubernetes API server certificate."),
    opt("kubernetes", "token_file", STR, Some("/var/run/secrets/kubernetes.io/serviceaccount/token"), "Bearer token file."),
    opt("kubernetes", "pod_project_driver", STR, Some("default"), "Project driver for pods (default, annotation)."),
    opt("kubernetes", "service_project_driver", STR, Some("default"), "Project driver for services (default, annotation)."),
    opt("kubernetes", "namespace_project_driver", STR, Some("default"), "Project driver for namespaces (default, annotation)."),
    opt("kubernetes", "network_policy_project_driver", STR, Some("default"), "Project driver for network policies (default, annotation)."),
    opt("kubernetes", "pod_subnets_driver", STR, Some("default"), "Subnet driver for pods (default, namespace)."),
    opt("kubernetes", "service_subnets_driver", STR, Some("default"), "Subnet driver for services."),
    opt("kubernetes", "pod_security_groups_driver", STR, Some("default"), "Security group driver for pods (default, policy)."),
    opt("kubernetes", "service_security_groups_driver", STR, Some("default"), "Security group driver for services (default, policy)."),
    opt("kubernetes", "pod_vif_driver", STR, Some("neutron-vif"), "Pod VIF driver (neutron-vif, nested-vlan, nested-macvlan, nested-dpdk)."),
    opt("kubernetes", "endpoints_lbaas_driver", STR, Some("lbaasv2"), "Load balancer driver for endpoints."),
    opt("kubernetes", "endpoints_driver_octavia_provider", STR, Some("default"), "Octavia provider for services (e.g. ovn)."),
    opt("kubernetes", "vif_pool_driver", STR, Some("noop"), "Port pool driver (noop, neutron, nested, multi_pool)."),
    opt("kubernetes", "nodes_subnets_driver", STR, Some("config"), "Driver listing the nodes' subnets (config, openshift)."),
    opt("kubernetes", "port_debug", BOOL, Some("false"), "Name Neutron ports after their pods."),
    opt("kubernetes", "service_public_ip_driver", STR, Some("neutron_floating_ip"), "Driver providing external IPs for LoadBalancer services."),
    opt("kubernetes", "enable_manager", BOOL, Some("false"), "Enable the pool manager socket."),
    opt("kubernetes", "watch_retry_timeout", UINT, Some("60"), "Seconds the watcher keeps retrying before giving up."),
    opt("kubernetes", "watch_connection_timeout", UINT, Some("30"), "TCP connect timeout of watches (s)."),
    opt("kubernetes", "watch_read_timeout", UINT, Some("60"), "TCP read timeout of watches (s)."),
    opt("kubernetes", "watch_reconcile_period", UINT, Some("120"), "Seconds between full re-lists (0 disables)."),
    opt("kubernetes", "enabled_handlers", LIST, Some("vif,endpoints,service,kuryrloadbalancer,kuryrport"), "Handlers registered in the pipeline."),
    opt("kubernetes", "controller_ha", BOOL, Some("false"), "Active/passive controller HA."),
    opt("kubernetes", "controller_ha_elector_port", OptKind::Port, Some("16401"), "Port of the leader-elector sidecar."),
    opt("kubernetes", "network_policy_driver", STR, Some("default"), "Network policy driver."),
    opt("kubernetes", "multi_vif_drivers", LIST, Some("noop"), "Drivers providing additional VIFs (noop, npwg_multiple_interfaces)."),
    opt("kubernetes", "additional_ifname_prefix", STR, Some("eth"), "Prefix of additional interface names."),
    opt("kubernetes", "use_events", BOOL, Some("true"), "Emit Kubernetes Events about OpenStack resources."),
    // ---- [neutron_defaults]
    opt("neutron_defaults", "project", STR, None, "Default OpenStack project ID for Kubernetes resources."),
    opt("neutron_defaults", "pod_subnet", STR, None, "Default Neutron subnet ID for pods."),
    opt("neutron_defaults", "pod_security_groups", LIST, None, "Default security group IDs for pods."),
    opt("neutron_defaults", "ovs_bridge", STR, None, "Default Open vSwitch integration bridge (sample: br-int)."),
    opt("neutron_defaults", "service_subnet", STR, None, "Default Neutron subnet ID for services."),
    opt("neutron_defaults", "external_svc_net", STR, None, "External network ID for services (floating IPs)."),
    opt("neutron_defaults", "external_svc_subnet", STR, None, "External subnet ID for services."),
    opt("neutron_defaults", "network_device_mtu", UINT, Some("0"), "MTU cap / MTU of namespace networks (0: Neutron's)."),
    opt("neutron_defaults", "lbaas_activation_timeout", UINT, Some("300"), "Seconds to wait for a load balancer to become ACTIVE."),
    opt("neutron_defaults", "subnet_mapping", DICT, Some(""), "driverType:subnet-ID mapping for additional networks."),
    opt("neutron_defaults", "resource_tags", LIST, Some(""), "Tags put on every OpenStack resource created."),
    opt("neutron_defaults", "max_sg_rules_per_policy", UINT, Some("1000"), "Most security-group rules one NetworkPolicy may translate to (0: no bound). A policy over it gets a Warning Event and is not applied (its previous rules stay): never half-applied, never near etcd's object size limit.").from(RS),
    opt("neutron_defaults", "cluster_tag", STR, None, "Tag identifying this cluster's OpenStack resources, added to resource_tags on everything created; nothing without all of these tags is ever pooled or deleted. Unset with resource_tags unset: derived as kuryr-cluster=<UID of the kube-system Namespace>.").from(RS),
    // ---- [octavia_defaults]
    opt("octavia_defaults", "member_mode", STR, Some("L3"), "Load balancer member mode (L2, L3)."),
    opt("octavia_defaults", "enforce_sg_rules", BOOL, Some("true"), "Enforce security group rules on load balancers."),
    opt("octavia_defaults", "lb_algorithm", STR, Some("ROUND_ROBIN"), "Pool algorithm (ROUND_ROBIN, LEAST_CONNECTIONS, SOURCE_IP, SOURCE_IP_PORT)."),
    opt("octavia_defaults", "timeout_client_data", UINT, Some("0"), "Listener client inactivity timeout (ms, 0: Octavia's)."),
    opt("octavia_defaults", "timeout_member_data", UINT, Some("0"), "Listener member inactivity timeout (ms, 0: Octavia's)."),
    // ---- [cache_defaults]
    opt("cache_defaults", "enabled", BOOL, Some("true"), "Enable caching (registered upstream, effectively unused)."),
    opt("cache_defaults", "backend", STR, Some("dogpile.cache.memory"), "Cache backend (unused)."),
    // ---- [pod_vif_nested]
    opt("pod_vif_nested", "worker_nodes_subnets", LIST, Some(""), "Neutron subnet IDs of the worker node VMs."),
    opt("pod_vif_nested", "rev_update_attempts", UINT, Some("3"), "Retries of revision-guarded port updates (macvlan)."),
    // ---- [vhostuser]
    opt("vhostuser", "mount_point", STR, Some("/var/cni/vhostuser"), "Where vhost-user sockets are created."),
    opt("vhostuser", "ovs_vhu_path", STR, Some("/var/run/openvswitch/"), "Where OVS keeps vhost-user sockets."),
    // ---- [prometheus_exporter]
    opt("prometheus_exporter", "controller_exporter_port", PORTINT, Some("9654"), "Port of the controller's Prometheus exporter."),
    opt("prometheus_exporter", "cni_exporter_port", PORTINT, Some("9655"), "Port of the CNI daemon's Prometheus exporter."),
    // ---- [vif_pool]
    opt("vif_pool", "ports_pool_max", UINT, Some("0"), "Maximum ports per pool (0: unlimited)."),
    opt("vif_pool", "ports_pool_min", UINT, Some("5"), "Target minimum ports per pool."),
    opt("vif_pool", "ports_pool_batch", UINT, Some("10"), "Ports created per bulk request."),
    opt("vif_pool", "ports_pool_update_frequency", UINT, Some("20"), "Minimum seconds between pool updates."),
    opt("vif_pool", "pools_vif_drivers", DICT, Some(""), "pool-driver:vif-driver mapping (deprecated: use vif_pool_mapping).").for_removal(),
    opt("vif_pool", "vif_pool_mapping", DICT, Some(""), "vif-driver:pool-driver mapping for multi_pool."),
    opt("vif_pool", "ports_pool_cooldown", UINT, Some("30"), "Seconds a released port waits before it is handed out again (IP/ARP caches).").from(RS),
    opt("vif_pool", "ports_pool_max_concurrent_bulk", OptKind::Int { min: Some(1), max: None }, Some("4"), "Bulk port creations in flight at once (all pools).").from(RS),
    opt("vif_pool", "ports_pool_janitor_interval", UINT, Some("90"), "Seconds between janitor passes deleting tagged ports nothing owns (0 disables).").from(RS),
    opt("vif_pool", "ports_pool_janitor_min_age", UINT, Some("600"), "Minimum age (s) of an unowned tagged port before the janitor puts it back in its pool (bound) or deletes it; recovery defers younger ports of a pool with a bulk creation in flight.").from(RS),
    opt("vif_pool", "port_activation_batch", OptKind::Int { min: Some(1), max: None }, Some("100"), "Port IDs per batched activation check (one filtered list request).").from(RS),
    opt("vif_pool", "port_activation_max_interval", UINT, Some("5"), "Longest interval (s) between activation checks while nothing changes.").from(RS),
    opt("vif_pool", "port_activation_timeout", UINT, Some("90"), "Seconds after which a port not yet ACTIVE is reported (ActivatePortFailed event).").from(RS),
    // ---- caching groups
    opt("node_driver_caching", "caching", BOOL, Some("true"), "Cache the pod_vif label of nodes."),
    opt("node_driver_caching", "cache_time", UINT, Some("3600"), "TTL of that cache (s)."),
    opt("subnet_caching", "caching", BOOL, Some("true"), "Cache subnet lookups."),
    opt("subnet_caching", "cache_time", UINT, Some("3600"), "TTL of that cache (s)."),
    opt("nodes_caching", "caching", BOOL, Some("true"), "Cache node (trunk) lookups."),
    opt("nodes_caching", "cache_time", UINT, Some("3600"), "TTL of that cache (s)."),
    // ---- [pool_manager]
    opt("pool_manager", "sock_file", STR, Some("/run/kuryr/kuryr_manage.sock"), "Unix socket of the pool manager."),
    // ---- [health_server] / [cni_health_server]
    opt("health_server", "port", PORTINT, Some("8082"), "Port of the controller health server."),
    opt("cni_health_server", "port", PORTINT, Some("8090"), "Port of the CNI daemon health server."),
    opt("cni_health_server", "max_memory_usage", OptKind::Int { min: Some(-1), max: None }, Some("-1"), "Memory limit (MiB) before unhealthy; -1 disables."),
    opt("cni_health_server", "cg_path", STR, Some("/sys/fs/cgroup/memory/system.slice/kuryr-cni.service"), "cgroup of the CNI daemon (non-containerized)."),
    // ---- [namespace_subnet]
    opt("namespace_subnet", "pod_router", STR, None, "Router namespace subnets are attached to."),
    opt("namespace_subnet", "pod_subnet_pool", STR, None, "Subnet pool namespace subnets are allocated from."),
    // ---- [nested_dpdk]
    opt("nested_dpdk", "dpdk_driver", STR, Some("uio_pci_generic"), "Driver DPDK devices are bound to."),
    opt("nested_dpdk", "pci_mount_point", STR, Some("/var/pci_address"), "Directory with the PCI addresses for DPDK applications."),
    // ---- [binding] (kuryr-lib)
    opt("binding", "veth_dst_prefix", STR, Some("eth"), "Name prefix of the container end of veths (unused).").from(LIB),
    opt("binding", "default_driver", STR, Some("kuryr.lib.binding.drivers.veth"), "kuryr-lib binding driver (unused).").from(LIB).deprecated(&["driver"]),
    opt("binding", "enabled_drivers", LIST, Some("kuryr.lib.binding.drivers.veth"), "kuryr-lib binding drivers (unused).").from(LIB),
    opt("binding", "link_iface", STR, Some(""), "VM interface nested links are created on (empty: from the trunk port)."),
    // ---- [neutron] (kuryr-lib)
    opt("neutron", "enable_dhcp", STR, Some("True"), "Enable DHCP on Neutron subnets (unused).").from(LIB),
    opt("neutron", "default_subnetpool_v4", STR, Some("kuryr"), "Default IPv4 subnet pool name (unused).").from(LIB),
    opt("neutron", "default_subnetpool_v6", STR, Some("kuryr6"), "Default IPv6 subnet pool name (unused).").from(LIB),
    opt("neutron", "vif_plugging_is_fatal", BOOL, Some("false"), "Unused.").from(LIB),
    opt("neutron", "vif_plugging_timeout", INT, Some("0"), "Unused.").from(LIB),
    opt("neutron", "region_name", STR, None, "Region of the Neutron (and Octavia) endpoints.").from(LIB),
    opt("neutron", "endpoint_type", OptKind::Choice(&["public", "admin", "internal"]), Some("public"), "Catalog interface of the endpoints.").from(LIB),
    opt("neutron", "endpoint_override", STR, None, "Neutron's URL with its version (e.g. https://neutron.example.org:9696/v2.0), used instead of the catalog's (keystoneauth's adapter option; a kuryr-rs addition).").from(KS),
    // ---- [neutron] keystoneauth session options
    opt("neutron", "cafile", STR, None, "CA bundle for HTTPS to OpenStack.").from(KS),
    opt("neutron", "certfile", STR, None, "Client certificate for OpenStack.").from(KS),
    opt("neutron", "keyfile", STR, None, "Client key for OpenStack.").from(KS),
    opt("neutron", "insecure", BOOL, Some("false"), "Do not verify OpenStack HTTPS certificates.").from(KS),
    opt("neutron", "timeout", FLOAT, None, "HTTP timeout of OpenStack requests (s).").from(KS),
    opt("neutron", "collect_timing", BOOL, Some("false"), "Collect per-request timing (unused).").from(KS),
    opt("neutron", "split_loggers", BOOL, Some("false"), "Split request logging (unused).").from(KS),
    // ---- [neutron] keystoneauth auth options (auth_type and the plugins' options)
    opt("neutron", "auth_type", STR, None, "keystoneauth plugin (password, v3password, token, v3applicationcredential …).").from(KS).deprecated(&["auth_plugin"]),
    opt("neutron", "auth_section", STR, None, "Group to read the auth plugin options from.").from(KS),
    opt("neutron", "auth_url", STR, None, "Keystone URL.").from(KS),
    opt("neutron", "system_scope", STR, None, "System scope.").from(KS),
    opt("neutron", "domain_id", STR, None, "Domain ID to scope to.").from(KS),
    opt("neutron", "domain_name", STR, None, "Domain name to scope to.").from(KS),
    opt("neutron", "project_id", STR, None, "Project ID to scope to.").from(KS).deprecated(&["tenant_id"]),
    opt("neutron", "project_name", STR, None, "Project name to scope to.").from(KS).deprecated(&["tenant_name"]),
    opt("neutron", "project_domain_id", STR, None, "Domain ID of the project.").from(KS),
    opt("neutron", "project_domain_name", STR, None, "Domain name of the project.").from(KS),
    opt("neutron", "trust_id", STR, None, "Trust ID.").from(KS),
    opt("neutron", "default_domain_id", STR, None, "Domain ID for user and project.").from(KS),
    opt("neutron", "default_domain_name", STR, None, "Domain name for user and project.").from(KS),
    opt("neutron", "user_id", STR, None, "User ID.").from(KS),
    opt("neutron", "username", STR, None, "User name.").from(KS).deprecated(&["user_name"]),
    opt("neutron", "user_domain_id", STR, None, "Domain ID of the user.").from(KS),
    opt("neutron", "user_domain_name", STR, None, "Domain name of the user.").from(KS),
    opt("neutron", "password", STR, None, "Password.").from(KS).secret(),
    opt("neutron", "token", STR, None, "Token (token plugins).").from(KS).secret(),
    opt("neutron", "application_credential_id", STR, None, "Application credential ID.").from(KS),
    opt("neutron", "application_credential_name", STR, None, "Application credential name.").from(KS),
    opt("neutron", "application_credential_secret", STR, None, "Application credential secret.").from(KS).secret(),
];

/// Groups that upstream libraries (os-vif, oslo.privsep, oslo.cache, oslo.concurrency) read from
/// the same file; kuryr-rs accepts and ignores them (one warning per group).
pub static IGNORED_GROUPS: &[&str] = &[
    "cache",
    "vif_plug_ovs_privileged",
    "vif_plug_linux_bridge_privileged",
    "os_vif_ovs",
    "os_vif_linux_bridge",
    "os_vif_privileged",
    "privsep",
    "privsep_osbrick",
    "oslo_concurrency",
    "keystone_authtoken",
];

/// Names of the keystoneauth auth options (the ones `[neutron] auth_section` may move to another
/// group).
pub fn is_auth_option(name: &str) -> bool {
    OPTIONS.iter().any(|o| {
        o.group == "neutron"
            && o.source == OptSource::Keystoneauth
            && (o.name == name || o.deprecated_names.contains(&name))
            && !matches!(
                o.name,
                "cafile"
                    | "endpoint_override"
                    | "certfile"
                    | "keyfile"
                    | "insecure"
                    | "timeout"
                    | "collect_timing"
                    | "split_loggers"
                    | "auth_section"
            )
    })
}

/// Looks up an option by group and current name.
pub fn find(group: &str, name: &str) -> Option<&'static OptSpec> {
    OPTIONS.iter().find(|o| o.group == group && o.name == name)
}

/// Looks up an option by group and a name that may be deprecated; returns the spec and whether
/// the name was a deprecated one.
pub fn find_any(group: &str, name: &str) -> Option<(&'static OptSpec, bool)> {
    OPTIONS.iter().find_map(|o| {
        if o.group != group {
            None
        } else if o.name == name {
            Some((o, false))
        } else if o.deprecated_names.contains(&name) {
            Some((o, true))
        } else {
            None
        }
    })
}

/// `true` if any option is registered in `group`.
pub fn is_known_group(group: &str) -> bool {
    OPTIONS.iter().any(|o| o.group == group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::parse_value;

    #[test]
    fn every_default_parses_as_its_type() {
        for o in OPTIONS {
            if let Some(d) = o.default {
                if d.is_empty() && o.kind.empty_means_unset() {
                    panic!("[{}] {} has an empty default", o.group, o.name);
                }
                assert!(
                    parse_value(o.kind, d).is_some(),
                    "[{}] {} default {d:?} is not {}",
                    o.group,
                    o.name,
                    o.kind.expected()
                );
            }
        }
    }

    #[test]
    fn names_are_unique_and_normalised() {
        for (i, a) in OPTIONS.iter().enumerate() {
            assert_eq!(a.name, crate::ini::normalize_key(a.name));
            for b in &OPTIONS[i + 1..] {
                assert!(
                    !(a.group == b.group && a.name == b.name),
                    "duplicate [{}] {}",
                    a.group,
                    a.name
                );
            }
        }
    }

    #[test]
    fn auth_options() {
        assert!(is_auth_option("username"));
        assert!(is_auth_option("user_name"));
        assert!(is_auth_option("auth_url"));
        assert!(!is_auth_option("cafile"));
        assert!(!is_auth_option("region_name"));
    }
}
