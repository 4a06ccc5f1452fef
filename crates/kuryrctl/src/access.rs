//! Access to the cluster and the cloud: the Kubernetes client (kubeconfig), the kuryr.conf
//! (lenient: no option is required by kuryrctl) and the Neutron client.

use std::{path::Path, sync::Arc};

use kube::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};
use kuryr_openstack::{ConnectOptions, NoopObserver, OpenStackNeutron};

use crate::Error;

/// A Kubernetes client from `kubeconfig`, else the usual inference.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, Error> {
    let cfg = match kubeconfig {
        Some(path) => {
            let kerr = |source| Error::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(kerr)?;
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(kerr)?
        }
        None => kube::Config::infer().await.map_err(Error::InferConfig)?,
    };
    Client::try_from(cfg).map_err(Error::Client)
}

/// The configuration of `files` (defaults when none).
pub fn config(files: &[std::path::PathBuf]) -> Result<kuryr_config::Config, Error> {
    let sources = kuryr_config::ConfigSources {
        config_files: files.to_vec(),
        config_dirs: Vec::new(),
    };
    let (config, _warnings) =
        kuryr_config::load_for(&sources, kuryr_config::Role::Any, &|k| std::env::var(k).ok())
            .map_err(|e| Error::Config(Box::new(e)))?;
    Ok(config)
}

/// The tags that mark this cluster's resources: `cluster_tag` when given, else the
/// configuration's `resource_tags` plus `cluster_tag`.
pub fn tags(config: &kuryr_config::Config, cluster_tag: Option<&str>) -> Result<Vec<String>, Error> {
    let tags = match cluster_tag {
        Some(t) => kuryr_core::config::TagPolicy::new(Vec::new(), Some(t.to_owned())),
        None => kuryr_core::config::TagPolicy::new(
            config.neutron_defaults.resource_tags.clone(),
            config.neutron_defaults.cluster_tag.clone(),
        ),
    }
    .map_err(Error::Tags)?;
    Ok(tags.tags())
}

/// A Neutron client with the credentials of `config` (or `OS_CLOUD`/`OS_*`).
pub async fn neutron(config: &kuryr_config::Config) -> Result<Arc<OpenStackNeutron>, Error> {
    let auth = kuryr_config::resolve_cloud_auth(config, &|k| std::env::var(k).ok())
        .map_err(|e| Error::CloudAuth(Box::new(e)))?;
    let opts = ConnectOptions::from_env(config.neutron.timeout);
    let n = OpenStackNeutron::connect(&auth, &opts, Arc::new(NoopObserver))
        .await
        .map_err(|source| Error::Neutron {
            what: "a connection",
            source,
        })?;
    Ok(Arc::new(n))
}
