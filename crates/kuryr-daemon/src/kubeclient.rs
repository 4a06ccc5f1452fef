//! The daemon's Kubernetes client: `--kubeconfig` if given, else `[kubernetes] api_root`
//! (plain URL, as upstream's daemon uses it), else inferred (`KUBECONFIG`, in-cluster).

use std::path::{Path, PathBuf};

use kube::{
    Client,
    config::{KubeConfigOptions, Kubeconfig},
};

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    /// The kubeconfig cannot be read.
    #[error("reading kubeconfig {path}")]
    Read {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig is not usable.
    #[error("loading kubeconfig")]
    Load(#[source] kube::config::KubeconfigError),
    /// `api_root` is not a URL.
    #[error("[kubernetes] api_root {0:?} is not a valid URL")]
    ApiRoot(String),
    /// Nothing to infer from.
    #[error("inferring the Kubernetes configuration")]
    Infer(#[source] kube::config::InferConfigError),
    /// The HTTP client cannot be built.
    #[error("building the Kubernetes client")]
    Client(#[source] kube::Error),
}

/// The client (see the module docs).
pub async fn client(kubeconfig: Option<&Path>, api_root: &str) -> Result<Client, KubeClientError> {
    let config = if let Some(path) = kubeconfig {
        let kc = Kubeconfig::read_from(path).map_err(|source| KubeClientError::Read {
            path: path.to_owned(),
            source,
        })?;
        kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(KubeClientError::Load)?
    } else if !api_root.is_empty() {
        let url = api_root
            .parse()
            .map_err(|_| KubeClientError::ApiRoot(api_root.to_owned()))?;
        kube::Config::new(url)
    } else {
        kube::Config::infer().await.map_err(KubeClientError::Infer)?
    };
    Client::try_from(config).map_err(KubeClientError::Client)
}
