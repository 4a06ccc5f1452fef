//! The fuzz targets: every parser that takes input from outside, fed the committed seed corpus
//! and mutations of it (see the crate docs). A target returns whether it accepted the input;
//! beyond "never panics" each one checks that a refusal says what was wrong (a non-empty
//! message, the CNI error codes the spec allows) and that what it accepts holds together.

use kuryr_cni_api::{
    CniArgs, CniError, CniResult, CniVersion, DaemonRequest, ErrorCode, NetConf, Verb, VifInfo,
    daemon::{DaemonOutcome, interpret_response},
};
use kuryr_fuzz::run;
use serde_json::Value;

const VERBS: [Verb; 6] = [
    Verb::Add,
    Verb::Del,
    Verb::Check,
    Verb::Gc,
    Verb::Status,
    Verb::Version,
];

fn told(e: &CniError) {
    assert!(!e.msg.is_empty(), "an error without a message: {e:?}");
    assert!(e.code.code() != 0, "an error with code 0: {e:?}");
}

/// CNI stdin: the network configuration the runtime passes (plugin side), and `CNI_ARGS`.
#[test]
fn cni_stdin_and_args() {
    let r = run("cni_stdin", vec![], |b| {
        let parsed = match NetConf::parse(b) {
            Ok(p) => p,
            Err(e) => {
                told(&e);
                assert!(
                    matches!(
                        e.code,
                        ErrorCode::DecodingFailure | ErrorCode::InvalidNetworkConfig
                    ),
                    "{e:?}"
                );
                return false;
            }
        };
        match parsed.conf.version() {
            Ok(v) => {
                let _ = v.as_str();
            }
            Err(e) => told(&e),
        }
        // The same bytes as CNI_ARGS.
        if let Ok(s) = std::str::from_utf8(b) {
            if let Ok(a) = CniArgs::parse(s) {
                let _ = (a.pod_namespace(), a.pod_name(), a.pod_uid(), a.ignore_unknown());
            }
        }
        true
    });
    eprintln!("cni_stdin: {r:?}");
    assert!(
        r.accepted > 0,
        "no input was ever accepted: the mutations miss the parser"
    );
}

/// The daemon's request bodies (what the plugin, or anyone on the daemon's socket, sends), with
/// the validation of every verb.
#[test]
fn daemon_request_bodies() {
    let r = run("daemon_request", vec![], |b| {
        let req: DaemonRequest = match kuryr_daemon::request::parse_body(b) {
            Ok(r) => r,
            Err(e) => {
                told(&e);
                return false;
            }
        };
        let mut any = false;
        for verb in VERBS {
            for proc_dir in [None, Some("/host_proc")] {
                match kuryr_daemon::request::validate(&req, verb, proc_dir) {
                    Ok(_) => any = true,
                    Err(e) => told(&e),
                }
            }
        }
        any
    });
    eprintln!("daemon_request: {r:?}");
    assert!(r.accepted > 0);
}

/// The daemon's answers as the plugin reads them (any status, any body), and an ADD's VIF turned
/// into the CNI result of every spec version.
#[test]
fn daemon_response_bodies() {
    let r = run("daemon_response", vec![], |b| {
        let mut accepted = false;
        for verb in VERBS {
            for status in [200, 202, 204, 400, 404, 409, 500, 503] {
                match interpret_response(verb, status, b) {
                    DaemonOutcome::Err(e) => told(&e),
                    DaemonOutcome::NotImplemented => {}
                    DaemonOutcome::Ok(v) if verb == Verb::Add => match VifInfo::from_primitive(&v) {
                        Ok(vif) => match CniResult::from_vif(&vif, "eth0", "/var/run/netns/x") {
                            Ok(res) => {
                                accepted = true;
                                for version in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
                                    if let Some(v) = CniVersion::parse(version) {
                                        let out = res.to_json(v);
                                        assert!(out.is_object(), "{out}");
                                    }
                                }
                            }
                            Err(e) => told(&e),
                        },
                        Err(e) => told(&e),
                    },
                    DaemonOutcome::Ok(_) => {}
                }
            }
        }
        accepted
    });
    eprintln!("daemon_response: {r:?}");
    assert!(r.accepted > 0);
}

/// `kuryr.conf` (an operator's file, upstream's included), as the controller and the daemon read
/// it; the generated sample is a seed too.
#[test]
fn kuryr_conf_files() {
    let sample = kuryr_config::sample_config().into_bytes();
    let r = run("kuryr_conf", vec![sample], |b| {
        let text = String::from_utf8_lossy(b);
        let mut accepted = false;
        for role in [
            kuryr_config::Role::Controller,
            kuryr_config::Role::Daemon,
            kuryr_config::Role::Any,
        ] {
            match kuryr_config::from_strs(&[("fuzz.conf", &text)], role, &|_| None) {
                Ok(_) => accepted = true,
                Err(errors) => {
                    let msg = errors.to_string();
                    assert!(!msg.trim().is_empty(), "errors without words");
                }
            }
        }
        accepted
    });
    eprintln!("kuryr_conf: {r:?}");
    assert!(r.accepted > 0);
}

/// os-vif VIF primitives and whole KuryrPort documents (CRD contents written by a user, an old
/// version or upstream).
#[test]
fn vif_primitives_and_kuryrports() {
    let r = run("vif", vec![], |b| {
        let Ok(v) = serde_json::from_slice::<Value>(b) else {
            return false;
        };
        match kuryr_types::vif::Vif::from_primitive(v.clone()) {
            Ok(vif) => {
                // What it accepts goes back out in the same shape.
                let back = serde_json::to_value(&vif).map(|o| o.is_object());
                assert!(matches!(back, Ok(true)), "{back:?}");
                true
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                false
            }
        }
    });
    eprintln!("vif: {r:?}");
    assert!(r.accepted > 0);
    let r = run("kuryrport", vec![], |b| {
        serde_json::from_slice::<kuryr_types::KuryrPort>(b)
            .map(|p| {
                let _ = serde_json::to_vec(&p);
            })
            .is_ok()
    });
    eprintln!("kuryrport: {r:?}");
    assert!(r.accepted > 0);
}

/// VIFs of KuryrPorts turned into wiring plans: whatever the CR says, the host device is the one
/// derived from the port ID (a device name), and the bridge is the configured one.
#[test]
fn wiring_plans_name_only_what_the_port_id_gives() {
    use kuryr_daemon::binding::spec::{SpecContext, host_dev_name, valid_ifname, wire_spec};
    let r = run("vif", vec![], |b| {
        let Ok(v) = serde_json::from_slice::<Value>(b) else {
            return false;
        };
        let Ok(vif) = kuryr_types::vif::Vif::from_primitive(v) else {
            return false;
        };
        let mut any = false;
        for bridge in [Some("br-int"), None] {
            let cx = SpecContext {
                ifname: "eth0",
                default: true,
                pod_uid: "u",
                default_bridge: bridge,
                network_device_mtu: 0,
            };
            match wire_spec(&vif, cx) {
                Ok(s) => {
                    any = true;
                    assert_eq!(s.host_dev, host_dev_name(&s.port_id), "{s:?}");
                    assert!(valid_ifname(&s.host_dev), "{s:?}");
                    if let Some(b) = bridge.filter(|_| !s.bridge.is_empty()) {
                        assert_eq!(s.bridge, b, "a bridge other than the configured one: {s:?}");
                    }
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
        any
    });
    eprintln!("wire_spec: {r:?}");
    assert!(r.accepted > 0);
}

/// The daemon's state files read at start (written by an earlier run, or planted): never a
/// panic, and a loaded record never names a host device the daemon would not have made.
#[test]
fn state_files_read_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = run("state_file", vec![], |b| {
        let path = dir.path().join("c1.json");
        if std::fs::write(&path, b).is_err() {
            return false;
        }
        let Ok(store) = kuryr_daemon::state::StateStore::open(dir.path()) else {
            return false;
        };
        let all = store.all();
        for a in &all {
            assert!(
                a.problem().is_none(),
                "a record unfit to act on was loaded: {a:?}"
            );
        }
        !all.is_empty()
    });
    eprintln!("state_file: {r:?}");
    assert!(r.accepted > 0);
}

/// OVSDB replies as the daemon reads them.
#[test]
fn ovsdb_replies() {
    let r = run("ovsdb", vec![], |b| {
        let Ok(v) = serde_json::from_slice::<Value>(b) else {
            return false;
        };
        match kuryr_daemon::ovsdb::parse_reply(v) {
            Ok(_) => true,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                false
            }
        }
    });
    eprintln!("ovsdb: {r:?}");
    assert!(r.accepted > 0);
}

/// Neutron and Octavia objects as the controller reads them, and the ownership rule on them:
/// what it pools is ours by tags with our device owner; what it takes from a CR's reference is
/// never another cluster's.
#[test]
fn neutron_and_octavia_objects_and_the_ownership_rule() {
    use kuryr_core::ownership::{Claim, Ownership, Verdict};
    let tags = kuryr_core::TagPolicy::new(vec![], Some("kuryr-cluster=a".into())).expect("tags");
    let r = run("neutron", vec![], |b| {
        let mut any = false;
        if let Ok(p) = serde_json::from_slice::<kuryr_openstack::Port>(b) {
            any = true;
            for project in [None, Some("p")] {
                let o = Ownership::new(&tags, project);
                if o.owns_pool_port(&p) {
                    assert_eq!(o.claim(&p.tags), Claim::Ours, "{p:?}");
                    assert_eq!(p.device_owner, "compute:kuryr");
                }
                match o.accepts_referenced(&p) {
                    Verdict::Ours => assert_eq!(o.claim(&p.tags), Claim::Ours),
                    Verdict::Adopted => assert!(p.tags.is_empty(), "{p:?}"),
                    Verdict::Refused(why) => assert!(!why.to_string().is_empty()),
                }
            }
        }
        any |= serde_json::from_slice::<kuryr_openstack::Network>(b).is_ok();
        any |= serde_json::from_slice::<kuryr_openstack::security_group::SecurityGroup>(b).is_ok();
        any |= serde_json::from_slice::<kuryr_openstack::FloatingIp>(b).is_ok();
        any |= serde_json::from_slice::<kuryr_openstack::octavia::LoadBalancer>(b).is_ok();
        any
    });
    eprintln!("neutron: {r:?}");
    assert!(r.accepted > 0);
}

/// The other CRDs' contents (written by a user, an old version or upstream).
#[test]
fn kuryr_network_load_balancer_and_policy_crs() {
    let r = run("kuryr_crs", vec![], |b| {
        let a = serde_json::from_slice::<kuryr_types::KuryrNetwork>(b).is_ok();
        let l = serde_json::from_slice::<kuryr_types::KuryrLoadBalancer>(b).is_ok();
        let p = serde_json::from_slice::<kuryr_types::KuryrNetworkPolicy>(b).is_ok();
        a || l || p
    });
    eprintln!("kuryr_crs: {r:?}");
    assert!(r.accepted > 0);
}
