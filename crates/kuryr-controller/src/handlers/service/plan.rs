//! The Service plan (pure): which Services get a load balancer, the KuryrLoadBalancer spec a
//! Service asks for (everything but `endpointSlices`, which the endpoints handler owns), and
//! the next step — finalizer, create, minimal spec update, deletion.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use kuryr_types::constants::{
    ANNOTATION_CLIENT_TIMEOUT, ANNOTATION_HM_DELAY, ANNOTATION_HM_ENABLE, ANNOTATION_HM_MAX_RETRIES,
    ANNOTATION_HM_MAX_RETRIES_DOWN, ANNOTATION_HM_TIMEOUT, ANNOTATION_LBAAS_SPEC, ANNOTATION_MEMBER_TIMEOUT,
    SERVICE_FINALIZER,
};
use kuryr_types::{
    KuryrLoadBalancer, KuryrLoadBalancerSpec,
    kuryrloadbalancer::{KlbHealthMonitor, LbPort},
};

use crate::handlers::scaffold::{Plan, Then};

/// How soon to look again while waiting for a new Service's EndpointSlices.
pub const SLICE_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Where Services' load balancers go (from `kuryr.conf`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SvcSettings {
    /// `[neutron_defaults] project`.
    pub project_id: String,
    /// `[neutron_defaults] service_subnet`.
    pub subnet_id: String,
    /// Security groups recorded for the VIP (`pod_security_groups`).
    pub security_groups: Vec<String>,
    /// `[kubernetes] endpoints_driver_octavia_provider` (`None`: Octavia's default).
    pub provider: Option<String>,
}

/// Why a Service gets no load balancer (`None` from [`skip_reason`]: it gets one).
pub fn skip_reason(svc: &Service) -> Option<&'static str> {
    let Some(spec) = svc.spec.as_ref() else {
        return Some("no spec");
    };
    if spec.type_.as_deref() == Some("ExternalName") {
        return Some("ExternalName Service");
    }
    match spec.cluster_ip.as_deref() {
        None | Some("") => return Some("no ClusterIP"),
        Some("None") => return Some("headless Service"),
        Some(_) => {}
    }
    if spec.ports.as_ref().is_none_or(Vec::is_empty) {
        return Some("no ports");
    }
    if svc.annotations().contains_key(ANNOTATION_LBAAS_SPEC) {
        return Some("legacy openstack.org/kuryr-lbaas-spec annotation");
    }
    None
}

fn millis(svc: &Service, key: &str) -> Option<i64> {
    svc.annotations()
        .get(key)
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|v| *v > 0)
}

/// The health monitor the Service's annotations ask for (cloud-provider-openstack's names and
/// defaults: 5 s delay, 3 s timeout, 1 retry up, 3 down); values that are not positive numbers
/// keep the default.
fn health_monitor(svc: &Service) -> Option<KlbHealthMonitor> {
    let a = svc.annotations();
    if !a
        .get(ANNOTATION_HM_ENABLE)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    {
        return None;
    }
    let num = |key: &str, default: i64| {
        a.get(key)
            .and_then(|v| v.trim().trim_end_matches('s').parse::<i64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(default)
    };
    Some(KlbHealthMonitor {
        delay: num(ANNOTATION_HM_DELAY, 5),
        timeout: num(ANNOTATION_HM_TIMEOUT, 3),
        max_retries: num(ANNOTATION_HM_MAX_RETRIES, 1),
        max_retries_down: num(ANNOTATION_HM_MAX_RETRIES_DOWN, 3),
    })
}

/// The spec `svc` asks for (its `endpointSlices` left empty).
pub fn klb_spec(svc: &Service, s: &SvcSettings) -> KuryrLoadBalancerSpec {
    let spec = svc.spec.clone().unwrap_or_default();
    let ports = spec
        .ports
        .unwrap_or_default()
        .into_iter()
        .map(|p| LbPort {
            name: p.name.filter(|n| !n.is_empty()),
            port: p.port,
            protocol: p.protocol.unwrap_or_else(|| "TCP".into()),
            target_port: match p.target_port {
                Some(IntOrString::Int(i)) => i.to_string(),
                Some(IntOrString::String(s)) => s,
                None => p.port.to_string(),
            },
        })
        .collect();
    KuryrLoadBalancerSpec {
        endpoint_slices: None,
        ip: spec.cluster_ip.clone(),
        lb_ip: spec.load_balancer_ip.clone().filter(|s| !s.is_empty()),
        ports: Some(ports),
        project_id: Some(s.project_id.clone()),
        security_groups_ids: Some(s.security_groups.clone()),
        subnet_id: Some(s.subnet_id.clone()),
        type_: Some(spec.type_.clone().unwrap_or_else(|| "ClusterIP".into())),
        provider: s.provider.clone(),
        timeout_client_data: millis(svc, ANNOTATION_CLIENT_TIMEOUT),
        timeout_member_data: millis(svc, ANNOTATION_MEMBER_TIMEOUT),
        // Kubernetes applies loadBalancerSourceRanges to LoadBalancer Services only.
        source_ranges: spec
            .load_balancer_source_ranges
            .filter(|r| !r.is_empty() && spec.type_.as_deref() == Some("LoadBalancer")),
        session_affinity: spec.session_affinity.filter(|a| a == "ClientIP"),
        health_monitor: health_monitor(svc),
    }
}

/// Whether `have` already carries everything of `want` (endpoint slices aside).
pub fn spec_matches(have: &KuryrLoadBalancerSpec, want: &KuryrLoadBalancerSpec) -> bool {
    let mut h = have.clone();
    h.endpoint_slices = None;
    &h == want
}

/// What the Service plan looks at.
#[derive(Debug, Clone)]
pub struct SvcObserved {
    /// The Service.
    pub svc: Service,
    /// Its KuryrLoadBalancer (same namespace and name).
    pub klb: Option<KuryrLoadBalancer>,
    /// Its EndpointSlices as the KLB carries them: written at creation, so that the load
    /// balancer is created with its members in one Octavia call (the endpoints handler keeps
    /// them current afterwards).
    pub slices: Vec<kuryr_types::kuryrloadbalancer::EndpointSlice>,
    /// The Service has a selector, no EndpointSlice of it exists yet and it is seconds old:
    /// its slices are about to come (the EndpointSlice controller creates one even without
    /// pods). Waiting for them a moment lets the load balancer be created with its members in
    /// one Octavia call instead of two.
    pub await_slices: bool,
    /// Settings.
    pub settings: SvcSettings,
}

/// One step of the Service handler.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Put the Service finalizer on the Service (before the KLB exists).
    AddFinalizer,
    /// Create the KLB with this spec.
    CreateKlb(Box<KuryrLoadBalancerSpec>),
    /// Set these spec fields of the KLB (a merge patch; `endpointSlices` untouched).
    UpdateKlb(Box<KuryrLoadBalancerSpec>),
    /// Delete the KLB (its handler releases the load balancer, then both finalizers).
    DeleteKlb,
    /// Remove the Service finalizer (no KLB left).
    RemoveFinalizer,
}

fn has_finalizer(svc: &Service) -> bool {
    svc.finalizers().iter().any(|f| f == SERVICE_FINALIZER)
}

/// The plan for a Service (pure).
pub fn plan(o: &SvcObserved) -> Plan<Step> {
    let fin = has_finalizer(&o.svc);
    let klb_deleting = o
        .klb
        .as_ref()
        .is_some_and(|k| k.metadata.deletion_timestamp.is_some());
    let release = |why: &'static str| match (&o.klb, fin) {
        (Some(_), _) if klb_deleting => Plan::nothing("KuryrLoadBalancer being deleted", Then::AwaitChange),
        (Some(_), _) => Plan::steps(why, vec![Step::DeleteKlb], Then::AwaitChange),
        (None, true) => Plan::steps(
            "no KuryrLoadBalancer left",
            vec![Step::RemoveFinalizer],
            Then::AwaitChange,
        ),
        (None, false) => Plan::nothing("nothing to release", Then::AwaitChange),
    };
    if o.svc.metadata.deletion_timestamp.is_some() {
        return release("Service deleted");
    }
    if let Some(why) = skip_reason(&o.svc) {
        if o.klb.is_some() || fin {
            return release("Service no longer gets a load balancer");
        }
        return Plan::nothing(why, Then::AwaitChange);
    }
    if !fin {
        return Plan::steps("finalizer first", vec![Step::AddFinalizer], Then::Periodic);
    }
    let want = klb_spec(&o.svc, &o.settings);
    match &o.klb {
        None if o.await_slices => Plan::nothing(
            "waiting a moment for the EndpointSlices",
            Then::Requeue(SLICE_POLL),
        ),
        None => {
            let mut spec = want;
            spec.endpoint_slices = (!o.slices.is_empty()).then(|| o.slices.clone());
            Plan::steps(
                "no KuryrLoadBalancer",
                vec![Step::CreateKlb(Box::new(spec))],
                Then::Periodic,
            )
            .confirmed_live()
        }
        Some(_) if klb_deleting => Plan::nothing(
            "KuryrLoadBalancer being deleted",
            Then::Requeue(super::RECREATE_POLL),
        ),
        Some(k) if !spec_matches(&k.spec, &want) => Plan::steps(
            "Service changed",
            vec![Step::UpdateKlb(Box::new(want))],
            Then::Periodic,
        ),
        Some(_) => Plan::nothing("KuryrLoadBalancer up to date", Then::Periodic),
    }
}

/// A KLB for `svc` with `spec`, owned by the Service, with the KLB finalizer.
pub fn new_klb(svc: &Service, spec: KuryrLoadBalancerSpec) -> KuryrLoadBalancer {
    let mut k = KuryrLoadBalancer::new(&svc.name_any(), spec);
    k.metadata.namespace = svc.namespace();
    k.metadata.finalizers = Some(vec![kuryr_types::constants::KURYRLB_FINALIZER.to_string()]);
    if let Some(uid) = svc.uid() {
        k.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "v1".into(),
                kind: "Service".into(),
                name: svc.name_any(),
                uid,
                ..Default::default()
            },
        ]);
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn svc(cluster_ip: &str, ports: &[(i32, Option<IntOrString>)]) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some("web".into());
        s.metadata.namespace = Some("ns".into());
        s.metadata.uid = Some("uid-1".into());
        s.spec = Some(ServiceSpec {
            cluster_ip: Some(cluster_ip.into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(p, t)| ServicePort {
                        port: *p,
                        target_port: t.clone(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        s
    }

    fn settings() -> SvcSettings {
        SvcSettings {
            project_id: "proj".into(),
            subnet_id: "svc-subnet".into(),
            security_groups: vec!["sg".into()],
            provider: Some("ovn".into()),
        }
    }

    fn obs(s: &Service, klb: Option<KuryrLoadBalancer>) -> SvcObserved {
        SvcObserved {
            svc: s.clone(),
            klb,
            slices: vec![Default::default()],
            await_slices: false,
            settings: settings(),
        }
    }

    #[test]
    fn which_services_get_a_load_balancer() {
        assert_eq!(skip_reason(&svc("None", &[(80, None)])), Some("headless Service"));
        assert_eq!(skip_reason(&svc("10.96.0.9", &[])), Some("no ports"));
        let mut ext = svc("", &[(80, None)]);
        if let Some(s) = ext.spec.as_mut() {
            s.type_ = Some("ExternalName".into());
        }
        assert_eq!(skip_reason(&ext), Some("ExternalName Service"));
        let mut legacy = svc("10.96.0.9", &[(80, None)]);
        legacy
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(ANNOTATION_LBAAS_SPEC.into(), "{}".into());
        assert!(skip_reason(&legacy).is_some());
        assert_eq!(skip_reason(&svc("10.96.0.9", &[(80, None)])), None);
    }

    #[test]
    fn spec_follows_the_service() {
        let mut s = svc(
            "10.96.0.9",
            &[
                (80, Some(IntOrString::Int(8080))),
                (81, Some(IntOrString::String("http".into()))),
                (82, None),
            ],
        );
        s.metadata
            .annotations
            .get_or_insert_default()
            .insert(ANNOTATION_CLIENT_TIMEOUT.into(), "60000".into());
        let spec = klb_spec(&s, &settings());
        let targets: Vec<&str> = spec
            .ports
            .iter()
            .flatten()
            .map(|p| p.target_port.as_str())
            .collect();
        assert_eq!(targets, ["8080", "http", "82"]);
        assert_eq!(spec.ports.as_ref().map(|p| p[0].protocol.as_str()), Some("TCP"));
        assert_eq!(spec.ip.as_deref(), Some("10.96.0.9"));
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.timeout_client_data, Some(60000));
        assert_eq!(spec.provider.as_deref(), Some("ovn"));
        let k = new_klb(&s, spec.clone());
        assert_eq!(k.owner_references()[0].uid, "uid-1");
        assert_eq!(k.finalizers(), [kuryr_types::constants::KURYRLB_FINALIZER]);
        // Endpoint slices are the endpoints handler's: they do not make the spec differ.
        let mut with_slices = spec.clone();
        with_slices.endpoint_slices = Some(vec![Default::default()]);
        assert!(spec_matches(&with_slices, &spec));
    }

    #[test]
    fn steps() {
        let mut s = svc("10.96.0.9", &[(80, None)]);
        assert_eq!(plan(&obs(&s, None)).steps, [Step::AddFinalizer]);
        s.metadata.finalizers = Some(vec![SERVICE_FINALIZER.into()]);
        let p = plan(&obs(&s, None));
        assert!(p.confirm_live);
        match &p.steps[..] {
            [Step::CreateKlb(spec)] => assert_eq!(
                spec.endpoint_slices.as_ref().map(Vec::len),
                Some(1),
                "created with its slices"
            ),
            other => panic!("{other:?}"),
        }
        let mut waiting = obs(&s, None);
        waiting.await_slices = true;
        assert!(
            plan(&waiting).steps.is_empty(),
            "a new Service waits a moment for its slices"
        );
        assert_eq!(plan(&waiting).then, Then::Requeue(SLICE_POLL));
        let k = new_klb(&s, klb_spec(&s, &settings()));
        assert!(plan(&obs(&s, Some(k.clone()))).steps.is_empty());
        // Port change: a spec update.
        let mut s2 = s.clone();
        if let Some(p) = s2.spec.as_mut().and_then(|sp| sp.ports.as_mut()) {
            p[0].port = 81;
        }
        assert!(matches!(
            plan(&obs(&s2, Some(k.clone()))).steps[..],
            [Step::UpdateKlb(_)]
        ));
        // Became headless: the KLB goes, then the finalizer.
        let mut h = s.clone();
        if let Some(sp) = h.spec.as_mut() {
            sp.cluster_ip = Some("None".into());
        }
        assert_eq!(plan(&obs(&h, Some(k.clone()))).steps, [Step::DeleteKlb]);
        assert_eq!(plan(&obs(&h, None)).steps, [Step::RemoveFinalizer]);
        // Deleted: same order; a KLB being deleted is waited for.
        let mut d = s.clone();
        d.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(plan(&obs(&d, Some(k.clone()))).steps, [Step::DeleteKlb]);
        let mut kd = k.clone();
        kd.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert!(plan(&obs(&d, Some(kd))).steps.is_empty());
        assert_eq!(plan(&obs(&d, None)).steps, [Step::RemoveFinalizer]);
    }

    #[test]
    fn source_ranges_only_for_load_balancers_and_affinity_only_client_ip() {
        let mut s = svc("10.96.0.9", &[(80, None)]);
        if let Some(sp) = s.spec.as_mut() {
            sp.load_balancer_source_ranges = Some(vec!["192.0.2.0/24".into()]);
            sp.session_affinity = Some("None".into());
        }
        let k = klb_spec(&s, &settings());
        assert_eq!(k.source_ranges, None, "a ClusterIP Service has no source ranges");
        assert_eq!(k.session_affinity, None);
        if let Some(sp) = s.spec.as_mut() {
            sp.type_ = Some("LoadBalancer".into());
            sp.session_affinity = Some("ClientIP".into());
        }
        let k = klb_spec(&s, &settings());
        assert_eq!(k.source_ranges, Some(vec!["192.0.2.0/24".to_string()]));
        assert_eq!(k.session_affinity.as_deref(), Some("ClientIP"));
    }

    #[test]
    fn health_monitor_from_cloud_provider_openstack_annotations() {
        let mut s = svc("10.96.0.9", &[(80, None)]);
        assert_eq!(klb_spec(&s, &settings()).health_monitor, None);
        let a = s.metadata.annotations.get_or_insert_default();
        a.insert(ANNOTATION_HM_ENABLE.into(), "true".into());
        a.insert(ANNOTATION_HM_DELAY.into(), "10s".into());
        a.insert(ANNOTATION_HM_MAX_RETRIES_DOWN.into(), "zero".into());
        assert_eq!(
            klb_spec(&s, &settings()).health_monitor,
            Some(KlbHealthMonitor {
                delay: 10,
                timeout: 3,
                max_retries: 1,
                max_retries_down: 3
            })
        );
    }
}
