//! The Kubernetes client of every kuryr-rs process, chosen as upstream does plus kubeconfig
//! support: `--kubeconfig` if given; else `[kubernetes] api_root` with `token_file`,
//! `ssl_client_crt_file`/`ssl_client_key_file`, `ssl_ca_crt_file` and `ssl_verify_server_crt`
//! (an upstream kuryr.conf inside a pod); else `kube::Config::infer` (`KUBECONFIG`,
//! `~/.kube/config`, in-cluster service account).

use std::path::{Path, PathBuf};

use kube::{
    Client,
    config::{
        AuthInfo, Cluster, Context, KubeConfigOptions, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
    },
};
use kuryr_config::KubernetesConf;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `[kubernetes] api_root` is not an http(s) URL.
    #[error("[kubernetes] api_root {0:?} is not an http(s) URL")]
    ApiRoot(String),
    /// `--kubeconfig` could not be read or parsed.
    #[error("reading kubeconfig {path}")]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig (given or built from `[kubernetes]`) is not usable.
    #[error("loading kubeconfig")]
    LoadKubeconfig(#[source] kube::config::KubeconfigError),
    /// Neither a kubeconfig nor an in-cluster environment was found.
    #[error("inferring the Kubernetes configuration (no --kubeconfig, no [kubernetes] api_root)")]
    Infer(#[source] kube::config::InferConfigError),
    /// Building the HTTP client failed.
    #[error("building the Kubernetes client")]
    Client(#[source] kube::Error),
}

/// The kubeconfig equivalent of upstream's `[kubernetes]` connection options (`api_root` set).
pub fn kubeconfig_from_conf(k: &KubernetesConf) -> Kubeconfig {
    const NAME: &str = "kuryr";
    let cluster = Cluster {
        server: Some(k.api_root.clone()),
        certificate_authority: k.ssl_ca_crt_file.clone().filter(|_| k.ssl_verify_server_crt),
        insecure_skip_tls_verify: (!k.ssl_verify_server_crt).then_some(true),
        ..Cluster::default()
    };
    // The default is the service account token path: outside a pod it does not exist, and
    // then the API server is reached without a bearer token.
    let token_file = k.token_file.clone().filter(|f| {
        let usable = !f.is_empty() && Path::new(f).exists();
        if !usable && !f.is_empty() {
            tracing::warn!(token_file = %f, "[kubernetes] token_file not found, no bearer token used");
        }
        usable
    });
    let user = AuthInfo {
        token_file,
        client_certificate: k.ssl_client_crt_file.clone(),
        client_key: k.ssl_client_key_file.clone(),
        ..AuthInfo::default()
    };
    Kubeconfig {
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(cluster),
            other: Default::default(),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: NAME.into(),
            auth_info: Some(user),
            other: Default::default(),
        }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context {
                cluster: NAME.into(),
                user: Some(NAME.into()),
                ..Context::default()
            }),
            other: Default::default(),
        }],
        current_context: Some(NAME.into()),
        ..Kubeconfig::default()
    }
}

/// The client for `kubeconfig` (if given) or `[kubernetes]` options, else inferred.
pub async fn client(kubeconfig: Option<&Path>, k: &KubernetesConf) -> Result<Client, Error> {
    let options = KubeConfigOptions::default();
    let config = if let Some(path) = kubeconfig {
        let kc = Kubeconfig::read_from(path).map_err(|source| Error::ReadKubeconfig {
            path: path.to_owned(),
            source,
        })?;
        kube::Config::from_custom_kubeconfig(kc, &options)
            .await
            .map_err(Error::LoadKubeconfig)?
    } else if !k.api_root.is_empty() {
        let scheme_ok = k.api_root.starts_with("https://") || k.api_root.starts_with("http://");
        if !scheme_ok || k.api_root.parse::<http::Uri>().is_err() {
            return Err(Error::ApiRoot(k.api_root.clone()));
        }
        kube::Config::from_custom_kubeconfig(kubeconfig_from_conf(k), &options)
            .await
            .map_err(Error::LoadKubeconfig)?
    } else {
        kube::Config::infer().await.map_err(Error::Infer)?
    };
    Client::try_from(config).map_err(Error::Client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_root_options_become_a_kubeconfig() {
        let mut k = kuryr_config::Config::defaults().groups.kubernetes;
        k.api_root = "https://10.0.0.1:6443".into();
        k.ssl_verify_server_crt = true;
        k.ssl_ca_crt_file = Some("/etc/kuryr/ca.crt".into());
        k.token_file = Some("/nonexistent/token".into());
        let kc = kubeconfig_from_conf(&k);
        let cluster = kc.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1:6443"));
        assert_eq!(
            cluster.certificate_authority.as_deref(),
            Some("/etc/kuryr/ca.crt")
        );
        assert_eq!(cluster.insecure_skip_tls_verify, None);
        let user = kc.auth_infos[0].auth_info.as_ref().expect("user");
        assert_eq!(user.token_file, None);
        assert_eq!(kc.current_context.as_deref(), Some("kuryr"));

        k.ssl_verify_server_crt = false;
        let kc = kubeconfig_from_conf(&k);
        let cluster = kc.clusters[0].cluster.as_ref().expect("cluster");
        assert_eq!(cluster.certificate_authority, None);
        assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
    }

    #[test]
    fn an_existing_token_file_is_used() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, "secret").expect("write token");
        let mut k = kuryr_config::Config::defaults().groups.kubernetes;
        k.api_root = "https://10.0.0.1:6443".into();
        k.token_file = Some(token.display().to_string());
        let kc = kubeconfig_from_conf(&k);
        let user = kc.auth_infos[0].auth_info.as_ref().expect("user");
        assert_eq!(user.token_file.as_deref(), Some(token.to_str().expect("utf-8")));
    }

    #[tokio::test]
    async fn a_bad_api_root_names_the_option() {
        let mut k = kuryr_config::Config::defaults().groups.kubernetes;
        k.api_root = "10.0.0.1:6443".into();
        let Err(e) = client(None, &k).await else {
            panic!("a host:port without scheme is not a URL")
        };
        assert!(e.to_string().contains("[kubernetes] api_root"), "{e}");
    }
}
