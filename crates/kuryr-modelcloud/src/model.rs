//! The model: what each call costs the cloud, and where every figure came from. One readable
//! file on purpose (issue 39): a figure here is either measured on the real sandbox (cited) or
//! marked *provisional* until `bench/*` replayed against both calibrates it.
//!
//! Shape of the model (ML2/OVN Neutron with `api_workers = 1`, the sandbox's, see
//! `../shared/notes/openstack-sandbox.md`): a request waits for one of `workers` servers (FIFO),
//! then holds it for `fixed + per_item × items`. Concurrent bulk port creations on one network
//! collide in IPAM (Neutron picks addresses at random among the free ones; the loser is retried
//! whole), which the model charges as extra work per concurrent bulk. A port goes ACTIVE a
//! while after its node plugs it (ovn-controller claiming it), not on its own.

use std::{collections::BTreeMap, time::Duration};

use kuryr_openstack::ops;
use serde::{Deserialize, Serialize};

/// The model's own operation: Neutron writing a plugged port's status `ACTIVE` once OVN
/// reports it up (its ML2/OVN driver's event handling), one port at a time beside the API
/// workers, priced like a request.
pub const PORT_UP: &str = "port_up";

/// What one operation costs the server that runs it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// Per request, in milliseconds.
    pub fixed_ms: f64,
    /// Per item of a bulk or batch (ports, rules, subports, list entries), in milliseconds.
    pub per_item_ms: f64,
}

impl Cost {
    const fn new(fixed_ms: f64, per_item_ms: f64) -> Self {
        Self {
            fixed_ms,
            per_item_ms,
        }
    }

    /// The service time of a request of `items` items.
    pub fn time(&self, items: usize) -> Duration {
        let ms = self.fixed_ms + self.per_item_ms * items as f64;
        Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    }
}

/// The whole model. `Default` is the sandbox's; a JSON file replaces the fields it names (a `neutron` table replaces the whole table)
/// (`kuryr-modelcloud --model FILE`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Model {
    /// Neutron's API servers working at once. Sandbox: `api_workers = 1` — one process whose
    /// CPU-bound work is serial.
    pub neutron_workers: usize,
    /// Cost per operation (the names of [`kuryr_openstack::ops`]); operations not listed
    /// cost [`Model::default_cost`].
    pub neutron: BTreeMap<String, Cost>,
    /// What an operation not in [`Model::neutron`] costs. Provisional.
    pub default_cost: Cost,
    /// Extra work of a bulk port creation for each other bulk on the same network in flight
    /// when it starts, as a fraction of its own cost. Sandbox: bulks of 10 ports taking ~5 s
    /// alone took 11–60 s with pools on two nodes populating at once, some failing after 208 s
    /// (docs/port-pools.md, "one bulk per network at a time"): 1.0 (doubling) is the low end.
    pub ipam_collision: f64,
    /// ovn-controller claims a plugged port (sets the node's `ovn-installed` flag, and Neutron
    /// starts its [`PORT_UP`]) after this long, uniformly between the two (ms). Sandbox,
    /// 2026-12-08, from each node's Open vSwitch database (interface inserted →
    /// `ovn-installed-ts`): 52 claims under a 50-pod burst p50 51 ms, p90 96 ms, max 135 ms;
    /// 30 pods created one after another p50 45 ms, max 84 ms. (The 250–600 ms of
    /// docs/port-pools.md was the wiring and the claim together, as a pod saw it.)
    pub active_after_plug_ms: (u64, u64),
    /// A node's ovn-controller claims its ports one after another: each plug waits for the
    /// node's earlier claims, this long each (ms), before its own delay above. Sandbox, the
    /// same day: 50 ports plugged at once on two nodes (the `noop` driver's burst) were
    /// claimed up to 263 ms after their plug (p90 of all 102 claims 241 ms): ~8 ms a port.
    pub claim_per_port_ms: f64,
    /// The largest request body Neutron reads (oslo.service's `[DEFAULT] max_request_body_size`,
    /// 114 688 bytes by default); a larger one is answered 413. A bulk of ~300 ports passes it.
    pub neutron_max_body_bytes: usize,
    /// Octavia's API workers answering requests at once. Provisional: 1 (the sandbox runs
    /// one API process).
    pub octavia_api_workers: usize,
    /// What an Octavia request costs its API worker before it answers (a write answers
    /// `PENDING_*` at once; its provisioning is [`Model::provisioning`]). Per operation; those
    /// not listed cost [`Model::default_cost`].
    pub octavia: BTreeMap<String, Cost>,
    /// Provisioning works at once (the provider driver and its agent, Neutron's reads for
    /// them), when it does not run in the API's server ([`Model::provision_in_api`]).
    pub provisioners: usize,
    /// The provider's provisioning runs in Octavia's API process and queues with its requests
    /// for the same server (the ovn provider: its driver works inside `octavia-api`). Sandbox,
    /// `bench/service-burst` 2026-12-08: 20 Services' load balancers were created one every
    /// ~1.7 s while the others waited, and none converged before 28 s (p50 34.6 s, p99 43.1 s;
    /// Octavia alone, 20 load balancers: ACTIVE p50 39.3 s, p99 46.3 s): one server doing
    /// everything, not separate provisioners.
    pub provision_in_api: bool,
    /// How long a write keeps the load balancer `PENDING_*` once a provisioner takes it, per
    /// operation (items: a fully populated create's listeners plus members; a batch member
    /// update's members). Operations not listed: [`Model::default_provisioning`].
    pub provisioning: BTreeMap<String, Cost>,
    /// Provisioning of a write not in [`Model::provisioning`]. Provisional.
    pub default_provisioning: Cost,
    /// The share of each service time the model spends on this machine's CPU instead of
    /// sleeping (0–1). 0 for scale runs: a real cloud runs on other machines. The
    /// calibration's benchmarks set 1 (`kuryr-modelcloud --cpu-share 1`): the sandbox's cloud
    /// runs on the same two cores as the cluster, and its Python servers are busy for the
    /// time they serve — without it the model's cluster had the cores to itself and its pods
    /// were Ready twice as fast after their port was taken from a pool.
    pub cpu_share: f64,
}

impl Default for Model {
    fn default() -> Self {
        let mut neutron = BTreeMap::new();
        let mut set = |op: &str, c: Cost| {
            neutron.insert(op.to_string(), c);
        };
        // Bound ports: ~1 s a port in bulk on ML2/OVN with one API worker (docs/port-pools.md:
        // "A bulk creation of ports with a binding host costs ~1 s per port"; README: bulks of
        // 10 bound ports 3.7–10.3 s). Unbound: ~0.3 s a port (README, the noop driver's
        // figures). The model takes the middle of bound bulks of 10 (~5 s): 0.2 s + 0.48 s a
        // port.
        set(ops::PORT_BULK_CREATE, Cost::new(200.0, 480.0));
        // A plugged port's status write (PORT_UP): `bench/pod-burst --cloud real --pool off`
        // (2026-12-08, 50 pods): every port is plugged within ~0.3 s of the others once the
        // bulk returns, and Neutron reports them ACTIVE 9.3 s (p50) to 15.7 s (p99) later,
        // one after another: ~0.3 s a port. With pools on (the same hour) the same pace while
        // the pools' refills kept the API worker busy: a queue of its own.
        set(PORT_UP, Cost::new(300.0, 0.0));
        // A port's group change 0.25–0.4 s (docs/network-policy.md); other updates provisional.
        set(ops::PORT_UPDATE, Cost::new(150.0, 0.0));
        set(ops::PORT_DELETE, Cost::new(250.0, 0.0));
        set(ops::PORT_SET_TAGS, Cost::new(60.0, 0.0));
        // Reads: provisional (a GET ~15 ms, a list 20 ms + 0.25 ms an entry returned).
        set(ops::PORT_GET, Cost::new(15.0, 0.0));
        set(ops::PORT_LIST, Cost::new(20.0, 0.25));
        set(ops::NETWORK_GET, Cost::new(15.0, 0.0));
        set(ops::SUBNET_GET, Cost::new(15.0, 0.0));
        set(ops::NETWORK_LIST, Cost::new(20.0, 0.5));
        set(ops::SUBNET_LIST, Cost::new(20.0, 0.5));
        set(ops::EXTENSION_LIST, Cost::new(10.0, 0.0));
        // Security-group rules: ~100 ms a rule, each its own OVN ACL transaction (bulk of 10
        // rules 0.65 s, 50 rules 5.0 s, linear; docs/network-policy.md). A group ~0.1 s.
        set(ops::SG_RULE_BULK_CREATE, Cost::new(0.0, 105.0));
        set(ops::SG_RULE_DELETE, Cost::new(100.0, 0.0));
        set(ops::SG_CREATE, Cost::new(100.0, 0.0));
        set(ops::SG_DELETE, Cost::new(150.0, 0.0));
        set(ops::SG_LIST, Cost::new(20.0, 0.5));
        set(ops::SG_RULE_LIST, Cost::new(20.0, 0.25));
        // Trunks: provisional (a subport is a port update plus an OVN row).
        set(ops::TRUNK_ADD_SUBPORTS, Cost::new(100.0, 120.0));
        set(ops::TRUNK_REMOVE_SUBPORTS, Cost::new(100.0, 80.0));
        let mut octavia = BTreeMap::new();
        // Octavia's API: validation and a database row before it answers. Provisional: a
        // write 40 ms, a read 15 ms, a list 20 ms + 0.2 ms an entry.
        // A load balancer's create answers after its VIP port is made in Neutron and the
        // provider driver has its rows: `bench/service-burst` 2026-12-08 saw the 20 creates
        // answered ~1.7 s apart under the burst, provisioning interleaved on the same server
        // (provision_in_api): 1.0 s of it is the request itself.
        octavia.insert(ops::LB_CREATE.to_string(), Cost::new(1000.0, 0.0));
        for op in [
            ops::LB_DELETE,
            ops::LISTENER_CREATE,
            ops::LISTENER_DELETE,
            ops::LISTENER_UPDATE,
            ops::POOL_CREATE,
            ops::POOL_DELETE,
            ops::POOL_UPDATE,
            ops::MEMBER_BATCH_UPDATE,
            ops::HM_CREATE,
            ops::HM_DELETE,
        ] {
            octavia.insert(op.to_string(), Cost::new(40.0, 0.0));
        }
        for op in [ops::LB_GET, ops::LB_STATUS, ops::HM_GET, ops::LB_VERSIONS] {
            octavia.insert(op.to_string(), Cost::new(15.0, 0.0));
        }
        for op in [ops::LB_LIST, ops::LISTENER_LIST, ops::POOL_LIST] {
            octavia.insert(op.to_string(), Cost::new(20.0, 0.2));
        }
        let mut provisioning = BTreeMap::new();
        // Fitted to `bench/service-burst` (20 Services, 3 backends; real cloud 2026-12-08
        // 02:12): a Service's load balancer is one fully populated create, and with the
        // request above on the same server it costs ~2.15 s of it in all — 20 in ~43 s, the
        // run's last convergence (43.1 s; Octavia alone, 20 populated load balancers: ACTIVE
        // p99 46.3 s). Earlier estimate: ~1.9 s of the whole cloud's CPU (docs/services.md,
        // 2026-11-27). A fully populated create: 0.55 s + 0.15 s per listener and member.
        provisioning.insert(ops::LB_CREATE.to_string(), Cost::new(550.0, 150.0));
        // A batch member update: the provider reads each member's subnet (docs/services.md:
        // ~11 subnet reads per load balancer). A backend deleted under 20 Services: the last
        // status without it after 17.7 s (p50 14.5 s) — ~0.85 s a load balancer: 0.4 s +
        // 0.15 s a member.
        provisioning.insert(ops::MEMBER_BATCH_UPDATE.to_string(), Cost::new(400.0, 150.0));
        // Deleting with cascade: provisional 0.5 s.
        provisioning.insert(ops::LB_DELETE.to_string(), Cost::new(500.0, 0.0));
        Model {
            neutron_workers: 1,
            neutron,
            default_cost: Cost::new(50.0, 0.0),
            ipam_collision: 1.0,
            active_after_plug_ms: (10, 110),
            claim_per_port_ms: 8.0,
            neutron_max_body_bytes: 114_688,
            octavia_api_workers: 1,
            octavia,
            provisioners: 2,
            provision_in_api: true,
            provisioning,
            // A listener, pool or health monitor alone, an update: provisional 0.4 s.
            default_provisioning: Cost::new(400.0, 0.0),
            cpu_share: 0.0,
        }
    }
}

impl Model {
    /// The cost of `op`.
    pub fn cost(&self, op: &str) -> Cost {
        self.neutron.get(op).copied().unwrap_or(self.default_cost)
    }

    /// The cost of Octavia request `op` to its API worker.
    pub fn octavia_cost(&self, op: &str) -> Cost {
        self.octavia.get(op).copied().unwrap_or(self.default_cost)
    }

    /// How long write `op` keeps its load balancer pending once provisioning starts.
    pub fn provisioning_cost(&self, op: &str) -> Cost {
        self.provisioning
            .get(op)
            .copied()
            .unwrap_or(self.default_provisioning)
    }

    /// Every service time scaled by `factor` (tests run the model fast).
    pub fn scaled(mut self, factor: f64) -> Self {
        let all = self
            .neutron
            .values_mut()
            .chain(self.octavia.values_mut())
            .chain(self.provisioning.values_mut())
            .chain([&mut self.default_cost, &mut self.default_provisioning]);
        for c in all {
            c.fixed_ms *= factor;
            c.per_item_ms *= factor;
        }
        let (lo, hi) = self.active_after_plug_ms;
        self.active_after_plug_ms = ((lo as f64 * factor) as u64, (hi as f64 * factor) as u64);
        self.claim_per_port_ms *= factor;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_bulk_of_ten_costs_what_the_sandbox_measured() {
        let m = Model::default();
        let t = m.cost(ops::PORT_BULK_CREATE).time(10).as_secs_f64();
        // 3.7–10.3 s measured; ~5 s alone.
        assert!((4.0..=6.0).contains(&t), "{t}");
        let rules = m.cost(ops::SG_RULE_BULK_CREATE).time(50).as_secs_f64();
        assert!((4.5..=5.5).contains(&rules), "{rules}");
        // One listener and three members: ~2.15 s of Octavia's one server, the request and
        // its provisioning (bench/service-burst, 2026-12-08).
        let lb = m.provisioning_cost(ops::LB_CREATE).time(4) + m.octavia_cost(ops::LB_CREATE).time(0);
        assert!((2.0..=2.3).contains(&lb.as_secs_f64()), "{lb:?}");
        // A plugged port's status: ~0.3 s (bench/pod-burst, 2026-12-08).
        let up = m.cost(PORT_UP).time(0).as_secs_f64();
        assert!((0.25..=0.35).contains(&up), "{up}");
    }

    #[test]
    fn a_model_file_replaces_only_what_it_names() {
        let m: Model = serde_json::from_str(r#"{"neutron_workers": 4}"#).expect("parses");
        assert_eq!(m.neutron_workers, 4);
        assert_eq!(m.cost(ops::PORT_GET), Model::default().cost(ops::PORT_GET));
        let fast = Model::default().scaled(0.01);
        assert!(fast.cost(ops::PORT_BULK_CREATE).time(10) < Duration::from_millis(100));
        assert!(fast.provisioning_cost(ops::LB_CREATE).time(4) < Duration::from_millis(20));
        assert!(fast.octavia_cost(ops::LB_GET).time(0) < Duration::from_millis(1));
    }
}
