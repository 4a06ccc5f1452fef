//! [`FakeOctavia`]: an in-memory [`Octavia`] for unit tests. Like Octavia, every write locks the
//! load balancer: it stays `PENDING_*` for [`FakeOctavia::with_settle_reads`] reads of it (0:
//! ACTIVE at once), and a write meanwhile answers 409. Faults can be injected per operation;
//! every call is counted.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use super::Octavia;
use super::model::{
    ApiVersion, HealthMonitorCreate, HealthMonitorSettings, LbCreate, LbFilter, Listener, ListenerCreate,
    LoadBalancer, MemberSpec, Pool, PoolCreate, SessionPersistence, StatusTree, TreeHealthMonitor,
    TreeListener, TreeMember, TreePool, status,
};
use crate::api::BoxFuture;
use crate::error::{Error, Result};
use crate::fake::FaultKind;
use crate::observe::ops;

#[derive(Debug, Clone)]
struct FakeLb {
    lb: LoadBalancer,
    /// Reads left before a pending state settles.
    pending_reads: u32,
    listeners: Vec<(Listener, Option<FakePool>)>,
}

#[derive(Debug, Clone)]
struct FakePool {
    id: String,
    name: String,
    source_ip_persistence: bool,
    /// (ID, settings, provisioning status).
    hm: Option<(String, HealthMonitorSettings, String)>,
    members: Vec<(String, MemberSpec)>,
}

#[derive(Debug, Default)]
struct State {
    lbs: BTreeMap<String, FakeLb>,
    faults: Vec<(&'static str, u32, FaultKind)>,
    calls: BTreeMap<&'static str, u64>,
    next_id: u64,
    settle_reads: u32,
}

impl State {
    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("0c7a0000-0000-4000-8000-{:012x}", self.next_id)
    }

    fn begin(&mut self, op: &'static str) -> Result<()> {
        *self.calls.entry(op).or_default() += 1;
        if let Some(f) = self.faults.iter_mut().find(|f| f.0 == op && f.1 > 0) {
            f.1 -= 1;
            let e = f.2.to_error(op);
            self.faults.retain(|f| f.1 > 0);
            return Err(e);
        }
        Ok(())
    }

    /// The load balancer `id`, writable (ACTIVE), now locked by a write.
    fn lock_for_write(&mut self, op: &'static str, id: &str) -> Result<&mut FakeLb> {
        let settle = self.settle_reads;
        let lb = self.lbs.get_mut(id).ok_or_else(|| not_found(op, id))?;
        if lb.lb.provisioning_status != status::ACTIVE {
            return Err(Error::Conflict {
                op,
                kind: String::new(),
                message: format!("Load Balancer {id} is immutable and cannot be updated."),
            });
        }
        if settle > 0 {
            lb.lb.provisioning_status = "PENDING_UPDATE".into();
            lb.pending_reads = settle;
        }
        Ok(lb)
    }

    fn read(&mut self, id: &str) -> Option<&mut FakeLb> {
        let lb = self.lbs.get_mut(id)?;
        if status::is_pending(&lb.lb.provisioning_status) {
            lb.pending_reads = lb.pending_reads.saturating_sub(1);
            if lb.pending_reads == 0 {
                lb.lb.provisioning_status = status::ACTIVE.into();
            }
        }
        Some(lb)
    }

    fn lb_of_listener(&self, listener_id: &str) -> Option<String> {
        self.lbs
            .iter()
            .find(|(_, l)| l.listeners.iter().any(|(x, _)| x.id == listener_id))
            .map(|(id, _)| id.clone())
    }

    fn lb_of_pool(&self, pool_id: &str) -> Option<String> {
        self.lbs
            .iter()
            .find(|(_, l)| {
                l.listeners
                    .iter()
                    .any(|(_, p)| p.as_ref().is_some_and(|p| p.id == pool_id))
            })
            .map(|(id, _)| id.clone())
    }
}

fn not_found(op: &'static str, id: &str) -> Error {
    Error::NotFound {
        op,
        kind: String::new(),
        message: format!("{id} not found"),
    }
}

/// The in-memory Octavia.
#[derive(Debug)]
pub struct FakeOctavia {
    state: Mutex<State>,
    version: ApiVersion,
}

impl Default for FakeOctavia {
    fn default() -> Self {
        FakeOctavia {
            state: Mutex::default(),
            version: ApiVersion { minor: 26 },
        }
    }
}

impl FakeOctavia {
    /// ACTIVE right after every write, API v2.26.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes leave the load balancer `PENDING_*` for `reads` reads.
    pub fn with_settle_reads(self, reads: u32) -> Self {
        self.lock().settle_reads = reads;
        self
    }

    /// Pretends to be API `v2.minor`.
    pub fn with_version(mut self, minor: u32) -> Self {
        self.version = ApiVersion { minor };
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The next `count` calls of `op` fail with `kind`.
    pub fn fail_next(&self, op: &'static str, count: u32, kind: FaultKind) {
        self.lock().faults.push((op, count, kind));
    }

    /// How many calls of `op` were made.
    pub fn calls(&self, op: &str) -> u64 {
        self.lock().calls.get(op).copied().unwrap_or(0)
    }

    /// Every Octavia write made so far.
    pub fn writes(&self) -> u64 {
        [
            ops::LB_CREATE,
            ops::LB_DELETE,
            ops::LISTENER_CREATE,
            ops::LISTENER_DELETE,
            ops::POOL_CREATE,
            ops::POOL_DELETE,
            ops::MEMBER_BATCH_UPDATE,
            ops::LISTENER_UPDATE,
            ops::POOL_UPDATE,
            ops::HM_CREATE,
            ops::HM_DELETE,
        ]
        .iter()
        .map(|op| self.calls(op))
        .sum()
    }

    /// Puts the health monitor of pool `pool_name` in provisioning status `s` (a provider that
    /// could not create it answers `ERROR`).
    pub fn set_health_monitor_status(&self, pool_name: &str, s: &str) {
        let mut st = self.lock();
        for lb in st.lbs.values_mut() {
            for p in lb.listeners.iter_mut().filter_map(|(_, p)| p.as_mut()) {
                if p.name == pool_name
                    && let Some(hm) = p.hm.as_mut()
                {
                    hm.2 = s.into();
                }
            }
        }
    }

    /// The settings of pool `pool_name`'s health monitor.
    pub fn health_monitor_of(&self, pool_name: &str) -> Option<HealthMonitorSettings> {
        let st = self.lock();
        st.lbs
            .values()
            .flat_map(|lb| lb.listeners.iter().filter_map(|(_, p)| p.as_ref()))
            .find(|p| p.name == pool_name)
            .and_then(|p| p.hm.as_ref().map(|h| h.1.clone()))
    }

    /// Every load balancer.
    pub fn load_balancers(&self) -> Vec<LoadBalancer> {
        self.lock().lbs.values().map(|l| l.lb.clone()).collect()
    }

    /// Puts a load balancer in `status` (e.g. `ERROR`).
    pub fn set_status(&self, id: &str, s: &str) {
        if let Some(lb) = self.lock().lbs.get_mut(id) {
            lb.lb.provisioning_status = s.into();
            lb.pending_reads = u32::MAX;
        }
    }

    /// The load balancer `id` belongs to: itself, or the one holding the listener, pool or
    /// health monitor `id` (O(load balancers); the model cloud settles writes by it).
    pub fn lb_of(&self, id: &str) -> Option<String> {
        let st = self.lock();
        if st.lbs.contains_key(id) {
            return Some(id.to_string());
        }
        st.lbs.iter().find_map(|(lb_id, lb)| {
            lb.listeners
                .iter()
                .any(|(l, p)| {
                    l.id == id
                        || p.as_ref()
                            .is_some_and(|p| p.id == id || p.hm.as_ref().is_some_and(|h| h.0 == id))
                })
                .then(|| lb_id.clone())
        })
    }

    /// The members (address, port) of pool `name` of any load balancer.
    pub fn members_of(&self, pool_name: &str) -> Vec<(String, i32)> {
        let st = self.lock();
        st.lbs
            .values()
            .flat_map(|l| l.listeners.iter())
            .filter_map(|(_, p)| p.as_ref())
            .filter(|p| p.name == pool_name)
            .flat_map(|p| {
                p.members
                    .iter()
                    .map(|(_, m)| (m.address.clone(), m.protocol_port))
            })
            .collect()
    }
}

impl Octavia for FakeOctavia {
    fn version(&self) -> ApiVersion {
        self.version
    }

    fn list_load_balancers<'a>(&'a self, filter: &'a LbFilter) -> BoxFuture<'a, Result<Vec<LoadBalancer>>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::LB_LIST)?;
            Ok(st
                .lbs
                .values()
                .map(|l| &l.lb)
                .filter(|lb| filter.name.as_ref().is_none_or(|n| &lb.name == n))
                .filter(|lb| filter.project_id.as_ref().is_none_or(|p| &lb.project_id == p))
                .filter(|lb| filter.vip_address.as_ref().is_none_or(|v| &lb.vip_address == v))
                .filter(|lb| filter.tags.iter().all(|t| lb.tags.contains(t)))
                .cloned()
                .collect())
        })
    }

    fn get_load_balancer<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<LoadBalancer>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::LB_GET)?;
            st.read(id)
                .map(|l| l.lb.clone())
                .ok_or_else(|| not_found(ops::LB_GET, id))
        })
    }

    fn create_load_balancer<'a>(&'a self, c: &'a LbCreate) -> BoxFuture<'a, Result<LoadBalancer>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::LB_CREATE)?;
            let id = st.id();
            let port = st.id();
            let settle = st.settle_reads;
            let lb = LoadBalancer {
                id: id.clone(),
                name: c.name.clone(),
                description: c.description.clone(),
                project_id: c.project_id.clone(),
                vip_address: c.vip_address.clone().unwrap_or_else(|| "10.96.0.250".into()),
                vip_port_id: port,
                vip_subnet_id: c.vip_subnet_id.clone(),
                provider: c.provider.clone().unwrap_or_else(|| "amphora".into()),
                provisioning_status: if settle > 0 {
                    "PENDING_CREATE"
                } else {
                    status::ACTIVE
                }
                .into(),
                operating_status: "ONLINE".into(),
                tags: if self.version.tags() {
                    c.tags.clone()
                } else {
                    Vec::new()
                },
            };
            let mut listeners = Vec::new();
            for f in &c.listeners {
                let (lid, pid) = (st.id(), st.id());
                let members = f.members.iter().map(|m| (st.id(), m.clone())).collect();
                listeners.push((
                    Listener {
                        id: lid,
                        name: f.listener.name.clone(),
                        protocol: f.listener.protocol.clone(),
                        protocol_port: f.listener.protocol_port,
                        default_pool_id: Some(pid.clone()),
                        timeout_client_data: f.listener.timeout_client_data,
                        timeout_member_data: f.listener.timeout_member_data,
                        allowed_cidrs: f.listener.allowed_cidrs.clone(),
                    },
                    Some(FakePool {
                        id: pid,
                        name: f.pool.name.clone(),
                        source_ip_persistence: f.pool.source_ip_persistence,
                        hm: None,
                        members,
                    }),
                ));
            }
            st.lbs.insert(
                id,
                FakeLb {
                    lb: lb.clone(),
                    pending_reads: settle,
                    listeners,
                },
            );
            Ok(lb)
        })
    }

    fn delete_load_balancer<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::LB_DELETE)?;
            // Cascade delete is accepted even while pending in real Octavia only when not
            // PENDING_*; the fake mirrors that.
            if let Some(lb) = st.lbs.get(id)
                && status::is_pending(&lb.lb.provisioning_status)
            {
                return Err(Error::Conflict {
                    op: ops::LB_DELETE,
                    kind: String::new(),
                    message: format!("Load Balancer {id} is immutable"),
                });
            }
            st.lbs.remove(id);
            Ok(())
        })
    }

    fn status_tree<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<StatusTree>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::LB_STATUS)?;
            let l = st.read(id).ok_or_else(|| not_found(ops::LB_STATUS, id))?;
            let ps = l.lb.provisioning_status.clone();
            Ok(StatusTree {
                id: l.lb.id.clone(),
                provisioning_status: ps.clone(),
                operating_status: l.lb.operating_status.clone(),
                listeners: l
                    .listeners
                    .iter()
                    .map(|(li, p)| TreeListener {
                        id: li.id.clone(),
                        name: li.name.clone(),
                        provisioning_status: ps.clone(),
                        pools: p
                            .iter()
                            .map(|p| TreePool {
                                id: p.id.clone(),
                                name: p.name.clone(),
                                provisioning_status: ps.clone(),
                                health_monitor: p.hm.as_ref().map(|(id, s, hps)| TreeHealthMonitor {
                                    id: id.clone(),
                                    type_: s.type_.clone(),
                                    provisioning_status: hps.clone(),
                                    operating_status: "ONLINE".into(),
                                }),
                                members: p
                                    .members
                                    .iter()
                                    .map(|(id, m)| TreeMember {
                                        id: id.clone(),
                                        name: m.name.clone(),
                                        address: m.address.clone(),
                                        protocol_port: m.protocol_port,
                                        provisioning_status: ps.clone(),
                                        operating_status: "NO_MONITOR".into(),
                                    })
                                    .collect(),
                            })
                            .collect(),
                    })
                    .collect(),
            })
        })
    }

    fn list_listeners<'a>(&'a self, lb_id: &'a str) -> BoxFuture<'a, Result<Vec<Listener>>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::LISTENER_LIST)?;
            Ok(st
                .lbs
                .get(lb_id)
                .map(|l| l.listeners.iter().map(|(x, _)| x.clone()).collect())
                .unwrap_or_default())
        })
    }

    fn create_listener<'a>(&'a self, c: &'a ListenerCreate) -> BoxFuture<'a, Result<String>> {
        Box::pin(async move {
            let op = ops::LISTENER_CREATE;
            let mut st = self.lock();
            st.begin(op)?;
            let id = st.id();
            let lb = st.lock_for_write(op, &c.loadbalancer_id)?;
            if lb
                .listeners
                .iter()
                .any(|(l, _)| l.protocol_port == c.protocol_port && l.protocol == c.protocol)
            {
                return Err(Error::Conflict {
                    op,
                    kind: String::new(),
                    message: "Another Listener on this Load Balancer is already using protocol_port".into(),
                });
            }
            lb.listeners.push((
                Listener {
                    id: id.clone(),
                    name: c.name.clone(),
                    protocol: c.protocol.clone(),
                    protocol_port: c.protocol_port,
                    default_pool_id: None,
                    timeout_client_data: c.timeout_client_data,
                    timeout_member_data: c.timeout_member_data,
                    allowed_cidrs: c.allowed_cidrs.clone(),
                },
                None,
            ));
            Ok(id)
        })
    }

    fn delete_listener<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let op = ops::LISTENER_DELETE;
            let mut st = self.lock();
            st.begin(op)?;
            let Some(lb_id) = st.lb_of_listener(id) else {
                return Ok(());
            };
            let lb = st.lock_for_write(op, &lb_id)?;
            lb.listeners.retain(|(l, _)| l.id != id);
            Ok(())
        })
    }

    fn update_listener_allowed_cidrs<'a>(
        &'a self,
        id: &'a str,
        cidrs: Option<&'a [String]>,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let op = ops::LISTENER_UPDATE;
            let mut st = self.lock();
            st.begin(op)?;
            let lb_id = st.lb_of_listener(id).ok_or_else(|| not_found(op, id))?;
            let lb = st.lock_for_write(op, &lb_id)?;
            for (l, _) in lb.listeners.iter_mut().filter(|(l, _)| l.id == id) {
                l.allowed_cidrs = cidrs.map(<[String]>::to_vec);
            }
            Ok(())
        })
    }

    fn list_pools<'a>(&'a self, lb_id: &'a str) -> BoxFuture<'a, Result<Vec<Pool>>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::POOL_LIST)?;
            let l = st
                .lbs
                .get(lb_id)
                .ok_or_else(|| not_found(ops::POOL_LIST, lb_id))?;
            Ok(l.listeners
                .iter()
                .filter_map(|(_, p)| p.as_ref())
                .map(|p| Pool {
                    id: p.id.clone(),
                    name: p.name.clone(),
                    session_persistence: p.source_ip_persistence.then(|| SessionPersistence {
                        type_: "SOURCE_IP".into(),
                    }),
                })
                .collect())
        })
    }

    fn update_pool_persistence<'a>(&'a self, id: &'a str, source_ip: bool) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let op = ops::POOL_UPDATE;
            let mut st = self.lock();
            st.begin(op)?;
            let lb_id = st.lb_of_pool(id).ok_or_else(|| not_found(op, id))?;
            let lb = st.lock_for_write(op, &lb_id)?;
            for p in lb.listeners.iter_mut().filter_map(|(_, p)| p.as_mut()) {
                if p.id == id {
                    p.source_ip_persistence = source_ip;
                }
            }
            Ok(())
        })
    }

    fn create_health_monitor<'a>(&'a self, c: &'a HealthMonitorCreate) -> BoxFuture<'a, Result<String>> {
        Box::pin(async move {
            let op = ops::HM_CREATE;
            let mut st = self.lock();
            st.begin(op)?;
            let id = st.id();
            let lb_id = st
                .lb_of_pool(&c.pool_id)
                .ok_or_else(|| not_found(op, &c.pool_id))?;
            let lb = st.lock_for_write(op, &lb_id)?;
            for p in lb.listeners.iter_mut().filter_map(|(_, p)| p.as_mut()) {
                if p.id == c.pool_id {
                    if p.hm.is_some() {
                        return Err(Error::Conflict {
                            op,
                            kind: String::new(),
                            message: "pool already has a health monitor".into(),
                        });
                    }
                    p.hm = Some((id.clone(), c.settings.clone(), status::ACTIVE.into()));
                }
            }
            Ok(id)
        })
    }

    fn get_health_monitor<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<HealthMonitorSettings>> {
        Box::pin(async move {
            let mut st = self.lock();
            st.begin(ops::HM_GET)?;
            st.lbs
                .values()
                .flat_map(|lb| lb.listeners.iter().filter_map(|(_, p)| p.as_ref()))
                .find_map(|p| p.hm.as_ref().filter(|h| h.0 == id).map(|h| h.1.clone()))
                .ok_or_else(|| not_found(ops::HM_GET, id))
        })
    }

    fn delete_health_monitor<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let op = ops::HM_DELETE;
            let mut st = self.lock();
            st.begin(op)?;
            let Some(lb_id) = st.lbs.iter().find_map(|(lid, lb)| {
                lb.listeners
                    .iter()
                    .filter_map(|(_, p)| p.as_ref())
                    .any(|p| p.hm.as_ref().is_some_and(|h| h.0 == id))
                    .then(|| lid.clone())
            }) else {
                return Ok(());
            };
            let lb = st.lock_for_write(op, &lb_id)?;
            for p in lb.listeners.iter_mut().filter_map(|(_, p)| p.as_mut()) {
                if p.hm.as_ref().is_some_and(|h| h.0 == id) {
                    p.hm = None;
                }
            }
            Ok(())
        })
    }

    fn create_pool<'a>(&'a self, c: &'a PoolCreate) -> BoxFuture<'a, Result<String>> {
        Box::pin(async move {
            let op = ops::POOL_CREATE;
            let mut st = self.lock();
            st.begin(op)?;
            let id = st.id();
            let lb_id = st
                .lb_of_listener(&c.listener_id)
                .ok_or_else(|| not_found(op, &c.listener_id))?;
            let lb = st.lock_for_write(op, &lb_id)?;
            for (l, p) in lb.listeners.iter_mut() {
                if l.id == c.listener_id {
                    if p.is_some() {
                        return Err(Error::Conflict {
                            op,
                            kind: String::new(),
                            message: "listener already has a default pool".into(),
                        });
                    }
                    l.default_pool_id = Some(id.clone());
                    *p = Some(FakePool {
                        id: id.clone(),
                        name: c.name.clone(),
                        source_ip_persistence: c.source_ip_persistence,
                        hm: None,
                        members: Vec::new(),
                    });
                }
            }
            Ok(id)
        })
    }

    fn delete_pool<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let op = ops::POOL_DELETE;
            let mut st = self.lock();
            st.begin(op)?;
            let Some(lb_id) = st.lb_of_pool(id) else {
                return Ok(());
            };
            let lb = st.lock_for_write(op, &lb_id)?;
            for (l, p) in lb.listeners.iter_mut() {
                if p.as_ref().is_some_and(|p| p.id == id) {
                    *p = None;
                    l.default_pool_id = None;
                }
            }
            Ok(())
        })
    }

    fn replace_members<'a>(
        &'a self,
        pool_id: &'a str,
        members: &'a [MemberSpec],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let op = ops::MEMBER_BATCH_UPDATE;
            let mut st = self.lock();
            st.begin(op)?;
            let lb_id = st.lb_of_pool(pool_id).ok_or_else(|| not_found(op, pool_id))?;
            let mut ids: Vec<String> = (0..members.len()).map(|_| st.id()).collect();
            let lb = st.lock_for_write(op, &lb_id)?;
            for (_, p) in lb.listeners.iter_mut() {
                let Some(p) = p.as_mut().filter(|p| p.id == pool_id) else {
                    continue;
                };
                let old = std::mem::take(&mut p.members);
                for m in members {
                    let id = old
                        .iter()
                        .find(|(_, o)| o.address == m.address && o.protocol_port == m.protocol_port)
                        .map(|(id, _)| id.clone())
                        .unwrap_or_else(|| ids.pop().unwrap_or_default());
                    p.members.push((id, m.clone()));
                }
            }
            Ok(())
        })
    }
}
