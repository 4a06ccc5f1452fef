//! The `kuryrctl` binary against the emulated API server (in-process) and, for the Neutron
//! commands, the REAL sandbox cloud (`sandbox/up`): status exit codes, VIF listing, network
//! checks, port classification (in use / pooled / orphan) and derived pools. Neutron ports
//! the test creates carry its own tag and are deleted at the end, also on failure. Fails
//! (never skips) when the sandbox is down.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::{
    api::core::v1::{Namespace, Pod},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use kuryr_openstack::{Neutron, NoopObserver, OpenStackNeutron, PortCreate, PortFilter};
use kuryr_types::{
    KuryrNetwork, KuryrNetworkSpec, KuryrPort, KuryrPortSpec, KuryrPortStatus, VifEntry,
    constants::{ANNOTATION_VIF, DEVICE_OWNER, KURYR_PORT_NAME},
};
use serde_json::{Value, json};

const HINT: &str = "the sandbox cloud is not up: run `sandbox/up` (and check `sandbox/status`)";

struct Env {
    server: kube_sandbox_apiserver::RunningServer,
    client: Client,
    _dir: tempfile::TempDir,
}

async fn sandbox() -> Env {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let server = kube_sandbox_apiserver::start(kube_sandbox_apiserver::Config::local(
        dir.path().join("kubeconfig"),
    ))
    .await
    .expect("apiserver");
    let kc = Kubeconfig::read_from(&server.kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    let client = Client::try_from(cfg).expect("client");
    Env {
        server,
        client,
        _dir: dir,
    }
}

async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in kuryr_types::crds::all() {
        crds.create(&PostParams::default(), &crd).await.expect("CRD");
    }
    let kps: Api<KuryrPort> = Api::all(client.clone());
    for _ in 0..100 {
        if kps.list(&ListParams::default().limit(1)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("KuryrPort CRD not served");
}

async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
}

async fn pod(client: &Client, ns: &str, name: &str, annotations: Value) -> Pod {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]},
    }))
    .expect("pod");
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &p)
        .await
        .expect("create pod")
}

/// A KuryrPort for `pod` with `vif` as its default VIF (status written through the main
/// resource, as upstream's CRD has no status subresource).
async fn kuryrport(client: &Client, pod: &Pod, vif: Option<kuryr_types::Vif>) {
    let ns = pod.metadata.namespace.clone().expect("ns");
    let name = pod.metadata.name.clone().expect("name");
    let mut kp = KuryrPort::new(
        &name,
        KuryrPortSpec {
            pod_uid: pod.metadata.uid.clone().expect("uid"),
            pod_node_name: "node-1".into(),
            pod_static: Some(false),
        },
    );
    kp.metadata.namespace = Some(ns.clone());
    let api: Api<KuryrPort> = Api::namespaced(client.clone(), &ns);
    api.create(&PostParams::default(), &kp).await.expect("KuryrPort");
    if let Some(vif) = vif {
        let status = KuryrPortStatus {
            vifs: [("eth0".to_string(), VifEntry { default: true, vif })].into(),
            ..Default::default()
        };
        let p = json!({"status": status});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&p))
            .await
            .expect("KuryrPort status");
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn kuryrctl(kubeconfig: &Path, args: &[&str]) -> Out {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_kuryrctl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run kuryrctl");
    let o = Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    println!(
        "$ kuryrctl {}\n{}{}[exit {}]",
        args.join(" "),
        o.stdout,
        o.stderr,
        o.code
    );
    o
}

fn json_of(o: &Out) -> Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_vifs_and_networks_without_neutron() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let env = sandbox().await;
    let kc = env.server.kubeconfig.clone();
    let client = env.client.clone();

    // No CRDs: failure, exit 2.
    let o = kuryrctl(&kc, &["status"]).await;
    assert_eq!(o.code, 2, "{}", o.stdout);
    assert!(
        o.stdout.contains("CRDs")
            && o.stdout.contains("Failure")
            && o.stdout.contains("kuryrports.openstack.org")
    );

    install_crds(&client).await;
    namespace(&client, "app").await;
    let o = kuryrctl(&kc, &["status"]).await;
    assert_eq!(o.code, 0, "{}", o.stdout);

    // A pod with its VIF, a pod waiting for it, a pod without KuryrPort.
    let p1 = pod(&client, "app", "web-1", json!({})).await;
    let mut vif = kuryr_types::Vif::new(kuryr_types::VifKind::OpenVSwitch, "0b1c2d3e-port");
    vif.address = Some("fa:16:3e:11:22:33".into());
    vif.active = Some(true);
    kuryrport(&client, &p1, Some(vif)).await;
    let p2 = pod(&client, "app", "web-2", json!({})).await;
    kuryrport(&client, &p2, None).await;
    pod(&client, "app", "web-3", json!({})).await;
    let o = kuryrctl(&kc, &["vifs", "-n", "app"]).await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert!(lines[0].starts_with("NAMESPACE") && lines[0].contains("PORT ID"));
    assert!(
        lines[1].contains("web-1")
            && lines[1].contains("0b1c2d3e-port")
            && lines[1].contains("fa:16:3e:11:22:33")
    );
    assert!(lines[1].contains("true") && lines[1].contains("vifs"));
    assert!(lines[2].contains("web-2") && lines[2].contains("pending"));
    assert!(lines[3].contains("web-3") && lines[3].contains("no-kuryrport"));
    let v = json_of(&kuryrctl(&kc, &["vifs", "-A", "-o", "json"]).await);
    assert_eq!(v["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(v["items"][0]["port_id"], "0b1c2d3e-port");
    assert_eq!(v["items"][0]["node"], "node-1");
    // Default namespace has no pods.
    let o = kuryrctl(&kc, &["vifs"]).await;
    assert_eq!(o.stdout.lines().count(), 1);

    // Legacy annotation: failure; stale KuryrPort only: warning.
    let legacy = pod(&client, "app", "old", json!({ANNOTATION_VIF: "{}"})).await;
    let o = kuryrctl(&kc, &["status"]).await;
    assert_eq!(o.code, 2);
    assert!(o.stdout.contains("app/old"), "{}", o.stdout);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "app");
    let dp = kube::api::DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete("old", &dp).await.expect("delete");
    drop(legacy);
    pods.delete("web-2", &dp).await.expect("delete");
    let o = kuryrctl(&kc, &["status", "-o", "json"]).await;
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert_eq!(json_of(&o)["result"], "warning");

    // Networks from the CRDs.
    let mut kn = KuryrNetwork::new(
        "app",
        KuryrNetworkSpec {
            ns_name: "app".into(),
            project_id: "p".into(),
            ns_labels: Default::default(),
        },
    );
    kn.metadata.namespace = Some("app".into());
    let kns: Api<KuryrNetwork> = Api::namespaced(client.clone(), "app");
    kns.create(&PostParams::default(), &kn).await.expect("kn");
    let st = json!({"status": {"netId": "n-1", "subnetId": "s-1", "subnetCIDR": "10.10.7.0/24", "routerId": "r-1", "populated": true}});
    kns.patch("app", &PatchParams::default(), &Patch::Merge(&st))
        .await
        .expect("kn status");
    let o = kuryrctl(&kc, &["networks", "--no-neutron"]).await;
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("10.10.7.0/24") && o.stdout.contains("n-1") && o.stdout.contains("true"));

    // As a kubectl plugin: `kubectl kuryr ...` runs `kubectl-kuryr` from PATH with KUBECONFIG.
    let bin = env._dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin dir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kuryrctl"), bin.join("kubectl-kuryr")).expect("symlink");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = tokio::process::Command::new("kubectl")
        .args(["kuryr", "vifs", "-n", "app"])
        .env("PATH", path)
        .env("KUBECONFIG", &kc)
        .output()
        .await
        .expect("run kubectl (tools/install-kubectl)");
    let text = String::from_utf8_lossy(&out.stdout);
    println!(
        "$ kubectl kuryr vifs -n app\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("web-1") && text.contains("0b1c2d3e-port"),
        "{text}"
    );

    // Clear errors, no panic: unreachable API server.
    let bad = env._dir.path().join("bad-kubeconfig");
    std::fs::write(&bad, "not: [a kubeconfig").expect("write");
    let o = kuryrctl(&bad, &["status"]).await;
    assert_eq!(o.code, 255);
    assert!(
        o.stderr
            .starts_with("kuryrctl: connecting to Kubernetes: reading kubeconfig"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("panicked"));
}

fn topology() -> HashMap<String, String> {
    let path = std::env::var("KURYR_SANDBOX_TOPOLOGY")
        .unwrap_or_else(|_| "/var/lib/kuryr-sandbox/topology.env".into());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{HINT} ({path}: {e})"));
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_pools_and_networks_against_the_sandbox_cloud() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let get = |k: &str| t.get(k).cloned().unwrap_or_else(|| panic!("{HINT} (no {k})"));
    let conf = PathBuf::from(get("KURYR_CONF"));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let tag = format!("kuryr-cluster=test-kuryrctl-{nanos}");
    let config = kuryr_config::load_for(
        &kuryr_config::ConfigSources {
            config_files: vec![conf.clone()],
            config_dirs: vec![],
        },
        kuryr_config::Role::Any,
        &|k| std::env::var(k).ok(),
    )
    .unwrap_or_else(|e| panic!("{HINT}: {e}"))
    .0;
    let auth = kuryr_config::resolve_cloud_auth(&config, &|k| std::env::var(k).ok()).expect("auth");
    let n = Arc::new(
        OpenStackNeutron::connect(&auth, &Default::default(), Arc::new(NoopObserver))
            .await
            .unwrap_or_else(|e| panic!("{HINT}: {e}")),
    );
    let env = sandbox().await;
    let kc = env.server.kubeconfig.clone();
    let client = env.client.clone();
    let conf_s = conf.to_string_lossy().into_owned();
    let body = async {
        install_crds(&client).await;
        namespace(&client, "app").await;
        let mk = |name: &str, host: &str| PortCreate {
            network_id: get("POD_NETWORK_ID"),
            subnet_ids: vec![get("POD_SUBNET_ID")],
            security_groups: Some(vec![get("POD_SG_ID")]),
            device_owner: Some(DEVICE_OWNER.into()),
            binding_host_id: (!host.is_empty()).then(|| host.to_string()),
            name: Some(name.into()),
            tags: vec![tag.clone()],
            ..Default::default()
        };
        let ports = n
            .create_ports_bulk(&[
                mk(KURYR_PORT_NAME, "node-1"),
                mk(KURYR_PORT_NAME, "node-1"),
                mk("app/gone", "node-2"),
            ])
            .await
            .expect("ports");
        let (used, pooled, orphan) = (&ports[0], &ports[1], &ports[2]);
        // `used` becomes the VIF of pod app/web-1.
        let net = n.get_network(&get("POD_NETWORK_ID")).await.expect("net");
        let sub = n.get_subnet(&get("POD_SUBNET_ID")).await.expect("subnet");
        let vif = kuryr_types::from_neutron::vif_from_port(used, &net, &[sub], Some("br-int")).expect("vif");
        let p1 = pod(&client, "app", "web-1", json!({})).await;
        kuryrport(&client, &p1, Some(vif)).await;

        let args = [
            "--config-file",
            conf_s.as_str(),
            "ports",
            "--cluster-tag",
            tag.as_str(),
        ];
        let o = kuryrctl(&kc, &args).await;
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(
            o.stdout.contains("3 port(s)") && o.stdout.contains("1 in use, 1 pooled, 1 orphan"),
            "{}",
            o.stdout
        );
        let mut json_args = args.to_vec();
        json_args.extend(["-o", "json"]);
        let v = json_of(&kuryrctl(&kc, &json_args).await);
        let class: HashMap<String, (String, String)> = v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| {
                (
                    i["id"].as_str().unwrap_or_default().to_string(),
                    (
                        i["class"].as_str().unwrap_or_default().to_string(),
                        i["owner"].as_str().unwrap_or_default().to_string(),
                    ),
                )
            })
            .collect();
        assert_eq!(class[&used.id], ("inuse".to_string(), "app/web-1".to_string()));
        assert_eq!(class[&pooled.id].0, "pooled");
        assert_eq!(class[&orphan.id].0, "orphan");
        let o = kuryrctl(
            &kc,
            &[
                "--config-file",
                &conf_s,
                "ports",
                "--cluster-tag",
                &tag,
                "--orphans",
            ],
        )
        .await;
        assert!(o.stdout.contains(&orphan.id) && !o.stdout.contains(&pooled.id));

        // The pod's VIF with its IP.
        let o = kuryrctl(&kc, &["vifs", "-n", "app"]).await;
        let ip = &used.fixed_ips[0].ip_address;
        assert!(
            o.stdout.contains(&format!("{ip}/")) && o.stdout.contains(&used.id),
            "{}",
            o.stdout
        );

        // Pools derived from Neutron (no pool-manager socket here).
        let sock = env._dir.path().join("none.sock");
        let sock_s = sock.to_string_lossy().into_owned();
        let o = kuryrctl(
            &kc,
            &[
                "--config-file",
                &conf_s,
                "pools",
                "--cluster-tag",
                &tag,
                "--socket",
                &sock_s,
            ],
        )
        .await;
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o.stdout.contains("1 pool(s), 1 free port(s)"), "{}", o.stdout);
        assert!(o.stdout.contains("node-1") && o.stdout.contains(&get("POD_NETWORK_ID")));

        // Networks checked in Neutron: a real one and a missing one.
        for (ns, net_id) in [
            ("app", get("POD_NETWORK_ID")),
            ("ghost", "00000000-0000-4000-8000-000000000000".into()),
        ] {
            if ns != "app" {
                namespace(&client, ns).await;
            }
            let mut kn = KuryrNetwork::new(
                ns,
                KuryrNetworkSpec {
                    ns_name: ns.into(),
                    project_id: get("KURYR_SANDBOX_PROJECT_ID"),
                    ns_labels: Default::default(),
                },
            );
            kn.metadata.namespace = Some(ns.into());
            let kns: Api<KuryrNetwork> = Api::namespaced(client.clone(), ns);
            kns.create(&PostParams::default(), &kn).await.expect("kn");
            let st = json!({"status": {"netId": net_id, "subnetId": get("POD_SUBNET_ID")}});
            kns.patch(ns, &PatchParams::default(), &Patch::Merge(&st))
                .await
                .expect("status");
        }
        let v = json_of(&kuryrctl(&kc, &["--config-file", &conf_s, "networks", "-o", "json"]).await);
        let by_ns: HashMap<String, String> = v["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| {
                (
                    i["namespace"].as_str().unwrap_or_default().into(),
                    i["neutron"].as_str().unwrap_or_default().into(),
                )
            })
            .collect();
        assert_eq!(by_ns["app"], "ok");
        assert_eq!(by_ns["ghost"], "network missing");
    };
    let outcome = futures_catch(body).await;
    let left = n
        .list_ports(&PortFilter::tagged([tag.as_str()]))
        .await
        .unwrap_or_default();
    for p in &left {
        let _ = n.delete_port(&p.id).await;
    }
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}

/// Runs `f`, catching a panic so that cleanup still happens.
async fn futures_catch<F: std::future::Future<Output = ()>>(
    f: F,
) -> Result<(), Box<dyn std::any::Any + Send>> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(f).catch_unwind().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_from_the_controller_pool_manager_socket() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    use kuryr_controller::{drivers::PodTarget, metrics::Metrics, pool};
    let env = sandbox().await;
    let fake = Arc::new(kuryr_openstack::fake::FakeNeutron::new());
    let (net, sub) = fake.add_network("pods", "10.30.0.0/24");
    let (config, _) = kuryr_config::from_strs(
        &[(
            "t.conf",
            "[kubernetes]\nvif_pool_driver = neutron\n[neutron_defaults]\ncluster_tag = t\n",
        )],
        kuryr_config::Role::Any,
        &|_| None,
    )
    .expect("config");
    let settings = pool::PoolSettings::from_config(&config).expect("settings");
    let vp = pool::VifPool::new(settings, fake.clone(), Arc::new(Metrics::default()));
    let target = PodTarget {
        project_id: "p".into(),
        network_id: net.id.clone(),
        subnet_ids: vec![sub.id.clone()],
        security_groups: vec!["sg".into()],
    };
    let created = vp.populate("node-1", &target, Some(3)).await.expect("populate");
    assert!(created >= 3);
    let in_neutron = fake.ports().len();
    println!("populate(Some(3)) created {created}, Neutron has {in_neutron} ports");
    let sock = env._dir.path().join("run/kuryr_manage.sock");
    // node-1 is a Node with an address: `--trunk` names it by that address.
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(json!({"metadata": {"name": "node-1"}})).expect("node");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    nodes.create(&PostParams::default(), &node).await.expect("node");
    nodes
        .patch_status(
            "node-1",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.10"}]}}),
            ),
        )
        .await
        .expect("node address");
    let manager = pool::manager::Manager {
        pools: vec![vp.clone()],
        source: Arc::new(pool::source::Pooled(vp.clone())),
        drivers: None,
        client: Some(env.client.clone()),
    };
    let server = pool::manager::serve(manager, &sock).expect("serve");
    let sock_s = sock.to_string_lossy().into_owned();
    let o = kuryrctl(&env.server.kubeconfig, &["pools", "--socket", &sock_s]).await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    let row = o.stdout.lines().nth(1).unwrap_or_default().to_string();
    assert!(row.starts_with("node-1") && row.contains(&net.id), "{}", o.stdout);
    // The pool may still top itself up in the background: counts only grow.
    assert!(
        o.stdout.contains("1 pool(s), ") && o.stdout.contains("available port(s) (from the pool manager"),
        "{}",
        o.stdout
    );
    let v = json_of(
        &kuryrctl(
            &env.server.kubeconfig,
            &["pools", "--socket", &sock_s, "-o", "json"],
        )
        .await,
    );
    assert_eq!(v["source"], "pool-manager");
    let available = v["items"][0]["available"].as_u64().unwrap_or_default();
    assert!(available >= 3 && available as usize <= fake.ports().len(), "{v}");
    println!("pool manager reports {available} available, Neutron held {in_neutron} after populate");

    // pools create: 2 ports in node-1's pool, the node named by its address (as upstream's
    // tools name a VM's trunk), the pool's key given.
    let kc = env.server.kubeconfig.clone();
    let key = [
        "--project",
        "p",
        "--network",
        net.id.as_str(),
        "--subnet",
        sub.id.as_str(),
        "--security-group",
        "sg",
    ];
    let mut args = vec![
        "pools",
        "create",
        "--trunk",
        "192.0.2.10",
        "-n",
        "2",
        "--socket",
        &sock_s,
    ];
    args.extend(key);
    let before = fake.ports().len();
    let v = json_of(&kuryrctl(&kc, &[args.as_slice(), &["-o", "json"]].concat()).await);
    let row = &v["items"][0];
    assert_eq!(
        (
            row["node"].as_str(),
            row["host"].as_str(),
            row["requested"].as_u64(),
            row["created"].as_u64()
        ),
        (Some("192.0.2.10"), Some("node-1"), Some(2), Some(2)),
        "{v}"
    );
    assert!(fake.ports().len() >= before + 2, "2 ports more in Neutron");
    let mut table_args = vec![
        "pools", "create", "--host", "node-1", "-n", "1", "--socket", &sock_s,
    ];
    table_args.extend(key);
    let o = kuryrctl(&kc, &table_args).await;
    assert!(
        o.code == 0 && o.stdout.contains("1 port(s) created in 1 pool(s)"),
        "{}",
        o.stdout
    );

    // pools show: one row per port of node-1's pool, all available (no pod uses one).
    let v = json_of(
        &kuryrctl(
            &kc,
            &[
                "pools",
                "show",
                "--trunk",
                "192.0.2.10",
                "--socket",
                &sock_s,
                "-o",
                "json",
            ],
        )
        .await,
    );
    let rows = v["items"].as_array().cloned().unwrap_or_default();
    let pool = vp.pool_ports(&kuryr_core::pool::PoolKey::new("node-1", "p", &net.id));
    assert_eq!(rows.len(), pool.available.len(), "{v}");
    assert!(rows.len() >= available as usize + 3, "{v}");
    assert!(
        rows.iter()
            .all(|r| r["host"] == "node-1" && r["state"] == "available"),
        "{v}"
    );
    let o = kuryrctl(
        &kc,
        &[
            "pools",
            "show",
            "--host",
            "node-1",
            "--network",
            "other",
            "--socket",
            &sock_s,
        ],
    )
    .await;
    assert!(
        o.code == 0 && o.stdout.contains("0 port(s) in 0 pool(s)"),
        "{}",
        o.stdout
    );

    // Refusals name what was wrong: no pool key and no drivers for defaults; a node no one
    // has; no pool manager at the socket.
    let o = kuryrctl(&kc, &["pools", "create", "--host", "node-1", "--socket", &sock_s]).await;
    assert!(
        o.code == 255 && o.stderr.contains("the pod drivers are not available"),
        "{}",
        o.stderr
    );
    let o = kuryrctl(
        &kc,
        &["pools", "delete", "--trunk", "198.51.100.7", "--socket", &sock_s],
    )
    .await;
    assert!(
        o.code == 255
            && o.stderr.contains("400")
            && o.stderr.contains("no node has the address or name 198.51.100.7"),
        "{}",
        o.stderr
    );
    let missing = env._dir.path().join("run/none.sock");
    let missing_s = missing.to_string_lossy().into_owned();
    let o = kuryrctl(&kc, &["pools", "show", "--socket", &missing_s]).await;
    assert!(
        o.code == 255
            && o.stderr
                .contains(&format!("no pool manager answers at {missing_s}")),
        "{}",
        o.stderr
    );

    // pools delete: node-1's pooled ports deleted in Neutron.
    let v = json_of(
        &kuryrctl(
            &kc,
            &[
                "pools", "delete", "--host", "node-1", "--socket", &sock_s, "-o", "json",
            ],
        )
        .await,
    );
    assert_eq!(v["items"][0]["deleted"].as_u64(), Some(rows.len() as u64), "{v}");
    assert!(
        fake.ports().is_empty(),
        "every pooled port deleted: {:?}",
        fake.ports()
    );
    let v = json_of(&kuryrctl(&kc, &["pools", "list", "--socket", &sock_s, "-o", "json"]).await);
    assert_eq!(v["items"].as_array().map(Vec::len), Some(0), "{v}");
    // Pools management needs the socket only, no Kubernetes: an unreadable kubeconfig is no
    // matter.
    let o = kuryrctl(
        Path::new("/nonexistent/kubeconfig"),
        &["pools", "show", "--socket", &sock_s],
    )
    .await;
    assert!(
        o.code == 0 && o.stdout.contains("0 port(s) in 0 pool(s)"),
        "{}{}",
        o.stdout,
        o.stderr
    );
    server.abort();
}
