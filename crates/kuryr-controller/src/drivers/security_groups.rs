//! Security-group drivers (`[kubernetes] pod_security_groups_driver`): `default` —
//! `[neutron_defaults] pod_security_groups` for every pod.

use k8s_openapi::api::core::v1::Pod;

use super::DriverError;

/// The selected security-groups driver.
#[derive(Debug, Clone)]
pub enum SecurityGroupsDriver {
    /// `[neutron_defaults] pod_security_groups` for every pod.
    Default {
        /// The security group IDs.
        sg_ids: Vec<String>,
    },
}

impl SecurityGroupsDriver {
    /// From `[kubernetes] pod_security_groups_driver`.
    pub fn from_config(config: &kuryr_config::Config) -> Result<Self, DriverError> {
        match config.kubernetes.pod_security_groups_driver.as_str() {
            "default" => Ok(Self::Default {
                sg_ids: config.neutron_defaults.pod_security_groups.clone(),
            }),
            other => Err(DriverError::UnknownDriver {
                option: "pod_security_groups_driver",
                value: other.to_string(),
                expected: "default",
            }),
        }
    }

    /// The security groups of ports pre-created in a namespace's network (pool population),
    /// before any pod is known: what a pod of that namespace without policies would get.
    pub fn namespace_security_groups(&self, _namespace: &str, _project_id: &str) -> Vec<String> {
        match self {
            Self::Default { sg_ids } => {
                let mut v = sg_ids.clone();
                v.sort();
                v.dedup();
                v
            }
        }
    }

    /// The security groups of `pod`'s port in `project_id`.
    pub fn pod_security_groups(&self, _pod: &Pod, _project_id: &str) -> Result<Vec<String>, DriverError> {
        match self {
            Self::Default { sg_ids } => Ok(sg_ids.clone()),
        }
    }
}
