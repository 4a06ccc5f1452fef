//! [`PoolSettings`]: the executor's options read from `kuryr.conf` (`[kubernetes]
//! vif_pool_driver`/`port_debug`, `[vif_pool]`, `[neutron_defaults] resource_tags`/
//! `cluster_tag`/`ovs_bridge`), validated before anything is touched.

use std::time::Duration;

use kuryr_core::{ConfigError, PoolConfig, TagPolicy, activation::ActivationConfig, ownership::Ownership};

/// `[kubernetes] vif_pool_driver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    /// `noop`: one port created per pod, deleted on release.
    Noop,
    /// `neutron`: ports pooled per (host, project, network); `nested` too, with the ports
    /// VLAN subports of the node VMs' trunks ([`PoolSettings::nested`]).
    Neutron,
}

/// A pool option is invalid.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// `vif_pool_driver` names a driver kuryr-rs does not have (yet).
    #[error(
        "[kubernetes] vif_pool_driver = {0}: not supported (expected noop, neutron, nested or multi_pool)"
    )]
    UnknownDriver(String),
    /// The multi pool's mapping is missing or maps what does not go together.
    #[error("[vif_pool] vif_pool_mapping: {0}")]
    Multi(String),
    /// The pool driver and the pod VIF driver do not go together.
    #[error("[kubernetes] vif_pool_driver = {pool} with pod_vif_driver = {vif}: {why}")]
    Mismatch {
        /// `vif_pool_driver`.
        pool: String,
        /// `pod_vif_driver`.
        vif: String,
        /// What goes together.
        why: &'static str,
    },
    /// Upstream's sanity checks (and kuryr-rs's own) failed.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Pool(Vec<ConfigError>),
    /// A tag is not a valid Neutron tag.
    #[error("[neutron_defaults] resource_tags / cluster_tag")]
    Tags(#[source] ConfigError),
}

/// The executor's options.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// Pooling or not.
    pub mode: PoolMode,
    /// Pool sizing, cool-down, bulk concurrency, `port_debug`.
    pub pool: PoolConfig,
    /// Tags put on created ports and required on recovered or collected ones: this cluster's
    /// identity (never empty in a running controller: [`kuryr_runtime::identity`]).
    pub tags: TagPolicy,
    /// The one project pods' ports are made in (`[neutron_defaults] project` with
    /// `pod_project_driver = default`): port listings are filtered by it and nothing outside
    /// it is ours. `None` with the `annotation` driver (projects per namespace: tags decide).
    pub project: Option<String>,
    /// `[neutron_defaults] ovs_bridge`: the VIF's bridge when the port does not name one.
    pub ovs_bridge: Option<String>,
    /// Period of the janitor (zero: off).
    pub janitor_interval: Duration,
    /// Minimum age of an unowned tagged port before the janitor adopts or deletes it (and the
    /// settle age of recovery).
    pub janitor_min_age: Duration,
    /// Batched activation checks.
    pub activation: ActivationConfig,
    /// `nested-vlan` pools (`vif_pool_driver = nested`): the worker VMs' subnets
    /// (`[pod_vif_nested] worker_nodes_subnets`) where their trunks' parents are found.
    pub nested: Option<Vec<String>>,
    /// The multi pool (`vif_pool_driver = multi_pool`, or any `[vif_pool] vif_pool_mapping`:
    /// upstream always routes through it): pod VIF driver → pool driver.
    pub multi: Option<MultiSettings>,
    /// `[kubernetes] pod_vif_driver` (without the multi pool: the one driver of every node).
    pub vif_driver: String,
    /// `[pod_vif_nested] rev_update_attempts`: tries of one revision-guarded update of a VM
    /// port's allowed address pairs (nested-macvlan).
    pub pair_update_attempts: u32,
}

impl PoolSettings {
    /// The ownership test of these settings ([`kuryr_core::ownership`]).
    pub fn ownership(&self) -> Ownership<'_> {
        Ownership::new(&self.tags, self.project.as_deref())
    }
}

/// The pod VIF drivers of pods inside node VMs (found by `[pod_vif_nested]
/// worker_nodes_subnets`).
pub const NESTED_VIF_DRIVERS: &[&str] = &["nested-vlan", "nested-macvlan"];

/// The multi pool's options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultiSettings {
    /// Pod VIF driver → pool driver (`vif_pool_mapping`, or `pools_vif_drivers` inverted).
    pub mapping: std::collections::BTreeMap<String, String>,
    /// The pod VIF driver of nodes without the `pod_vif` label (`[kubernetes] pod_vif_driver`).
    pub default_driver: String,
    /// How long a node's label is trusted (`[node_driver_caching] cache_time`).
    pub cache_time: Duration,
}

/// The pool drivers each pod VIF driver can be served by (upstream's valid combinations that
/// kuryr-rs implements).
const VALID_PAIRS: &[(&str, &str)] = &[
    ("neutron-vif", "neutron"),
    ("neutron-vif", "noop"),
    ("nested-vlan", "nested"),
    // Upstream's combination: a port per pod, its pairs added to the VM's port.
    ("nested-macvlan", "noop"),
    // kuryr-rs's: pooled ports, their pairs on their VM's port already.
    ("nested-macvlan", "nested"),
];

fn multi_settings(config: &kuryr_config::Config) -> Result<Option<MultiSettings>, SettingsError> {
    let k = &config.kubernetes;
    let vp = &config.vif_pool;
    let mapping: std::collections::BTreeMap<String, String> = if !vp.vif_pool_mapping.is_empty() {
        vp.vif_pool_mapping.clone()
    } else {
        // Deprecated, the other way round: pool driver → pod VIF driver.
        vp.pools_vif_drivers
            .iter()
            .map(|(pool, vif)| (vif.clone(), pool.clone()))
            .collect()
    };
    if mapping.is_empty() {
        if k.vif_pool_driver == "multi_pool" {
            return Err(SettingsError::Multi(
                "is empty: vif_pool_driver = multi_pool needs it (e.g. nested-vlan:nested,neutron-vif:neutron)".into(),
            ));
        }
        return Ok(None);
    }
    for (vif, pool) in &mapping {
        if !VALID_PAIRS.contains(&(vif.as_str(), pool.as_str())) {
            return Err(SettingsError::Multi(format!(
                "{vif}:{pool} does not go together (kuryr-rs serves neutron-vif from neutron or noop pools, \
                 nested-vlan from nested pools, nested-macvlan from noop or nested pools)"
            )));
        }
    }
    if !mapping.contains_key(&k.pod_vif_driver) {
        return Err(SettingsError::Multi(format!(
            "maps no pool for [kubernetes] pod_vif_driver = {} (the driver of nodes without the pod_vif label)",
            k.pod_vif_driver
        )));
    }
    Ok(Some(MultiSettings {
        mapping,
        default_driver: k.pod_vif_driver.clone(),
        cache_time: config.node_driver_caching.cache_time,
    }))
}

impl PoolSettings {
    /// Reads and validates the options.
    pub fn from_config(config: &kuryr_config::Config) -> Result<Self, SettingsError> {
        let k = &config.kubernetes;
        let mismatch = |why| SettingsError::Mismatch {
            pool: k.vif_pool_driver.clone(),
            vif: k.pod_vif_driver.clone(),
            why,
        };
        let multi = multi_settings(config)?;
        let vif = k.pod_vif_driver.as_str();
        let in_vm = NESTED_VIF_DRIVERS.contains(&vif);
        let mode = match k.vif_pool_driver.as_str() {
            _ if multi.is_some() => PoolMode::Neutron,
            "noop" if vif == "nested-vlan" => {
                return Err(mismatch(
                    "nested-vlan ports come from subport pools in kuryr-rs: use vif_pool_driver = nested",
                ));
            }
            "noop" => PoolMode::Noop,
            "neutron" if in_vm => {
                return Err(mismatch(
                    "ports of node VMs come from vif_pool_driver = nested (nested-vlan) or noop (nested-macvlan)",
                ));
            }
            "neutron" => PoolMode::Neutron,
            "nested" if !in_vm => {
                return Err(mismatch(
                    "nested pools hold ports of node VMs: pod_vif_driver = nested-vlan (trunk subports) or \
                     nested-macvlan (ports allowed on the VM's port)",
                ));
            }
            "nested" => PoolMode::Neutron,
            other => return Err(SettingsError::UnknownDriver(other.to_string())),
        };
        let nested = (in_vm
            || multi
                .as_ref()
                .is_some_and(|m| NESTED_VIF_DRIVERS.iter().any(|d| m.mapping.contains_key(*d))))
        .then(|| config.pod_vif_nested.worker_nodes_subnets.clone());
        let vp = &config.vif_pool;
        let pool = PoolConfig::from_conf(vp, k.port_debug);
        if mode == PoolMode::Neutron {
            pool.validate().map_err(SettingsError::Pool)?;
        }
        let nd = &config.neutron_defaults;
        let tags = TagPolicy::from_neutron_defaults(nd).map_err(SettingsError::Tags)?;
        let project = (k.pod_project_driver == "default")
            .then(|| nd.project.clone())
            .flatten()
            .filter(|p| !p.is_empty());
        Ok(PoolSettings {
            mode,
            pool,
            tags,
            project,
            ovs_bridge: nd.ovs_bridge.clone(),
            janitor_interval: vp.ports_pool_janitor_interval,
            janitor_min_age: vp.ports_pool_janitor_min_age,
            activation: ActivationConfig {
                batch: vp.port_activation_batch.max(1) as usize,
                max_interval: vp.port_activation_max_interval.max(Duration::from_millis(500)),
                timeout: vp.port_activation_timeout,
                ..ActivationConfig::default()
            },
            nested,
            multi,
            vif_driver: k.pod_vif_driver.clone(),
            pair_update_attempts: config.pod_vif_nested.rev_update_attempts.max(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(extra: &str) -> kuryr_config::Config {
        kuryr_config::from_strs(&[("kuryr.conf", extra)], kuryr_config::Role::Any, &|_| None)
            .expect("config")
            .0
    }

    #[test]
    fn reads_driver_tags_and_additions() {
        let c = conf(
            "[kubernetes]\nvif_pool_driver = neutron\n[neutron_defaults]\nresource_tags = a,b\ncluster_tag = kuryr-cluster=x\n\
             [vif_pool]\nports_pool_cooldown = 3\nports_pool_max_concurrent_bulk = 2\n",
        );
        let s = PoolSettings::from_config(&c).expect("settings");
        assert_eq!(s.mode, PoolMode::Neutron);
        assert_eq!(s.tags.tags(), ["a", "b", "kuryr-cluster=x"]);
        assert_eq!(s.pool.cooldown, Duration::from_secs(3));
        assert_eq!(s.pool.max_concurrent_bulk, 2);
        assert_eq!(s.janitor_min_age, Duration::from_secs(600));
        assert_eq!(s.activation.batch, 100);
    }

    #[test]
    fn nested_pools_read_the_worker_subnets() {
        let c = conf(
            "[kubernetes]\nvif_pool_driver = nested\npod_vif_driver = nested-vlan\n\
             [pod_vif_nested]\nworker_nodes_subnets = s1,s2\n",
        );
        let s = PoolSettings::from_config(&c).expect("settings");
        assert_eq!(s.mode, PoolMode::Neutron);
        assert_eq!(
            s.nested.as_deref(),
            Some(&["s1".to_string(), "s2".to_string()][..])
        );
        assert!(
            PoolSettings::from_config(&conf(""))
                .expect("defaults")
                .nested
                .is_none()
        );
    }

    #[test]
    fn nested_macvlan_is_served_by_noop_as_upstream_or_by_nested_pools() {
        let c = conf(
            "[kubernetes]\nvif_pool_driver = noop\npod_vif_driver = nested-macvlan\n\
             [pod_vif_nested]\nworker_nodes_subnets = w\nrev_update_attempts = 5\n",
        );
        let s = PoolSettings::from_config(&c).expect("settings");
        assert_eq!(s.mode, PoolMode::Noop);
        assert_eq!(s.vif_driver, "nested-macvlan");
        assert_eq!(s.pair_update_attempts, 5);
        assert_eq!(s.nested.as_deref(), Some(&["w".to_string()][..]));
        let c = conf("[kubernetes]\nvif_pool_driver = neutron\npod_vif_driver = nested-macvlan\n");
        let e = PoolSettings::from_config(&c).expect_err("neutron").to_string();
        assert!(e.contains("noop"), "{e}");
        let c = conf("[kubernetes]\nvif_pool_driver = nested\npod_vif_driver = nested-macvlan\n");
        assert_eq!(
            PoolSettings::from_config(&c).expect("pooled").mode,
            PoolMode::Neutron
        );
        let c = conf(
            "[kubernetes]\nvif_pool_driver = multi_pool\n[vif_pool]\n\
             vif_pool_mapping = nested-macvlan:noop,nested-vlan:nested,neutron-vif:neutron\n\
             [pod_vif_nested]\nworker_nodes_subnets = w\n",
        );
        let s = PoolSettings::from_config(&c).expect("mixed");
        assert_eq!(s.multi.expect("multi").mapping["nested-macvlan"], "noop");
        assert!(s.nested.is_some());
        let c = conf(
            "[kubernetes]\nvif_pool_driver = multi_pool\n[vif_pool]\nvif_pool_mapping = nested-macvlan:neutron,neutron-vif:neutron\n",
        );
        assert!(PoolSettings::from_config(&c).is_err());
    }

    #[test]
    fn the_multi_pool_maps_drivers_to_pools() {
        let c = conf(
            "[kubernetes]\nvif_pool_driver = multi_pool\n[vif_pool]\nvif_pool_mapping = nested-vlan:nested,neutron-vif:neutron\n\
             [pod_vif_nested]\nworker_nodes_subnets = w\n",
        );
        let s = PoolSettings::from_config(&c).expect("settings");
        let m = s.multi.expect("multi");
        assert_eq!(m.mapping["nested-vlan"], "nested");
        assert_eq!(m.mapping["neutron-vif"], "neutron");
        assert_eq!(m.default_driver, "neutron-vif");
        assert_eq!(s.nested.as_deref(), Some(&["w".to_string()][..]));
        // The deprecated inverse form; upstream routes through the multi pool whenever a mapping
        // is set, whatever vif_pool_driver says.
        let c = conf(
            "[kubernetes]\nvif_pool_driver = neutron\n[vif_pool]\npools_vif_drivers = neutron:neutron-vif,nested:nested-vlan\n",
        );
        let m = PoolSettings::from_config(&c)
            .expect("settings")
            .multi
            .expect("multi");
        assert_eq!(m.mapping["nested-vlan"], "nested");
    }

    #[test]
    fn rejects_unknown_driver_and_insane_pools() {
        let e = PoolSettings::from_config(&conf("[kubernetes]\nvif_pool_driver = nested\n")).unwrap_err();
        assert!(
            e.to_string()
                .contains("pod_vif_driver = nested-vlan (trunk subports) or nested-macvlan"),
            "{e}"
        );
        let e = PoolSettings::from_config(&conf("[kubernetes]\nvif_pool_driver = multi\n")).unwrap_err();
        assert!(
            e.to_string().contains("vif_pool_driver = multi: not supported"),
            "{e}"
        );
        let e = PoolSettings::from_config(&conf("[kubernetes]\nvif_pool_driver = multi_pool\n")).unwrap_err();
        assert!(e.to_string().contains("vif_pool_mapping: is empty"), "{e}");
        let e = PoolSettings::from_config(&conf("[vif_pool]\nvif_pool_mapping = nested-vlan:neutron\n"))
            .unwrap_err();
        assert!(
            e.to_string().contains("nested-vlan:neutron does not go together"),
            "{e}"
        );
        let e = PoolSettings::from_config(&conf("[vif_pool]\nvif_pool_mapping = nested-vlan:nested\n"))
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("maps no pool for [kubernetes] pod_vif_driver = neutron-vif"),
            "{e}"
        );
        let e = PoolSettings::from_config(&conf(
            "[kubernetes]\nvif_pool_driver = neutron\npod_vif_driver = nested-vlan\n",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("vif_pool_driver = nested"), "{e}");
        let e = PoolSettings::from_config(&conf(
            "[kubernetes]\nvif_pool_driver = neutron\n[vif_pool]\nports_pool_min = 20\n",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("ports_pool_batch"), "{e}");
        assert_eq!(
            PoolSettings::from_config(&conf("")).expect("defaults").mode,
            PoolMode::Noop
        );
    }
}
