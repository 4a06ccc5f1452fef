//! Which OpenStack credentials to use: upstream reads keystoneauth options from `[neutron]`
//! (optionally moved to another group by `auth_section`); kuryr-rs also accepts the usual
//! `OS_CLOUD` (clouds.yaml) and `OS_*` environment variables. This module only decides and
//! carries the data; the client is built elsewhere.

use crate::config::Config;
use crate::error::ConfigError;
use std::fmt;
use std::time::Duration;

/// Keystone authentication parameters (a keystoneauth plugin and its options).
#[derive(Clone, PartialEq, Default)]
pub struct KeystoneAuth {
    /// keystoneauth plugin name: `password`, `v3password`, `token`, `v3token`,
    /// `v3applicationcredential`, …
    pub auth_type: String,
    /// Keystone URL.
    pub auth_url: Option<String>,
    /// User name.
    pub username: Option<String>,
    /// User ID.
    pub user_id: Option<String>,
    /// Password (never printed).
    pub password: Option<String>,
    /// Project name.
    pub project_name: Option<String>,
    /// Project ID.
    pub project_id: Option<String>,
    /// User's domain name.
    pub user_domain_name: Option<String>,
    /// User's domain ID.
    pub user_domain_id: Option<String>,
    /// Project's domain name.
    pub project_domain_name: Option<String>,
    /// Project's domain ID.
    pub project_domain_id: Option<String>,
    /// Domain name to scope to.
    pub domain_name: Option<String>,
    /// Domain ID to scope to.
    pub domain_id: Option<String>,
    /// Default domain name (user and project).
    pub default_domain_name: Option<String>,
    /// Default domain ID (user and project).
    pub default_domain_id: Option<String>,
    /// System scope.
    pub system_scope: Option<String>,
    /// Trust ID.
    pub trust_id: Option<String>,
    /// Token, for token plugins (never printed).
    pub token: Option<String>,
    /// Application credential ID.
    pub application_credential_id: Option<String>,
    /// Application credential name.
    pub application_credential_name: Option<String>,
    /// Application credential secret (never printed).
    pub application_credential_secret: Option<String>,
    /// Region.
    pub region_name: Option<String>,
    /// Catalog interface (`public`, `internal`, `admin`).
    pub interface: String,
    /// CA bundle.
    pub cafile: Option<String>,
    /// Client certificate.
    pub certfile: Option<String>,
    /// Client key.
    pub keyfile: Option<String>,
    /// Skip TLS verification.
    pub insecure: bool,
    /// HTTP timeout.
    pub timeout: Option<Duration>,
}

impl fmt::Debug for KeystoneAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |s: &Option<String>| s.as_ref().map(|_| "<redacted>");
        f.debug_struct("KeystoneAuth")
            .field("auth_type", &self.auth_type)
            .field("auth_url", &self.auth_url)
            .field("username", &self.username)
            .field("user_id", &self.user_id)
            .field("password", &redact(&self.password))
            .field("project_name", &self.project_name)
            .field("project_id", &self.project_id)
            .field("user_domain_name", &self.user_domain_name)
            .field("project_domain_name", &self.project_domain_name)
            .field("token", &redact(&self.token))
            .field("application_credential_id", &self.application_credential_id)
            .field(
                "application_credential_secret",
                &redact(&self.application_credential_secret),
            )
            .field("region_name", &self.region_name)
            .field("interface", &self.interface)
            .field("cafile", &self.cafile)
            .field("insecure", &self.insecure)
            .finish_non_exhaustive()
    }
}

/// Where the OpenStack credentials come from.
#[derive(Debug, Clone, PartialEq)]
pub enum CloudAuth {
    /// A `clouds.yaml` entry (named by `OS_CLOUD`); `[neutron] region_name` overrides the
    /// cloud's region when set.
    CloudsYaml {
        /// Cloud name.
        cloud: String,
        /// Region override from `[neutron] region_name`.
        region_name: Option<String>,
    },
    /// keystoneauth options of `[neutron]` (upstream's way).
    Neutron(KeystoneAuth),
    /// `OS_*` environment variables (`OS_AUTH_URL`, `OS_USERNAME`, …).
    Environment(KeystoneAuth),
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty())
}

/// Decides which credentials to use. Order: keystone options in `[neutron]` (if any auth option
/// is set there, as upstream); else `OS_CLOUD`; else `OS_AUTH_URL` and friends; else an error.
pub fn resolve_cloud_auth(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<CloudAuth, ConfigError> {
    let r = &config.resolved;
    let n = &config.groups.neutron;
    let s = |name: &str| non_empty(r.str_opt("neutron", name));
    let set_in_file = |name: &str| {
        r.get("neutron", name)
            .is_some_and(|o| o.origin.is_some() && o.value.is_some())
    };
    let auth_keys = [
        "auth_type",
        "auth_url",
        "username",
        "user_id",
        "password",
        "token",
        "application_credential_id",
        "application_credential_secret",
    ];
    if auth_keys.iter().any(|k| set_in_file(k)) {
        let Some(auth_type) = s("auth_type") else {
            return Err(ConfigError::MissingRequired {
                group: "neutron".into(),
                option: "auth_type".into(),
                reason: "when keystone options are set in [neutron]".into(),
                origin: None,
                files: r.files.clone(),
            });
        };
        let auth = KeystoneAuth {
            auth_type,
            auth_url: s("auth_url"),
            username: s("username"),
            user_id: s("user_id"),
            password: s("password"),
            project_name: s("project_name"),
            project_id: s("project_id"),
            user_domain_name: s("user_domain_name"),
            user_domain_id: s("user_domain_id"),
            project_domain_name: s("project_domain_name"),
            project_domain_id: s("project_domain_id"),
            domain_name: s("domain_name"),
            domain_id: s("domain_id"),
            default_domain_name: s("default_domain_name"),
            default_domain_id: s("default_domain_id"),
            system_scope: s("system_scope"),
            trust_id: s("trust_id"),
            token: s("token"),
            application_credential_id: s("application_credential_id"),
            application_credential_name: s("application_credential_name"),
            application_credential_secret: s("application_credential_secret"),
            region_name: n.region_name.clone(),
            interface: n.endpoint_type.clone(),
            cafile: n.cafile.clone(),
            certfile: n.certfile.clone(),
            keyfile: n.keyfile.clone(),
            insecure: n.insecure,
            timeout: n.timeout,
        };
        if auth.auth_type != "none" && auth.auth_type != "noauth" && auth.auth_url.is_none() {
            return Err(ConfigError::MissingRequired {
                group: "neutron".into(),
                option: "auth_url".into(),
                reason: format!("by auth_type = {}", auth.auth_type),
                origin: None,
                files: r.files.clone(),
            });
        }
        return Ok(CloudAuth::Neutron(auth));
    }
    if let Some(cloud) = non_empty(env("OS_CLOUD")) {
        return Ok(CloudAuth::CloudsYaml {
            cloud,
            region_name: n.region_name.clone(),
        });
    }
    if let Some(auth_url) = non_empty(env("OS_AUTH_URL")) {
        let e = |k: &str| non_empty(env(k));
        let auth = KeystoneAuth {
            auth_type: e("OS_AUTH_TYPE").unwrap_or_else(|| {
                if e("OS_APPLICATION_CREDENTIAL_ID").is_some() {
                    "v3applicationcredential".into()
                } else if e("OS_TOKEN").is_some() {
                    "token".into()
                } else {
                    "password".into()
                }
            }),
            auth_url: Some(auth_url),
            username: e("OS_USERNAME"),
            user_id: e("OS_USER_ID"),
            password: e("OS_PASSWORD"),
            project_name: e("OS_PROJECT_NAME").or_else(|| e("OS_TENANT_NAME")),
            project_id: e("OS_PROJECT_ID").or_else(|| e("OS_TENANT_ID")),
            user_domain_name: e("OS_USER_DOMAIN_NAME"),
            user_domain_id: e("OS_USER_DOMAIN_ID"),
            project_domain_name: e("OS_PROJECT_DOMAIN_NAME"),
            project_domain_id: e("OS_PROJECT_DOMAIN_ID"),
            domain_name: e("OS_DOMAIN_NAME"),
            domain_id: e("OS_DOMAIN_ID"),
            default_domain_name: e("OS_DEFAULT_DOMAIN_NAME"),
            default_domain_id: e("OS_DEFAULT_DOMAIN_ID"),
            system_scope: e("OS_SYSTEM_SCOPE"),
            trust_id: e("OS_TRUST_ID"),
            token: e("OS_TOKEN"),
            application_credential_id: e("OS_APPLICATION_CREDENTIAL_ID"),
            application_credential_name: e("OS_APPLICATION_CREDENTIAL_NAME"),
            application_credential_secret: e("OS_APPLICATION_CREDENTIAL_SECRET"),
            region_name: n.region_name.clone().or_else(|| e("OS_REGION_NAME")),
            interface: e("OS_INTERFACE").unwrap_or_else(|| n.endpoint_type.clone()),
            cafile: n.cafile.clone().or_else(|| e("OS_CACERT")),
            certfile: n.certfile.clone().or_else(|| e("OS_CERT")),
            keyfile: n.keyfile.clone().or_else(|| e("OS_KEY")),
            insecure: n.insecure
                || e("OS_INSECURE").is_some_and(|v| crate::value::parse_bool(&v) == Some(true)),
            timeout: n.timeout,
        };
        return Ok(CloudAuth::Environment(auth));
    }
    Err(ConfigError::NoCredentials(
        "set keystone options in [neutron] (auth_type, auth_url, username, password, \
         project_name, …), or OS_CLOUD (clouds.yaml), or OS_AUTH_URL and the other OS_* variables"
            .into(),
    ))
}
