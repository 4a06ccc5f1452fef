//! Subnets drivers (`[kubernetes] pod_subnets_driver`): `default` — `[neutron_defaults]
//! pod_subnet` for every pod (its network looked up once and cached); `namespace` — the
//! network and subnet in the `status` of the pod namespace's KuryrNetwork, read from a
//! watch-fed cache (no API request per pod).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kuryr_openstack::Neutron;
use kuryr_types::KuryrNetwork;
use tokio::sync::OnceCell;

use super::{DriverError, cache::Reflected};

/// Network and subnets of a pod's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSubnets {
    /// The network.
    pub network_id: String,
    /// The subnets (one for now).
    pub subnet_ids: Vec<String>,
}

/// The selected subnets driver.
pub enum SubnetsDriver {
    /// `[neutron_defaults] pod_subnet` for every pod.
    Default {
        /// The subnet.
        subnet_id: String,
        /// Its network, asked from Neutron once.
        network_id: OnceCell<String>,
        /// Neutron.
        neutron: Arc<dyn Neutron>,
    },
    /// The network of the pod's namespace (KuryrNetwork `<ns>/<ns>`, `status.netId` and
    /// `status.subnetId`).
    Namespace {
        /// KuryrNetworks, read from a watch-fed cache.
        networks: Reflected<KuryrNetwork>,
    },
}

/// The network and subnet a KuryrNetwork's status names; [`DriverError::NotReady`] until the
/// KuryrNetwork handler has created both (or while the network is being deleted).
pub fn subnets_of_network(kn: &KuryrNetwork) -> Result<PodSubnets, DriverError> {
    let name = kn.name_any();
    if kn.metadata.deletion_timestamp.is_some() {
        return Err(DriverError::NotReady(format!(
            "KuryrNetwork {name} is being deleted"
        )));
    }
    let status = kn.status.as_ref();
    match (
        status.and_then(|s| s.net_id.as_deref()),
        status.and_then(|s| s.subnet_id.as_deref()),
    ) {
        (Some(net), Some(subnet)) if !net.is_empty() && !subnet.is_empty() => Ok(PodSubnets {
            network_id: net.to_owned(),
            subnet_ids: vec![subnet.to_owned()],
        }),
        _ => Err(DriverError::NotReady(format!(
            "KuryrNetwork {name} has no subnet yet"
        ))),
    }
}

impl SubnetsDriver {
    /// From `[kubernetes] pod_subnets_driver`.
    pub fn from_config(
        config: &kuryr_config::Config,
        client: kube::Client,
        neutron: Arc<dyn Neutron>,
    ) -> Result<Self, DriverError> {
        match config.kubernetes.pod_subnets_driver.as_str() {
            "default" => {
                let subnet_id =
                    config
                        .neutron_defaults
                        .pod_subnet
                        .clone()
                        .ok_or(DriverError::MissingOption {
                            group: "neutron_defaults",
                            option: "pod_subnet",
                            driver: "default subnets",
                        })?;
                Ok(Self::Default {
                    subnet_id,
                    network_id: OnceCell::new(),
                    neutron,
                })
            }
            "namespace" => Ok(Self::Namespace {
                networks: Reflected::spawn(client, "kuryrnetworks")?,
            }),
            other => Err(DriverError::UnknownDriver {
                option: "pod_subnets_driver",
                value: other.to_string(),
                expected: "default, namespace",
            }),
        }
    }

    /// Network and subnets of `pod`'s port.
    pub async fn pod_subnets(&self, pod: &Pod) -> Result<PodSubnets, DriverError> {
        match self {
            Self::Namespace { networks } => {
                let ns = pod.namespace().unwrap_or_default();
                match networks.get(Some(&ns), &ns) {
                    Some(kn) => subnets_of_network(&kn),
                    None => Err(DriverError::NotReady(format!(
                        "namespace {ns} has no KuryrNetwork yet"
                    ))),
                }
            }
            Self::Default {
                subnet_id,
                network_id,
                neutron,
            } => {
                let net = network_id
                    .get_or_try_init(|| async {
                        neutron
                            .get_subnet(subnet_id)
                            .await
                            .map(|s| s.network_id)
                            .map_err(|source| DriverError::Neutron {
                                what: format!("subnet {subnet_id}"),
                                source,
                            })
                    })
                    .await?;
                Ok(PodSubnets {
                    network_id: net.clone(),
                    subnet_ids: vec![subnet_id.clone()],
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kuryr_types::{KuryrNetworkSpec, KuryrNetworkStatus};

    fn kn(net: Option<&str>, subnet: Option<&str>) -> KuryrNetwork {
        let mut kn = KuryrNetwork::new(
            "ns1",
            KuryrNetworkSpec {
                ns_name: "ns1".into(),
                project_id: "p".into(),
                ns_labels: Default::default(),
            },
        );
        kn.status = Some(KuryrNetworkStatus {
            net_id: net.map(Into::into),
            subnet_id: subnet.map(Into::into),
            ..Default::default()
        });
        kn
    }

    #[test]
    fn namespace_subnets_need_net_and_subnet() {
        assert_eq!(
            subnets_of_network(&kn(Some("n"), Some("s"))).unwrap(),
            PodSubnets {
                network_id: "n".into(),
                subnet_ids: vec!["s".into()]
            }
        );
        for (n, s) in [
            (None, None),
            (Some("n"), None),
            (None, Some("s")),
            (Some(""), Some("s")),
        ] {
            assert!(matches!(
                subnets_of_network(&kn(n, s)),
                Err(DriverError::NotReady(_))
            ));
        }
        let mut deleting = kn(Some("n"), Some("s"));
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Default::default(),
        ));
        assert!(matches!(
            subnets_of_network(&deleting),
            Err(DriverError::NotReady(_))
        ));
    }
}
