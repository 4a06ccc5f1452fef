//! The commands: each reads what it needs, decides with [`crate::classify`] and prints with
//! [`crate::output`]; each returns its exit code.

pub mod lbs;
pub mod networks;
pub mod policies;
pub mod pools;
pub mod ports;
pub mod status;
pub mod vifs;

use std::io::Write;

use kube::{Api, Client, Resource, api::ListParams};
use serde::de::DeserializeOwned;

use crate::{
    Error,
    cli::{Cli, Command},
};

/// Runs the command of `cli`, printing to `out`.
pub async fn run(cli: &Cli, out: &mut dyn Write) -> Result<u8, Error> {
    // Pools management needs only the pool manager socket (it runs where the controller
    // does, perhaps without a kubeconfig); the listing connects when it falls back to Neutron.
    if let Command::Pools { list, action } = &cli.command {
        return pools::run(cli, list, action.as_ref(), out).await;
    }
    let client = crate::access::client(cli.kubeconfig.as_deref(), &cli.config_file).await?;
    match &cli.command {
        Command::Vifs {
            namespace,
            all_namespaces,
            selector,
        } => {
            let ns = if *all_namespaces {
                None
            } else {
                Some(namespace.clone().unwrap_or_else(|| "default".into()))
            };
            vifs::run(&client, ns.as_deref(), selector.as_deref(), cli.output, out).await
        }
        Command::Networks { no_neutron } => networks::run(cli, &client, *no_neutron, out).await,
        Command::Ports { cluster_tag, orphans } => {
            ports::run_ports(cli, &client, cluster_tag.as_deref(), *orphans, out).await
        }
        Command::Pools { list, action } => pools::run(cli, list, action.as_ref(), out).await,
        Command::Lbs {
            cluster_tag,
            no_octavia,
        } => lbs::run(cli, &client, cluster_tag.as_deref(), *no_octavia, out).await,
        Command::Policies {
            cluster_tag,
            no_neutron,
        } => policies::run(cli, &client, cluster_tag.as_deref(), *no_neutron, out).await,
        Command::Status => {
            let config = crate::access::config(&cli.config_file)?;
            let handlers = (!cli.config_file.is_empty()).then(|| config.kubernetes.enabled_handlers.clone());
            let identity = crate::access::identity(&config, &client).await;
            status::run(&client, handlers.as_deref(), identity, cli.output, out).await
        }
    }
}

/// Lists every `K` (in `ns`, or everywhere).
pub async fn list<K>(
    client: &Client,
    ns: Option<&str>,
    selector: Option<&str>,
    what: &str,
) -> Result<Vec<K>, Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut lp = ListParams::default();
    if let Some(s) = selector {
        lp = lp.labels(s);
    }
    api.list(&lp)
        .await
        .map(|l| l.items)
        .map_err(|source| Error::List {
            what: what.to_owned(),
            source,
        })
}
