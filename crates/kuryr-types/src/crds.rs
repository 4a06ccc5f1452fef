//! The four CustomResourceDefinitions as installed in a cluster, generated from the Rust types,
//! adjusted where kube's derive differs from upstream's manifests, and rendered to the YAML
//! files under `deploy/crds/` (named like upstream's: `kuryrport.yaml`, …).
//!
//! Adjustments, so that the CRDs are drop-in replacements for upstream's:
//! * no `status` subresource (see [`STATUS_SUBRESOURCE`]);
//! * the root `required` list is upstream's: none, except `[status, spec]` for
//!   KuryrNetworkPolicy (kube's derive would require `spec` everywhere).

use crate::{KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Whether the CRDs declare the `status` subresource. Upstream's do not: upstream writes
/// `status` with JSON patches on the main resource (`PATCH .../kuryrports/<name>` with
/// `/status/vifs`). With the subresource enabled, those writes would be silently dropped by the
/// API server, so a cluster could not move back and forth between upstream and kuryr-rs
/// components. Consequently kuryr-rs writes `status` through the main resource too.
pub const STATUS_SUBRESOURCE: bool = false;

/// Header of every generated file.
pub const GENERATED_HEADER: &str = "# Generated from crates/kuryr-types by \
`cargo run -p kuryr-types --bin kuryr-crdgen -- --write`; do not edit.\n";

/// Why a CRD could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// YAML serialization failed.
    #[error("rendering CRD {name} as YAML")]
    Render {
        /// CRD name.
        name: String,
        /// Cause.
        #[source]
        source: serde_yaml::Error,
    },
}

fn adjust(mut crd: CustomResourceDefinition, root_required: &[&str]) -> CustomResourceDefinition {
    for v in &mut crd.spec.versions {
        if !STATUS_SUBRESOURCE {
            v.subresources = None;
        }
        if let Some(schema) = v.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.required = if root_required.is_empty() {
                None
            } else {
                Some(root_required.iter().map(|s| s.to_string()).collect())
            };
        }
    }
    crd
}

/// The KuryrPort CRD.
pub fn kuryrport() -> CustomResourceDefinition {
    adjust(KuryrPort::crd(), &[])
}

/// The KuryrNetwork CRD.
pub fn kuryrnetwork() -> CustomResourceDefinition {
    adjust(KuryrNetwork::crd(), &[])
}

/// The KuryrNetworkPolicy CRD.
pub fn kuryrnetworkpolicy() -> CustomResourceDefinition {
    adjust(KuryrNetworkPolicy::crd(), &["status", "spec"])
}

/// The KuryrLoadBalancer CRD.
pub fn kuryrloadbalancer() -> CustomResourceDefinition {
    adjust(KuryrLoadBalancer::crd(), &[])
}

/// All four CRDs with the file name each is written to (upstream's names).
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("kuryrport.yaml", kuryrport()),
        ("kuryrnetwork.yaml", kuryrnetwork()),
        ("kuryrnetworkpolicy.yaml", kuryrnetworkpolicy()),
        ("kuryrloadbalancer.yaml", kuryrloadbalancer()),
    ]
}

/// Renders one CRD as a YAML document with the generated-file header.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    let body = serde_yaml::to_string(crd).map_err(|source| CrdError::Render {
        name: crd.metadata.name.clone().unwrap_or_default(),
        source,
    })?;
    Ok(format!("{GENERATED_HEADER}{body}"))
}

/// `(file name, YAML)` of every CRD, as they must be in `deploy/crds/`.
pub fn render_all() -> Result<Vec<(&'static str, String)>, CrdError> {
    all()
        .into_iter()
        .map(|(file, crd)| Ok((file, to_yaml(&crd)?)))
        .collect()
}
