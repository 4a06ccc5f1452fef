//! Pod status as kubelet reports it (pure): Pending while the sandbox is being created, Running
//! with IPs, conditions and container statuses once the containers serve.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::state::SandboxRecord;

fn existing_condition<'a>(pod: &'a Pod, ty: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == ty)
}

/// Conditions with `lastTransitionTime` kept when the status did not change.
fn conditions(pod: &Pod, wanted: &[(&str, bool, Option<&str>)], now: &str) -> Value {
    let mut out = Vec::new();
    // The pod is bound to us, so it is scheduled: keep a True PodScheduled as it is, replace an
    // absent or stale (Unschedulable) one.
    match existing_condition(pod, "PodScheduled").filter(|c| c.status == "True") {
        Some(c) => out.push(serde_json::to_value(c).unwrap_or(Value::Null)),
        None => out.push(json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now})),
    }
    for (ty, ok, reason) in wanted {
        let status = if *ok { "True" } else { "False" };
        let since = existing_condition(pod, ty)
            .filter(|c| c.status == status)
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| crate::k8s_time(t.0))
            .unwrap_or_else(|| now.to_string());
        let mut c = json!({"type": ty, "status": status, "lastTransitionTime": since, "lastProbeTime": null});
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        out.push(c);
    }
    Value::Array(out)
}

fn container_names(pod: &Pod) -> Vec<(String, String)> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect()
}

fn ips_json(ips: &[String]) -> Value {
    Value::Array(ips.iter().map(|ip| json!({"ip": ip})).collect())
}

/// Status while the sandbox is not up yet (containers `ContainerCreating`).
pub fn pending(pod: &Pod, host_ip: IpAddr, now: &str) -> Value {
    let names = container_names(pod);
    let unready: Vec<&str> = names.iter().map(|(n, _)| n.as_str()).collect();
    let mut conds = conditions(
        pod,
        &[
            ("PodReadyToStartContainers", false, None),
            ("Initialized", true, None),
            ("Ready", false, Some("ContainersNotReady")),
            ("ContainersReady", false, Some("ContainersNotReady")),
        ],
        now,
    );
    let msg = format!("containers with unready status: [{}]", unready.join(" "));
    for c in conds.as_array_mut().into_iter().flatten() {
        if c["reason"] == "ContainersNotReady" {
            c["message"] = json!(msg);
        }
    }
    json!({
        "phase": "Pending",
        "hostIP": host_ip.to_string(),
        "hostIPs": [{"ip": host_ip.to_string()}],
        "startTime": start_time(pod, now),
        "conditions": conds,
        "containerStatuses": names.iter().map(|(n, image)| json!({
            "name": n, "image": image, "imageID": "", "ready": false, "started": false,
            "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}},
        })).collect::<Vec<_>>(),
        "qosClass": "BestEffort",
    })
}

fn start_time(pod: &Pod, now: &str) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| crate::k8s_time(t.0))
        .unwrap_or_else(|| now.to_string())
}

/// Container id of container `idx`: the record's id with the index in the last two digits.
fn container_id(base: &str, idx: usize) -> String {
    let keep = base.get(..62).unwrap_or(base);
    format!("containerd://{keep}{:02x}", idx % 256)
}

/// Status of a running pod with IPs `ips` (node IP for host-network pods).
pub fn running(pod: &Pod, host_ip: IpAddr, ips: &[String], rec: Option<&SandboxRecord>, now: &str) -> Value {
    let started = rec
        .and_then(|r| r.started.as_deref())
        .map_or_else(|| now.to_string(), crate::to_k8s_time);
    let base = rec
        .map(|r| r.container_id.clone())
        .unwrap_or_else(|| "0".repeat(64));
    let statuses: Vec<Value> = container_names(pod)
        .iter()
        .enumerate()
        .map(|(i, (n, image))| {
            json!({
                "name": n, "image": image,
                "imageID": format!("{image}@sha256:{}", "0".repeat(64)),
                "containerID": container_id(&base, i),
                "ready": true, "started": true, "restartCount": 0,
                "state": {"running": {"startedAt": started}},
            })
        })
        .collect();
    json!({
        "phase": "Running",
        "hostIP": host_ip.to_string(),
        "hostIPs": [{"ip": host_ip.to_string()}],
        "podIP": ips.first(),
        "podIPs": ips_json(ips),
        "startTime": start_time(pod, now),
        "conditions": conditions(
            pod,
            &[
                ("PodReadyToStartContainers", true, None),
                ("Initialized", true, None),
                ("Ready", true, None),
                ("ContainersReady", true, None),
            ],
            now,
        ),
        "containerStatuses": statuses,
        "initContainerStatuses": init_statuses(pod, &base, &started),
        "qosClass": "BestEffort",
    })
}

/// Init containers of a running pod: all completed (exit 0) when the sandbox came up.
fn init_statuses(pod: &Pod, base: &str, at: &str) -> Value {
    let inits: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .enumerate()
        .map(|(i, c)| {
            let image = c.image.clone().unwrap_or_default();
            json!({
                "name": c.name, "image": image,
                "imageID": format!("{image}@sha256:{}", "0".repeat(64)),
                "containerID": container_id(base, 128 + i),
                "ready": true, "started": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed",
                    "startedAt": at, "finishedAt": at, "containerID": container_id(base, 128 + i)}},
            })
        })
        .collect();
    if inits.is_empty() {
        Value::Null
    } else {
        Value::Array(inits)
    }
}

/// Whether the pod's current status already says what `desired` says (phase, IPs, condition
/// statuses, container readiness): no write needed. Read from the typed status as it is (a
/// worker asks on every event of its pod).
pub fn up_to_date(pod: &Pod, desired: &Value) -> bool {
    let Some(cur) = pod.status.as_ref() else {
        return false;
    };
    if cur.phase.as_deref() != desired["phase"].as_str()
        || cur.pod_ip.as_deref() != desired["podIP"].as_str()
        || cur.host_ip.as_deref() != desired["hostIP"].as_str()
    {
        return false;
    }
    let mut have: Vec<(&str, &str)> = cur
        .conditions
        .iter()
        .flatten()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    let mut want: Vec<(&str, &str)> = desired["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or(""),
                c["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    have.sort_unstable();
    want.sort_unstable();
    if have != want {
        return false;
    }
    let ready_have = cur
        .container_statuses
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.ready));
    let ready_want = desired["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or(""),
                c["ready"].as_bool().unwrap_or(false),
            )
        });
    ready_have.eq(ready_want)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        }))
        .unwrap()
    }

    #[test]
    fn running_status_has_ips_conditions_and_containers() {
        let p = pod();
        let now = "2026-01-01T00:01:00Z";
        let s = running(&p, "10.0.0.1".parse().unwrap(), &["10.244.0.5".into()], None, now);
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["podIP"], "10.244.0.5");
        assert_eq!(s["podIPs"], json!([{"ip": "10.244.0.5"}]));
        assert_eq!(s["hostIP"], "10.0.0.1");
        let types: Vec<&str> = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "PodScheduled",
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady"
            ]
        );
        assert_eq!(s["conditions"][0]["lastTransitionTime"], "2026-01-01T00:00:00Z");
        assert_eq!(s["conditions"][3]["status"], "True");
        let c = &s["containerStatuses"][0];
        assert_eq!(c["ready"], true);
        assert!(c["containerID"].as_str().unwrap().starts_with("containerd://"));
        assert_eq!(
            c["containerID"].as_str().unwrap().len(),
            "containerd://".len() + 64
        );
        assert!(s["initContainerStatuses"].is_null());
        assert!(!up_to_date(&p, &s));
        let mut p2 = p.clone();
        p2.status = Some(serde_json::from_value(s.clone()).unwrap());
        assert!(up_to_date(&p2, &s));
    }

    #[test]
    fn started_at_is_whole_seconds_while_the_record_keeps_microseconds() {
        let rec = SandboxRecord {
            started: Some("2026-01-01T00:01:02.345678Z".into()),
            ..SandboxRecord::sample()
        };
        let s = running(
            &pod(),
            "10.0.0.1".parse().unwrap(),
            &["10.244.0.5".into()],
            Some(&rec),
            "2026-01-01T00:01:09Z",
        );
        assert_eq!(
            s["containerStatuses"][0]["state"]["running"]["startedAt"],
            "2026-01-01T00:01:02Z"
        );
        let now = crate::precise_now();
        assert_eq!(now.len(), "2026-01-01T00:01:02.345678Z".len(), "{now}");
    }

    #[test]
    fn init_containers_are_completed_when_running() {
        let mut p = pod();
        p.spec.as_mut().unwrap().init_containers = Some(vec![
            serde_json::from_value(json!({"name": "init", "image": "busybox"})).unwrap(),
        ]);
        let s = running(
            &p,
            "10.0.0.1".parse().unwrap(),
            &["10.244.0.5".into()],
            None,
            "2026-01-01T00:01:00Z",
        );
        let i = &s["initContainerStatuses"][0];
        assert_eq!(i["name"], "init");
        assert_eq!(i["state"]["terminated"]["reason"], "Completed");
        assert_eq!(i["state"]["terminated"]["exitCode"], 0);
        assert_ne!(i["containerID"], s["containerStatuses"][0]["containerID"]);
    }

    #[test]
    fn pending_status_is_not_ready() {
        let s = pending(&pod(), "10.0.0.1".parse().unwrap(), "2026-01-01T00:01:00Z");
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        let ready = s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Ready")
            .unwrap();
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["message"], "containers with unready status: [c]");
    }
}
