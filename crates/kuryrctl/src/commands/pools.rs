//! `kuryrctl pools [list|create|delete|show]`, the pools management of upstream's ports-pool
//! how-to: list the pools (from the controller's pool manager, else derived from Neutron and
//! the KuryrPorts), create ports in a node's pool (subports on a worker VM's trunk for nested
//! pools), free a node's pools, show a pool's ports. Everything but the fallback listing is a
//! request to the pool manager socket ([`crate::manager`]).

use std::io::Write;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{
    Error,
    classify::{self, ManagedPoolRow},
    cli::{Cli, Output, PoolNodes, PoolsAction, PoolsList},
    manager::{self, PoolManager, READ_TIMEOUT, WRITE_TIMEOUT},
    output::{self, Row},
};

/// A node as the user named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRef {
    /// By address (a worker VM's IP: its trunk).
    Trunk(String),
    /// By name.
    Host(String),
}

impl NodeRef {
    /// Every node of `nodes`, trunks first, in the order given.
    pub fn all(nodes: &PoolNodes) -> Vec<NodeRef> {
        let trunks = nodes.trunks.iter().cloned().map(NodeRef::Trunk);
        trunks
            .chain(nodes.hosts.iter().cloned().map(NodeRef::Host))
            .collect()
    }

    /// The request field naming it.
    fn field(&self) -> (&'static str, &str) {
        match self {
            NodeRef::Trunk(t) => ("trunk", t),
            NodeRef::Host(h) => ("host", h),
        }
    }
}

/// The `populatePool` body for one node.
#[allow(clippy::too_many_arguments)]
pub fn populate_body(
    node: &NodeRef,
    num_ports: u32,
    project: Option<&str>,
    network: Option<&str>,
    subnets: &[String],
    security_groups: &[String],
    namespace: Option<&str>,
) -> serde_json::Value {
    let (k, v) = node.field();
    let mut b = json!({ k: v, "num_ports": num_ports });
    let opt = |b: &mut serde_json::Value, k: &str, v: Option<&str>| {
        if let Some(v) = v {
            b[k] = json!(v);
        }
    };
    opt(&mut b, "project_id", project);
    opt(&mut b, "network_id", network);
    opt(&mut b, "namespace", namespace);
    if !subnets.is_empty() {
        b["subnet_ids"] = json!(subnets);
    }
    if !security_groups.is_empty() {
        b["security_groups"] = json!(security_groups);
    }
    b
}

/// One node's `populatePool` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedRow {
    /// The node as given (`--trunk` address or `--host` name).
    #[serde(default)]
    pub node: String,
    /// The pool's host (the node's name).
    pub host: String,
    /// Its project.
    pub project_id: String,
    /// Its network.
    pub network_id: String,
    /// Ports asked for.
    #[serde(default)]
    pub requested: u32,
    /// Ports created.
    pub created: u32,
}

impl Row for CreatedRow {
    fn headers() -> &'static [&'static str] {
        &["NODE", "HOST", "PROJECT", "NETWORK", "REQUESTED", "CREATED"]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.node.clone(),
            self.host.clone(),
            self.project_id.clone(),
            self.network_id.clone(),
            self.requested.to_string(),
            self.created.to_string(),
        ]
    }
}

/// One node's (or every node's) `freePool` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedRow {
    /// The node as given; `all` for every pool.
    #[serde(default)]
    pub node: String,
    /// The node's name (none for every pool).
    #[serde(default)]
    pub host: Option<String>,
    /// Ports deleted.
    pub deleted: u32,
}

impl Row for DeletedRow {
    fn headers() -> &'static [&'static str] {
        &["NODE", "HOST", "DELETED"]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.node.clone(),
            output::dash(self.host.as_deref()),
            self.deleted.to_string(),
        ]
    }
}

/// A pool with its ports, as `listPools?ports=true` answers.
#[derive(Debug, Clone, Deserialize)]
pub struct PoolWithPorts {
    /// Key and counters.
    #[serde(flatten)]
    pub pool: ManagedPoolRow,
    /// Port IDs by state.
    #[serde(default)]
    pub ports: PortsByState,
}

/// Port IDs by state.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PortsByState {
    /// Ready.
    #[serde(default)]
    pub available: Vec<String>,
    /// Assigned to pods.
    #[serde(default)]
    pub in_use: Vec<String>,
    /// Cooling down.
    #[serde(default)]
    pub cooling: Vec<String>,
    /// Being deleted.
    #[serde(default)]
    pub deleting: Vec<String>,
}

/// One port of a pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolPortRow {
    /// The pool's host.
    pub host: String,
    /// Its project.
    pub project_id: String,
    /// Its network.
    pub network_id: String,
    /// The port.
    pub port_id: String,
    /// `available`, `in_use`, `cooling` or `deleting`.
    pub state: &'static str,
}

impl Row for PoolPortRow {
    fn headers() -> &'static [&'static str] {
        &["HOST", "PROJECT", "NETWORK", "PORT", "STATE"]
    }
    fn cells(&self) -> Vec<String> {
        vec![
            self.host.clone(),
            self.project_id.clone(),
            self.network_id.clone(),
            self.port_id.clone(),
            self.state.replace('_', " "),
        ]
    }
}

/// One row per port, pools in key order, ports by state then ID.
pub fn port_rows(pools: &[PoolWithPorts]) -> Vec<PoolPortRow> {
    let mut pools: Vec<&PoolWithPorts> = pools.iter().collect();
    pools.sort_by(|a, b| {
        (&a.pool.host, &a.pool.project_id, &a.pool.network_id).cmp(&(
            &b.pool.host,
            &b.pool.project_id,
            &b.pool.network_id,
        ))
    });
    let mut rows = Vec::new();
    for p in pools {
        for (state, ids) in [
            ("available", &p.ports.available),
            ("in_use", &p.ports.in_use),
            ("cooling", &p.ports.cooling),
            ("deleting", &p.ports.deleting),
        ] {
            let mut ids = ids.clone();
            ids.sort();
            rows.extend(ids.into_iter().map(|port_id| PoolPortRow {
                host: p.pool.host.clone(),
                project_id: p.pool.project_id.clone(),
                network_id: p.pool.network_id.clone(),
                port_id,
                state,
            }));
        }
    }
    rows
}

/// `kuryrctl pools …`.
pub async fn run(
    cli: &Cli,
    list: &PoolsList,
    action: Option<&PoolsAction>,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let config = crate::access::config(&cli.config_file)?;
    let at = |s: &Option<std::path::PathBuf>| PoolManager::new(manager::socket_of(s.as_deref(), &config));
    match action {
        None => run_list(cli, &config, list, out).await,
        Some(PoolsAction::List(l)) => run_list(cli, &config, l, out).await,
        Some(PoolsAction::Create {
            nodes,
            num_ports,
            project,
            network,
            subnets,
            security_groups,
            namespace,
            socket,
        }) => {
            let pm = at(socket);
            let requests = NodeRef::all(nodes).into_iter().map(|node| {
                let body = populate_body(
                    &node,
                    *num_ports,
                    project.as_deref(),
                    network.as_deref(),
                    subnets,
                    security_groups,
                    namespace.as_deref(),
                );
                (node.field().1.to_owned(), body)
            });
            let (done, failed) = post_each::<CreatedRow>(&pm, "/populatePool", requests).await;
            let rows: Vec<CreatedRow> = done
                .into_iter()
                .map(|(node, row)| CreatedRow {
                    node,
                    requested: *num_ports,
                    ..row
                })
                .collect();
            if failed.is_none() || !rows.is_empty() {
                print_rows(cli, out, &pm, &rows)?;
            }
            if cli.output == Output::Table && !rows.is_empty() {
                let created: u32 = rows.iter().map(|r| r.created).sum();
                let _ = writeln!(out, "\n{created} port(s) created in {} pool(s)", rows.len());
                if rows.iter().any(|r| r.created < r.requested) {
                    let _ = writeln!(
                        out,
                        "(fewer than asked: a pool at [vif_pool] ports_pool_max, or one already being filled, creates fewer)"
                    );
                }
            }
            failed.map_or(Ok(0), Err)
        }
        Some(PoolsAction::Delete { nodes, all, socket }) => {
            let pm = at(socket);
            let requests: Vec<(String, serde_json::Value)> = if *all {
                vec![("all".to_owned(), json!({}))]
            } else {
                NodeRef::all(nodes)
                    .iter()
                    .map(|n| {
                        let (k, v) = n.field();
                        (v.to_owned(), json!({ k: v }))
                    })
                    .collect()
            };
            let (done, failed) = post_each::<DeletedRow>(&pm, "/freePool", requests).await;
            let rows: Vec<DeletedRow> = done
                .into_iter()
                .map(|(node, row)| DeletedRow { node, ..row })
                .collect();
            if failed.is_none() || !rows.is_empty() {
                print_rows(cli, out, &pm, &rows)?;
            }
            if cli.output == Output::Table && !rows.is_empty() {
                let deleted: u32 = rows.iter().map(|r| r.deleted).sum();
                let _ = writeln!(out, "\n{deleted} pooled port(s) deleted");
            }
            failed.map_or(Ok(0), Err)
        }
        Some(PoolsAction::Show {
            trunk,
            host,
            project,
            network,
            socket,
        }) => {
            let pm = at(socket);
            let q = manager::query(&[
                ("trunk", trunk.as_deref()),
                ("host", host.as_deref()),
                ("project_id", project.as_deref()),
                ("network_id", network.as_deref()),
                ("ports", Some("true")),
            ]);
            let pools: Vec<PoolWithPorts> = pm
                .call("GET", &format!("/listPools?{q}"), &json!({}), READ_TIMEOUT)
                .await?;
            let rows = port_rows(&pools);
            print_rows(cli, out, &pm, &rows)?;
            if cli.output == Output::Table {
                let n = |s: &str| rows.iter().filter(|r| r.state == s).count();
                let _ = writeln!(
                    out,
                    "\n{} port(s) in {} pool(s): {} available, {} in use, {} cooling, {} deleting",
                    rows.len(),
                    pools.len(),
                    n("available"),
                    n("in_use"),
                    n("cooling"),
                    n("deleting")
                );
            }
            Ok(0)
        }
    }
}

/// POSTs each `(node, body)` to `path` in order and stops at the first failure: the answers
/// so far, by node, and that failure (what was done is printed before the error).
async fn post_each<R: serde::de::DeserializeOwned>(
    pm: &PoolManager,
    path: &str,
    requests: impl IntoIterator<Item = (String, serde_json::Value)>,
) -> (Vec<(String, R)>, Option<Error>) {
    let mut done = Vec::new();
    for (node, body) in requests {
        match pm.call::<R>("POST", path, &body, WRITE_TIMEOUT).await {
            Ok(r) => done.push((node, r)),
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}

/// Prints rows answered by the manager at `pm`.
fn print_rows<R: Row>(cli: &Cli, out: &mut dyn Write, pm: &PoolManager, rows: &[R]) -> Result<(), Error> {
    let mut extra = serde_json::Map::new();
    extra.insert("source".into(), json!("pool-manager"));
    extra.insert("socket".into(), json!(pm.socket));
    output::print(out, cli.output, rows, extra)
}

/// `kuryrctl pools [list]`: from the pool manager when it answers, else derived from Neutron.
async fn run_list(
    cli: &Cli,
    config: &kuryr_config::Config,
    list: &PoolsList,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let pm = PoolManager::new(manager::socket_of(list.socket.as_deref(), config));
    if pm.exists()
        && let Ok(answer) = pm.send("GET", "/listPools", "{}", READ_TIMEOUT).await
    {
        return print_managed(cli, out, &pm, &answer.body);
    }
    let client = crate::access::client(cli.kubeconfig.as_deref(), &cli.config_file).await?;
    let (ports, referenced, tags) = super::ports::load(config, &client, list.cluster_tag.as_deref()).await?;
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

/// The manager's `listPools` answer: kuryr-rs' JSON as a table, upstream's text as it is.
fn print_managed(cli: &Cli, out: &mut dyn Write, pm: &PoolManager, text: &str) -> Result<u8, Error> {
    let sock = pm.socket.as_path();
    if let Ok(mut rows) = serde_json::from_str::<Vec<ManagedPoolRow>>(text) {
        rows.sort_by(|a, b| (&a.host, &a.network_id).cmp(&(&b.host, &b.network_id)));
        print_rows(cli, out, pm, &rows)?;
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
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn populate_bodies_carry_only_what_was_given() {
        let b = populate_body(&NodeRef::Trunk("10.0.0.5".into()), 3, None, None, &[], &[], None);
        assert_eq!(b, json!({"trunk": "10.0.0.5", "num_ports": 3}));
        let b = populate_body(
            &NodeRef::Host("vm-1".into()),
            2,
            Some("p"),
            Some("n"),
            &["s".into()],
            &["sg-a".into(), "sg-b".into()],
            Some("ns"),
        );
        assert_eq!(
            b,
            json!({"host": "vm-1", "num_ports": 2, "project_id": "p", "network_id": "n",
                   "subnet_ids": ["s"], "security_groups": ["sg-a", "sg-b"], "namespace": "ns"})
        );
    }

    #[test]
    fn nodes_keep_their_order_trunks_first() {
        let n = PoolNodes {
            trunks: vec!["10.0.0.5".into(), "10.0.0.6".into()],
            hosts: vec!["node-1".into()],
        };
        assert_eq!(
            NodeRef::all(&n),
            vec![
                NodeRef::Trunk("10.0.0.5".into()),
                NodeRef::Trunk("10.0.0.6".into()),
                NodeRef::Host("node-1".into())
            ]
        );
    }

    #[test]
    fn one_row_per_port_pools_in_key_order() {
        let pools: Vec<PoolWithPorts> = serde_json::from_value(json!([
            {"host": "vm-2", "project_id": "p", "network_id": "n", "available": 1,
             "ports": {"available": ["c"], "in_use": [], "cooling": [], "deleting": []}},
            {"host": "vm-1", "project_id": "p", "network_id": "n", "available": 2, "in_use": 1,
             "ports": {"available": ["b", "a"], "in_use": ["z"]}},
            {"host": "vm-3", "project_id": "p", "network_id": "n"}
        ]))
        .expect("pools");
        let rows: Vec<(String, String, &str)> = port_rows(&pools)
            .into_iter()
            .map(|r| (r.host, r.port_id, r.state))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("vm-1".into(), "a".into(), "available"),
                ("vm-1".into(), "b".into(), "available"),
                ("vm-1".into(), "z".into(), "in_use"),
                ("vm-2".into(), "c".into(), "available"),
            ]
        );
    }

    #[test]
    fn the_command_line_keeps_bare_pools_and_checks_the_rest() {
        use clap::Parser;
        let parse =
            |args: &[&str]| Cli::try_parse_from(std::iter::once("kuryrctl").chain(args.iter().copied()));
        let c = parse(&["pools", "--socket", "/s"]).expect("bare pools");
        assert!(matches!(
            c.command,
            crate::cli::Command::Pools { action: None, .. }
        ));
        let c = parse(&[
            "pools", "create", "--trunk", "10.0.0.5", "--trunks", "10.0.0.6", "-n", "3",
        ])
        .expect("create");
        let Some(PoolsAction::Create { nodes, num_ports, .. }) = (match c.command {
            crate::cli::Command::Pools { action, .. } => action,
            _ => None,
        }) else {
            panic!("not create");
        };
        assert_eq!((nodes.trunks.len(), num_ports), (2, 3));
        for bad in [
            &["pools", "create", "-n", "3"][..],
            &["pools", "create", "--trunk", "10.0.0.5", "-n", "0"],
            &["pools", "create", "--trunk", "10.0.0.5", "-n", "5000"],
            &["pools", "delete"],
            &["pools", "delete", "--all", "--host", "vm-1"],
            &["pools", "show", "--trunk", "10.0.0.5", "--host", "vm-1"],
            &["pools", "--socket", "/s", "create", "--trunk", "10.0.0.5"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(parse(&["pools", "delete", "--all"]).is_ok());
        assert!(parse(&["pools", "show"]).is_ok());
    }
}
