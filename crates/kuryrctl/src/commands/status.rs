//! `kuryrctl status`: upgrade checks (upstream's `kuryr-k8s-status upgrade check`): the CRDs
//! are installed, no pod still uses the legacy VIF annotation, every KuryrPort has its pod, and
//! no object carries an upstream finalizer that no kuryr-rs handler removes yet; and the
//! cluster's identity on OpenStack (configured tags, or derived from `kube-system`).
//! Exit code: the worst result (0 success, 1 warning, 2 failure).

use std::{collections::BTreeSet, io::Write};

use k8s_openapi::{
    api::{
        core::v1::{Pod, Service},
        networking::v1::NetworkPolicy,
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{Api, Client, ResourceExt, api::ListParams};
use kuryr_types::{KuryrLoadBalancer, KuryrNetworkPolicy, KuryrPort};
use serde_json::json;

use super::list;
use crate::{Error, classify, cli::Output, output};

/// Runs the checks.
pub async fn run(
    client: &Client,
    enabled_handlers: Option<&[String]>,
    identity: Result<kuryr_runtime::identity::Identity, Error>,
    format: Output,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let present: BTreeSet<String> = crds
        .list(&ListParams::default())
        .await
        .map_err(|source| Error::List {
            what: "CustomResourceDefinitions".into(),
            source,
        })?
        .items
        .iter()
        .map(|c| c.name_any())
        .collect();
    let expected: Vec<String> = kuryr_types::crds::all()
        .iter()
        .map(|(_, c)| c.name_any())
        .collect();
    let mut checks = vec![
        check_identity(identity),
        classify::check_crds(&expected, &present),
    ];
    let pods: Vec<Pod> = list(client, None, None, "pods").await?;
    checks.push(classify::check_legacy_annotations(&pods));
    if present.contains("kuryrports.openstack.org") {
        let kps: Vec<KuryrPort> = list(client, None, None, "KuryrPorts").await?;
        checks.push(classify::check_stale_kuryrports(&pods, &kps));
    }
    checks.push(classify::check_unhandled_finalizers(
        &finalized_objects(client, &present).await?,
        enabled_handlers,
    ));
    let worst = checks
        .iter()
        .map(|c| c.result)
        .max()
        .unwrap_or(classify::Outcome::Success);
    let mut extra = serde_json::Map::new();
    extra.insert("result".into(), json!(worst));
    output::print(out, format, &checks, extra)?;
    Ok(worst.code())
}

/// The cluster's identity on OpenStack: the tags that prove a resource is this cluster's.
fn check_identity(identity: Result<kuryr_runtime::identity::Identity, Error>) -> classify::Check {
    match identity {
        Ok(id) => classify::Check {
            check: "Cluster identity",
            result: classify::Outcome::Success,
            details: format!("{} ({})", id.tags().join(","), id.source()),
        },
        Err(e) => classify::Check {
            check: "Cluster identity",
            result: classify::Outcome::Failure,
            details: kuryr_runtime::error_chain(&e),
        },
    }
}

/// Services, NetworkPolicies and (when their CRDs exist) KuryrLoadBalancers and
/// KuryrNetworkPolicies, with their finalizers.
async fn finalized_objects(
    client: &Client,
    present: &BTreeSet<String>,
) -> Result<Vec<classify::Finalized>, Error> {
    fn rows<K: ResourceExt>(kind: &'static str, items: Vec<K>) -> impl Iterator<Item = classify::Finalized> {
        items.into_iter().map(move |o| {
            (
                kind,
                format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any()),
                o.finalizers().to_vec(),
            )
        })
    }
    let mut out: Vec<classify::Finalized> = Vec::new();
    out.extend(rows(
        "Service",
        list::<Service>(client, None, None, "Services").await?,
    ));
    out.extend(rows(
        "NetworkPolicy",
        list::<NetworkPolicy>(client, None, None, "NetworkPolicies").await?,
    ));
    if present.contains("kuryrloadbalancers.openstack.org") {
        out.extend(rows(
            "KuryrLoadBalancer",
            list::<KuryrLoadBalancer>(client, None, None, "KuryrLoadBalancers").await?,
        ));
    }
    if present.contains("kuryrnetworkpolicies.openstack.org") {
        out.extend(rows(
            "KuryrNetworkPolicy",
            list::<KuryrNetworkPolicy>(client, None, None, "KuryrNetworkPolicies").await?,
        ));
    }
    Ok(out)
}
