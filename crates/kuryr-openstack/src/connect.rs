//! Building an authenticated openstack_sdk session from [`CloudAuth`] (clouds.yaml cloud,
//! `[neutron]` keystone options, or `OS_*` variables), with the pitfalls of the SDK handled:
//! a rustls crypto provider is installed first, the whole connection runs under a timeout,
//! and the Network (and Load Balancer) endpoints are version-discovered explicitly.
//!
//! `$HOME`: openstack_sdk always creates and prunes `$HOME/.osc` (its token and discovery cache
//! directory), even with the auth cache disabled. In a container with a read-only root give the
//! process a writable `HOME` (an `emptyDir`), otherwise connecting fails on that directory.

use crate::error::{BoxError, Error, Result};
use kuryr_config::{CloudAuth, KeystoneAuth};
use openstack_sdk::AsyncOpenStack;
use openstack_sdk::config::{CloudConfig, ConfigFile};
use openstack_sdk::types::ServiceType;
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// The HTTP client's own timeout: above every per-request timeout we set (see
/// [`connect_session`]).
const HTTP_BACKSTOP: Duration = Duration::from_secs(3600);

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Upper bound of authentication plus discovery (default 30 s). openstack_sdk can hang
    /// forever in `connect()` (seen with `interface: internal` when Keystone is only registered
    /// as public), so this is not optional.
    pub connect_timeout: Duration,
    /// Upper bound of each request (default 30 s); `[neutron] timeout` when set.
    pub request_timeout: Duration,
    /// clouds.yaml to read besides the SDK's own search path (`./clouds.yaml`,
    /// `~/.config/openstack/`, `/etc/openstack/`, `$OS_CLIENT_CONFIG_PATH`).
    pub clouds_file: Option<PathBuf>,
    /// Neutron's URL, version included (`[neutron] endpoint_override`, as keystoneauth's adapter
    /// option): used instead of the catalog's, without version discovery. Everything else
    /// (Keystone, Octavia) still comes from the catalog.
    pub network_endpoint: Option<String>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            clouds_file: None,
            network_endpoint: None,
        }
    }
}

impl ConnectOptions {
    /// Defaults, with `clouds_file` from `$OS_CLIENT_CONFIG_FILE` (python-openstackclient's
    /// variable, which the SDK itself does not read) and `request_timeout` from `[neutron]
    /// timeout` when given.
    pub fn from_env(neutron_timeout: Option<Duration>) -> Self {
        ConnectOptions {
            clouds_file: std::env::var_os("OS_CLIENT_CONFIG_FILE").map(PathBuf::from),
            request_timeout: neutron_timeout.unwrap_or(Duration::from_secs(30)),
            ..Default::default()
        }
    }
}

fn connect_err(step: &'static str, message: impl Into<String>, source: Option<BoxError>) -> Error {
    Error::Connect {
        step,
        message: message.into(),
        source,
    }
}

/// Installs the aws-lc-rs rustls provider for the process (reqwest under openstack_sdk and
/// kube would otherwise disagree and panic). Installing twice is harmless.
pub fn install_crypto_provider() {
    // Err only means a provider is already installed, which is what we want.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// The SDK's cloud configuration for `auth`, with the Network endpoint override of `opts`.
pub fn cloud_config(auth: &CloudAuth, opts: &ConnectOptions) -> Result<CloudConfig> {
    let mut cfg = auth_config(auth, opts)?;
    if let Some(url) = opts.network_endpoint.as_deref().filter(|u| !u.is_empty()) {
        // The SDK takes per-service overrides from its catch-all options (as clouds.yaml's
        // `network_endpoint_override`); built through serde because their value type is the
        // SDK's own.
        let extra: CloudConfig =
            serde_json::from_value(json!({"network_endpoint_override": url, "network_skip_discovery": true}))
                .map_err(|e| connect_err("config", "[neutron] endpoint_override", Some(Box::new(e))))?;
        cfg.options.extend(extra.options);
    }
    Ok(cfg)
}

fn auth_config(auth: &CloudAuth, opts: &ConnectOptions) -> Result<CloudConfig> {
    match auth {
        CloudAuth::CloudsYaml { cloud, region_name } => {
            let file =
                ConfigFile::new_with_user_specified_configs(opts.clouds_file.as_ref(), None::<PathBuf>)
                    .map_err(|e| connect_err("config", "reading clouds.yaml", Some(Box::new(e))))?;
            let mut cfg = file
                .get_cloud_config(cloud)
                .map_err(|e| connect_err("config", format!("cloud {cloud}"), Some(Box::new(e))))?
                .ok_or_else(|| {
                    connect_err(
                        "config",
                        format!(
                            "cloud {cloud:?} not in clouds.yaml (searched {:?}, ./clouds.yaml, \
                             ~/.config/openstack, /etc/openstack)",
                            opts.clouds_file
                        ),
                        None,
                    )
                })?;
            if let Some(r) = region_name {
                cfg.region_name = Some(r.clone());
            }
            Ok(cfg)
        }
        CloudAuth::Neutron(k) | CloudAuth::Environment(k) => keystone_config(k),
    }
}

/// Translates keystoneauth options (as in `kuryr.conf [neutron]`) to the SDK's config.
pub fn keystone_config(k: &KeystoneAuth) -> Result<CloudConfig> {
    let mut a = Map::new();
    let mut put = |key: &str, v: &Option<String>| {
        if let Some(v) = v {
            a.insert(key.into(), json!(v));
        }
    };
    put("auth_url", &k.auth_url);
    put("username", &k.username);
    put("user_id", &k.user_id);
    put("password", &k.password);
    put("project_name", &k.project_name);
    put("project_id", &k.project_id);
    put(
        "user_domain_name",
        &k.user_domain_name.clone().or(k.default_domain_name.clone()),
    );
    put(
        "user_domain_id",
        &k.user_domain_id.clone().or(k.default_domain_id.clone()),
    );
    put(
        "project_domain_name",
        &k.project_domain_name.clone().or(k.default_domain_name.clone()),
    );
    put(
        "project_domain_id",
        &k.project_domain_id.clone().or(k.default_domain_id.clone()),
    );
    put("domain_name", &k.domain_name);
    put("domain_id", &k.domain_id);
    put("system_scope", &k.system_scope);
    put("token", &k.token);
    put("application_credential_id", &k.application_credential_id);
    put("application_credential_name", &k.application_credential_name);
    put("application_credential_secret", &k.application_credential_secret);
    if k.trust_id.is_some() {
        tracing::warn!("[neutron] trust_id is not supported by the OpenStack client; ignored");
    }
    let mut c = Map::new();
    c.insert("auth".into(), Value::Object(a));
    c.insert("auth_type".into(), json!(k.auth_type));
    c.insert("name".into(), json!("kuryr.conf"));
    c.insert("auth_cache".into(), json!(false));
    if !k.interface.is_empty() {
        c.insert("interface".into(), json!(k.interface));
    }
    if let Some(r) = &k.region_name {
        c.insert("region_name".into(), json!(r));
    }
    if let Some(ca) = &k.cafile {
        c.insert("cacert".into(), json!(ca));
    }
    if k.insecure {
        c.insert("verify".into(), json!(false));
    }
    serde_json::from_value(Value::Object(c))
        .map_err(|e| connect_err("config", "keystone options", Some(Box::new(e))))
}

/// Authenticates and discovers the Network (and, when in the catalog, Load Balancer)
/// endpoints, all within `opts.connect_timeout`.
pub async fn connect_session(cfg: &CloudConfig, opts: &ConnectOptions) -> Result<AsyncOpenStack> {
    install_crypto_provider();
    let work = async {
        let os = AsyncOpenStack::builder(cfg)
            .disable_auth_cache(true)
            // Our own per-request timeouts (tokio) govern and give typed errors: `[neutron]
            // timeout`, longer for bulk requests (`client::bulk_timeout`). This is only the
            // HTTP client's backstop, above any of them (the SDK's default is 30 s, which
            // would cut a healthy bulk creation short).
            .http_timeout(HTTP_BACKSTOP.max(opts.request_timeout.saturating_mul(2)))
            .http_connect_timeout(opts.request_timeout.min(Duration::from_secs(10)))
            .connect()
            .await
            .map_err(|e| connect_err("authenticate", "keystone", Some(Box::new(e))))?;
        // The catalog URLs may carry no version (`http://host:9696`); without discovery every
        // call would go to `/ports` and 404.
        os.discover_service_endpoint(&ServiceType::Network)
            .await
            .map_err(|e| connect_err("discover", "network endpoint", Some(Box::new(e))))?;
        if let Err(e) = os.discover_service_endpoint(&ServiceType::LoadBalancer).await {
            tracing::warn!(error = %e, "load-balancer endpoint discovery failed");
        }
        Ok(os)
    };
    match tokio::time::timeout(opts.connect_timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(connect_err(
            "timeout",
            format!(
                "no session within {:?} (with `interface: internal` check that Keystone has an \
                 internal endpoint)",
                opts.connect_timeout
            ),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keystone_options_translate() {
        let k = KeystoneAuth {
            auth_type: "password".into(),
            auth_url: Some("http://ks:5000/v3".into()),
            username: Some("kuryr".into()),
            password: Some("pw".into()),
            project_name: Some("k8s".into()),
            default_domain_name: Some("Default".into()),
            region_name: Some("RegionOne".into()),
            interface: "public".into(),
            ..Default::default()
        };
        let c = keystone_config(&k).unwrap();
        assert_eq!(c.auth_type.as_deref(), Some("password"));
        assert_eq!(c.region_name.as_deref(), Some("RegionOne"));
        assert_eq!(c.interface.as_deref(), Some("public"));
        let a = c.auth.unwrap();
        assert_eq!(a.username.as_deref(), Some("kuryr"));
        assert_eq!(a.user_domain_name.as_deref(), Some("Default"));
        assert_eq!(a.project_domain_name.as_deref(), Some("Default"));
        assert!(a.password.is_some());
    }

    #[test]
    fn missing_cloud_is_a_connect_error() {
        let dir = std::env::temp_dir().join(format!("kos-clouds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("clouds.yaml");
        std::fs::write(&f, "clouds:\n  a:\n    auth:\n      auth_url: http://x\n").unwrap();
        let opts = ConnectOptions {
            clouds_file: Some(f),
            ..Default::default()
        };
        let e = cloud_config(
            &CloudAuth::CloudsYaml {
                cloud: "nope".into(),
                region_name: None,
            },
            &opts,
        )
        .unwrap_err();
        assert!(matches!(e, Error::Connect { step: "config", .. }), "{e}");
        let c = cloud_config(
            &CloudAuth::CloudsYaml {
                cloud: "a".into(),
                region_name: Some("R2".into()),
            },
            &opts,
        )
        .unwrap();
        assert_eq!(c.region_name.as_deref(), Some("R2"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
