//! A fleet of hollow nodes against the in-process emulated API server and the real controller
//! handlers (pod, kuryrport) over the fake Neutron — or through the real Neutron client over HTTP
//! to the model cloud — whose ports go ACTIVE when a hollow binding
//! plugs them: every pod gets its own port through its node's real daemon code (the KuryrPort
//! watch, the registry, ADD, the state file, the recorded wiring), turns Ready, and on deletion
//! is unwired and its port released. Prints what it took (a first, small scale figure).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::core::v1::{Namespace, Pod},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use kuryr_hollow::HollowNode;
use kuryr_openstack::{Neutron, fake::FakeNeutron};
use serde_json::json;

/// Nodes and pods a node (`HOLLOW_NODES`, `HOLLOW_PODS_PER_NODE` for a bigger run; CI's: 20 × 10).
fn size() -> (usize, usize) {
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    (env("HOLLOW_NODES", 20), env("HOLLOW_PODS_PER_NODE", 10))
}

async fn wait_for<T>(what: &str, timeout: Duration, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// CPU seconds (user + system) of this process.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

async fn client_of(server: &kube_sandbox_apiserver::RunningServer) -> Client {
    let kc = Kubeconfig::read_from(&server.kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("client config");
    Client::try_from(cfg).expect("client")
}

async fn install(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in kuryr_types::crds::all() {
        crds.create(&PostParams::default(), &crd).await.expect("CRD");
    }
    wait_for("KuryrPorts served", Duration::from_secs(10), async || {
        Api::<kuryr_types::KuryrPort>::all(client.clone())
            .list(&ListParams::default().limit(1))
            .await
            .ok()
    })
    .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "scale"}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
}

fn ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The cloud a fleet runs against: the controller's Neutron, the state behind it, and what a
/// hollow binding's plug does there.
struct TestCloud {
    neutron: Arc<dyn Neutron>,
    state: FakeNeutron,
    on_plug: kuryr_daemon::binding::record::OnPlug,
    subnet_id: String,
    name: &'static str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hollow_nodes_run_the_daemon_for_every_pod() {
    // The cloud: one pod network; a port goes ACTIVE when a hollow binding plugs it.
    let fake = FakeNeutron::new();
    let (_, subnet) = fake.add_network("pods", "10.0.0.0/16");
    let plug_fake = fake.clone();
    let (nodes_n, per_node) = size();
    run_fleet(
        TestCloud {
            neutron: Arc::new(fake.clone()),
            state: fake,
            on_plug: Arc::new(move |port: &str| {
                plug_fake.activate(port);
            }),
            subnet_id: subnet.id,
            name: "fake Neutron",
        },
        nodes_n,
        per_node,
    )
    .await;
}

/// The same through the real Neutron client over HTTP, against the model cloud (Keystone,
/// Neutron's API, the queueing model at 5 % of the sandbox's service times): ports go ACTIVE
/// the model's delay after the hollow binding reports the plug over HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hollow_nodes_on_the_model_cloud() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let fake = FakeNeutron::new();
    let (_, subnet) = fake.add_network("pods", "10.0.0.0/16");
    let model = kuryr_modelcloud::Model::default().scaled(0.05);
    let running = kuryr_modelcloud::serve(
        kuryr_modelcloud::Cloud::new(fake.clone(), model),
        "127.0.0.1:0".parse().expect("addr"),
    )
    .await
    .expect("model cloud");
    let auth = running.cloud_auth();
    let neutron = kuryr_openstack::OpenStackNeutron::connect_unobserved(&auth, &Default::default())
        .await
        .expect("the real client on the model cloud");
    run_fleet(
        TestCloud {
            neutron: Arc::new(neutron),
            state: fake,
            // As `kuryr-hollow --model-url` does: each plug reported over HTTP.
            on_plug: kuryr_hollow::report::plug_reporter(&running.url).expect("reporter"),
            subnet_id: subnet.id,
            name: "model cloud",
        },
        10,
        5,
    )
    .await;
    let stats = running.cloud.stats();
    println!(
        "model cloud: {} requests ({} bulk creations of {} ports), {:.0} ms queued in all",
        stats.requests(),
        stats.ops.get("port_bulk_create").map_or(0, |o| o.requests),
        stats.ops.get("port_bulk_create").map_or(0, |o| o.items),
        stats.ops.values().map(|o| o.wait_ms).sum::<f64>(),
    );
    for (op, o) in &stats.ops {
        println!(
            "  {op}: {} requests, {} items, {} errors, queued {:.0} ms (max {:.0}), served {:.0} ms",
            o.requests, o.items, o.errors, o.wait_ms, o.max_wait_ms, o.service_ms
        );
    }
    assert!(stats.ops.get("port_bulk_create").is_some_and(|o| o.items >= 50));
    assert_eq!(stats.plugged, 50, "every plug reported over HTTP");
}

async fn run_fleet(cloud: TestCloud, nodes_n: usize, per_node: usize) {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = kube_sandbox_apiserver::start(kube_sandbox_apiserver::Config::local(
        dir.path().join("kubeconfig"),
    ))
    .await
    .expect("apiserver");
    let client = client_of(&server).await;
    install(&client).await;

    let text = format!(
        "[kubernetes]\nenabled_handlers = vif,kuryrport\n\
         [neutron_defaults]\nproject = proj\npod_subnet = {}\npod_security_groups = sg-1\n\
         cluster_tag = kuryr-cluster=hollow\novs_bridge = br-int\n\
         [vif_pool]\nports_pool_batch = 5\nports_pool_min = 2\n",
        cloud.subnet_id
    );
    let (config, _) = kuryr_config::from_strs(
        &[("hollow.conf", text.as_str())],
        kuryr_config::Role::Any,
        &|_| None,
    )
    .expect("config");
    let neutron = cloud.neutron.clone();
    let metrics = Arc::new(kuryr_controller::metrics::Metrics::default());
    let settings = kuryr_controller::pool::PoolSettings::from_config(&config).expect("pool settings");
    let os = kuryr_controller::cli::openstack_over(
        &config,
        client.clone(),
        metrics.clone(),
        settings,
        neutron,
        None,
    )
    .expect("openstack");
    let watchers = kuryr_controller::cli::watcher_count(&config);
    let ctx = Arc::new(
        kuryr_controller::Context::new(client.clone(), Arc::new(config.clone()), watchers)
            .with_metrics(metrics)
            .with_openstack(os),
    );
    let controller = kuryr_controller::cli::spawn_handlers(&ctx);

    let root = dir.path().join("fleet");
    kuryr_hollow::write_conflist(&kuryr_hollow::conf_dir(&root)).expect("conflist");
    let on_plug = cloud.on_plug.clone();
    let started = Instant::now();
    let cpu0 = cpu_s();
    let nodes: Vec<HollowNode> = kuryr_hollow::fleet("hollow-", nodes_n, &root, Duration::ZERO)
        .iter()
        .map(|s| HollowNode::start(client.clone(), s, &config, Some(on_plug.clone())).expect("node"))
        .collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "scale");
    for n in &nodes {
        for i in 0..per_node {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("{}-p{i}", n.name), "namespace": "scale"},
                "spec": {"nodeName": n.name, "containers": [{"name": "c", "image": "busybox"}]}
            }))
            .expect("pod");
            pods.create(&PostParams::default(), &pod)
                .await
                .expect("create pod");
        }
    }
    let total = nodes_n * per_node;
    let limit = Duration::from_secs(180).max(Duration::from_millis(100) * total as u32);
    wait_for("every pod Ready", limit, async || {
        let l = pods.list(&ListParams::default()).await.ok()?;
        (l.items.iter().filter(|p| ready(p)).count() == total).then_some(())
    })
    .await;
    let took = started.elapsed();
    let cpu = cpu_s() - cpu0;
    let wired: u64 = nodes.iter().map(|n| n.bindings.counts().connects).sum();
    assert_eq!(wired, total as u64, "one wiring a pod");
    // Each wiring was of the node's own port: bound to that node, ACTIVE.
    let ports = cloud.state.ports();
    for n in &nodes {
        for r in n.bindings.recent() {
            let p = ports
                .iter()
                .find(|p| p.id == r.port_id)
                .expect("the wired port exists");
            assert_eq!(p.binding_host_id, n.name, "{r:?}");
            assert_eq!(p.status, "ACTIVE");
        }
    }
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmHWM:")
                .map(|v| v.trim().trim_end_matches(" kB").to_string())
        })
        .unwrap_or_default();
    println!(
        "hollow nodes={nodes_n} pods={total} all_ready_s={:.1} process_cpu_s={cpu:.1} peak_rss_kib={rss_kib} \
         (API server, controller handlers, {} and the fleet in one process)",
        took.as_secs_f64(),
        cloud.name
    );

    // Deleted: unwired by their node's daemon, gone.
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete pods");
    wait_for(
        "every pod unwired and gone",
        Duration::from_secs(120),
        async || {
            let left = pods.list(&ListParams::default()).await.ok()?.items.len();
            let unwired: u64 = nodes.iter().map(|n| n.bindings.counts().disconnects).sum();
            (left == 0 && unwired >= total as u64).then_some(())
        },
    )
    .await;
    assert!(nodes.iter().all(|n| !n.is_finished()), "a hollow node stopped");
    for t in controller {
        t.abort();
    }
}
