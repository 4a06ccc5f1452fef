//! `kuryrctl vifs`: pods with their VIFs (successor of upstream's `kubectl kuryr get vif`,
//! reading KuryrPorts instead of the legacy pod annotation).

use std::{collections::HashMap, io::Write};

use k8s_openapi::api::core::v1::Pod;
use kube::{Client, ResourceExt};
use kuryr_types::KuryrPort;

use super::list;
use crate::{Error, classify, cli::Output, output};

/// Prints the VIF of every non-host-network pod in `ns` (or all namespaces).
pub async fn run(
    client: &Client,
    ns: Option<&str>,
    selector: Option<&str>,
    format: Output,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let pods: Vec<Pod> = list(client, ns, selector, "pods").await?;
    let kps: Vec<KuryrPort> = list(client, ns, None, "KuryrPorts").await?;
    let by_name: HashMap<(String, String), &KuryrPort> = kps
        .iter()
        .map(|k| ((k.namespace().unwrap_or_default(), k.name_any()), k))
        .collect();
    let mut rows: Vec<classify::VifRow> = pods
        .iter()
        .filter_map(|p| {
            let kp = by_name
                .get(&(p.namespace().unwrap_or_default(), p.name_any()))
                .copied()
                .filter(|kp| Some(&kp.spec.pod_uid) == p.uid().as_ref());
            classify::vif_row(p, kp)
        })
        .collect();
    rows.sort_by(|a, b| (&a.namespace, &a.pod).cmp(&(&b.namespace, &b.pod)));
    output::print(out, format, &rows, Default::default())?;
    Ok(0)
}
