//! kuryr-rs as a Kubernetes application: installed only by `kubectl apply -f deploy/` onto the
//! emulated cluster (`sandbox/cluster up --deploy manifests`), the real binaries running as the
//! pods of its DaemonSet and Deployment. Proves that workload pods get Neutron ports and talk,
//! that RBAC grants the ServiceAccounts what they need and no more (their own tokens, used with
//! the real kubectl, are refused Secrets and KuryrPort writes), and that killing the leading
//! controller's process in the middle of a pod burst hands over to a working leader (the
//! takeover time is printed) with no port leaked or duplicated.

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
    time::{Duration, Instant},
};

use common::*;
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::{Api, ResourceExt, api::ListParams};
use kuryr_e2e::{cluster::Cluster, neutron, pods};
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

    // Every pod's KuryrPort names one port, no port serves two pods, and each is a live,
    // tagged Neutron port (nothing duplicated or lost across the takeover).
    let all: Vec<(String, String)> = keys
        .iter()
        .chain(burst.iter())
        .chain(after.iter())
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
}

/// The same from the chart: `helm upgrade --install` (values: the cluster's handlers and
/// drivers), pods get ports and talk; `sandbox/cluster down` uninstalls with `helm uninstall`.
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
}
