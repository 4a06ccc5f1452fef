//! kuryr-rs as a Kubernetes application: installed only by `kubectl apply -f deploy/` onto the
//! emulated cluster (`sandbox/cluster up --deploy manifests`), the real binaries running as the
//! pods of its DaemonSet and Deployment. Proves that workload pods get Neutron ports and talk,
//! that RBAC grants the ServiceAccounts what they need and no more (their own tokens, used with
//! the real kubectl, are refused Secrets and KuryrPort writes), and that killing the leading
//! controller's process in the middle of a pod burst hands over to a working leader (the
//! takeover time is printed) with no port leaked or duplicated; that a rolling upgrade of both
//! under pod-to-pod traffic and pod creation loses no probe and fails no pod; and that the
//! uninstall (`kubectl delete -f deploy/`, `helm uninstall`) leaves no Neutron port and no file
//! in the nodes' CNI directories.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use common::*;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::{Api, ResourceExt, api::ListParams};
use kuryr_e2e::{
    cluster::Cluster,
    neutron, pods,
    soak::{self, Progress, SoakConfig, SoakPod},
};
use kuryr_types::KuryrPort;

const APP_NS: &str = "kube-system";

fn kubectl(cluster: &Cluster, args: &[&str]) -> (bool, String, String) {
    let bin = std::env::var("KUBECTL").unwrap_or_else(|_| "/opt/kube-sandbox/kubectl/bin/kubectl".into());
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(args)
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The ServiceAccount token the node projected into a running pod of `app` (its volume dir).
async fn pod_token(cluster: &Cluster, client: &kube::Client, component: &str) -> String {
    let api: Api<Pod> = Api::namespaced(client.clone(), APP_NS);
    let lp = ListParams::default().labels(&format!("app.kubernetes.io/component={component}"));
    let pod = api
        .list(&lp)
        .await
        .expect("list")
        .items
        .into_iter()
        .next()
        .expect("a pod");
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound");
    let vols = cluster
        .node_state_dir(&node)
        .join("pods")
        .join(pod.uid().expect("uid"))
        .join("volumes");
    let dir = std::fs::read_dir(&vols)
        .expect("volumes dir")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("kube-api-access-"))
        })
        .expect("projected token volume");
    std::fs::read_to_string(dir.join("token"))
        .expect("token")
        .trim()
        .to_string()
}

/// The pid of the process whose environment says `POD_NAME=<pod>` (a container of that pod).
fn pid_of_pod(pod: &str) -> Option<i32> {
    let want = format!("POD_NAME={pod}");
    std::fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok())
        .find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            env.split(|b| *b == 0)
                .any(|v| v == want.as_bytes())
                .then_some(pid)
        })
}

async fn lease(client: &kube::Client) -> Option<(String, jiff::Timestamp)> {
    let l = Api::<Lease>::namespaced(client.clone(), APP_NS)
        .get_opt("kuryr-controller")
        .await
        .ok()??;
    let spec = l.spec?;
    Some((spec.holder_identity?, spec.renew_time?.0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuryr_rs_runs_as_a_kubernetes_app_from_the_manifests() {
    let (_dir, cluster) = start(|o| o.deploy = Some("manifests"));
    let client = check(&cluster, "client", cluster.client().await);

    // kuryr-rs itself: a daemon per node, two controllers on different nodes, all Ready.
    let api: Api<Pod> = Api::namespaced(client.clone(), APP_NS);
    let mine = api
        .list(&ListParams::default().labels("app.kubernetes.io/name=kuryr-rs"))
        .await
        .expect("list");
    let nodes_of = |component: &str| -> Vec<String> {
        let mut v: Vec<String> = mine
            .items
            .iter()
            .filter(|p| p.labels().get("app.kubernetes.io/component").map(String::as_str) == Some(component))
            .filter(|p| pods::is_ready(p))
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        v.sort();
        v
    };
    let all_nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    assert_eq!(nodes_of("daemon"), all_nodes, "one Ready daemon per node");
    assert_eq!(
        nodes_of("controller"),
        all_nodes,
        "two Ready controllers, one per node"
    );

    // Workload pods on both nodes get ports and talk.
    let keys = create_spread(&client, &cluster, &["app-a"], "w").await;
    ready_and_connected(&cluster, &client, &keys).await;

    // RBAC, with the pods' own tokens and the real kubectl.
    let daemon = format!("--token={}", pod_token(&cluster, &client, "daemon").await);
    let (ok, _, _) = kubectl(&cluster, &[&daemon, "get", "kuryrports", "-A"]);
    assert!(ok, "the daemon lists KuryrPorts");
    let (ok, _, err) = kubectl(
        &cluster,
        &[&daemon, "-n", APP_NS, "get", "secret", "kuryr-credentials"],
    );
    assert!(!ok);
    assert!(
        err.contains(r#"secrets "kuryr-credentials" is forbidden: User "system:serviceaccount:kube-system:kuryr-daemon" cannot get resource "secrets""#),
        "{err}"
    );
    let (ok, _, err) = kubectl(
        &cluster,
        &[
            &daemon,
            "-n",
            "app-a",
            "patch",
            "kuryrport",
            &keys[0].1,
            "--type=merge",
            "-p",
            r#"{"spec":{"podStatic":true}}"#,
        ],
    );
    // (kubectl reads before it patches: the daemon may not even get one KuryrPort by name.)
    assert!(!ok);
    assert!(
        err.contains(r#"kuryrports.openstack.org "w-node-1" is forbidden: User "system:serviceaccount:kube-system:kuryr-daemon""#),
        "{err}"
    );
    let controller = format!("--token={}", pod_token(&cluster, &client, "controller").await);
    let (ok, _, _) = kubectl(&cluster, &[&controller, "get", "pods", "-A"]);
    assert!(ok, "the controller lists pods");
    let (ok, _, err) = kubectl(&cluster, &[&controller, "-n", APP_NS, "get", "secrets"]);
    assert!(!ok && err.contains("forbidden"), "{err}");

    // Leader takeover: a burst of pods, then SIGKILL of the leading controller's process.
    let (holder, _) = lease(&client).await.expect("a leader holds the Lease");
    let burst: Vec<(String, String)> = (0..8).map(|i| ("app-b".to_string(), format!("b-{i}"))).collect();
    check(
        &cluster,
        "namespace",
        pods::ensure_namespace(&client, "app-b").await,
    );
    for (i, (ns, name)) in burst.iter().enumerate() {
        let node = &cluster.nodes[i % cluster.nodes.len()].name;
        check(
            &cluster,
            "create",
            pods::create_pod(&client, ns, name, Some(node)).await,
        );
    }
    let pid = pid_of_pod(&holder).expect("the leader's process");
    let killed = Instant::now();
    let t0 = jiff::Timestamp::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).expect("kill");
    let mut takeover = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some((h, renewed)) = lease(&client).await
            && renewed > t0
            && pid_of_pod(&h).is_some_and(|p| p != pid)
        {
            takeover = Some((h, killed.elapsed()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (new_holder, took) =
        takeover.unwrap_or_else(|| panic!("no controller took over within 60 s\n{}", cluster.log_tails(40)));
    eprintln!(
        "leader takeover after SIGKILL of {holder}: {:.1} s (new holder {new_holder}: the restarted container of the same pod; Lease duration 15 s)",
        took.as_secs_f64()
    );
    check(
        &cluster,
        "burst Ready",
        pods::wait_ready(&client, &burst, READY).await,
    );

    // Deleting the leader's pod: it releases the Lease on SIGTERM and the other replica leads.
    let deleted = Instant::now();
    let t1 = jiff::Timestamp::now();
    Api::<Pod>::namespaced(client.clone(), APP_NS)
        .delete(&new_holder, &Default::default())
        .await
        .expect("delete the leader's pod");
    let mut handed = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some((h, renewed)) = lease(&client).await
            && h != new_holder
            && renewed > t1
        {
            handed = Some((h, deleted.elapsed()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (other, took) = handed.unwrap_or_else(|| {
        panic!(
            "the other replica did not take over within 60 s\n{}",
            cluster.log_tails(40)
        )
    });
    eprintln!(
        "leader takeover after deleting pod {new_holder}: {:.1} s (new holder {other})",
        took.as_secs_f64()
    );
    let after: Vec<(String, String)> = vec![("app-b".into(), "after-handover".into())];
    check(
        &cluster,
        "create",
        pods::create_pod(&client, "app-b", "after-handover", None).await,
    );
    check(
        &cluster,
        "pod after handover Ready",
        pods::wait_ready(&client, &after, READY).await,
    );

    // Rolling upgrade of the DaemonSet and the Deployment while every running pod probes every
    // other one and new pods keep coming.
    let upgraded = rolling_upgrade_under_traffic(&cluster, &client).await;

    // Every pod's KuryrPort names one port, no port serves two pods, and each is a live,
    // tagged Neutron port (nothing duplicated or lost across the takeover and the upgrade).
    let all: Vec<(String, String)> = keys
        .iter()
        .chain(burst.iter())
        .chain(after.iter())
        .chain(upgraded.iter())
        .cloned()
        .collect();
    let mut port_of: BTreeMap<String, String> = BTreeMap::new();
    for (ns, name) in &all {
        let kp = Api::<KuryrPort>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .expect("KuryrPort");
        let id = kp
            .status
            .as_ref()
            .and_then(|s| s.default_vif())
            .and_then(|(_, v)| v.id.clone())
            .unwrap_or_else(|| panic!("{ns}/{name} has no VIF"));
        if let Some(other) = port_of.insert(id.clone(), format!("{ns}/{name}")) {
            panic!("port {id} serves both {other} and {ns}/{name}");
        }
    }
    let tagged: BTreeSet<String> = check(&cluster, "tagged ports", neutron::ports_tagged(&cluster.tag))
        .into_iter()
        .map(|p| p.id)
        .collect();
    for (id, pod) in &port_of {
        assert!(
            tagged.contains(id),
            "{pod}'s port {id} is not a tagged Neutron port"
        );
    }

    // Uninstall, the operator's way: workloads first, then `kubectl delete -f deploy/`.
    for ns in ["app-a", "app-b", "app-c"] {
        check(
            &cluster,
            "delete namespace",
            pods::delete_namespace(&client, ns).await,
        );
    }
    check(&cluster, "pods gone", pods::wait_gone(&client, &all, READY).await);
    let logs = common::kept_logs::LogKeeper::start(cluster.state_dir.join("nodes"), "kuryr-controller");
    let (ok, _, err) = kubectl(&cluster, &["delete", "-f", &repo_path("deploy"), "--wait=false"]);
    assert!(ok, "kubectl delete -f deploy/: {err}");
    assert_uninstalled(&cluster, &client, logs).await;
}

/// The repository's `rel` path.
fn repo_path(rel: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
        .display()
        .to_string()
}

/// Waits for kuryr-rs's pods to be gone, then proves nothing of it is left: no Neutron port
/// tagged for the cluster (the pools' ports were deleted by the last controller), no file in
/// any node's CNI directories (each daemon removed what its init container installed). A port
/// left comes with what the controllers logged during the uninstall (`logs`, started before it).
async fn assert_uninstalled(cluster: &Cluster, client: &kube::Client, logs: common::kept_logs::LogKeeper) {
    let started = Instant::now();
    let api: Api<Pod> = Api::namespaced(client.clone(), APP_NS);
    let lp = ListParams::default().labels("app.kubernetes.io/name=kuryr-rs");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let left = api.list(&lp).await.map(|l| l.items.len()).unwrap_or(usize::MAX);
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} kuryr-rs pods still there 90 s after the uninstall\n{}",
            cluster.log_tails(40)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let ports = check(cluster, "tagged ports", neutron::ports_tagged(&cluster.tag));
    let controller_logs = logs.stop(80);
    assert_or_logs(
        cluster,
        ports.is_empty(),
        format!(
            "{} Neutron ports tagged {} left after the uninstall: {:?}\nwhat the controllers logged:\n{controller_logs}",
            ports.len(),
            cluster.tag,
            ports
                .iter()
                .map(|p| format!(
                    "{} host={} status={} device={}",
                    p.id, p.host, p.status, p.device_id
                ))
                .collect::<Vec<_>>()
        ),
    );
    for node in &cluster.nodes {
        for dir in ["net.d", "cni-bin"] {
            let path = cluster.state_dir.join("nodes").join(&node.name).join(dir);
            let files: Vec<String> = std::fs::read_dir(&path)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            assert_or_logs(
                cluster,
                files.is_empty(),
                format!("{}'s CNI dir {} still holds {files:?}", node.name, path.display()),
            );
        }
    }
    eprintln!(
        "uninstall: pods gone, no tagged port, CNI dirs empty after {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// The pods of `app.kubernetes.io/component=<component>` (name → uid).
async fn app_pods(client: &kube::Client, component: &str) -> BTreeMap<String, String> {
    Api::<Pod>::namespaced(client.clone(), APP_NS)
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/component={component}")))
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect()
}

/// Sets its flag when dropped (also while a panic unwinds).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// `kubectl rollout restart` of the daemon DaemonSet and the controller Deployment while every
/// running pod probes every other one over TCP (twice a second) and a pod is created every
/// 0.5 s: no pair of pods loses its connection, every new pod gets Ready (its CNI ADD waits for its
/// node's daemon while that restarts), every kuryr-rs pod is replaced. Returns the new pods.
async fn rolling_upgrade_under_traffic(cluster: &Cluster, client: &kube::Client) -> Vec<(String, String)> {
    let views = check(
        cluster,
        "collect",
        pods::collect(cluster, client, &["app-a".into(), "app-b".into()]).await,
    );
    let peers: Vec<SoakPod> = views
        .iter()
        .map(|v| SoakPod {
            label: format!("{}/{}", v.namespace, v.name),
            node: v.node.clone(),
            ip: v.pod_ip.parse().expect("pod IP"),
            expect: v.name.clone(),
            netns: v.netns.clone(),
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    // The prober is a blocking task: the runtime waits for it at its end, so a failed
    // assertion below must stop it too, or the test hangs instead of failing.
    let _stop_on_exit = StopOnDrop(stop.clone());
    let prober = {
        let (peers, stop) = (peers.clone(), stop.clone());
        tokio::task::spawn_blocking(move || {
            let cfg = SoakConfig {
                duration: Duration::from_secs(3),
                interval: Duration::from_millis(500),
                timeout: Duration::from_secs(2),
                tcp_ports: vec![pods::POD_PORT],
                udp_ports: vec![],
            };
            let mut reports = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                reports.push(soak::run(&peers, &cfg, Arc::new(Progress::default())));
            }
            reports
        })
    };
    let before_daemons = app_pods(client, "daemon").await;
    let before_controllers = app_pods(client, "controller").await;
    check(
        cluster,
        "namespace",
        pods::ensure_namespace(client, "app-c").await,
    );
    let started = Instant::now();
    let (ok, _, err) = kubectl(
        cluster,
        &[
            "-n",
            APP_NS,
            "rollout",
            "restart",
            "daemonset/kuryr-daemon",
            "deployment/kuryr-controller",
        ],
    );
    assert!(ok, "rollout restart: {err}");
    // New pods all along the rollout (and at least 8), alternating nodes.
    let mut created: Vec<(String, String)> = Vec::new();
    let rollout = {
        let cluster_kubeconfig = cluster.kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            let bin =
                std::env::var("KUBECTL").unwrap_or_else(|_| "/opt/kube-sandbox/kubectl/bin/kubectl".into());
            let mut took = Vec::new();
            for w in ["daemonset/kuryr-daemon", "deployment/kuryr-controller"] {
                let out = Command::new(&bin)
                    .arg("--kubeconfig")
                    .arg(&cluster_kubeconfig)
                    .args(["-n", APP_NS, "rollout", "status", w, "--timeout=240s"])
                    .env("HOME", std::env::temp_dir())
                    .output()
                    .expect("kubectl");
                took.push((
                    w,
                    out.status.success(),
                    started.elapsed(),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                ));
            }
            took
        })
    };
    while !rollout.is_finished() || created.len() < 8 {
        let i = created.len();
        let node = &cluster.nodes[i % cluster.nodes.len()].name;
        let name = format!("u-{i}");
        check(
            cluster,
            "create",
            pods::create_pod(client, "app-c", &name, Some(node)).await,
        );
        created.push(("app-c".into(), name));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let rollouts = rollout.await.expect("rollout status");
    for (w, ok, took, err) in &rollouts {
        assert!(
            *ok,
            "rollout of {w} did not finish: {err}\n{}",
            cluster.log_tails(40)
        );
        eprintln!("upgrade: {w} rolled out after {:.1} s", took.as_secs_f64());
    }
    let keys = created;
    check(
        cluster,
        "pods created during the upgrade Ready",
        pods::wait_ready(client, &keys, READY).await,
    );
    // Not one CNI ADD failed on the way (the node would have told it with a Warning
    // `FailedCreatePodSandBox` and tried again): the plugin waited for its restarting daemon.
    let failed: Vec<String> = Api::<k8s_openapi::api::core::v1::Event>::namespaced(client.clone(), "app-c")
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .map(|e| {
            format!(
                "{} {}: {}",
                e.involved_object.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        })
        .collect();
    assert_or_logs(
        cluster,
        failed.is_empty(),
        format!("pods created during the upgrade met failures: {failed:#?}"),
    );
    stop.store(true, Ordering::SeqCst);
    let reports = prober.await.expect("prober");
    let probes: u64 = reports.iter().map(|r| r.probes).sum();
    let unanswered: u64 = reports.iter().map(|r| r.unanswered).sum();
    let failures: Vec<String> = reports
        .iter()
        .flat_map(|r| r.failures.iter())
        .take(10)
        .map(|f| format!("{} -> {}: {}", peers[f.from].label, peers[f.to].label, f.why))
        .collect();
    eprintln!(
        "upgrade: {} pods probed each other {probes} times over {:.0} s, {unanswered} unanswered; {} pods created during it, all Ready",
        peers.len(),
        started.elapsed().as_secs_f64(),
        keys.len()
    );
    assert!(
        probes > 0,
        "the probe did not run: {:?}",
        reports.iter().map(|r| &r.setup_errors).collect::<Vec<_>>()
    );
    // Connectivity is kept when no pair loses it: a probe may go unanswered on a busy 2-core
    // machine (a lost SYN, a slow answer), but the same pair may not miss twice within 5 s,
    // and misses stay under 1 %.
    let mut last_miss: BTreeMap<(String, String), Duration> = BTreeMap::new();
    let mut outages = Vec::new();
    let mut offset = Duration::ZERO;
    for r in &reports {
        for f in &r.failures {
            let at = offset + f.at;
            let pair = (peers[f.from].label.clone(), peers[f.to].label.clone());
            if let Some(prev) = last_miss.insert(pair.clone(), at)
                && at.saturating_sub(prev) < Duration::from_secs(5)
            {
                outages.push(format!(
                    "{} -> {} missed at {prev:.1?} and {at:.1?}",
                    pair.0, pair.1
                ));
            }
        }
        offset += r.elapsed;
    }
    assert_or_logs(
        cluster,
        outages.is_empty() && unanswered * 100 <= probes,
        format!(
            "connectivity lost during the upgrade: {outages:#?}; {unanswered} of {probes} probes unanswered: {failures:#?}"
        ),
    );
    // Every kuryr-rs pod was replaced.
    let after_daemons = app_pods(client, "daemon").await;
    let after_controllers = app_pods(client, "controller").await;
    for (before, after, what) in [
        (&before_daemons, &after_daemons, "daemon"),
        (&before_controllers, &after_controllers, "controller"),
    ] {
        assert_eq!(after.len(), before.len(), "{what} pods: {after:?}");
        let kept: Vec<&String> = after
            .values()
            .filter(|u| before.values().any(|b| b == *u))
            .collect();
        assert!(kept.is_empty(), "{what} pods not replaced: {kept:?}");
    }
    keys
}

/// The same from the chart: `helm upgrade --install` (values: the cluster's handlers and
/// drivers), pods get ports and talk; `helm uninstall` leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kuryr_rs_installs_with_helm() {
    let (_dir, cluster) = start(|o| o.deploy = Some("helm"));
    let client = check(&cluster, "client", cluster.client().await);
    let keys = create_spread(&client, &cluster, &["helm-a"], "h").await;
    ready_and_connected(&cluster, &client, &keys).await;
    let (ok, out, err) = kubectl(
        &cluster,
        &[
            "-n",
            APP_NS,
            "get",
            "deploy,ds",
            "-l",
            "app.kubernetes.io/managed-by=Helm",
            "-o",
            "name",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");

    // `helm uninstall` after the workloads are gone leaves nothing behind.
    check(
        &cluster,
        "delete namespace",
        pods::delete_namespace(&client, "helm-a").await,
    );
    check(
        &cluster,
        "pods gone",
        pods::wait_gone(&client, &keys, READY).await,
    );
    let helm = Command::new(repo_path("tools/install-helm"))
        .output()
        .expect("tools/install-helm");
    assert!(helm.status.success(), "{}", String::from_utf8_lossy(&helm.stderr));
    let logs = common::kept_logs::LogKeeper::start(cluster.state_dir.join("nodes"), "kuryr-controller");
    let out = Command::new(String::from_utf8_lossy(&helm.stdout).trim())
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["uninstall", "kuryr-rs", "-n", APP_NS])
        .env("HOME", std::env::temp_dir())
        .output()
        .expect("helm uninstall");
    assert!(
        out.status.success(),
        "helm uninstall: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_uninstalled(&cluster, &client, logs).await;
}
