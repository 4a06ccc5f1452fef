//! Security-group drivers (`[kubernetes] pod_security_groups_driver`): `default` —
//! `[neutron_defaults] pod_security_groups` for every pod; `policy` — the groups of the
//! NetworkPolicies that select the pod ([`super::policy_groups`]).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kuryr_openstack::Neutron;

use super::DriverError;
use super::policy_groups::PolicyGroups;

/// The selected security-groups driver.
#[derive(Clone)]
pub enum SecurityGroupsDriver {
    /// `[neutron_defaults] pod_security_groups` for every pod.
    Default {
        /// The security group IDs.
        sg_ids: Vec<String>,
    },
    /// NetworkPolicy.
    Policy(Arc<PolicyGroups>),
}

impl std::fmt::Debug for SecurityGroupsDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default { sg_ids } => f.debug_struct("Default").field("sg_ids", sg_ids).finish(),
            Self::Policy(p) => f.debug_struct("Policy").field("defaults", &p.defaults()).finish(),
        }
    }
}

impl SecurityGroupsDriver {
    /// From `[kubernetes] pod_security_groups_driver` (`policy` starts its caches on the
    /// current Tokio runtime).
    pub fn from_config(
        config: &kuryr_config::Config,
        client: kube::Client,
        neutron: Arc<dyn Neutron>,
    ) -> Result<Self, DriverError> {
        match config.kubernetes.pod_security_groups_driver.as_str() {
            "default" => Ok(Self::defaults(config)),
            "policy" => Ok(Self::Policy(Arc::new(PolicyGroups::spawn(
                config, client, neutron,
            )?))),
            other => Err(DriverError::UnknownDriver {
                option: "pod_security_groups_driver",
                value: other.to_string(),
                expected: "default, policy",
            }),
        }
    }

    /// The `default` driver (also what ports pre-created for a namespace get under `policy`:
    /// before any pod is known, a port is what a pod no policy selects would get).
    pub fn defaults(config: &kuryr_config::Config) -> Self {
        Self::Default {
            sg_ids: config.neutron_defaults.pod_security_groups.clone(),
        }
    }

    /// The security groups of ports pre-created in a namespace's network (pool population),
    /// before any pod is known: what a pod of that namespace without policies would get.
    pub fn namespace_security_groups(&self, _namespace: &str, _project_id: &str) -> Vec<String> {
        let mut v = match self {
            Self::Default { sg_ids } => sg_ids.clone(),
            Self::Policy(p) => p.defaults().to_vec(),
        };
        v.sort();
        v.dedup();
        v
    }

    /// The security groups of `pod`'s port in `project_id` (for a port about to be handed to
    /// it: `policy` reads the namespace's policies live).
    pub async fn pod_security_groups(
        &self,
        pod: &Pod,
        _project_id: &str,
    ) -> Result<Vec<String>, DriverError> {
        match self {
            Self::Default { sg_ids } => Ok(sg_ids.clone()),
            Self::Policy(p) => p.pod_groups(pod, true).await,
        }
    }
}
