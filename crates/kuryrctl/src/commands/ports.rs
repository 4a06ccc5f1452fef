//! `kuryrctl ports` and `kuryrctl pools`: the cluster's tagged Neutron ports, classified
//! against the KuryrPorts, and the pools they form.

use std::{io::Write, path::Path, time::Duration};

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
async fn load(
    cli: &Cli,
    client: &Client,
    cluster_tag: Option<&str>,
) -> Result<(Vec<Port>, std::collections::HashMap<String, String>, Vec<String>), Error> {
    let config = crate::access::config(&cli.config_file)?;
    let tags = crate::access::tags(&config, cluster_tag)?;
    if tags.is_empty() {
        return Err(Error::NoTags);
    }
    let kps: Vec<KuryrPort> = list(client, None, None, "KuryrPorts").await?;
    let neutron = crate::access::neutron(&config).await?;
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
    let (ports, referenced, tags) = load(cli, client, cluster_tag).await?;
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

/// Asks the controller's pool-manager socket for its pools (`GET /listPools`, upstream's
/// API); `None` when nothing answers there.
async fn ask_socket(path: &Path) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fut = async {
        let mut s = tokio::net::UnixStream::connect(path).await.ok()?;
        let req = "GET /listPools HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        // Upstream answered without a status line; an HTTP answer has headers to skip.
        Some(match text.split_once("\r\n\r\n") {
            Some((head, body)) if head.starts_with("HTTP/") => body.to_owned(),
            _ => text,
        })
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .ok()
        .flatten()
}

/// `kuryrctl pools`.
pub async fn run_pools(
    cli: &Cli,
    client: &Client,
    cluster_tag: Option<&str>,
    socket: Option<&Path>,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let config = crate::access::config(&cli.config_file)?;
    let sock = socket
        .map(Path::to_path_buf)
        .unwrap_or_else(|| config.pool_manager.sock_file.clone().into());
    if sock.exists()
        && let Some(text) = ask_socket(&sock).await
    {
        // kuryr-rs' manager answers JSON; upstream's answered plain text, shown as is.
        if let Ok(mut rows) = serde_json::from_str::<Vec<classify::ManagedPoolRow>>(&text) {
            rows.sort_by(|a, b| (&a.host, &a.network_id).cmp(&(&b.host, &b.network_id)));
            let mut extra = serde_json::Map::new();
            extra.insert("source".into(), json!("pool-manager"));
            extra.insert("socket".into(), json!(sock));
            output::print(out, cli.output, &rows, extra)?;
            if cli.output == Output::Table {
                let total: u32 = rows.iter().map(|r| r.available).sum();
                let _ = writeln!(
                    out,
                    "\n{} pool(s), {total} available port(s) (from the pool manager at {})",
                    rows.len(),
                    sock.display()
                );
            }
            return Ok(0);
        }
        match cli.output {
            Output::Table => {
                let _ = writeln!(
                    out,
                    "(from the pool manager at {})\n{}",
                    sock.display(),
                    text.trim_end()
                );
            }
            Output::Json => {
                let doc = json!({"source": "pool-manager", "socket": sock, "answer": text});
                let _ = writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&doc).map_err(Error::Json)?
                );
            }
        }
        return Ok(0);
    }
    let (ports, referenced, tags) = load(cli, client, cluster_tag).await?;
    let rows = classify::pools(&ports, &referenced);
    let mut extra = serde_json::Map::new();
    extra.insert("source".into(), json!("neutron"));
    extra.insert("tags".into(), json!(tags));
    output::print(out, cli.output, &rows, extra)?;
    if cli.output == Output::Table {
        let total: usize = rows.iter().map(|r| r.ports).sum();
        let _ = writeln!(
            out,
            "\n{} pool(s), {total} free port(s) (derived from Neutron ports tagged {} and the KuryrPorts)",
            rows.len(),
            tags.join(",")
        );
    }
    Ok(0)
}
