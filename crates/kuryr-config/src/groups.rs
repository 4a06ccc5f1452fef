//! Typed views of the option groups, one struct per upstream group, with upstream's option names
//! as field names. Built from a [`Resolved`] (so every field has been type-checked already).

use crate::resolve::Resolved;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

fn secs(r: &Resolved, g: &str, n: &str) -> Duration {
    Duration::from_secs(u64::try_from(r.int(g, n)).unwrap_or(0))
}
fn millis(r: &Resolved, g: &str, n: &str) -> Duration {
    Duration::from_millis(u64::try_from(r.int(g, n)).unwrap_or(0))
}
fn uint(r: &Resolved, g: &str, n: &str) -> u32 {
    u32::try_from(r.int(g, n)).unwrap_or(u32::MAX)
}
fn port(r: &Resolved, g: &str, n: &str) -> u16 {
    u16::try_from(r.int(g, n)).unwrap_or(0)
}

/// `[DEFAULT]`: the oslo.log options kuryr-rs honours.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DefaultConf {
    /// `debug`: log at debug level.
    pub debug: bool,
    /// `log_file`.
    pub log_file: Option<String>,
    /// `log_dir`.
    pub log_dir: Option<String>,
    /// `use_stderr`.
    pub use_stderr: bool,
    /// `use_json`.
    pub use_json: bool,
    /// `use_syslog`.
    pub use_syslog: bool,
    /// `use_journal`.
    pub use_journal: bool,
    /// `default_log_levels` (`logger=LEVEL` items).
    pub default_log_levels: Vec<String>,
}

impl DefaultConf {
    fn from_resolved(r: &Resolved) -> Self {
        let g = "DEFAULT";
        DefaultConf {
            debug: r.bool(g, "debug"),
            log_file: r.str_opt(g, "log_file"),
            log_dir: r.str_opt(g, "log_dir"),
            use_stderr: r.bool(g, "use_stderr"),
            use_json: r.bool(g, "use_json"),
            use_syslog: r.bool(g, "use_syslog"),
            use_journal: r.bool(g, "use_journal"),
            default_log_levels: r.list(g, "default_log_levels"),
        }
    }
}

/// `[cni_daemon]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CniDaemonConf {
    /// `bind_address` of the daemon's API: `unix:PATH` (default `unix:/run/kuryr/cni.sock`)
    /// or upstream's `host:port`.
    pub bind_address: String,
    /// `worker_num`.
    pub worker_num: u32,
    /// `vif_annotation_timeout`: how long CNI ADD waits for the VIFs (and their activation).
    pub vif_annotation_timeout: Duration,
    /// `pyroute2_timeout`: netlink operation timeout.
    pub pyroute2_timeout: Duration,
    /// `docker_mode`.
    pub docker_mode: bool,
    /// `netns_proc_dir`.
    pub netns_proc_dir: Option<String>,
    /// `cni_failures_count`.
    pub cni_failures_count: u32,
}

/// `[kubernetes]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KubernetesConf {
    /// `api_root`; empty means "in-cluster" (`KUBERNETES_SERVICE_HOST`/`_PORT_HTTPS`).
    pub api_root: String,
    /// `ssl_client_crt_file`.
    pub ssl_client_crt_file: Option<String>,
    /// `ssl_client_key_file`.
    pub ssl_client_key_file: Option<String>,
    /// `ssl_ca_crt_file`.
    pub ssl_ca_crt_file: Option<String>,
    /// `ssl_verify_server_crt`.
    pub ssl_verify_server_crt: bool,
    /// `token_file`.
    pub token_file: Option<String>,
    /// `pod_project_driver`.
    pub pod_project_driver: String,
    /// `service_project_driver`.
    pub service_project_driver: String,
    /// `namespace_project_driver`.
    pub namespace_project_driver: String,
    /// `network_policy_project_driver`.
    pub network_policy_project_driver: String,
    /// `pod_subnets_driver`.
    pub pod_subnets_driver: String,
    /// `service_subnets_driver`.
    pub service_subnets_driver: String,
    /// `pod_security_groups_driver`.
    pub pod_security_groups_driver: String,
    /// `service_security_groups_driver`.
    pub service_security_groups_driver: String,
    /// `pod_vif_driver`.
    pub pod_vif_driver: String,
    /// `endpoints_lbaas_driver`.
    pub endpoints_lbaas_driver: String,
    /// `endpoints_driver_octavia_provider`.
    pub endpoints_driver_octavia_provider: String,
    /// `vif_pool_driver`.
    pub vif_pool_driver: String,
    /// `nodes_subnets_driver`.
    pub nodes_subnets_driver: String,
    /// `port_debug`.
    pub port_debug: bool,
    /// `service_public_ip_driver`.
    pub service_public_ip_driver: String,
    /// `enable_manager`.
    pub enable_manager: bool,
    /// `watch_retry_timeout`.
    pub watch_retry_timeout: Duration,
    /// `watch_connection_timeout`.
    pub watch_connection_timeout: Duration,
    /// `watch_read_timeout`.
    pub watch_read_timeout: Duration,
    /// `watch_reconcile_period` (zero disables).
    pub watch_reconcile_period: Duration,
    /// `enabled_handlers`.
    pub enabled_handlers: Vec<String>,
    /// `controller_ha`.
    pub controller_ha: bool,
    /// `controller_ha_elector_port`.
    pub controller_ha_elector_port: u16,
    /// `network_policy_driver`.
    pub network_policy_driver: String,
    /// `multi_vif_drivers`.
    pub multi_vif_drivers: Vec<String>,
    /// `additional_ifname_prefix`.
    pub additional_ifname_prefix: String,
    /// `use_events`.
    pub use_events: bool,
}

/// `[neutron_defaults]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NeutronDefaultsConf {
    /// `project`.
    pub project: Option<String>,
    /// `pod_subnet`.
    pub pod_subnet: Option<String>,
    /// `pod_security_groups`.
    pub pod_security_groups: Vec<String>,
    /// `ovs_bridge`.
    pub ovs_bridge: Option<String>,
    /// `service_subnet`.
    pub service_subnet: Option<String>,
    /// `external_svc_net`.
    pub external_svc_net: Option<String>,
    /// `external_svc_subnet`.
    pub external_svc_subnet: Option<String>,
    /// `network_device_mtu` (0: Neutron's).
    pub network_device_mtu: u32,
    /// `lbaas_activation_timeout`.
    pub lbaas_activation_timeout: Duration,
    /// `subnet_mapping` (driverType → subnet ID).
    pub subnet_mapping: BTreeMap<String, String>,
    /// `resource_tags`.
    pub resource_tags: Vec<String>,
    /// `cluster_tag` (kuryr-rs): tag of this cluster's resources, added to `resource_tags`.
    pub cluster_tag: Option<String>,
    /// `max_sg_rules_per_policy` (kuryr-rs): most rules one NetworkPolicy translates to (0: any).
    pub max_sg_rules_per_policy: u32,
}

/// `[octavia_defaults]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OctaviaDefaultsConf {
    /// `member_mode` (`L2`/`L3`).
    pub member_mode: String,
    /// `enforce_sg_rules`.
    pub enforce_sg_rules: bool,
    /// `lb_algorithm`.
    pub lb_algorithm: String,
    /// `timeout_client_data` (zero: Octavia's default).
    pub timeout_client_data: Duration,
    /// `timeout_member_data` (zero: Octavia's default).
    pub timeout_member_data: Duration,
}

/// `[pod_vif_nested]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PodVifNestedConf {
    /// `worker_nodes_subnets`.
    pub worker_nodes_subnets: Vec<String>,
    /// `rev_update_attempts`.
    pub rev_update_attempts: u32,
}

/// `[vhostuser]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VhostUserConf {
    /// `mount_point`.
    pub mount_point: String,
    /// `ovs_vhu_path`.
    pub ovs_vhu_path: String,
}

/// `[prometheus_exporter]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrometheusExporterConf {
    /// `controller_exporter_port`.
    pub controller_exporter_port: u16,
    /// `cni_exporter_port`.
    pub cni_exporter_port: u16,
}

/// `[vif_pool]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VifPoolConf {
    /// `ports_pool_max` (0: unlimited).
    pub ports_pool_max: u32,
    /// `ports_pool_min`.
    pub ports_pool_min: u32,
    /// `ports_pool_batch`.
    pub ports_pool_batch: u32,
    /// `ports_pool_update_frequency`.
    pub ports_pool_update_frequency: Duration,
    /// `pools_vif_drivers` (deprecated; pool driver → vif driver).
    pub pools_vif_drivers: BTreeMap<String, String>,
    /// `vif_pool_mapping` (vif driver → pool driver).
    pub vif_pool_mapping: BTreeMap<String, String>,
    /// `ports_pool_cooldown` (kuryr-rs): wait before a released port is reused.
    pub ports_pool_cooldown: Duration,
    /// `ports_pool_max_concurrent_bulk` (kuryr-rs): bulk creations in flight at once.
    pub ports_pool_max_concurrent_bulk: u32,
    /// `ports_pool_janitor_interval` (kuryr-rs; zero: janitor off).
    pub ports_pool_janitor_interval: Duration,
    /// `ports_pool_janitor_min_age` (kuryr-rs).
    pub ports_pool_janitor_min_age: Duration,
    /// `port_activation_batch` (kuryr-rs): port IDs per activation list request.
    pub port_activation_batch: u32,
    /// `port_activation_max_interval` (kuryr-rs).
    pub port_activation_max_interval: Duration,
    /// `port_activation_timeout` (kuryr-rs).
    pub port_activation_timeout: Duration,
}

/// `[node_driver_caching]`, `[subnet_caching]`, `[nodes_caching]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CachingConf {
    /// `caching`.
    pub caching: bool,
    /// `cache_time`.
    pub cache_time: Duration,
}

/// `[pool_manager]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolManagerConf {
    /// `sock_file`.
    pub sock_file: String,
}

/// `[health_server]` (controller probes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthServerConf {
    /// `port`.
    pub port: u16,
}

/// `[cni_health_server]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CniHealthServerConf {
    /// `port`.
    pub port: u16,
    /// `max_memory_usage` in MiB; `None` when disabled (`-1`).
    pub max_memory_usage: Option<u64>,
    /// `cg_path`.
    pub cg_path: String,
}

/// `[namespace_subnet]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamespaceSubnetConf {
    /// `pod_router`.
    pub pod_router: Option<String>,
    /// `pod_subnet_pool`.
    pub pod_subnet_pool: Option<String>,
}

/// `[nested_dpdk]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NestedDpdkConf {
    /// `dpdk_driver`.
    pub dpdk_driver: String,
    /// `pci_mount_point`.
    pub pci_mount_point: String,
}

/// `[binding]` (kuryr-lib): the one option kuryr-rs uses.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BindingConf {
    /// `link_iface`: VM interface that nested links hang off (empty: found from the trunk port).
    pub link_iface: String,
}

/// `[neutron]`: endpoint selection and keystoneauth session options. The auth plugin options
/// are in [`crate::auth`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NeutronConf {
    /// `region_name`.
    pub region_name: Option<String>,
    /// `endpoint_type` (`public`, `admin`, `internal`).
    pub endpoint_type: String,
    /// `endpoint_override`: Neutron's URL instead of the catalog's.
    pub endpoint_override: Option<String>,
    /// `cafile`.
    pub cafile: Option<String>,
    /// `certfile`.
    pub certfile: Option<String>,
    /// `keyfile`.
    pub keyfile: Option<String>,
    /// `insecure`.
    pub insecure: bool,
    /// `timeout` (seconds).
    pub timeout: Option<Duration>,
}

/// Every typed group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Groups {
    /// `[DEFAULT]`.
    pub default: DefaultConf,
    /// `[cni_daemon]`.
    pub cni_daemon: CniDaemonConf,
    /// `[kubernetes]`.
    pub kubernetes: KubernetesConf,
    /// `[neutron_defaults]`.
    pub neutron_defaults: NeutronDefaultsConf,
    /// `[octavia_defaults]`.
    pub octavia_defaults: OctaviaDefaultsConf,
    /// `[pod_vif_nested]`.
    pub pod_vif_nested: PodVifNestedConf,
    /// `[vhostuser]`.
    pub vhostuser: VhostUserConf,
    /// `[prometheus_exporter]`.
    pub prometheus_exporter: PrometheusExporterConf,
    /// `[vif_pool]`.
    pub vif_pool: VifPoolConf,
    /// `[node_driver_caching]`.
    pub node_driver_caching: CachingConf,
    /// `[subnet_caching]`.
    pub subnet_caching: CachingConf,
    /// `[nodes_caching]`.
    pub nodes_caching: CachingConf,
    /// `[pool_manager]`.
    pub pool_manager: PoolManagerConf,
    /// `[health_server]`.
    pub health_server: HealthServerConf,
    /// `[cni_health_server]`.
    pub cni_health_server: CniHealthServerConf,
    /// `[namespace_subnet]`.
    pub namespace_subnet: NamespaceSubnetConf,
    /// `[nested_dpdk]`.
    pub nested_dpdk: NestedDpdkConf,
    /// `[binding]`.
    pub binding: BindingConf,
    /// `[neutron]`.
    pub neutron: NeutronConf,
}

fn caching(r: &Resolved, g: &str) -> CachingConf {
    CachingConf {
        caching: r.bool(g, "caching"),
        cache_time: secs(r, g, "cache_time"),
    }
}

impl Groups {
    /// Builds every typed group from resolved values.
    pub fn from_resolved(r: &Resolved) -> Self {
        let k = "kubernetes";
        let nd = "neutron_defaults";
        let cd = "cni_daemon";
        Groups {
            default: DefaultConf::from_resolved(r),
            cni_daemon: CniDaemonConf {
                bind_address: r.string(cd, "bind_address"),
                worker_num: uint(r, cd, "worker_num"),
                vif_annotation_timeout: secs(r, cd, "vif_annotation_timeout"),
                pyroute2_timeout: secs(r, cd, "pyroute2_timeout"),
                docker_mode: r.bool(cd, "docker_mode"),
                netns_proc_dir: r.str_opt(cd, "netns_proc_dir"),
                cni_failures_count: uint(r, cd, "cni_failures_count"),
            },
            kubernetes: KubernetesConf {
                api_root: r.string(k, "api_root"),
                ssl_client_crt_file: r.str_opt(k, "ssl_client_crt_file"),
                ssl_client_key_file: r.str_opt(k, "ssl_client_key_file"),
                ssl_ca_crt_file: r.str_opt(k, "ssl_ca_crt_file"),
                ssl_verify_server_crt: r.bool(k, "ssl_verify_server_crt"),
                token_file: r.str_opt(k, "token_file"),
                pod_project_driver: r.string(k, "pod_project_driver"),
                service_project_driver: r.string(k, "service_project_driver"),
                namespace_project_driver: r.string(k, "namespace_project_driver"),
                network_policy_project_driver: r.string(k, "network_policy_project_driver"),
                pod_subnets_driver: r.string(k, "pod_subnets_driver"),
                service_subnets_driver: r.string(k, "service_subnets_driver"),
                pod_security_groups_driver: r.string(k, "pod_security_groups_driver"),
                service_security_groups_driver: r.string(k, "service_security_groups_driver"),
                pod_vif_driver: r.string(k, "pod_vif_driver"),
                endpoints_lbaas_driver: r.string(k, "endpoints_lbaas_driver"),
                endpoints_driver_octavia_provider: r.string(k, "endpoints_driver_octavia_provider"),
                vif_pool_driver: r.string(k, "vif_pool_driver"),
                nodes_subnets_driver: r.string(k, "nodes_subnets_driver"),
                port_debug: r.bool(k, "port_debug"),
                service_public_ip_driver: r.string(k, "service_public_ip_driver"),
                enable_manager: r.bool(k, "enable_manager"),
                watch_retry_timeout: secs(r, k, "watch_retry_timeout"),
                watch_connection_timeout: secs(r, k, "watch_connection_timeout"),
                watch_read_timeout: secs(r, k, "watch_read_timeout"),
                watch_reconcile_period: secs(r, k, "watch_reconcile_period"),
                enabled_handlers: r.list(k, "enabled_handlers"),
                controller_ha: r.bool(k, "controller_ha"),
                controller_ha_elector_port: port(r, k, "controller_ha_elector_port"),
                network_policy_driver: r.string(k, "network_policy_driver"),
                multi_vif_drivers: r.list(k, "multi_vif_drivers"),
                additional_ifname_prefix: r.string(k, "additional_ifname_prefix"),
                use_events: r.bool(k, "use_events"),
            },
            neutron_defaults: NeutronDefaultsConf {
                project: r.str_opt(nd, "project").filter(|s| !s.is_empty()),
                pod_subnet: r.str_opt(nd, "pod_subnet").filter(|s| !s.is_empty()),
                pod_security_groups: r.list(nd, "pod_security_groups"),
                ovs_bridge: r.str_opt(nd, "ovs_bridge").filter(|s| !s.is_empty()),
                service_subnet: r.str_opt(nd, "service_subnet").filter(|s| !s.is_empty()),
                external_svc_net: r.str_opt(nd, "external_svc_net").filter(|s| !s.is_empty()),
                external_svc_subnet: r.str_opt(nd, "external_svc_subnet").filter(|s| !s.is_empty()),
                network_device_mtu: uint(r, nd, "network_device_mtu"),
                lbaas_activation_timeout: secs(r, nd, "lbaas_activation_timeout"),
                subnet_mapping: r.dict(nd, "subnet_mapping"),
                resource_tags: r.list(nd, "resource_tags"),
                cluster_tag: r.str_opt(nd, "cluster_tag").filter(|s| !s.is_empty()),
                max_sg_rules_per_policy: uint(r, nd, "max_sg_rules_per_policy"),
            },
            octavia_defaults: OctaviaDefaultsConf {
                member_mode: r.string("octavia_defaults", "member_mode"),
                enforce_sg_rules: r.bool("octavia_defaults", "enforce_sg_rules"),
                lb_algorithm: r.string("octavia_defaults", "lb_algorithm"),
                timeout_client_data: millis(r, "octavia_defaults", "timeout_client_data"),
                timeout_member_data: millis(r, "octavia_defaults", "timeout_member_data"),
            },
            pod_vif_nested: PodVifNestedConf {
                worker_nodes_subnets: r.list("pod_vif_nested", "worker_nodes_subnets"),
                rev_update_attempts: uint(r, "pod_vif_nested", "rev_update_attempts"),
            },
            vhostuser: VhostUserConf {
                mount_point: r.string("vhostuser", "mount_point"),
                ovs_vhu_path: r.string("vhostuser", "ovs_vhu_path"),
            },
            prometheus_exporter: PrometheusExporterConf {
                controller_exporter_port: port(r, "prometheus_exporter", "controller_exporter_port"),
                cni_exporter_port: port(r, "prometheus_exporter", "cni_exporter_port"),
            },
            vif_pool: VifPoolConf {
                ports_pool_max: uint(r, "vif_pool", "ports_pool_max"),
                ports_pool_min: uint(r, "vif_pool", "ports_pool_min"),
                ports_pool_batch: uint(r, "vif_pool", "ports_pool_batch"),
                ports_pool_update_frequency: secs(r, "vif_pool", "ports_pool_update_frequency"),
                pools_vif_drivers: r.dict("vif_pool", "pools_vif_drivers"),
                vif_pool_mapping: r.dict("vif_pool", "vif_pool_mapping"),
                ports_pool_cooldown: secs(r, "vif_pool", "ports_pool_cooldown"),
                ports_pool_max_concurrent_bulk: uint(r, "vif_pool", "ports_pool_max_concurrent_bulk"),
                ports_pool_janitor_interval: secs(r, "vif_pool", "ports_pool_janitor_interval"),
                ports_pool_janitor_min_age: secs(r, "vif_pool", "ports_pool_janitor_min_age"),
                port_activation_batch: uint(r, "vif_pool", "port_activation_batch"),
                port_activation_max_interval: secs(r, "vif_pool", "port_activation_max_interval"),
                port_activation_timeout: secs(r, "vif_pool", "port_activation_timeout"),
            },
            node_driver_caching: caching(r, "node_driver_caching"),
            subnet_caching: caching(r, "subnet_caching"),
            nodes_caching: caching(r, "nodes_caching"),
            pool_manager: PoolManagerConf {
                sock_file: r.string("pool_manager", "sock_file"),
            },
            health_server: HealthServerConf {
                port: port(r, "health_server", "port"),
            },
            cni_health_server: CniHealthServerConf {
                port: port(r, "cni_health_server", "port"),
                max_memory_usage: u64::try_from(r.int("cni_health_server", "max_memory_usage")).ok(),
                cg_path: r.string("cni_health_server", "cg_path"),
            },
            namespace_subnet: NamespaceSubnetConf {
                pod_router: r
                    .str_opt("namespace_subnet", "pod_router")
                    .filter(|s| !s.is_empty()),
                pod_subnet_pool: r
                    .str_opt("namespace_subnet", "pod_subnet_pool")
                    .filter(|s| !s.is_empty()),
            },
            nested_dpdk: NestedDpdkConf {
                dpdk_driver: r.string("nested_dpdk", "dpdk_driver"),
                pci_mount_point: r.string("nested_dpdk", "pci_mount_point"),
            },
            binding: BindingConf {
                link_iface: r.string("binding", "link_iface"),
            },
            neutron: NeutronConf {
                region_name: r.str_opt("neutron", "region_name").filter(|s| !s.is_empty()),
                endpoint_type: r.string("neutron", "endpoint_type"),
                endpoint_override: r
                    .str_opt("neutron", "endpoint_override")
                    .filter(|s| !s.is_empty()),
                cafile: r.str_opt("neutron", "cafile").filter(|s| !s.is_empty()),
                certfile: r.str_opt("neutron", "certfile").filter(|s| !s.is_empty()),
                keyfile: r.str_opt("neutron", "keyfile").filter(|s| !s.is_empty()),
                insecure: r.bool("neutron", "insecure"),
                timeout: r
                    .float_opt("neutron", "timeout")
                    .and_then(|t| Duration::try_from_secs_f64(t).ok()),
            },
        }
    }
}
