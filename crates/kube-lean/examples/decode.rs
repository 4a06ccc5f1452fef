//! Prints the time to decode one watch event of a pod as `Pod` and as `Lean<Pod>`.
//!
//! `cargo run --release -p kube-lean --example decode [-- ROUNDS]`
//!
//! The pod is shaped like one of the sandbox's benchmark pods once it runs: created by a
//! client, bound by the scheduler, its status written by the kubelet, a finalizer and an
//! annotation added by kuryr-controller — one managedFields entry per writer.

use std::{hint::black_box, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::core::WatchEvent;
use kube_lean::Lean;
use serde_json::json;

fn event() -> String {
    let entry = |manager: &str, sub: Option<&str>, fields: serde_json::Value| {
        let mut e = json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
                           "time": "2026-11-29T05:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields});
        if let Some(s) = sub {
            e["subresource"] = json!(s);
        }
        e
    };
    let cond = |t: &str| {
        (
            format!("k:{{\"type\":\"{t}\"}}"),
            json!({".": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}),
        )
    };
    let conditions: serde_json::Map<String, serde_json::Value> = [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ]
    .map(cond)
    .into_iter()
    .collect();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "w0-17", "namespace": "kuryr-bench", "uid": "5f0c6a2e-4d1b-4c8e-9a57-0d6f1e2b3c4d",
            "resourceVersion": "48211", "creationTimestamp": "2026-11-29T05:00:00Z",
            "labels": {"app": "w0", "kuryr-bench": "burst"},
            "annotations": {"openstack.org/kuryr-pod-label": "{\"app\": \"w0\"}"},
            "finalizers": ["kuryr.openstack.org/pod-finalizer"],
            "managedFields": [
                entry("kuryr-e2e", None, json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:kuryr-bench": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {},
                        "f:name": {}, "f:resources": {}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
                        "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                        "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}})),
                entry("kube-scheduler", None, json!({"f:spec": {"f:nodeName": {}}})),
                entry("kuryr-controller", None, json!({"f:metadata": {"f:annotations": {".": {}, "f:openstack.org/kuryr-pod-label": {}},
                    "f:finalizers": {".": {}, "v:\"kuryr.openstack.org/pod-finalizer\"": {}}}})),
                entry("kubelet", Some("status"), json!({"f:status": {"f:conditions": conditions, "f:containerStatuses": {},
                    "f:hostIP": {}, "f:hostIPs": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.1.0.17\"}": {".": {}, "f:ip": {}}},
                    "f:startTime": {}}})),
            ]
        },
        "spec": {"nodeName": "vm-1", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "IfNotPresent",
                                 "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}]},
        "status": {"phase": "Running", "hostIP": "10.20.0.11", "podIP": "10.1.0.17", "podIPs": [{"ip": "10.1.0.17"}],
                   "startTime": "2026-11-29T05:00:01Z",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-29T05:00:02Z"}]}
    });
    json!({"type": "MODIFIED", "object": pod}).to_string()
}

fn time<F: FnMut()>(rounds: u32, mut f: F) -> f64 {
    for _ in 0..rounds / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..rounds {
        f();
    }
    t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: u32 = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(20_000);
    let text = event();
    // Both must read the event before they are timed.
    serde_json::from_str::<WatchEvent<Pod>>(&text)?;
    serde_json::from_str::<WatchEvent<Lean<Pod>>>(&text)?;
    let full = time(rounds, || {
        black_box(serde_json::from_str::<WatchEvent<Pod>>(black_box(&text)).ok());
    });
    let lean = time(rounds, || {
        black_box(serde_json::from_str::<WatchEvent<Lean<Pod>>>(black_box(&text)).ok());
    });
    println!(
        "event {} bytes, {rounds} rounds: Pod {full:.2} us, Lean<Pod> {lean:.2} us per decode ({:.0} % less)",
        text.len(),
        100.0 * (1.0 - lean / full)
    );
    Ok(())
}
