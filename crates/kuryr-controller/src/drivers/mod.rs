//! Driver selection (upstream's stevedore driver families, chosen by `[kubernetes]` options):
//! which project, subnets and security groups a pod's port gets. [`Drivers::pod_target`] is the
//! one question the KuryrPort handler asks; the families live in [`project`], [`subnets`] and
//! [`security_groups`].

pub mod cache;
pub mod policy_groups;
pub mod project;
pub mod security_groups;
pub mod subnets;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kuryr_openstack::Neutron;

pub use cache::Reflected;
pub use project::{NamespaceProjectDriver, ProjectDriver};
pub use security_groups::SecurityGroupsDriver;
pub use subnets::SubnetsDriver;

/// Where a pod's port is created and with what: the joint answer of the project, subnets and
/// security-groups drivers. Also the pool key's network part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTarget {
    /// OpenStack project of the port.
    pub project_id: String,
    /// Neutron network of the port.
    pub network_id: String,
    /// Subnets the port takes its fixed IPs from (one for now; upstream allowed several).
    pub subnet_ids: Vec<String>,
    /// Security groups of the port (sorted, deduplicated).
    pub security_groups: Vec<String>,
}

/// Why a driver could not answer.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A `[kubernetes] *_driver` option names a driver that does not exist (or is not built).
    #[error("[kubernetes] {option} = {value}: unknown driver (expected one of: {expected})")]
    UnknownDriver {
        /// The option.
        option: &'static str,
        /// Its value.
        value: String,
        /// The accepted values.
        expected: &'static str,
    },
    /// A required option is not set for the selected driver.
    #[error("[{group}] {option} is required by the {driver} driver")]
    MissingOption {
        /// Group.
        group: &'static str,
        /// Option.
        option: &'static str,
        /// Driver that needs it.
        driver: &'static str,
    },
    /// The answer depends on something not there yet (e.g. the namespace's KuryrNetwork has no
    /// subnet yet): the caller requeues without an error Event.
    #[error("not ready: {0}")]
    NotReady(String),
    /// A driver needing a watch-fed cache was built outside a Tokio runtime (a programming
    /// error of the caller).
    #[error("the {what} cache of a driver needs a Tokio runtime")]
    NoRuntime {
        /// What was to be cached.
        what: &'static str,
    },
    /// `[neutron_defaults] resource_tags` / `cluster_tag` are not valid Neutron tags.
    #[error("invalid [neutron_defaults] resource_tags/cluster_tag")]
    Tags(#[source] kuryr_core::config::ConfigError),
    /// Neutron could not be asked.
    #[error("asking Neutron for {what}")]
    Neutron {
        /// What was asked.
        what: String,
        /// Cause.
        #[source]
        source: kuryr_openstack::Error,
    },
    /// Kubernetes could not be asked.
    #[error("reading {what} from Kubernetes")]
    Kube {
        /// What was read.
        what: String,
        /// Cause.
        #[source]
        source: kube::Error,
    },
}

impl DriverError {
    /// Worth retrying later (not a configuration error).
    pub fn is_transient(&self) -> bool {
        !matches!(
            self,
            DriverError::UnknownDriver { .. }
                | DriverError::MissingOption { .. }
                | DriverError::NoRuntime { .. }
                | DriverError::Tags(_)
        )
    }
}

/// The selected project, subnets and security-groups drivers.
pub struct Drivers {
    /// `[kubernetes] pod_project_driver`.
    pub project: ProjectDriver,
    /// `[kubernetes] pod_subnets_driver`.
    pub subnets: SubnetsDriver,
    /// `[kubernetes] pod_security_groups_driver`.
    pub security_groups: SecurityGroupsDriver,
}

impl Drivers {
    /// Selects the drivers named in `config`; unknown names and missing options are errors
    /// (the controller exits before touching anything).
    pub fn from_config(
        config: &kuryr_config::Config,
        client: kube::Client,
        neutron: Arc<dyn Neutron>,
    ) -> Result<Self, DriverError> {
        Ok(Self {
            project: ProjectDriver::from_config(config, client.clone())?,
            subnets: SubnetsDriver::from_config(config, client.clone(), neutron.clone())?,
            security_groups: SecurityGroupsDriver::from_config(config, client.clone(), neutron.clone())?,
        })
    }

    /// Project, network, subnets and security groups for `pod`'s port.
    pub async fn pod_target(&self, pod: &Pod) -> Result<PodTarget, DriverError> {
        let project_id = self.project.pod_project(pod).await?;
        let subnets = self.subnets.pod_subnets(pod).await?;
        let mut security_groups = self.security_groups.pod_security_groups(pod, &project_id).await?;
        security_groups.sort();
        security_groups.dedup();
        Ok(PodTarget {
            project_id,
            network_id: subnets.network_id,
            subnet_ids: subnets.subnet_ids,
            security_groups,
        })
    }
}
