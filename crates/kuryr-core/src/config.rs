//! The pool's configuration ([`PoolConfig`]): upstream's `[vif_pool]` options mapped from
//! [`kuryr_config::VifPoolConf`], the few new knobs kuryr-rs adds (cool-down, bulk concurrency),
//! and upstream's §4.8 sanity checks (`--vif_pool_min_max`, `--vif_pool_min_batch`,
//! `--vif_pool_max_batch`) as errors that name the options.

use std::time::Duration;

use kuryr_config::{NeutronDefaultsConf, VifPoolConf};

/// Default cool-down of a released port before it is handed out again (AWS VPC CNI uses 30 s
/// for IPs; the branch-ENI controller 60 s to outlive the Linux ARP cache).
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);
/// Default bound on bulk `POST /v2.0/ports` requests in flight at once (upstream: 20).
pub const DEFAULT_MAX_CONCURRENT_BULK: u32 = 4;
/// Default grace before the janitor may delete an unowned tagged port: long enough for an
/// in-flight bulk creation to be recorded (upstream's dead-port GC uses 600 s).
pub const DEFAULT_JANITOR_MIN_AGE: Duration = Duration::from_secs(600);
/// Name upstream gives pool ports when `port_debug` is on.
pub const POOL_PORT_NAME: &str = "kuryr-pool-port";

/// A pool configuration value that upstream's sanity checks reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `--vif_pool_min_max`.
    #[error("[vif_pool] ports_pool_max ({max}) must be 0 (unlimited) or >= ports_pool_min ({min})")]
    MaxBelowMin {
        /// `ports_pool_max`.
        max: u32,
        /// `ports_pool_min`.
        min: u32,
    },
    /// `--vif_pool_min_batch`.
    #[error("[vif_pool] ports_pool_min ({min}) must be <= ports_pool_batch ({batch})")]
    MinAboveBatch {
        /// `ports_pool_min`.
        min: u32,
        /// `ports_pool_batch`.
        batch: u32,
    },
    /// `--vif_pool_max_batch`.
    #[error("[vif_pool] ports_pool_max ({max}) must be 0 (unlimited) or >= ports_pool_batch ({batch})")]
    MaxBelowBatch {
        /// `ports_pool_max`.
        max: u32,
        /// `ports_pool_batch`.
        batch: u32,
    },
    /// A batch of zero would never create a port.
    #[error("[vif_pool] ports_pool_batch must be >= 1")]
    ZeroBatch,
    /// Zero concurrent bulk requests would never create a port.
    #[error("[vif_pool] ports_pool_max_concurrent_bulk must be >= 1")]
    ZeroConcurrency,
    /// Neutron tags cannot contain commas (tag filters are comma lists) and are at most 255 chars.
    #[error("tag {tag:?} is not a valid Neutron tag (empty, longer than 255 characters or containing ',')")]
    InvalidTag {
        /// The tag.
        tag: String,
    },
}

/// Everything the pool state machine needs to know, plain values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// `ports_pool_min`: target minimum of available ports per pool (default 5).
    pub min: u32,
    /// `ports_pool_max`: beyond this many pooled (available + cooling) ports, released ports
    /// are deleted and extra ones trimmed; 0 = unlimited (default 0).
    pub max: u32,
    /// `ports_pool_batch`: ports per bulk creation (default 10).
    pub batch: u32,
    /// `ports_pool_update_frequency`: period of [`crate::pool::PoolState::tick`] (default 20 s).
    pub update_frequency: Duration,
    /// New (`ports_pool_cooldown`): a released port is reused only after this (default 30 s).
    pub cooldown: Duration,
    /// New (`ports_pool_max_concurrent_bulk`): bulk requests in flight at once (default 4).
    pub max_concurrent_bulk: u32,
    /// `[kubernetes]port_debug`: ports are renamed after their pod when taken and back to
    /// `kuryr-pool-port` when released (one Neutron write each way).
    pub port_debug: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            min: 5,
            max: 0,
            batch: 10,
            update_frequency: Duration::from_secs(20),
            cooldown: DEFAULT_COOLDOWN,
            max_concurrent_bulk: DEFAULT_MAX_CONCURRENT_BULK,
            port_debug: false,
        }
    }
}

impl PoolConfig {
    /// Maps upstream's `[vif_pool]` group (and `[kubernetes]port_debug`), including the
    /// kuryr-rs additions `ports_pool_cooldown` and `ports_pool_max_concurrent_bulk`.
    pub fn from_conf(conf: &VifPoolConf, port_debug: bool) -> Self {
        PoolConfig {
            min: conf.ports_pool_min,
            max: conf.ports_pool_max,
            batch: conf.ports_pool_batch,
            update_frequency: conf.ports_pool_update_frequency,
            cooldown: conf.ports_pool_cooldown,
            max_concurrent_bulk: conf.ports_pool_max_concurrent_bulk,
            port_debug,
        }
    }

    /// Upstream's three sanity checks plus the two that make the pool unable to grow. All
    /// failures are returned, not just the first.
    pub fn validate(&self) -> Result<(), Vec<ConfigError>> {
        let mut errs = Vec::new();
        if self.max != 0 && self.max < self.min {
            errs.push(ConfigError::MaxBelowMin {
                max: self.max,
                min: self.min,
            });
        }
        if self.min > self.batch {
            errs.push(ConfigError::MinAboveBatch {
                min: self.min,
                batch: self.batch,
            });
        }
        if self.max != 0 && self.max < self.batch {
            errs.push(ConfigError::MaxBelowBatch {
                max: self.max,
                batch: self.batch,
            });
        }
        if self.batch == 0 {
            errs.push(ConfigError::ZeroBatch);
        }
        if self.max_concurrent_bulk == 0 {
            errs.push(ConfigError::ZeroConcurrency);
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }
}

/// Which tags mark a Neutron resource as created by this cluster's kuryr-rs: upstream's
/// `[neutron_defaults]resource_tags` plus an optional cluster tag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagPolicy {
    /// `[neutron_defaults]resource_tags`.
    pub resource_tags: Vec<String>,
    /// The cluster tag (e.g. `kuryr-cluster=prod-1`), if configured.
    pub cluster_tag: Option<String>,
}

impl TagPolicy {
    /// A policy; tags are checked against Neutron's rules.
    pub fn new(resource_tags: Vec<String>, cluster_tag: Option<String>) -> Result<Self, ConfigError> {
        for tag in resource_tags.iter().chain(cluster_tag.iter()) {
            if tag.is_empty() || tag.len() > 255 || tag.contains(',') {
                return Err(ConfigError::InvalidTag { tag: tag.clone() });
            }
        }
        Ok(TagPolicy {
            resource_tags,
            cluster_tag,
        })
    }

    /// The policy of `[neutron_defaults] resource_tags` and `cluster_tag`.
    pub fn from_neutron_defaults(nd: &NeutronDefaultsConf) -> Result<Self, ConfigError> {
        Self::new(nd.resource_tags.clone(), nd.cluster_tag.clone())
    }

    /// All tags to put on a created resource, deduplicated, in configuration order.
    pub fn tags(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in self.resource_tags.iter().chain(self.cluster_tag.iter()) {
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
        out
    }

    /// `true` when no tag is configured: ownership cannot be proven by tags, so nothing is
    /// ever deleted, pooled or adopted on the strength of tags. A running controller never has
    /// an empty policy: without configured tags it derives the cluster's identity tag.
    pub fn is_empty(&self) -> bool {
        self.resource_tags.is_empty() && self.cluster_tag.is_none()
    }

    /// The resource carries every configured tag. An empty policy matches nothing (it used to
    /// match everything, vacuously: another cluster's ports were then "ours").
    pub fn matches(&self, tags: &[String]) -> bool {
        !self.is_empty() && self.tags().iter().all(|t| tags.contains(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams_and_valid() {
        let c = PoolConfig::default();
        assert_eq!((c.min, c.max, c.batch), (5, 0, 10));
        assert_eq!(c.update_frequency, Duration::from_secs(20));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn from_conf_maps_options() {
        let conf = VifPoolConf {
            ports_pool_max: 40,
            ports_pool_min: 3,
            ports_pool_batch: 7,
            ports_pool_update_frequency: Duration::from_secs(9),
            pools_vif_drivers: Default::default(),
            vif_pool_mapping: Default::default(),
            ports_pool_cooldown: Duration::from_secs(3),
            ports_pool_max_concurrent_bulk: 2,
            ports_pool_janitor_interval: Duration::from_secs(90),
            ports_pool_janitor_min_age: DEFAULT_JANITOR_MIN_AGE,
            port_activation_batch: 100,
            port_activation_max_interval: Duration::from_secs(5),
            port_activation_timeout: Duration::from_secs(90),
        };
        let c = PoolConfig::from_conf(&conf, true);
        assert_eq!((c.min, c.max, c.batch), (3, 40, 7));
        assert_eq!(c.update_frequency, Duration::from_secs(9));
        assert!(c.port_debug);
        assert_eq!(c.cooldown, Duration::from_secs(3));
        assert_eq!(c.max_concurrent_bulk, 2);
    }

    #[test]
    fn sanity_checks_name_the_options() {
        let c = PoolConfig {
            min: 20,
            max: 8,
            batch: 10,
            ..PoolConfig::default()
        };
        let errs = c.validate().unwrap_err();
        assert_eq!(
            errs,
            vec![
                ConfigError::MaxBelowMin { max: 8, min: 20 },
                ConfigError::MinAboveBatch { min: 20, batch: 10 },
                ConfigError::MaxBelowBatch { max: 8, batch: 10 },
            ]
        );
        assert!(errs[0].to_string().contains("ports_pool_max"));
        assert!(errs[1].to_string().contains("ports_pool_batch"));
        let c = PoolConfig {
            batch: 0,
            min: 0,
            max_concurrent_bulk: 0,
            ..PoolConfig::default()
        };
        assert_eq!(
            c.validate().unwrap_err(),
            vec![ConfigError::ZeroBatch, ConfigError::ZeroConcurrency]
        );
        // max = 0 means unlimited: no max check.
        let c = PoolConfig {
            min: 5,
            max: 0,
            batch: 10,
            ..PoolConfig::default()
        };
        assert!(c.validate().is_ok());
    }

    #[test]
    fn tag_policy() {
        let p = TagPolicy::new(vec!["a".into(), "b".into()], Some("kuryr-cluster=x".into())).unwrap();
        assert_eq!(p.tags(), vec!["a", "b", "kuryr-cluster=x"]);
        assert!(p.matches(&["kuryr-cluster=x".into(), "b".into(), "a".into(), "z".into()]));
        assert!(!p.matches(&["a".into(), "b".into()]));
        assert!(TagPolicy::new(vec!["a,b".into()], None).is_err());
        assert!(!TagPolicy::default().matches(&[]));
        assert!(!TagPolicy::default().matches(&["a".into()]));
        assert!(TagPolicy::default().is_empty());
    }
}
