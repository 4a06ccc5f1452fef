//! Fidelity tests of the emulated API server with kube-rs, the client our controller uses:
//! a reflector that must survive `410 Gone` (tiny watch history), a `Controller` with a
//! finalizer (add, reconcile, cleanup on delete, object disappears), and Lease-based leader
//! election between two real processes (kube-lease-manager, server-side apply): exactly one
//! leader, and takeover within the lease duration after the leader is killed.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{Opts, Sandbox};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::{reflector, watcher};
use serde_json::json;

fn cm(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let labels: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"k": "v"},
    }))
    .expect("configmap")
}

async fn wait_for<T>(timeout: Duration, what: &str, f: impl AsyncFnMut() -> Option<T>) -> T {
    wait_for_with(timeout, || what.to_string(), f).await
}

/// Like [`wait_for`], describing what was awaited only when it times out.
async fn wait_for_with<T>(
    timeout: Duration,
    what: impl Fn() -> String,
    mut f: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {}",
            what()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A reflector watching `app=watched` ConfigMaps, whose watch goes idle while unrelated
/// ConfigMaps churn past a 5-event history; when its short watch times out and resumes from the
/// old resourceVersion the server answers 410 Gone, and the watcher must re-list and converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_survives_410_gone() {
    let sb = Sandbox::start_with(Opts {
        watch_history: Some(5),
        bookmark_interval: Some(3600),
        ..Opts::default()
    });
    let client = sb.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    api.create(&PostParams::default(), &cm("a", &[("app", "watched")]))
        .await
        .expect("create a");

    let (reader, writer) = reflector::store::<ConfigMap>();
    let cfg = watcher::Config::default().labels("app=watched").timeout(2);
    let inits = Arc::new(Mutex::new(0usize));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let stream = reflector::reflector(writer, watcher(api.clone(), cfg));
    let (inits2, errors2) = (inits.clone(), errors.clone());
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::Init) => *inits2.lock().expect("lock") += 1,
                Ok(_) => {}
                Err(e) => errors2.lock().expect("lock").push(e.to_string()),
            }
        }
    });
    reader.wait_until_ready().await.expect("store ready");
    assert_eq!(names(&reader), ["a"]);

    // Churn unrelated objects: the watch sees nothing, its resourceVersion falls out of history.
    for i in 0..20 {
        api.create(
            &PostParams::default(),
            &cm(&format!("noise-{i}"), &[("app", "noise")]),
        )
        .await
        .expect("create noise");
    }
    // Wait for the 2 s watch to time out and resume from the stale version: a re-list follows.
    wait_for(Duration::from_secs(30), "a re-list after 410 Gone", async || {
        (*inits.lock().expect("lock") >= 2).then_some(())
    })
    .await;

    // The store keeps following changes after the re-list.
    api.create(&PostParams::default(), &cm("b", &[("app", "watched")]))
        .await
        .expect("create b");
    api.delete("a", &DeleteParams::default()).await.expect("delete a");
    wait_for(Duration::from_secs(20), "store == {b}", async || {
        (names(&reader) == ["b"]).then_some(())
    })
    .await;
    task.abort();
    let errors = errors.lock().expect("lock").clone();
    // The re-list must come from the server's "too old resource version" (410 Expired), and
    // nothing else may have gone wrong.
    assert!(!errors.is_empty(), "no watch error seen, so no 410 happened");
    assert!(
        errors
            .iter()
            .all(|e| e.contains("too old resource version") || e.contains("410")),
        "only 410-type watch errors expected: {errors:?}"
    );
}

fn names(reader: &reflector::Store<ConfigMap>) -> Vec<String> {
    let mut n: Vec<String> = reader
        .state()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    n.sort();
    n
}

#[derive(Debug)]
enum ReconcileError {
    Kube(kube::Error),
    Finalizer(String),
}

impl std::error::Error for ReconcileError {}

impl std::fmt::Display for ReconcileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconcileError::Kube(e) => write!(f, "kube: {e}"),
            ReconcileError::Finalizer(e) => write!(f, "finalizer: {e}"),
        }
    }
}

struct Ctx {
    api: Api<ConfigMap>,
    cleaned: Mutex<BTreeSet<String>>,
    applied: Mutex<BTreeSet<String>>,
}

const FINALIZER: &str = "kube-sandbox.test/cleanup";

async fn reconcile(obj: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let api = ctx.api.clone();
    finalizer(&api, FINALIZER, obj, |ev| async {
        match ev {
            FinalizerEvent::Apply(cm) => {
                let name = cm.metadata.name.clone().unwrap_or_default();
                let patch = json!({"metadata": {"annotations": {"reconciled": "true"}}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(ReconcileError::Kube)?;
                ctx.applied.lock().expect("lock").insert(name);
                Ok::<_, ReconcileError>(Action::await_change())
            }
            FinalizerEvent::Cleanup(cm) => {
                let name = cm.metadata.name.clone().unwrap_or_default();
                ctx.cleaned.lock().expect("lock").insert(name);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(e.to_string()))
}

fn error_policy(_obj: Arc<ConfigMap>, _err: &ReconcileError, _ctx: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(500))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_with_finalizer() {
    let sb = Sandbox::start();
    let client = sb.client().await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let ctx = Arc::new(Ctx {
        api: api.clone(),
        cleaned: Mutex::new(BTreeSet::new()),
        applied: Mutex::new(BTreeSet::new()),
    });
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let errors2 = errors.clone();
    let controller = Controller::new(api.clone(), watcher::Config::default().labels("managed=yes"))
        .run(reconcile, error_policy, ctx.clone())
        .for_each(move |r| {
            if let Err(e) = r {
                errors2.lock().expect("lock").push(format!("{e:?}"));
            }
            futures::future::ready(())
        });
    let task = tokio::spawn(controller);

    api.create(&PostParams::default(), &cm("owned", &[("managed", "yes")]))
        .await
        .expect("create");
    api.create(&PostParams::default(), &cm("ignored", &[("managed", "no")]))
        .await
        .expect("create");
    let api2 = api.clone();
    let errors3 = errors.clone();
    let what = move || {
        format!(
            "finalizer + reconciled annotation (controller errors: {:?})",
            errors3.lock().expect("lock")
        )
    };
    wait_for_with(Duration::from_secs(30), what, async || {
        let cm = api2.get("owned").await.ok()?;
        let fin = cm.metadata.finalizers.clone().unwrap_or_default();
        let ann = cm.metadata.annotations.clone().unwrap_or_default();
        (fin.iter().any(|f| f == FINALIZER) && ann.get("reconciled").map(String::as_str) == Some("true"))
            .then_some(())
    })
    .await;
    let ignored = api.get("ignored").await.expect("get ignored");
    assert!(ignored.metadata.finalizers.unwrap_or_default().is_empty());

    api.delete("owned", &DeleteParams::default())
        .await
        .expect("delete");
    let api3 = api.clone();
    wait_for(
        Duration::from_secs(30),
        "owned configmap to be finalized and gone",
        async || match api3.get_opt("owned").await {
            Ok(None) => Some(()),
            _ => None,
        },
    )
    .await;
    assert!(ctx.cleaned.lock().expect("lock").contains("owned"), "cleanup ran");
    assert!(ctx.applied.lock().expect("lock").contains("owned"));
    task.abort();
    let errors = errors.lock().expect("lock").clone();
    // Conflicts on finalizer patches are retried by design; anything else is a fidelity bug.
    assert!(
        errors
            .iter()
            .all(|e| e.contains("Conflict") || e.contains("409") || e.contains("NotFound")),
        "controller errors: {errors:?}"
    );
}

const LEASE_NAME: &str = "kube-sandbox-test-leader";
const LEASE_DURATION: u64 = 4;
const LEASE_GRACE: u64 = 1;

/// Child side of the leader-election test: runs only when re-executed with
/// `KS_LEASE_CONTENDER=<identity>`; prints `LEASE <identity> <true|false>` on every change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_contender_child() {
    let Ok(id) = std::env::var("KS_LEASE_CONTENDER") else {
        return;
    };
    eprintln!("{id}: starting");
    let kubeconfig = std::env::var("KS_LEASE_KUBECONFIG").expect("KS_LEASE_KUBECONFIG");
    let client = common::client_for(std::path::Path::new(&kubeconfig))
        .await
        .expect("client");
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace("default")
        .with_identity(id.clone())
        .with_duration(LEASE_DURATION)
        .with_grace(LEASE_GRACE)
        .build()
        .await
        .expect("lease manager");
    eprintln!("{id}: lease manager built");
    let (mut rx, task) = manager.watch().await;
    let initial = *rx.borrow_and_update();
    println!("LEASE {id} {initial}");
    loop {
        if rx.changed().await.is_err() {
            let r = task.await;
            println!("LEASE {id} ended {r:?}");
            return;
        }
        println!("LEASE {id} {}", *rx.borrow_and_update());
    }
}

fn contender_log(sb: &Sandbox, id: &str) -> std::path::PathBuf {
    sb.dir.path().join(format!("{id}.stderr"))
}

fn contender_logs(sb: &Sandbox) -> String {
    ["contender-a", "contender-b"]
        .iter()
        .map(|id| {
            format!(
                "--- {id} stderr ---\n{}",
                std::fs::read_to_string(contender_log(sb, id)).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn spawn_contender(sb: &Sandbox, id: &str, tx: mpsc::Sender<(String, bool, Instant)>) -> Child {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "lease_contender_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("KS_LEASE_CONTENDER", id)
        .env("KS_LEASE_KUBECONFIG", &sb.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(contender_log(sb, id)).expect("contender log"))
        .spawn()
        .expect("spawn contender");
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test lease_contender_child ... " before the first line.
            let Some(at) = line.find("LEASE ") else {
                continue;
            };
            let mut parts = line[at..].split_whitespace().skip(1);
            let (Some(who), Some(state)) = (parts.next(), parts.next()) else {
                continue;
            };
            let leader = match state {
                "true" => true,
                "false" => false,
                _ => continue,
            };
            if tx.send((who.to_string(), leader, Instant::now())).is_err() {
                break;
            }
        }
    });
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_leader_election_between_processes() {
    let sb = Sandbox::start();
    let (tx, rx) = mpsc::channel();
    let mut a = spawn_contender(&sb, "contender-a", tx.clone());
    let mut b = spawn_contender(&sb, "contender-b", tx);
    let mut state: BTreeMap<String, bool> = BTreeMap::new();
    let mut both = false;
    let mut apply = |state: &mut BTreeMap<String, bool>, (who, leader, _): (String, bool, Instant)| {
        state.insert(who, leader);
        if state.values().filter(|l| **l).count() > 1 {
            both = true;
        }
    };

    // Exactly one leader emerges.
    let deadline = Instant::now() + Duration::from_secs(30);
    let leader = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(ev) => apply(&mut state, ev),
            Err(_) => panic!(
                "no leader within 30 s: {state:?}\n{}\n{}",
                contender_logs(&sb),
                common::tail(&sb.log_text(), 40)
            ),
        }
        let leaders: Vec<&String> = state.iter().filter(|(_, l)| **l).map(|(w, _)| w).collect();
        if leaders.len() == 1 && state.len() == 2 {
            break leaders[0].clone();
        }
    };
    // It stays that way for more than a lease period (renewals work, no flapping).
    let settle = Instant::now() + Duration::from_secs(LEASE_DURATION * 2);
    while let Ok(ev) = rx.recv_timeout(settle.saturating_duration_since(Instant::now())) {
        apply(&mut state, ev);
    }
    assert_eq!(
        state.get(&leader),
        Some(&true),
        "leader kept the lease: {state:?}"
    );
    let client = sb.client().await;
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let lease = leases.get(LEASE_NAME).await.expect("lease");
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    assert_eq!(holder.as_deref(), Some(leader.as_str()));

    // Kill the leader: the other one takes over within the lease duration (+ slack).
    let killed_at = Instant::now();
    let (victim, survivor) = if leader == "contender-a" {
        (&mut a, "contender-b")
    } else {
        (&mut b, "contender-a")
    };
    victim.kill().expect("kill leader");
    let _ = victim.wait();
    state.remove(&leader);
    let took_over = loop {
        match rx.recv_timeout(Duration::from_secs(LEASE_DURATION * 3 + 5)) {
            Ok((who, l, at)) => {
                let hit = who == survivor && l;
                apply(&mut state, (who, l, at));
                if hit {
                    break at;
                }
            }
            Err(_) => panic!(
                "{survivor} did not take over: {state:?}\n{}\n{}",
                contender_logs(&sb),
                common::tail(&sb.log_text(), 40)
            ),
        }
    };
    let takeover = took_over.duration_since(killed_at);
    eprintln!("leader {leader} killed; {survivor} took over after {takeover:?}");
    let _ = a.kill();
    let _ = b.kill();
    let _ = a.wait();
    let _ = b.wait();
    assert!(!both, "two leaders at once: {state:?}");
    assert!(
        takeover <= Duration::from_secs(LEASE_DURATION + LEASE_GRACE + 5),
        "takeover took {takeover:?}"
    );
    let lease = leases.get(LEASE_NAME).await.expect("lease");
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.clone());
    assert_eq!(holder.as_deref(), Some(survivor));
}
