//! [`AddressPairs`]: `[kubernetes] pod_vif_driver = nested-macvlan` (with `vif_pool_driver =
//! noop`, as upstream paired them) — a pod of a node VM is a macvlan of the VM's interface that
//! sends with its own port's MAC and IPs, so the pod port's `(IP, MAC)` pairs must be in the VM
//! port's `allowed_address_pairs` before the pod's traffic passes the VM port's port security.
//!
//! That list is one field of one port that every pod of the VM changes. Upstream serialized the
//! changes behind a lock per VM port and one revision-guarded update each. Here the changes of
//! one VM port are queued and whoever writes next applies all of them in ONE update (group
//! commit): 25 pods starting at once on a VM cost a few updates, not 25 in a row. Each update is
//! made on the port as just read, guarded by its `revision_number` (`If-Match`), and read again
//! on a 412 up to `[pod_vif_nested] rev_update_attempts` times, so another writer's change (an
//! operator's pair, a second controller) is never lost either.
//!
//! The pod port is never bound (the VM port carries its traffic); it names its VM's port in
//! `device_id`, which tells it from the unbound ports of other drivers in a mixed cluster. It is
//! always on the subnet of its VM's port ([`Attachment::place`]): the pod's frames leave
//! the VM untagged, on the VM's network, whatever the subnet driver says (upstream required
//! `pod_subnet` to be that subnet; a pod elsewhere had no working network).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use kuryr_core::{
    nested::node_port,
    pairs::{AddressPair, PairChange, apply, pairs_of, pod_pairs, revision_of},
};
use kuryr_openstack::{BoxFuture, Neutron, Port, PortCreate, PortFilter, PortUpdate};
use kuryr_types::vif::Vif;
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use super::{
    Attachment,
    nested::{NodeAddresses, nested_err, ports_of_node_ip},
};
use crate::{
    drivers::PodTarget,
    pool::{Error, lock, netcache::NetCache},
};

/// `binding:vif_type` of a macvlan pod port as the pools see it (Neutron's is `unbound`).
const MACVLAN_VIEW: &str = "macvlan";

/// A pair as the books key it ([`AddressPair::key`]).
type PairKey = (String, String);

#[derive(Default)]
struct Books {
    /// Node → its VM's port.
    vm_of_host: HashMap<String, String>,
    /// A VM's port → its network and its subnets among the workers' ones.
    place_of_vm: HashMap<String, (String, Vec<String>)>,
    /// A VM's port → its node.
    host_of_vm: HashMap<String, String>,
    /// Pair → the VM port carrying it (as last read or written).
    carrier: HashMap<PairKey, String>,
    /// Pod port → its pairs (as attached here).
    attached: HashMap<String, Vec<AddressPair>>,
    /// The VM ports were read at least once ([`AddressPairs::refresh`]).
    refreshed: bool,
}

impl Books {
    fn learn_vm(&mut self, host: Option<&str>, vm: &Port, workers: &[String]) {
        let subnets: Vec<String> = vm
            .fixed_ips
            .iter()
            .filter(|ip| workers.contains(&ip.subnet_id))
            .map(|ip| ip.subnet_id.clone())
            .collect();
        self.place_of_vm
            .insert(vm.id.clone(), (vm.network_id.clone(), subnets));
        if let Some(h) = host {
            self.vm_of_host.insert(h.to_string(), vm.id.clone());
            self.host_of_vm.insert(vm.id.clone(), h.to_string());
        }
        match pairs_of(vm) {
            Ok(pairs) => self.carried(&vm.id, &pairs),
            Err(e) => warn!(error = %e, "cannot read a VM port's allowed address pairs"),
        }
    }

    /// `vm`'s pairs are now `pairs`.
    fn carried(&mut self, vm: &str, pairs: &[AddressPair]) {
        self.carrier.retain(|_, v| v != vm);
        for p in pairs {
            self.carrier.insert(p.key(), vm.to_string());
        }
    }
}

/// A failed update as every waiter of its batch gets it.
#[derive(Debug, Clone)]
struct Failure {
    /// What failed.
    why: String,
    /// Trying again may help (Neutron unreachable, revision races).
    retryable: bool,
    /// The VM's port is gone (its node was recreated): look it up again.
    vm_gone: bool,
}

impl Failure {
    fn of(what: &str, e: &kuryr_openstack::Error) -> Self {
        let mut why = format!("{what}: {}", crate::error_chain(e));
        if matches!(e, kuryr_openstack::Error::BadRequest { kind, .. } if kind == "AllowedAddressPairExhausted")
        {
            why.push_str(
                " (each pod of a VM is one pair of its port: raise Neutron's max_allowed_address_pair, \
                 10 by default)",
            );
        }
        Failure {
            why,
            retryable: e.is_retryable(),
            vm_gone: e.is_not_found(),
        }
    }

    fn into_error(self, vm: &str) -> Error {
        Error::AddressPairs {
            vm_port: vm.to_string(),
            why: self.why,
            retryable: self.retryable,
        }
    }
}

type Shared = Result<(), Failure>;

/// The changes queued for one VM port, and who writes them.
#[derive(Default)]
struct Queue {
    pending: Mutex<Vec<(PairChange, oneshot::Sender<Shared>)>>,
    writer: tokio::sync::Mutex<()>,
}

/// See the module documentation.
pub struct AddressPairs {
    neutron: Arc<dyn Neutron>,
    nodes: Arc<dyn NodeAddresses>,
    worker_subnets: Vec<String>,
    attempts: u32,
    books: Mutex<Books>,
    queues: Mutex<HashMap<String, Arc<Queue>>>,
}

impl AddressPairs {
    /// The attachment of nested-macvlan pods: nodes' addresses from `nodes`, their VMs' ports on
    /// `worker_subnets`, each update tried up to `attempts` times on revision conflicts.
    pub fn new(
        neutron: Arc<dyn Neutron>,
        nodes: Arc<dyn NodeAddresses>,
        worker_subnets: Vec<String>,
        attempts: u32,
    ) -> Arc<Self> {
        Arc::new(Self {
            neutron,
            nodes,
            worker_subnets,
            attempts: attempts.max(1),
            books: Mutex::default(),
            queues: Mutex::default(),
        })
    }

    /// The VM port of `host` (read once per node).
    async fn vm_port_for(&self, host: &str) -> Result<String, Error> {
        if let Some(v) = lock(&self.books).vm_of_host.get(host) {
            return Ok(v.clone());
        }
        let (ip, ports) = ports_of_node_ip(&*self.neutron, &*self.nodes, host).await?;
        let vm = node_port(&ports, &ip, &self.worker_subnets).map_err(|e| nested_err(host, e))?;
        info!(host, ip, vm_port = %vm.id, "node's VM port found");
        lock(&self.books).learn_vm(Some(host), vm, &self.worker_subnets);
        Ok(vm.id.clone())
    }

    fn queue(&self, vm: &str) -> Arc<Queue> {
        lock(&self.queues).entry(vm.to_string()).or_default().clone()
    }

    /// Queues `change` for `vm`'s pairs and returns once an update containing it is done.
    async fn change(&self, vm: &str, change: PairChange) -> Shared {
        let q = self.queue(vm);
        let (tx, rx) = oneshot::channel();
        lock(&q.pending).push((change, tx));
        {
            let _writer = q.writer.lock().await;
            // Everything queued until now, ours included unless an earlier writer took it.
            let batch = std::mem::take(&mut *lock(&q.pending));
            if !batch.is_empty() {
                self.write_batch(vm, batch).await;
            }
        }
        rx.await.unwrap_or_else(|_| {
            Err(Failure {
                why: "the update was abandoned (its writer was cancelled)".into(),
                retryable: true,
                vm_gone: false,
            })
        })
    }

    /// Writes a batch and answers its waiters. A batch Neutron refuses as a whole (a full VM
    /// port) is written again with its removals only, so pods going away still make room.
    async fn write_batch(&self, vm: &str, batch: Vec<(PairChange, oneshot::Sender<Shared>)>) {
        let changes: Vec<PairChange> = batch.iter().map(|(c, _)| c.clone()).collect();
        let result = self.write(vm, &changes).await;
        debug!(
            vm_port = vm,
            changes = changes.len(),
            ok = result.is_ok(),
            "allowed address pairs written"
        );
        let is_removal = |c: &PairChange| matches!(c, PairChange::Remove(_));
        let mixed = changes.iter().any(is_removal) && !changes.iter().all(is_removal);
        let removals_result = match &result {
            Err(f) if mixed && !f.retryable && !f.vm_gone => {
                let removals: Vec<PairChange> = changes.iter().filter(|c| is_removal(c)).cloned().collect();
                Some(self.write(vm, &removals).await)
            }
            _ => None,
        };
        for (c, tx) in batch {
            let answer = match &removals_result {
                Some(r) if is_removal(&c) => r.clone(),
                _ => result.clone(),
            };
            let _ = tx.send(answer);
        }
    }

    /// One revision-guarded read-modify-write of `vm`'s pairs with `changes`, tried again
    /// after a revision conflict.
    async fn write(&self, vm: &str, changes: &[PairChange]) -> Shared {
        for attempt in 1..=self.attempts {
            let port = self
                .neutron
                .get_port(vm)
                .await
                .map_err(|e| Failure::of("reading it", &e))?;
            let current = pairs_of(&port).map_err(|e| Failure {
                why: e.to_string(),
                retryable: false,
                vm_gone: false,
            })?;
            let Some(new) = apply(&current, changes) else {
                lock(&self.books).carried(vm, &current);
                return Ok(());
            };
            let update = PortUpdate {
                allowed_address_pairs: Some(new.clone()),
                if_revision: revision_of(&port),
                ..PortUpdate::default()
            };
            match self.neutron.update_port(vm, &update).await {
                Ok(_) => {
                    lock(&self.books).carried(vm, &new);
                    return Ok(());
                }
                Err(e @ kuryr_openstack::Error::Conflict { .. }) if attempt < self.attempts => {
                    warn!(vm_port = vm, attempt, error = %crate::error_chain(&e), "VM port changed meanwhile: reading it again");
                }
                Err(e) => return Err(Failure::of("updating it", &e)),
            }
        }
        Err(Failure {
            why: format!("still changed by someone else after {} tries", self.attempts),
            retryable: true,
            vm_gone: false,
        })
    }

    /// The pairs of `ids` (from the books, else read from Neutron).
    async fn pairs_of_ports(&self, ids: &[String]) -> Result<Vec<(String, Vec<AddressPair>)>, Error> {
        let mut out = Vec::new();
        let mut unknown = Vec::new();
        {
            let b = lock(&self.books);
            for id in ids {
                match b.attached.get(id) {
                    Some(p) => out.push((id.clone(), p.clone())),
                    None => unknown.push(id.clone()),
                }
            }
        }
        if !unknown.is_empty() {
            let ports = self
                .neutron
                .list_ports(&PortFilter::ids(unknown))
                .await
                .map_err(|source| Error::ListPorts {
                    what: "pod ports whose pairs are to be removed",
                    source,
                })?;
            out.extend(ports.iter().map(|p| (p.id.clone(), pod_pairs(p))));
        }
        Ok(out)
    }
}

impl Attachment for AddressPairs {
    fn name(&self) -> &'static str {
        "nested-macvlan"
    }

    fn prepare<'a>(&'a self, host: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move { self.vm_port_for(host).await.map(|_| ()) })
    }

    fn place(&self, host: &str, target: &PodTarget) -> Option<PodTarget> {
        let b = lock(&self.books);
        let (network_id, subnet_ids) = b.place_of_vm.get(b.vm_of_host.get(host)?)?.clone();
        Some(PodTarget {
            network_id,
            subnet_ids,
            security_groups: Vec::new(),
            ..target.clone()
        })
    }

    fn create_body(&self, host: &str, mut body: PortCreate) -> PortCreate {
        // Never bound: the VM's port carries its traffic (and its groups filter it). Its
        // device is that port. No port security: see `kuryr_core::pairs` (over ML2/OVN the
        // pod's frames would otherwise go to this port's own logical port).
        body.binding_host_id = None;
        body.port_security_enabled = Some(false);
        body.security_groups = Some(Vec::new());
        if let Some(vm) = lock(&self.books).vm_of_host.get(host) {
            body.device_id = Some(vm.clone());
        }
        body
    }

    fn attach<'a>(&'a self, host: &'a str, ports: &'a mut [Port]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            if ports.is_empty() {
                return Ok(());
            }
            let vm = self.vm_port_for(host).await?;
            let pairs: Vec<AddressPair> = ports.iter().flat_map(pod_pairs).collect();
            {
                // Before the update: should its answer be lost, the detach that follows a
                // failure still knows what to take away.
                let mut b = lock(&self.books);
                for p in ports.iter() {
                    b.attached.insert(p.id.clone(), pod_pairs(p));
                }
            }
            match self.change(&vm, PairChange::Add(pairs)).await {
                Ok(()) => {
                    // As the pools see them ([`Attachment::pool_view`]): on their VM's node.
                    for p in ports.iter_mut() {
                        p.binding_host_id = host.to_string();
                        p.binding_vif_type = MACVLAN_VIEW.into();
                    }
                    Ok(())
                }
                Err(f) => {
                    if f.vm_gone {
                        // The VM's port is gone (the node was recreated): look it up again.
                        let mut b = lock(&self.books);
                        b.vm_of_host.remove(host);
                        b.host_of_vm.remove(&vm);
                    }
                    Err(f.into_error(&vm))
                }
            }
        })
    }

    fn detach<'a>(&'a self, port_ids: &'a [String]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            if port_ids.is_empty() {
                return Ok(());
            }
            let pairs = self.pairs_of_ports(port_ids).await?;
            if !lock(&self.books).refreshed && pairs.iter().any(|(_, p)| !p.is_empty()) {
                self.refresh().await?;
            }
            let mut by_vm: HashMap<String, Vec<AddressPair>> = HashMap::new();
            {
                let b = lock(&self.books);
                for p in pairs.iter().flat_map(|(_, p)| p) {
                    if let Some(vm) = b.carrier.get(&p.key()) {
                        by_vm.entry(vm.clone()).or_default().push(p.clone());
                    }
                }
            }
            let mut first = None;
            for (vm, pairs) in by_vm {
                match self.change(&vm, PairChange::Remove(pairs)).await {
                    // A VM port that is gone carries no pair any more.
                    Err(f) if !f.vm_gone => {
                        first.get_or_insert(f.into_error(&vm));
                    }
                    _ => {}
                }
            }
            if let Some(e) = first {
                return Err(e);
            }
            let mut b = lock(&self.books);
            for id in port_ids {
                b.attached.remove(id);
            }
            Ok(())
        })
    }

    fn refresh(&self) -> BoxFuture<'_, Result<(), Error>> {
        Box::pin(async move {
            let node_of_ip = self.nodes.all().await?;
            let mut vms: Vec<(String, Port)> = Vec::new();
            for subnet in &self.worker_subnets {
                let ports = self
                    .neutron
                    .list_ports(&PortFilter {
                        fixed_ip_subnet: Some(subnet.clone()),
                        ..PortFilter::default()
                    })
                    .await
                    .map_err(|source| Error::ListPorts {
                        what: "the node VMs' ports",
                        source,
                    })?;
                for p in ports {
                    let node = p
                        .fixed_ips
                        .iter()
                        .filter(|ip| &ip.subnet_id == subnet)
                        .find_map(|ip| node_of_ip.get(&ip.ip_address));
                    if let Some(n) = node {
                        vms.push((n.clone(), p));
                    }
                }
            }
            let mut b = lock(&self.books);
            b.vm_of_host.clear();
            b.host_of_vm.clear();
            b.carrier.clear();
            b.place_of_vm.clear();
            for (host, vm) in &vms {
                b.learn_vm(Some(host), vm, &self.worker_subnets);
            }
            b.refreshed = true;
            info!(
                vms = vms.len(),
                pairs = b.carrier.len(),
                "nested-macvlan: node VMs' ports read"
            );
            Ok(())
        })
    }

    fn unbound_ports(&self) -> bool {
        true
    }

    fn listed_owner(&self) -> Option<&'static str> {
        Some(kuryr_types::constants::DEVICE_OWNER)
    }

    fn pool_view(&self, mut port: Port) -> Option<Port> {
        // Ours: unbound, naming a port as its device (a bound port is a bare-metal pool's, an
        // unbound one naming nothing a nested-vlan port not on its trunk yet). Shown on the node
        // of the VM it names; naming no VM of a node: unbound as the pools see it (deferred
        // while young, deleted when old and nobody's).
        if !port.binding_host_id.is_empty() || port.device_id.is_empty() {
            return None;
        }
        if let Some(host) = lock(&self.books).host_of_vm.get(&port.device_id) {
            port.binding_host_id = host.clone();
            port.binding_vif_type = MACVLAN_VIEW.into();
        }
        Some(port)
    }

    fn vif<'a>(
        &'a self,
        nets: &'a NetCache,
        port: &'a Port,
        _ovs_bridge: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vif, Error>> {
        Box::pin(nets.vif_macvlan(port))
    }
}
