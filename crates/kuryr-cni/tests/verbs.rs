//! Runs the real `kuryr-cni` binary against an in-test daemon: every verb, every spec version,
//! TCP and unix socket, daemon down, timeouts.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;

const NETNS: &str = "/proc/self/ns/net";

fn add_daemon() -> FakeDaemon {
    FakeDaemon::tcp(|r| match r.path.as_str() {
        "/addNetwork" => Reply::new(202, vif()),
        "/delNetwork" => Reply::new(204, ""),
        _ => Reply::new(404, "not found"),
    })
}

#[test]
fn version_verb() {
    let r = run_plugin(
        &[("CNI_COMMAND", "VERSION".into())],
        br#"{"cniVersion":"1.1.0"}"#.to_vec(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.json(),
        json!({"cniVersion": "1.1.0", "supportedVersions": ["0.3.1", "0.4.0", "1.0.0", "1.1.0"]})
    );
}

#[test]
fn add_in_every_version_over_tcp() {
    let d = add_daemon();
    for v in ["0.3.1", "0.4.0", "1.0.0", "1.1.0"] {
        let r = run_plugin(&cni_env("ADD", NETNS), conf(v, &d.address));
        assert_eq!(r.code, 0, "{r:?}");
        let out = r.json();
        assert_eq!(out["cniVersion"], v);
        assert_eq!(out["interfaces"][0]["name"], "eth0");
        assert_eq!(out["interfaces"][0]["mac"], "fa:16:3e:12:34:56");
        assert_eq!(out["interfaces"][0]["sandbox"], NETNS);
        assert_eq!(out["ips"][0]["address"], "10.0.0.87/26");
        assert_eq!(out["ips"][0]["gateway"], "10.0.0.65");
        assert_eq!(out["ips"][0]["interface"], 0);
        assert_eq!(
            out["routes"],
            json!([{"dst": "169.254.169.254/32", "gw": "10.0.0.66"}])
        );
        assert_eq!(out["dns"], json!({"nameservers": ["10.0.0.2"]}));
        let has_version = out["ips"][0].get("version").is_some();
        assert_eq!(has_version, v.starts_with("0."), "{v}");
        assert_eq!(out["interfaces"][0].get("mtu").is_some(), v == "1.1.0");
    }
    let reqs = d.requests();
    assert_eq!(reqs.len(), 4);
    let body: serde_json::Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, "/addNetwork");
    assert_eq!(body["CNI_COMMAND"], "ADD");
    assert_eq!(body["CNI_CONTAINERID"], "f0e1d2c3b4a5");
    assert_eq!(body["CNI_NETNS"], NETNS);
    assert_eq!(body["CNI_IFNAME"], "eth0");
    assert_eq!(body["CNI_PATH"], "/opt/cni/bin");
    assert!(body["CNI_ARGS"].as_str().unwrap().contains("K8S_POD_NAME=demo"));
    assert_eq!(body["config_kuryr"]["kuryr_conf"], "/nonexistent/kuryr.conf");
    assert_eq!(body["config_kuryr"]["cniVersion"], "0.3.1");
}

#[test]
fn add_and_del_over_unix_socket_with_chunked_reply() {
    let d = FakeDaemon::unix(|r| match r.path.as_str() {
        "/addNetwork" => Reply {
            chunked: true,
            ..Reply::new(202, vif())
        },
        _ => Reply::new(204, ""),
    });
    let r = run_plugin(&cni_env("ADD", NETNS), conf("1.0.0", &d.address));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["ips"][0]["address"], "10.0.0.87/26");
    run_plugin(&cni_env("DEL", NETNS), conf("1.0.0", &d.address)).assert_ok_empty();
    assert_eq!(
        d.requests().iter().map(|r| r.path.as_str()).collect::<Vec<_>>(),
        ["/addNetwork", "/delNetwork"]
    );
}

#[test]
fn del_tolerates_missing_netns_and_forwards() {
    let d = add_daemon();
    run_plugin(&cni_env("DEL", "/nonexistent/netns"), conf("0.4.0", &d.address)).assert_ok_empty();
    let mut env = cni_env("DEL", "");
    env.retain(|(k, _)| *k != "CNI_NETNS");
    run_plugin(&env, conf("1.1.0", &d.address)).assert_ok_empty();
    assert_eq!(d.requests().len(), 2);
}

#[test]
fn daemon_down() {
    // A port nothing listens on.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    // Short timeouts: the plugin keeps trying to connect until the verb's timeout.
    let short = |version: &str, addr: &str| {
        let mut c: serde_json::Value = serde_json::from_slice(&conf(version, addr)).unwrap();
        c["add_timeout"] = json!(1);
        c["del_timeout"] = json!(1);
        c
    };
    for verb in ["ADD", "DEL", "CHECK"] {
        let mut c = short("1.1.0", &addr);
        c["prevResult"] = json!({"cniVersion": "1.1.0"});
        let t = std::time::Instant::now();
        let e = run_plugin(&cni_env(verb, NETNS), serde_json::to_vec(&c).unwrap()).assert_error(11);
        assert_eq!(e["cniVersion"], "1.1.0");
        assert!(e["msg"].as_str().unwrap().contains("not reachable"), "{e}");
        let took = t.elapsed();
        assert!(
            took >= std::time::Duration::from_millis(600) && took < std::time::Duration::from_secs(4),
            "{verb}: retried for {took:?}, expected about the 1 s timeout"
        );
    }
    let c = serde_json::to_vec(&short("1.1.0", &addr)).unwrap();
    run_plugin(&cni_env("GC", NETNS), c.clone()).assert_error(11);
    // STATUS answers at once: it reports whether the daemon is there now.
    let t = std::time::Instant::now();
    run_plugin(&cni_env("STATUS", NETNS), c).assert_error(50);
    assert!(
        t.elapsed() < std::time::Duration::from_millis(500),
        "{:?}",
        t.elapsed()
    );
    let c = serde_json::to_vec(&short("0.3.1", "unix:/nonexistent/cni.sock")).unwrap();
    run_plugin(&cni_env("ADD", NETNS), c).assert_error(11);
}

/// Runs an ADD against `addr`; `meanwhile` stops the daemon that is there (if any); a daemon
/// then starts there and must get the request exactly once, and the ADD succeed.
fn add_across_a_daemon_restart(l: Option<std::net::TcpListener>, addr: String, meanwhile: impl FnOnce()) {
    let plugin = {
        let addr = addr.clone();
        std::thread::spawn(move || run_plugin(&cni_env("ADD", NETNS), conf("1.0.0", &addr)))
    };
    meanwhile();
    drop(l);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let d = FakeDaemon::tcp_at(&addr, |r| match r.path.as_str() {
        "/addNetwork" => Reply::new(202, vif()),
        _ => Reply::new(404, "not found"),
    });
    let r = plugin.join().unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["ips"][0]["address"], "10.0.0.87/26");
    assert_eq!(d.requests().len(), 1, "the request is sent once");
}

fn free_port() -> (std::net::TcpListener, String) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    (l, addr)
}

/// The daemon restarts (a rolling upgrade of its DaemonSet): an ADD that finds nobody
/// listening keeps trying and succeeds once the daemon is back, sending its request once.
#[test]
fn add_waits_for_a_restarting_daemon() {
    let (l, addr) = free_port();
    drop(l);
    add_across_a_daemon_restart(None, addr, || {
        std::thread::sleep(std::time::Duration::from_millis(1200))
    });
}

/// The daemon stops (a rolling upgrade) while the plugin's connection waits in its accept
/// queue: the kernel had completed it and taken the request head, and resets it with the
/// listener (CI, 2026-12-06). The body was never sent, so the plugin tries again and the next
/// daemon gets the request, once.
#[test]
fn add_resends_a_request_the_stopping_daemon_never_took() {
    let (l, addr) = free_port();
    // The plugin connects and sends its head; nobody accepts; then the listener closes.
    add_across_a_daemon_restart(Some(l), addr, || {
        std::thread::sleep(std::time::Duration::from_millis(1000))
    });
}

#[test]
fn daemon_errors_pass_through() {
    let d = FakeDaemon::tcp(|r| match r.path.as_str() {
        "/addNetwork" => Reply::new(410, r#"{"code": 3, "msg": "pod gone", "details": "uid"}"#),
        "/delNetwork" => Reply::new(500, "<html>boom</html>"),
        _ => Reply::new(202, "{not json"),
    });
    let e = run_plugin(&cni_env("ADD", NETNS), conf("0.3.1", &d.address)).assert_error(3);
    assert_eq!(
        e,
        json!({"cniVersion": "0.3.1", "code": 3, "msg": "pod gone", "details": "uid"})
    );
    let e = run_plugin(&cni_env("DEL", NETNS), conf("1.0.0", &d.address)).assert_error(999);
    assert!(e["details"].as_str().unwrap().contains("boom"));
    // A 202 with a body that is not a VIF.
    let bad_vif = FakeDaemon::tcp(|_| Reply::new(202, r#"{"versioned_object.data": 5}"#));
    run_plugin(&cni_env("ADD", NETNS), conf("1.0.0", &bad_vif.address)).assert_error(899);
    let garbage = FakeDaemon::tcp(|_| Reply::new(202, "{not json"));
    run_plugin(&cni_env("ADD", NETNS), conf("1.0.0", &garbage.address)).assert_error(6);
}

#[test]
fn add_timeout_is_try_again() {
    let d = FakeDaemon::tcp(|_| Reply {
        hang: true,
        ..Reply::new(202, "")
    });
    let mut c: serde_json::Value = serde_json::from_slice(&conf("1.0.0", &d.address)).unwrap();
    c["add_timeout"] = json!(1);
    let t = std::time::Instant::now();
    let e = run_plugin(&cni_env("ADD", NETNS), serde_json::to_vec(&c).unwrap()).assert_error(11);
    assert!(
        t.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        t.elapsed()
    );
    assert!(e["msg"].as_str().unwrap().contains("timed out"), "{e}");
}

#[test]
fn check_gc_status_against_upstream_daemon() {
    let d = add_daemon(); // 404 for the extension endpoints, like upstream.
    let mut c: serde_json::Value = serde_json::from_slice(&conf("1.0.0", &d.address)).unwrap();
    c["prevResult"] = json!({"cniVersion": "1.0.0", "interfaces": [], "ips": []});
    let check = serde_json::to_vec(&c).unwrap();
    run_plugin(&cni_env("CHECK", NETNS), check).assert_error(11);
    let gc = serde_json::to_vec(
        &json!({"cniVersion": "1.1.0", "name": "kuryr", "type": "kuryr-cni", "daemon_address": d.address,
        "cni.dev/valid-attachments": [{"containerID": "f0e1d2c3b4a5", "ifname": "eth0"}]}),
    )
    .unwrap();
    run_plugin(
        &[("CNI_COMMAND", "GC".into()), ("CNI_PATH", "/opt/cni/bin".into())],
        gc,
    )
    .assert_ok_empty();
    run_plugin(&[("CNI_COMMAND", "STATUS".into())], conf("1.1.0", &d.address)).assert_ok_empty();
    let reqs = d.requests();
    assert_eq!(
        reqs.iter()
            .map(|r| (r.method.as_str(), r.path.as_str()))
            .collect::<Vec<_>>(),
        [
            ("POST", "/checkNetwork"),
            ("POST", "/gcNetworks"),
            ("GET", "/status")
        ]
    );
    let body: serde_json::Value = serde_json::from_slice(&reqs[1].body).unwrap();
    assert_eq!(
        body["config_kuryr"]["cni.dev/valid-attachments"][0]["containerID"],
        "f0e1d2c3b4a5"
    );
}

#[test]
fn check_gc_status_against_kuryr_rs_daemon() {
    let d = FakeDaemon::tcp(|r| match r.path.as_str() {
        "/checkNetwork" | "/gcNetworks" => Reply::new(204, ""),
        _ => Reply::new(503, r#"{"code": 50, "msg": "pool empty"}"#),
    });
    let mut c: serde_json::Value = serde_json::from_slice(&conf("0.4.0", &d.address)).unwrap();
    c["prevResult"] = json!({"cniVersion": "0.4.0"});
    run_plugin(&cni_env("CHECK", NETNS), serde_json::to_vec(&c).unwrap()).assert_ok_empty();
    run_plugin(&[("CNI_COMMAND", "GC".into())], conf("1.1.0", &d.address)).assert_ok_empty();
    let e = run_plugin(&[("CNI_COMMAND", "STATUS".into())], conf("1.1.0", &d.address)).assert_error(50);
    assert_eq!(e["msg"], "pool empty");
}

#[test]
fn verbs_outside_their_spec_version() {
    let d = add_daemon();
    let mut c: serde_json::Value = serde_json::from_slice(&conf("0.3.1", &d.address)).unwrap();
    c["prevResult"] = json!({});
    run_plugin(&cni_env("CHECK", NETNS), serde_json::to_vec(&c).unwrap()).assert_error(1);
    run_plugin(&cni_env("GC", NETNS), conf("1.0.0", &d.address)).assert_error(1);
    run_plugin(&cni_env("STATUS", NETNS), conf("0.4.0", &d.address)).assert_error(1);
    // CHECK without prevResult.
    run_plugin(&cni_env("CHECK", NETNS), conf("1.0.0", &d.address)).assert_error(7);
    assert!(d.requests().is_empty());
}

#[test]
fn log_file_and_kuryr_conf_bind_address() {
    let d = add_daemon();
    let dir = tempfile::tempdir().unwrap();
    let kuryr_conf = dir.path().join("kuryr.conf");
    std::fs::write(
        &kuryr_conf,
        format!(
            "[DEFAULT]\ndebug = true\n[cni_daemon]\nbind_address = {}\n",
            d.address
        ),
    )
    .unwrap();
    let log = dir.path().join("cni.log");
    // Upstream-shaped config: no daemon_address, the address comes from kuryr.conf.
    let c = json!({"cniVersion": "0.3.1", "name": "kuryr", "type": "kuryr-cni",
        "kuryr_conf": kuryr_conf, "debug": true, "log_file": log});
    let r = run_plugin(&cni_env("ADD", NETNS), serde_json::to_vec(&c).unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["cniVersion"], "0.3.1");
    assert_eq!(r.stderr, "");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("DEBUG verb=ADD container=f0e1d2c3b4a5"), "{text}");
    assert!(text.contains("status=202"), "{text}");
    assert!(text.contains("INFO verb=ADD container=f0e1d2c3b4a5 ok"), "{text}");
}
