//! `kuryrctl ports`: the cluster's tagged Neutron ports, classified against the KuryrPorts
//! (in use, pooled, orphan); [`load`] also feeds `kuryrctl pools`' derived pools.

use std::io::Write;

use kube::Client;
use kuryr_openstack::{Neutron, Port, PortFilter};
use kuryr_types::KuryrPort;
use serde_json::json;

use super::list;
use crate::{
    Error,
    classify::{self, PortClass, PortRow},
    cli::{Cli, Output},
    output,
};

/// Tagged ports and the referenced port IDs.
pub(super) async fn load(
    config: &kuryr_config::Config,
    client: &Client,
    cluster_tag: Option<&str>,
) -> Result<(Vec<Port>, std::collections::HashMap<String, String>, Vec<String>), Error> {
    let tags = crate::access::tags(config, cluster_tag, client).await?;
    if tags.is_empty() {
        return Err(Error::NoTags);
    }
    let kps: Vec<KuryrPort> = list(client, None, None, "KuryrPorts").await?;
    let neutron = crate::access::neutron(config).await?;
    let ports = neutron
        .list_ports(&PortFilter {
            tags: tags.clone(),
            ..Default::default()
        })
        .await
        .map_err(|source| Error::Neutron {
            what: "ports",
            source,
        })?;
    Ok((ports, classify::referenced_ports(&kps), tags))
}

/// `kuryrctl ports`.
pub async fn run_ports(
    cli: &Cli,
    client: &Client,
    cluster_tag: Option<&str>,
    orphans_only: bool,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let config = crate::access::config(&cli.config_file)?;
    let (ports, referenced, tags) = load(&config, client, cluster_tag).await?;
    let mut rows: Vec<PortRow> = ports
        .iter()
        .map(|p| PortRow::new(p, classify::classify_port(p, &referenced)))
        .collect();
    let count = |c: fn(&PortClass) -> bool| rows.iter().filter(|r| c(&r.class)).count();
    let in_use = count(|c| matches!(c, PortClass::InUse { .. }));
    let pooled = count(|c| matches!(c, PortClass::Pooled));
    let orphan = count(|c| matches!(c, PortClass::Orphan));
    if orphans_only {
        rows.retain(|r| r.class == PortClass::Orphan);
    }
    rows.sort_by(|a, b| (&a.host, &a.network_id, &a.id).cmp(&(&b.host, &b.network_id, &b.id)));
    let mut extra = serde_json::Map::new();
    extra.insert("tags".into(), json!(tags));
    extra.insert(
        "summary".into(),
        json!({"inUse": in_use, "pooled": pooled, "orphan": orphan}),
    );
    output::print(out, cli.output, &rows, extra)?;
    if cli.output == Output::Table {
        let _ = writeln!(
            out,
            "\n{} port(s) tagged {}: {in_use} in use, {pooled} pooled, {orphan} orphan",
            ports.len(),
            tags.join(",")
        );
    }
    Ok(0)
}
