//! Every CNI verb through the recording binding: no namespaces, netlink or OVS.

use std::{sync::Arc, time::Duration};

use kuryr_cni_api::{ErrorCode, config::Attachment as ValidAttachment};
use kuryr_types::{
    VifEntry, VifKind,
    vif::{FixedIp, Network, Subnet, Vif},
};

use crate::{
    binding::record::RecordingBindings,
    daemon::{Daemon, OpError, Settings},
    metrics::Metrics,
    registry::{PodRecord, PortRecord, Registry, Source},
    request::CniCall,
    state::StateStore,
};

const PORT: &str = "3e5f2a1b-7c8d-4e9f-a0b1-c2d3e4f5a6b7";

struct Fixture {
    daemon: Daemon,
    fake: Arc<RecordingBindings>,
    registry: Arc<Registry>,
    // The "namespace" the calls name: any existing path will do for the fake.
    netns: tempfile::NamedTempFile,
    _state: tempfile::TempDir,
}

fn vif(active: bool) -> Vif {
    let mut v = Vif::new(VifKind::OpenVSwitch, PORT);
    v.address = Some("fa:16:3e:12:34:56".into());
    let mut s = Subnet::new("10.10.0.0/24");
    s.gateway = Some("10.10.0.1".into());
    s.ips.push(FixedIp::new("10.10.0.7"));
    let mut n = Network::new("net");
    n.mtu = Some(1442);
    n.bridge = Some("br-int".into());
    n.subnets.push(s);
    v.network = Some(n);
    v.active = Some(active);
    v
}

fn fixture() -> Fixture {
    fixture_with(true)
}

/// A daemon whose watchers have listed (`synced`) or not yet.
fn fixture_with(synced: bool) -> Fixture {
    fixture_timed(synced, Duration::from_millis(300))
}

/// [`fixture_with`] with ADD's VIF timeout `vif_timeout`.
fn fixture_timed(synced: bool, vif_timeout: Duration) -> Fixture {
    let state_dir = tempfile::tempdir().expect("state dir");
    let registry = Arc::new(Registry::default());
    if synced {
        for src in [Source::Ports, Source::Pods] {
            registry.relist_start(src);
            registry.relist_done(src);
        }
    }
    let fake = RecordingBindings::new(Duration::ZERO, None);
    let settings = Settings {
        vif_timeout,
        default_bridge: Some("br-int".into()),
        network_device_mtu: 0,
        netns_proc_dir: None,
    };
    let daemon = Daemon::new(
        settings,
        registry.clone(),
        StateStore::open(state_dir.path()).expect("state store"),
        fake.clone(),
        Arc::new(Metrics::default()),
    );
    Fixture {
        daemon,
        fake,
        registry,
        netns: tempfile::NamedTempFile::new().expect("netns stand-in"),
        _state: state_dir,
    }
}

impl Fixture {
    /// The watchers saw pod `ns/web` (UID `uid-1`) and its KuryrPort with one VIF.
    fn pod_with_vif(&self, active: bool) {
        let mut vifs = std::collections::BTreeMap::new();
        vifs.insert(
            "eth0".to_string(),
            VifEntry {
                default: true,
                vif: vif(active),
            },
        );
        self.registry.put_pod(
            "ns/web".into(),
            PodRecord {
                uid: "uid-1".into(),
                terminating: false,
            },
        );
        self.registry.put_port(
            "ns/web".into(),
            PortRecord {
                kp_uid: "kp-1".into(),
                pod_uid: "uid-1".into(),
                pod_static: false,
                vifs,
            },
        );
    }

    fn call(&self, container: &str) -> CniCall {
        CniCall {
            container_id: container.into(),
            netns: self.netns.path().to_owned(),
            ifname: "eth0".into(),
            pod_namespace: Some("ns".into()),
            pod_name: Some("web".into()),
            pod_uid: Some("uid-1".into()),
            valid_attachments: Vec::new(),
        }
    }
}

fn ops(f: &Fixture) -> Vec<&'static str> {
    f.fake.recent().into_iter().map(|c| c.op).collect()
}

#[tokio::test]
async fn add_wires_every_vif_records_it_and_returns_the_default_vif() {
    let f = fixture();
    f.pod_with_vif(true);
    let v = f.daemon.add(&f.call("c1")).await.expect("ADD");
    assert_eq!(v["versioned_object.data"]["id"], PORT, "{v}");
    let calls = f.fake.recent();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].op, "connect");
    assert_eq!(calls[0].ifname, "eth0");
    assert_eq!(calls[0].host_dev, "tap3e5f2a1b-7c");
    let a = f.daemon.state.get("c1").expect("attachment recorded");
    assert_eq!((a.pod_uid.as_str(), a.vifs.len()), ("uid-1", 1));
}

#[tokio::test]
async fn add_waits_for_activation_and_times_out_without_it() {
    let f = fixture();
    f.pod_with_vif(false);
    // The fake datapath has no OVN flags: only Neutron's ACTIVE (in the KuryrPort) ends the wait.
    let e = f.daemon.add(&f.call("c1")).await.expect_err("never active");
    assert!(matches!(e, OpError::ActivationTimeout { .. }), "{e}");
    assert_eq!(e.to_cni().code, ErrorCode::TryAgainLater);
    // Wired and recorded all the same: the retry finds it, DEL can clean it.
    assert_eq!(ops(&f), ["connect"]);
    assert!(f.daemon.state.get("c1").is_some());
}

#[tokio::test]
async fn add_ends_when_the_pod_goes_away_while_waiting_for_activation() {
    // A long timeout: only the pod's going ends the wait early.
    let f = fixture_timed(true, Duration::from_secs(30));
    f.pod_with_vif(false);
    let registry = f.daemon.registry.clone();
    let gone = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        registry.delete_port("ns/web");
    });
    let t = std::time::Instant::now();
    let e = f.daemon.add(&f.call("c1")).await.expect_err("pod gone");
    gone.await.expect("join");
    assert!(matches!(e, OpError::PodGone(_)), "{e}");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "ended with the pod, not at the timeout: {:?}",
        t.elapsed()
    );
    // Wired and recorded: DEL still cleans it.
    assert!(f.daemon.state.get("c1").is_some());
}

#[tokio::test]
async fn add_without_a_kuryrport_times_out_and_wires_nothing() {
    let f = fixture();
    let e = f.daemon.add(&f.call("c1")).await.expect_err("no KuryrPort");
    assert!(matches!(e, OpError::KuryrPortTimeout { .. }), "{e}");
    assert!(f.fake.recent().is_empty());
    assert!(f.daemon.state.get("c1").is_none());
}

#[tokio::test]
async fn a_failed_binding_is_an_internal_error_with_the_attachment_kept_for_del() {
    let f = fixture();
    f.pod_with_vif(true);
    f.fake.fail_connect("veth creation refused");
    let e = f.daemon.add(&f.call("c1")).await.expect_err("binding fails");
    assert!(e.is_internal());
    assert_eq!(e.to_cni().code, ErrorCode::DaemonInternal);
    assert!(
        f.daemon.state.get("c1").is_some(),
        "recorded before wiring, for DEL"
    );
    f.daemon.del(&f.call("c1")).await.expect("DEL cleans it");
    assert!(f.daemon.state.get("c1").is_none());
}

#[tokio::test]
async fn add_of_a_missing_namespace_is_refused() {
    let f = fixture();
    f.pod_with_vif(true);
    let mut call = f.call("c1");
    call.netns = "/nonexistent/netns".into();
    let e = f.daemon.add(&call).await.expect_err("no netns");
    assert!(matches!(e, OpError::NoNetns(_)));
    assert!(f.fake.recent().is_empty());
}

#[tokio::test]
async fn del_unwires_what_was_recorded_and_is_idempotent() {
    let f = fixture();
    f.pod_with_vif(true);
    f.daemon.add(&f.call("c1")).await.expect("ADD");
    f.daemon.del(&f.call("c1")).await.expect("DEL");
    assert_eq!(ops(&f), ["connect", "disconnect"]);
    assert!(f.daemon.state.get("c1").is_none());
    // Again: nothing recorded, no other container of the pod: nothing is touched (the daemon
    // never deletes what it did not wire, whatever CNI_NETNS and CNI_IFNAME name).
    f.daemon.del(&f.call("c1")).await.expect("second DEL");
    assert_eq!(ops(&f), ["connect", "disconnect"]);
    let mut host = f.call("never-seen");
    host.netns = "/proc/1/ns/net".into();
    host.ifname = "lo".into();
    f.daemon.del(&host).await.expect("DEL of a container never wired");
    assert_eq!(ops(&f), ["connect", "disconnect"]);
    // A DEL without a namespace (already gone) does nothing at all.
    let mut gone = f.call("c1");
    gone.netns = "".into();
    f.daemon.del(&gone).await.expect("DEL without netns");
    assert_eq!(ops(&f).len(), 2);
}

#[tokio::test]
async fn del_of_a_stale_container_leaves_the_current_one_wired() {
    let f = fixture();
    f.pod_with_vif(true);
    f.daemon
        .add(&f.call("c2"))
        .await
        .expect("ADD of the current sandbox");
    f.daemon
        .del(&f.call("c1"))
        .await
        .expect("DEL of an older sandbox");
    assert_eq!(ops(&f), ["connect"]);
    assert!(f.daemon.state.get("c2").is_some());
}

#[tokio::test]
async fn a_del_during_adds_wait_keeps_the_add_from_wiring() {
    let f = fixture();
    // ADD waits for the KuryrPort; DEL of the same container comes meanwhile.
    let call = f.call("c1");
    let add = f.daemon.add(&call);
    let later = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        f.daemon.del(&f.call("c1")).await.expect("DEL");
        f.pod_with_vif(true);
    };
    let (r, ()) = tokio::join!(add, later);
    let e = r.expect_err("the container was deleted");
    assert!(matches!(e, OpError::DeletedMeanwhile(_)), "{e}");
    assert!(!ops(&f).contains(&"connect"));
}

#[tokio::test]
async fn check_verifies_the_recorded_wiring() {
    let f = fixture();
    let e = f.daemon.check(&f.call("c1")).await.expect_err("not wired");
    assert!(matches!(e, OpError::NotWired(_)));
    f.pod_with_vif(true);
    f.daemon.add(&f.call("c1")).await.expect("ADD");
    f.daemon
        .check(&f.call("c1"))
        .await
        .expect("CHECK of intact wiring");
    f.fake.set_problems(&["tap3e5f2a1b-7c is not on br-int"]);
    match f.daemon.check(&f.call("c1")).await {
        Err(OpError::CheckFailed { problems, .. }) => {
            assert_eq!(problems, ["tap3e5f2a1b-7c is not on br-int"]);
        }
        other => panic!("expected CheckFailed, got {other:?}"),
    }
    f.fake.set_problems(&[]);
    let mut renamed = f.call("c1");
    renamed.ifname = "eth1".into();
    match f.daemon.check(&renamed).await {
        Err(OpError::CheckFailed { problems, .. }) => assert!(problems[0].contains("eth1"), "{problems:?}"),
        other => panic!("expected CheckFailed, got {other:?}"),
    }
}

#[tokio::test]
async fn gc_unwires_every_attachment_not_listed_as_valid() {
    let f = fixture();
    f.pod_with_vif(true);
    f.daemon.add(&f.call("c1")).await.expect("ADD");
    let mut gc = f.call("");
    gc.valid_attachments = vec![ValidAttachment {
        container_id: "c1".into(),
        ifname: "eth0".into(),
    }];
    assert_eq!(f.daemon.gc(&gc).await.expect("GC keeping c1"), 0);
    gc.valid_attachments.clear();
    assert_eq!(f.daemon.gc(&gc).await.expect("GC of everything"), 1);
    assert_eq!(ops(&f), ["connect", "disconnect"]);
    assert!(f.daemon.state.all().is_empty());
}

#[tokio::test]
async fn status_needs_synced_watchers_and_a_ready_datapath() {
    let f = fixture();
    f.daemon.status().await.expect("ready");
    f.fake.set_not_ready(Some("OVS bridge br-int does not exist"));
    let e = f.daemon.status().await.expect_err("datapath not ready");
    assert_eq!(e.code, ErrorCode::PluginNotAvailable);
    assert!(e.msg.contains("br-int"), "{}", e.msg);
    let unsynced = fixture_with(false);
    let e = unsynced
        .daemon
        .status()
        .await
        .expect_err("watchers not listed yet");
    assert_eq!(e.code, ErrorCode::PluginNotAvailable);
    assert!(e.msg.contains("synced"), "{}", e.msg);
}
