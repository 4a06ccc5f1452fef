//! The runtime state of a host-network pod's containers and the pod status kubelet reports for
//! it (pure): container states (waiting with a reason, running, terminated with the exit code),
//! restart counts, readiness, the last termination, and the pod's phase and conditions.

use serde_json::{Value, json};

/// How a container last ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminated {
    /// Exit code (128 + signal for a signal).
    pub exit_code: i32,
    /// `Completed` (0) or `Error`.
    pub reason: String,
    /// When it started.
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
}

/// What a container is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Not running: `ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`,
    /// `CreateContainerConfigError`, `CreateContainerError`...
    Waiting {
        /// Reason.
        reason: String,
        /// Message.
        message: Option<String>,
    },
    /// Running since.
    Running {
        /// Start time.
        started_at: String,
    },
    /// Ended (and not restarted).
    Terminated(Terminated),
}

/// One container's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerState {
    /// Container name.
    pub name: String,
    /// Image.
    pub image: String,
    /// Current state.
    pub phase: Phase,
    /// The previous termination.
    pub last: Option<Terminated>,
    /// Restarts so far.
    pub restarts: u32,
    /// Readiness (probe, or running without one).
    pub ready: bool,
    /// `containerd://…` id of the current run.
    pub id: String,
}

impl ContainerState {
    /// A container that has not started yet.
    pub fn new(name: &str, image: &str, reason: &str) -> Self {
        Self {
            name: name.into(),
            image: image.into(),
            phase: Phase::Waiting {
                reason: reason.into(),
                message: None,
            },
            last: None,
            restarts: 0,
            ready: false,
            id: String::new(),
        }
    }
    fn json(&self, init: bool) -> Value {
        let term = |t: &Terminated| {
            json!({"terminated": {"exitCode": t.exit_code, "reason": t.reason,
                "startedAt": t.started_at, "finishedAt": t.finished_at, "containerID": self.id}})
        };
        let state = match &self.phase {
            Phase::Waiting { reason, message } => {
                let mut w = json!({"reason": reason});
                if let Some(m) = message {
                    w["message"] = json!(m);
                }
                json!({"waiting": w})
            }
            Phase::Running { started_at } => json!({"running": {"startedAt": started_at}}),
            Phase::Terminated(t) => term(t),
        };
        let running = matches!(self.phase, Phase::Running { .. });
        let mut v = json!({
            "name": self.name, "image": self.image,
            "imageID": format!("{}@sha256:{}", self.image, "0".repeat(64)),
            "ready": if init { matches!(&self.phase, Phase::Terminated(t) if t.exit_code == 0) } else { self.ready && running },
            "started": running,
            "restartCount": self.restarts,
            "state": state,
            "lastState": self.last.as_ref().map_or(json!({}), term),
        });
        if !self.id.is_empty() {
            v["containerID"] = json!(self.id);
        }
        v
    }
}

/// All containers of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodState {
    /// Init containers, in order.
    pub init: Vec<ContainerState>,
    /// App containers.
    pub main: Vec<ContainerState>,
    /// The pod has finished for good (restartPolicy Never/OnFailure): `Succeeded` or `Failed`.
    pub finished: Option<&'static str>,
}

impl PodState {
    /// Init containers all completed.
    pub fn initialized(&self) -> bool {
        self.init
            .iter()
            .all(|c| matches!(&c.phase, Phase::Terminated(t) if t.exit_code == 0))
    }
    /// All app containers running and ready.
    pub fn ready(&self) -> bool {
        !self.main.is_empty()
            && self
                .main
                .iter()
                .all(|c| c.ready && matches!(c.phase, Phase::Running { .. }))
    }
}

fn condition(ty: &str, ok: bool, reason: Option<&str>, message: Option<String>, since: &str) -> Value {
    let mut c = json!({"type": ty, "status": if ok { "True" } else { "False" },
        "lastTransitionTime": since, "lastProbeTime": null});
    if !ok {
        if let Some(r) = reason {
            c["reason"] = json!(r);
        }
        if let Some(m) = message {
            c["message"] = json!(m);
        }
    }
    c
}

/// The pod status for `st` (`since`: the time to stamp on conditions that changed).
pub fn pod_status(st: &PodState, host_ip: &str, start_time: &str, since: &str) -> Value {
    let phase = match st.finished {
        Some(p) => p,
        None if st.initialized()
            && st
                .main
                .iter()
                .any(|c| !matches!(c.phase, Phase::Waiting { .. }) || c.restarts > 0) =>
        {
            "Running"
        }
        None => "Pending",
    };
    let unready: Vec<&str> = st
        .main
        .iter()
        .filter(|c| !(c.ready && matches!(c.phase, Phase::Running { .. })))
        .map(|c| c.name.as_str())
        .collect();
    let not_ready_msg = format!("containers with unready status: [{}]", unready.join(" "));
    let pending_init: Vec<&str> = st
        .init
        .iter()
        .filter(|c| !matches!(&c.phase, Phase::Terminated(t) if t.exit_code == 0))
        .map(|c| c.name.as_str())
        .collect();
    let mut status = json!({
        "phase": phase,
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": host_ip, "podIPs": [{"ip": host_ip}],
        "startTime": start_time,
        "qosClass": "BestEffort",
        "conditions": [
            condition("PodReadyToStartContainers", true, None, None, since),
            condition("Initialized", st.initialized(), Some("ContainersNotInitialized"),
                Some(format!("containers with incomplete status: [{}]", pending_init.join(" "))), since),
            condition("Ready", st.ready(), Some("ContainersNotReady"), Some(not_ready_msg.clone()), since),
            condition("ContainersReady", st.ready(), Some("ContainersNotReady"), Some(not_ready_msg), since),
            condition("PodScheduled", true, None, None, since),
        ],
        "containerStatuses": st.main.iter().map(|c| c.json(false)).collect::<Vec<_>>(),
    });
    if !st.init.is_empty() {
        status["initContainerStatuses"] = Value::Array(st.init.iter().map(|c| c.json(true)).collect());
    }
    status
}

/// Keeps `lastTransitionTime` of conditions whose status did not change since `current`.
pub fn keep_transition_times(current: &Value, desired: &mut Value) {
    let Some(conds) = desired["conditions"].as_array_mut() else {
        return;
    };
    for c in conds {
        if let Some(old) = current["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["type"] == c["type"] && o["status"] == c["status"])
            && let Some(t) = old.get("lastTransitionTime")
        {
            c["lastTransitionTime"] = t.clone();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn running(name: &str, ready: bool) -> ContainerState {
        ContainerState {
            phase: Phase::Running {
                started_at: "2026-01-01T00:00:00Z".into(),
            },
            ready,
            id: "containerd://x".into(),
            ..ContainerState::new(name, "img", "ContainerCreating")
        }
    }

    #[test]
    fn phases_and_conditions_follow_the_containers() {
        let mut st = PodState {
            init: vec![ContainerState::new("install", "img", "PodInitializing")],
            main: vec![ContainerState::new("daemon", "img", "PodInitializing")],
            finished: None,
        };
        let s = pod_status(&st, "10.0.0.1", "t0", "t1");
        assert_eq!(s["phase"], "Pending");
        assert_eq!(s["conditions"][1]["status"], "False");
        assert_eq!(
            s["conditions"][1]["message"],
            "containers with incomplete status: [install]"
        );
        st.init[0].phase = Phase::Terminated(Terminated {
            exit_code: 0,
            reason: "Completed".into(),
            started_at: "t0".into(),
            finished_at: "t1".into(),
        });
        st.main[0] = running("daemon", false);
        let s = pod_status(&st, "10.0.0.1", "t0", "t1");
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["conditions"][2]["status"], "False");
        assert_eq!(s["initContainerStatuses"][0]["ready"], true);
        st.main[0].ready = true;
        let mut s = pod_status(&st, "10.0.0.1", "t0", "t2");
        assert_eq!(s["conditions"][2]["status"], "True");
        assert_eq!(s["containerStatuses"][0]["started"], true);
        let old = pod_status(&st, "10.0.0.1", "t0", "t1");
        keep_transition_times(&old, &mut s);
        assert_eq!(s["conditions"][2]["lastTransitionTime"], "t1");
    }

    #[test]
    fn a_crash_looping_container_shows_its_last_state() {
        let mut c = ContainerState::new("c", "img", "ContainerCreating");
        c.restarts = 3;
        c.last = Some(Terminated {
            exit_code: 1,
            reason: "Error".into(),
            started_at: "a".into(),
            finished_at: "b".into(),
        });
        c.phase = Phase::Waiting {
            reason: "CrashLoopBackOff".into(),
            message: Some("back-off 4s restarting failed container".into()),
        };
        let v = c.json(false);
        assert_eq!(v["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(v["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(v["restartCount"], 3);
        assert_eq!(v["ready"], false);
    }
}
