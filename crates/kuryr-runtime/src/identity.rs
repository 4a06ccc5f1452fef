//! This cluster's identity on OpenStack: the tags every resource kuryr-rs creates carries and
//! every resource it deletes, pools or adopts must carry (the ownership rule of
//! `kuryr_core::ownership`).
//!
//! `[neutron_defaults] cluster_tag` and `resource_tags` are the identity when either is set
//! (upstream's `resource_tags`; OpenShift sets it to the cluster's ID). When neither is, the
//! identity is derived: `kuryr-cluster=<UID of the kube-system Namespace>` — stable for the
//! cluster's life, different for every cluster, readable by the controller and `kuryrctl` with
//! one `get` — and written into the configuration as `cluster_tag`, so that every consumer
//! (pools, networks, security groups, load balancers, janitors) uses it without knowing where
//! it came from. Upstream had no identity without tags: its cleanup then took every
//! `compute:kuryr` port of the project for its own.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, Client};
use kuryr_config::Config;

/// Prefix of the derived identity tag (`kuryr-cluster=<kube-system UID>`).
pub const DERIVED_PREFIX: &str = "kuryr-cluster=";

/// The Namespace whose UID names the cluster.
pub const IDENTITY_NAMESPACE: &str = "kube-system";

/// Where this cluster's identity comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// `cluster_tag` / `resource_tags` as configured.
    Configured(Vec<String>),
    /// Derived from the `kube-system` Namespace's UID (`tag`, set as `cluster_tag`).
    Derived {
        /// The tag, `kuryr-cluster=<uid>`.
        tag: String,
    },
}

impl Identity {
    /// The identity's tags.
    pub fn tags(&self) -> Vec<String> {
        match self {
            Identity::Configured(t) => t.clone(),
            Identity::Derived { tag } => vec![tag.clone()],
        }
    }

    /// How it was found, for logs and `kuryrctl status`.
    pub fn source(&self) -> &'static str {
        match self {
            Identity::Configured(_) => "[neutron_defaults] cluster_tag / resource_tags",
            Identity::Derived { .. } => "derived from the UID of Namespace kube-system",
        }
    }
}

/// Why no identity could be found.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither tag is configured and the Namespace cannot be read.
    #[error(
        "no cluster identity: [neutron_defaults] cluster_tag and resource_tags are unset and Namespace \
         {IDENTITY_NAMESPACE} cannot be read to derive one (grant `get` on namespaces/{IDENTITY_NAMESPACE}, or set cluster_tag)"
    )]
    Unreadable(#[source] kube::Error),
    /// The Namespace has no UID (not a real API server).
    #[error("no cluster identity: Namespace {IDENTITY_NAMESPACE} has no UID")]
    NoUid,
}

/// The configured identity, if any (no I/O).
pub fn configured(config: &Config) -> Option<Identity> {
    let nd = &config.neutron_defaults;
    let mut tags = nd.resource_tags.clone();
    if let Some(t) = &nd.cluster_tag
        && !tags.contains(t)
    {
        tags.push(t.clone());
    }
    (!tags.is_empty()).then_some(Identity::Configured(tags))
}

/// The identity tag of a cluster whose `kube-system` Namespace has `uid`.
pub fn derived_tag(uid: &str) -> String {
    format!("{DERIVED_PREFIX}{uid}")
}

/// Finds the identity and, when derived, writes it into `config` as `cluster_tag`. A transient
/// API failure is retried for about half a minute; a refusal (403) or a missing Namespace
/// fails at once, naming the fix.
pub async fn resolve(client: &Client, config: &mut Config) -> Result<Identity, Error> {
    if let Some(id) = configured(config) {
        return Ok(id);
    }
    let api: Api<Namespace> = Api::all(client.clone());
    let mut delay = Duration::from_millis(500);
    let mut attempt = 0;
    let ns = loop {
        attempt += 1;
        match api.get(IDENTITY_NAMESPACE).await {
            Ok(ns) => break ns,
            Err(kube::Error::Api(s)) if matches!(s.code, 401 | 403 | 404) => {
                return Err(Error::Unreadable(kube::Error::Api(s)));
            }
            Err(e) if attempt >= 8 => return Err(Error::Unreadable(e)),
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), attempt, "reading Namespace kube-system for the cluster identity");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(8));
            }
        }
    };
    let uid = ns.metadata.uid.filter(|u| !u.is_empty()).ok_or(Error::NoUid)?;
    let tag = derived_tag(&uid);
    config.groups.neutron_defaults.cluster_tag = Some(tag.clone());
    Ok(Identity::Derived { tag })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(text: &str) -> Config {
        kuryr_config::from_strs(&[("kuryr.conf", text)], kuryr_config::Role::Any, &|_| None)
            .expect("config")
            .0
    }

    #[test]
    fn configured_tags_are_the_identity() {
        assert_eq!(configured(&conf("")), None);
        assert_eq!(
            configured(&conf(
                "[neutron_defaults]\nresource_tags = a,b\ncluster_tag = c\n"
            )),
            Some(Identity::Configured(vec!["a".into(), "b".into(), "c".into()]))
        );
        assert_eq!(
            configured(&conf("[neutron_defaults]\ncluster_tag = c\n")).map(|i| i.tags()),
            Some(vec!["c".to_string()])
        );
    }

    #[test]
    fn the_derived_tag_is_a_valid_neutron_tag() {
        let t = derived_tag("0c8a2a57-5e0d-4b4e-9a0b-6f7cf3b1a2d4");
        assert_eq!(t, "kuryr-cluster=0c8a2a57-5e0d-4b4e-9a0b-6f7cf3b1a2d4");
        assert!(!t.contains(',') && t.len() <= 255);
    }
}
