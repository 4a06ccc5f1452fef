//! Access to the cluster and the cloud: the Kubernetes client (kubeconfig), the kuryr.conf
//! (lenient: no option is required by kuryrctl) and the Neutron client.

use std::{path::Path, sync::Arc};

use kube::Client;
use kuryr_openstack::{ConnectOptions, NoopObserver, OpenStackNeutron};

use crate::Error;

/// A Kubernetes client: `kubeconfig` if given, else `[kubernetes] api_root` (with its token and
/// TLS options) of the kuryr.conf `files`, else the usual inference (`KUBECONFIG`, in-cluster) —
/// the same choice as the controller and the daemon make.
pub async fn client(kubeconfig: Option<&Path>, files: &[std::path::PathBuf]) -> Result<Client, Error> {
    let config = config(files)?;
    kuryr_runtime::kubeclient::client(kubeconfig, &config.kubernetes)
        .await
        .map_err(Error::Kube)
}

/// The configuration of `files` (defaults when none; lenient: nothing is required of kuryrctl).
pub fn config(files: &[std::path::PathBuf]) -> Result<kuryr_config::Config, Error> {
    let args = kuryr_runtime::ConfigArgs {
        config_file: files.to_vec(),
        config_dir: Vec::new(),
    };
    let (config, _warnings) =
        kuryr_runtime::load_config(&args, kuryr_config::Role::Any).map_err(|e| Error::Config(Box::new(e)))?;
    Ok(config)
}

/// The tags that mark this cluster's resources: `cluster_tag` when given, else the
/// configuration's `resource_tags` plus `cluster_tag`, else the identity the controller derives
/// from the `kube-system` Namespace ([`kuryr_runtime::identity`]).
pub async fn tags(
    config: &kuryr_config::Config,
    cluster_tag: Option<&str>,
    client: &Client,
) -> Result<Vec<String>, Error> {
    if let Some(t) = cluster_tag {
        let tags = kuryr_core::config::TagPolicy::new(Vec::new(), Some(t.to_owned())).map_err(Error::Tags)?;
        return Ok(tags.tags());
    }
    let id = identity(config, client).await?;
    let tags = kuryr_core::config::TagPolicy::new(id.tags(), None).map_err(Error::Tags)?;
    Ok(tags.tags())
}

/// This cluster's identity as the controller finds it.
pub async fn identity(
    config: &kuryr_config::Config,
    client: &Client,
) -> Result<kuryr_runtime::identity::Identity, Error> {
    let mut config = config.clone();
    kuryr_runtime::identity::resolve(client, &mut config)
        .await
        .map_err(Error::Identity)
}

/// A Neutron client with the credentials of `config` (or `OS_CLOUD`/`OS_*`).
pub async fn neutron(config: &kuryr_config::Config) -> Result<Arc<OpenStackNeutron>, Error> {
    let auth = kuryr_config::resolve_cloud_auth(config, &|k| std::env::var(k).ok())
        .map_err(|e| Error::CloudAuth(Box::new(e)))?;
    let mut opts = ConnectOptions::from_env(config.neutron.timeout);
    opts.network_endpoint = config.neutron.endpoint_override.clone();
    let n = OpenStackNeutron::connect(&auth, &opts, Arc::new(NoopObserver))
        .await
        .map_err(|source| Error::Neutron {
            what: "a connection",
            source,
        })?;
    Ok(Arc::new(n))
}
