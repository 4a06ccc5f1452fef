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

/// The service account's CA inside a pod.
pub const SERVICE_ACCOUNT_CA: &str = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";

/// The CA that verifies the API server: `ssl_ca_crt_file` when set (an empty value is unset),
/// else the service account's inside a pod; `None` without verification.
fn server_ca(k: &KubernetesConf) -> Option<String> {
    if !k.ssl_verify_server_crt {
        return None;
    }
    k.ssl_ca_crt_file.clone().filter(|f| !f.is_empty()).or_else(|| {
        Path::new(SERVICE_ACCOUNT_CA)
            .exists()
            .then(|| SERVICE_ACCOUNT_CA.to_owned())
    })
}

/// What is unsafe in the `[kubernetes]` options of `api_root` when a bearer token is sent
/// (`token`): the token in clear text over `http://`, or to a server whose certificate is not
/// checked (`ssl_verify_server_crt = False`, upstream's default). Each is a start-up warning.
pub fn transport_warnings(k: &KubernetesConf, token: bool) -> Vec<String> {
    let mut out = Vec::new();
    if !token || k.api_root.is_empty() {
        return out;
    }
    if k.api_root.starts_with("http://") {
        out.push(format!(
            "[kubernetes] api_root = {}: the ServiceAccount token is sent in clear text; use https://",
            k.api_root
        ));
    } else if !k.ssl_verify_server_crt {
        out.push(format!(
            "[kubernetes] ssl_verify_server_crt = False: the ServiceAccount token is sent to {} without checking \
             its certificate (anyone on the path can take it); set ssl_verify_server_crt = True (the \
             ServiceAccount's CA is used when ssl_ca_crt_file is unset)",
            k.api_root
        ));
    }
    out
}

/// The kubeconfig equivalent of upstream's `[kubernetes]` connection options (`api_root` set).
pub fn kubeconfig_from_conf(k: &KubernetesConf) -> Kubeconfig {
    const NAME: &str = "kuryr";
    let cluster = Cluster {
        server: Some(k.api_root.clone()),
        certificate_authority: server_ca(k),
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
        let kc = kubeconfig_from_conf(k);
        let token = kc
            .auth_infos
            .first()
            .and_then(|a| a.auth_info.as_ref())
            .is_some_and(|a| a.token_file.is_some());
        for w in transport_warnings(k, token) {
            tracing::warn!("{w}");
        }
        kube::Config::from_custom_kubeconfig(kc, &options)
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

    #[test]
    fn a_token_to_an_unverified_or_plain_server_is_warned_about() {
        let mut k = kuryr_config::Config::defaults().groups.kubernetes;
        k.api_root = "https://10.0.0.1:6443".into();
        k.ssl_verify_server_crt = false;
        let w = transport_warnings(&k, true);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("ssl_verify_server_crt = False"), "{w:?}");
        assert!(
            transport_warnings(&k, false).is_empty(),
            "no token, nothing to lose"
        );
        k.ssl_verify_server_crt = true;
        assert!(transport_warnings(&k, true).is_empty());
        k.api_root = "http://10.0.0.1:8080".into();
        assert!(transport_warnings(&k, true)[0].contains("clear text"));
        // An empty ssl_ca_crt_file is unset: the ServiceAccount's CA in a pod (none here).
        k.api_root = "https://10.0.0.1:6443".into();
        k.ssl_ca_crt_file = Some(String::new());
        let kc = kubeconfig_from_conf(&k);
        let ca = kc.clusters[0]
            .cluster
            .as_ref()
            .expect("cluster")
            .certificate_authority
            .clone();
        assert_eq!(ca.is_some(), Path::new(SERVICE_ACCOUNT_CA).exists(), "{ca:?}");
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
