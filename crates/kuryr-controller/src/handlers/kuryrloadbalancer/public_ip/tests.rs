//! The floating-IP plan driven to convergence against a tiny in-memory Neutron + Service: every
//! starting state (fresh, half-done by a killed controller, switched type, recreated load
//! balancer, user address) ends where it should, with nothing leaked and nobody's address deleted.

use super::*;

const VIP: &str = "vip-port";

fn tags() -> Vec<String> {
    vec!["k8s-cluster".to_string()]
}

#[derive(Debug, Default, Clone)]
struct World {
    fips: Vec<FloatingIp>,
    rec: Option<ServicePubIpInfo>,
    ingress: Vec<String>,
    warnings: Vec<String>,
    next: u32,
}

impl World {
    fn observe(&self, want: Option<&PublicIp>) -> FipObserved {
        FipObserved {
            on_vip: self
                .fips
                .iter()
                .filter(|f| f.port_id.as_deref() == Some(VIP))
                .cloned()
                .collect(),
            recorded: self
                .rec
                .as_ref()
                .and_then(|r| self.fips.iter().find(|f| f.id == r.ip_id).cloned()),
            user: match want {
                Some(PublicIp::User(a)) => self.fips.iter().find(|f| &f.floating_ip_address == a).cloned(),
                _ => None,
            },
            ingress: Some(self.ingress.clone()),
        }
    }

    fn apply(&mut self, s: FipStep) {
        match s {
            FipStep::Create => {
                self.next += 1;
                self.fips.push(FloatingIp {
                    id: format!("pool-{}", self.next),
                    floating_ip_address: format!("172.24.4.{}", 100 + self.next),
                    port_id: Some(VIP.into()),
                    tags: tags(),
                    description: FIP_DESCRIPTION.into(),
                    ..Default::default()
                });
            }
            FipStep::Associate(id) => {
                assert!(
                    !self.fips.iter().any(|f| f.port_id.as_deref() == Some(VIP)),
                    "VIP already has one"
                );
                self.fips.iter_mut().find(|f| f.id == id).expect("exists").port_id = Some(VIP.into());
            }
            FipStep::Disassociate(id) => {
                self.fips.iter_mut().find(|f| f.id == id).expect("exists").port_id = None;
            }
            FipStep::Delete(id) => {
                let f = self.fips.iter().find(|f| f.id == id).expect("exists");
                assert!(
                    allocated_by_kuryr(f, &tags()),
                    "deleted someone else's address {f:?}"
                );
                self.fips.retain(|f| f.id != id);
            }
            FipStep::Record(r) => self.rec = r,
            FipStep::Ingress(a) => self.ingress = a.into_iter().collect(),
            FipStep::Warn(w) => self.warnings.push(w),
        }
    }

    /// Like the handler: after a record, the plan sees the old observation with the new record
    /// (no fresh `recorded` lookup) — it must still converge.
    fn converge_stale(&mut self, want: Option<&PublicIp>) -> Vec<FipStep> {
        let mut steps = Vec::new();
        let mut obs = self.observe(want);
        for _ in 0..20 {
            match next(want, Some(VIP), self.rec.as_ref(), &obs, &tags(), false) {
                None => return steps,
                Some(s) => {
                    let record = matches!(s, FipStep::Record(_));
                    steps.push(s.clone());
                    self.apply(s);
                    if !record {
                        obs = self.observe(want);
                    }
                }
            }
        }
        panic!("no convergence on a stale observation: {steps:?}");
    }

    /// Runs the plan until it has nothing to do (or warns); returns the steps taken.
    fn converge(&mut self, want: Option<&PublicIp>, vip: Option<&str>, deleting: bool) -> Vec<FipStep> {
        let mut steps = Vec::new();
        for _ in 0..20 {
            let obs = self.observe(want);
            match next(want, vip, self.rec.as_ref(), &obs, &tags(), deleting) {
                None => return steps,
                Some(s @ FipStep::Warn(_)) => {
                    self.apply(s.clone());
                    steps.push(s);
                    return steps;
                }
                Some(s) => {
                    steps.push(s.clone());
                    self.apply(s);
                }
            }
        }
        panic!("no convergence: {steps:?}");
    }

    fn user_fip(&mut self, addr: &str, port: Option<&str>) {
        self.fips.push(FloatingIp {
            id: format!("user-{addr}"),
            floating_ip_address: addr.into(),
            port_id: port.map(str::to_string),
            ..Default::default()
        });
    }
}

#[test]
fn pool_address_allocated_recorded_and_shown() {
    let mut w = World::default();
    let steps = w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    assert_eq!(steps.len(), 3, "{steps:?}"); // create, record, ingress
    assert_eq!(steps[0], FipStep::Create);
    let rec = w.rec.clone().expect("recorded");
    assert_eq!(rec.alloc_method, ALLOC_POOL);
    assert_eq!(w.ingress, vec![rec.ip_addr.clone()]);
    // Converged: nothing more, and a second pass writes nothing.
    assert!(w.converge(Some(&PublicIp::Pool), Some(VIP), false).is_empty());
}

#[test]
fn no_load_balancer_yet_means_no_floating_ip_yet() {
    let mut w = World::default();
    assert!(w.converge(Some(&PublicIp::Pool), None, false).is_empty());
    assert!(w.fips.is_empty());
}

#[test]
fn killed_between_create_and_record_adopts_instead_of_allocating_twice() {
    let mut w = World::default();
    w.apply(FipStep::Create);
    let steps = w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    assert!(!steps.contains(&FipStep::Create), "{steps:?}");
    assert_eq!(w.fips.len(), 1);
    assert_eq!(w.rec.as_ref().map(|r| r.alloc_method.as_str()), Some(ALLOC_POOL));
}

#[test]
fn recreated_load_balancer_gets_the_same_address_back() {
    let mut w = World::default();
    w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    let addr = w.rec.clone().expect("recorded").ip_addr;
    // The VIP port went with the old load balancer: Neutron freed the address.
    for f in &mut w.fips {
        f.port_id = None;
    }
    let steps = w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    assert!(matches!(steps.as_slice(), [FipStep::Associate(_)]), "{steps:?}");
    assert_eq!(w.rec.expect("recorded").ip_addr, addr);
    assert_eq!(w.fips.len(), 1);
}

#[test]
fn type_changed_to_cluster_ip_deletes_the_pool_address_and_clears_the_service() {
    let mut w = World::default();
    w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    w.converge(None, Some(VIP), false);
    assert!(
        w.fips.is_empty() && w.rec.is_none() && w.ingress.is_empty(),
        "{w:?}"
    );
}

#[test]
fn deletion_releases_pool_address_and_keeps_user_address() {
    let mut w = World::default();
    w.converge(Some(&PublicIp::Pool), Some(VIP), true);
    assert!(w.fips.is_empty(), "deleting never allocates");
    w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    w.converge(Some(&PublicIp::Pool), Some(VIP), true);
    assert!(w.fips.is_empty() && w.rec.is_none());

    let mut w = World::default();
    w.user_fip("172.24.4.50", None);
    let want = PublicIp::User("172.24.4.50".into());
    w.converge(Some(&want), Some(VIP), false);
    assert_eq!(w.fips[0].port_id.as_deref(), Some(VIP));
    assert_eq!(w.rec.as_ref().map(|r| r.alloc_method.as_str()), Some(ALLOC_USER));
    assert_eq!(w.ingress, vec!["172.24.4.50".to_string()]);
    w.converge(Some(&want), Some(VIP), true);
    assert_eq!(w.fips.len(), 1, "a user's address is kept");
    assert_eq!(w.fips[0].port_id, None, "but freed");
    assert!(w.rec.is_none());
}

#[test]
fn unknown_or_busy_user_address_is_a_warning_not_an_allocation() {
    let mut w = World::default();
    let want = PublicIp::User("172.24.4.60".into());
    let steps = w.converge(Some(&want), Some(VIP), false);
    assert!(
        matches!(steps.as_slice(), [FipStep::Warn(m)] if m.contains("172.24.4.60")),
        "{steps:?}"
    );
    assert!(w.fips.is_empty());

    let mut w = World::default();
    w.user_fip("172.24.4.60", Some("some-vm-port"));
    let steps = w.converge(Some(&want), Some(VIP), false);
    assert!(
        matches!(steps.as_slice(), [FipStep::Warn(m)] if m.contains("some-vm-port")),
        "{steps:?}"
    );
}

#[test]
fn switching_between_pool_and_user_address_releases_the_old_one_first() {
    let mut w = World::default();
    w.user_fip("172.24.4.70", None);
    w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    let want = PublicIp::User("172.24.4.70".into());
    w.converge(Some(&want), Some(VIP), false);
    assert_eq!(w.fips.len(), 1, "pool address deleted: {w:?}");
    assert_eq!(w.rec.as_ref().map(|r| r.ip_addr.as_str()), Some("172.24.4.70"));
    assert_eq!(w.ingress, vec!["172.24.4.70".to_string()]);
    // loadBalancerIP removed: the Service keeps the address it has (no swap under its
    // clients), still the user's: kept on deletion.
    assert!(w.converge(Some(&PublicIp::Pool), Some(VIP), false).is_empty());
    w.converge(Some(&PublicIp::Pool), Some(VIP), true);
    assert_eq!(w.fips.len(), 1);
    assert_eq!(w.fips[0].port_id, None);
}

#[test]
fn someone_elses_address_on_the_vip_is_recorded_as_user_and_never_deleted() {
    let mut w = World::default();
    w.user_fip("172.24.4.80", Some(VIP));
    w.converge(Some(&PublicIp::Pool), Some(VIP), false);
    assert_eq!(w.rec.as_ref().map(|r| r.alloc_method.as_str()), Some(ALLOC_USER));
    w.converge(None, Some(VIP), true);
    assert_eq!(w.fips.len(), 1);
}

#[test]
fn unrecorded_kuryr_address_left_on_the_vip_goes_when_nothing_wants_one() {
    let mut w = World::default();
    w.apply(FipStep::Create);
    w.converge(None, Some(VIP), false);
    assert!(w.fips.is_empty());
}

#[test]
fn a_record_then_a_replan_on_the_old_observation_converges() {
    let mut w = World::default();
    w.apply(FipStep::Create);
    let steps = w.converge_stale(Some(&PublicIp::Pool));
    assert_eq!(steps.len(), 2, "{steps:?}"); // record, ingress
    assert!(w.rec.is_some());
}
