//! The namespace subnet driver end to end against the REAL sandbox cloud (`sandbox/up`) and the
//! in-process emulated API server: Namespace → KuryrNetwork (finalizer) → Neutron network,
//! subnet from the subnet pool and router interface, all tagged with this test's cluster tag →
//! KuryrNetwork status as upstream → the namespace's pools pre-populated on every Ready node →
//! pods of the namespace target its network; deleting the namespace removes everything. Also a
//! Neutron failure (a subnet pool that does not exist): Warning Events, retries, no crash.
//! Everything tagged with the test's tag is deleted at the end, also on failure. Fails (never
//! skips) when the sandbox is down.

mod common;

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use common::{openstack::*, *};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use kuryr_openstack::{Neutron, OpenStackNeutron, PortFilter, ResourceFilter};
use kuryr_types::{KuryrNetwork, constants::KURYRNETWORK_FINALIZER};
use serde_json::json;

/// The sandbox's kuryr.conf plus the test's layer (handlers, namespace driver, tag, `extra`).
fn conf(dir: &std::path::Path, topo: &Topology, tag: &str, handlers: &str, extra: &str) -> Vec<PathBuf> {
    let path = dir.join("kn-test.conf");
    std::fs::write(
        &path,
        format!(
            "[kubernetes]\nenabled_handlers = {handlers}\npod_subnets_driver = namespace\n{extra}\n\
             [neutron_defaults]\ncluster_tag = {tag}\n"
        ),
    )
    .expect("write conf");
    vec![PathBuf::from(topo.get("KURYR_CONF")), path]
}

/// Detaches, then deletes every port, subnet and network tagged `tag`; returns how many
/// resources there were. Several rounds: a population in flight when the test stopped can
/// still create ports on a network. Never panics.
async fn cleanup(n: &OpenStackNeutron, router: &str, tag: &str) -> usize {
    let mut total = 0;
    for round in 0..5 {
        if round > 0 {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let mut found = cleanup_ports(n, tag).await;
        let nets = n
            .list_networks(&ResourceFilter::tagged([tag]))
            .await
            .unwrap_or_default();
        let subnets = n
            .list_subnets(&ResourceFilter::tagged([tag]))
            .await
            .unwrap_or_default();
        found += nets.len() + subnets.len();
        for s in &subnets {
            let _ = n.remove_router_interface(router, &s.id).await;
            if let Err(e) = n.delete_subnet(&s.id).await {
                eprintln!("cleanup: subnet {}: {e}", s.id);
            }
        }
        for net in &nets {
            // Ports Neutron made itself (DHCP) go with the network.
            if let Err(e) = n.delete_network(&net.id).await {
                eprintln!("cleanup: network {}: {e}", net.id);
            }
        }
        total += found;
        if found == 0 {
            break;
        }
    }
    total
}

async fn labelled_namespace(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let labels: BTreeMap<_, _> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("ns");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

async fn kn_of(client: &Client, ns: &str) -> Option<KuryrNetwork> {
    Api::<KuryrNetwork>::namespaced(client.clone(), ns)
        .get_opt(ns)
        .await
        .expect("get KuryrNetwork")
}

async fn delete_namespace_and_wait(client: &Client, name: &str) {
    // No kubelet here to finish graceful pod deletions.
    let pods: Api<Pod> = Api::namespaced(client.clone(), name);
    for p in pods.list(&ListParams::default()).await.expect("pods").items {
        delete_now(&pods, &p.name_any()).await;
    }
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.delete(name, &DeleteParams::default())
        .await
        .expect("delete namespace");
    wait_for(
        "namespace and its KuryrNetwork gone",
        Duration::from_secs(90),
        async || {
            let kn_gone = kn_of(client, name).await.is_none();
            let ns_gone = nss.get_opt(name).await.expect("get ns").is_none();
            (kn_gone && ns_gone).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_network_lifecycle() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = Topology::load();
    let tag = unique_tag("knlife");
    let router = topo.get("ROUTER_ID").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let files = conf(
        dir.path(),
        &topo,
        &tag,
        "namespace,kuryrnetwork,kuryrnetwork_population",
        "vif_pool_driver = neutron\n[vif_pool]\nports_pool_min = 2\nports_pool_batch = 2\n",
    );
    let config = load_config(&files);
    let (n, _) = neutron(&config).await;
    let env = sandbox().await;
    let client = env.client.clone();
    let body = async {
        install_crds_and_ns(&client).await;
        for node in topo.nodes() {
            ready_node(&client, &node).await;
        }
        let ctl = InProcess::start(&client, config.clone()).await;
        let ns = "kn-life";
        labelled_namespace(&client, ns, &[("team", "a")]).await;
        // No pod needing a port yet: no network.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            kn_of(&client, ns).await.is_none(),
            "KuryrNetwork created for an empty namespace"
        );
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let nodes = topo.nodes();
        let pod = pods
            .create(&PostParams::default(), &pod_on(ns, "p1", &nodes[0]))
            .await
            .expect("pod");
        let t0 = std::time::Instant::now();
        let kn = wait_for("KuryrNetwork populated", Duration::from_secs(90), async || {
            kn_of(&client, ns)
                .await
                .filter(|k| k.status.as_ref().and_then(|s| s.populated) == Some(true))
        })
        .await;
        println!(
            "namespace network ready and populated in {} ms",
            t0.elapsed().as_millis()
        );
        assert_eq!(kn.finalizers(), [KURYRNETWORK_FINALIZER]);
        assert_eq!(kn.spec.ns_name, ns);
        assert_eq!(kn.spec.project_id, topo.get("KURYR_SANDBOX_PROJECT_ID"));
        let st = kn.status.clone().expect("status");
        let (net_id, subnet_id) = (
            st.net_id.clone().expect("netId"),
            st.subnet_id.clone().expect("subnetId"),
        );
        assert_eq!(st.router_id.as_deref(), Some(router.as_str()));
        // The API server adds `kubernetes.io/metadata.name` to every namespace.
        let labels = BTreeMap::from([
            ("kubernetes.io/metadata.name".to_string(), ns.to_string()),
            ("team".to_string(), "a".to_string()),
        ]);
        assert_eq!(st.ns_labels.as_ref(), Some(&labels));
        assert_eq!(kn.spec.ns_labels, labels);
        let cidr = st.subnet_cidr.clone().expect("subnetCIDR");
        assert!(
            cidr.starts_with("10.10."),
            "CIDR {cidr} not from the pool 10.10.0.0/16"
        );

        // Neutron: tagged network and subnet from the pool, attached to the router.
        let ns_uid = Api::<Namespace>::all(client.clone())
            .get(ns)
            .await
            .expect("ns")
            .uid()
            .expect("uid");
        let net = n.get_network(&net_id).await.expect("network");
        assert!(net.tags.contains(&tag), "network tags {:?}", net.tags);
        assert_eq!(net.name, format!("{ns_uid}/{ns}"));
        assert_eq!(net.project_id, topo.get("KURYR_SANDBOX_PROJECT_ID"));
        let sub = n.get_subnet(&subnet_id).await.expect("subnet");
        assert!(sub.tags.contains(&tag), "subnet tags {:?}", sub.tags);
        assert_eq!(sub.network_id, net_id);
        assert_eq!(sub.cidr, cidr);
        assert_eq!(sub.subnetpool_id.as_deref(), Some(topo.get("POD_SUBNETPOOL_ID")));
        let rports = n
            .list_ports(&PortFilter {
                network_id: Some(net_id.clone()),
                device_id: Some(router.clone()),
                ..Default::default()
            })
            .await
            .expect("router ports");
        assert_eq!(rports.len(), 1, "router interface on the namespace subnet");

        // Pools pre-populated on every Ready node, on the namespace network, tagged
        // (`populated: true` is written first, the bulk creations follow).
        let pooled = wait_for("pools pre-populated", Duration::from_secs(60), async || {
            let ports = n
                .list_ports(&PortFilter {
                    network_id: Some(net_id.clone()),
                    tags: vec![tag.clone()],
                    ..Default::default()
                })
                .await
                .expect("pool ports");
            nodes
                .iter()
                .all(|node| ports.iter().filter(|p| &p.binding_host_id == node).count() >= 2)
                .then_some(ports)
        })
        .await;
        println!(
            "pre-populated ports: {} on {} nodes after {} ms",
            pooled.len(),
            nodes.len(),
            t0.elapsed().as_millis()
        );

        // A pod of the namespace targets its network.
        let os = ctl.ctx.openstack.clone().expect("openstack");
        let target = wait_for("pod target", Duration::from_secs(10), async || {
            os.drivers.pod_target(&pod).await.ok()
        })
        .await;
        assert_eq!(target.network_id, net_id);
        assert_eq!(target.subnet_ids, std::slice::from_ref(&subnet_id));
        assert_eq!(target.project_id, topo.get("KURYR_SANDBOX_PROJECT_ID"));

        // Labels follow the namespace.
        let p = json!({"metadata": {"labels": {"team": "b"}}});
        Api::<Namespace>::all(client.clone())
            .patch(ns, &PatchParams::default(), &Patch::Merge(&p))
            .await
            .expect("relabel");
        wait_for("labels synced", Duration::from_secs(20), async || {
            let k = kn_of(&client, ns).await?;
            let want = BTreeMap::from([
                ("kubernetes.io/metadata.name".to_string(), ns.to_string()),
                ("team".to_string(), "b".to_string()),
            ]);
            (k.spec.ns_labels == want && k.status.as_ref()?.ns_labels.as_ref() == Some(&want)).then_some(())
        })
        .await;

        // Delete the namespace: router interface, subnet, network and pool ports go.
        delete_namespace_and_wait(&client, ns).await;
        assert!(
            n.get_network(&net_id).await.is_err_and(|e| e.is_not_found()),
            "network left"
        );
        assert!(
            n.get_subnet(&subnet_id).await.is_err_and(|e| e.is_not_found()),
            "subnet left"
        );
        let left_ports = n
            .list_ports(&PortFilter::tagged([tag.as_str()]))
            .await
            .expect("ports");
        let left_nets = n
            .list_networks(&ResourceFilter::tagged([tag.as_str()]))
            .await
            .expect("nets");
        let left_subs = n
            .list_subnets(&ResourceFilter::tagged([tag.as_str()]))
            .await
            .expect("subs");
        assert!(
            left_ports.is_empty() && left_nets.is_empty() && left_subs.is_empty(),
            "left behind: ports {left_ports:?} networks {left_nets:?} subnets {left_subs:?}"
        );
        assert!(ctl.tasks.iter().all(|t| !t.is_finished()), "a handler stopped");
    };
    guarded(body, async {
        let found = cleanup(&n, &router, &tag).await;
        if found > 0 {
            eprintln!("cleanup removed {found} resources tagged {tag}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neutron_failure_is_an_event_and_a_retry() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = Topology::load();
    let tag = unique_tag("knfail");
    let router = topo.get("ROUTER_ID").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let files = conf(
        dir.path(),
        &topo,
        &tag,
        "namespace,kuryrnetwork",
        "[namespace_subnet]\npod_subnet_pool = 00000000-0000-4000-8000-000000000000\n",
    );
    let config = load_config(&files);
    let (n, _) = neutron(&config).await;
    let env = sandbox().await;
    let client = env.client.clone();
    let body = async {
        install_crds_and_ns(&client).await;
        let ctl = InProcess::start(&client, config.clone()).await;
        let ns = "kn-fail";
        labelled_namespace(&client, ns, &[]).await;
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        pods.create(&PostParams::default(), &pod_on(ns, "p1", "node-1"))
            .await
            .expect("pod");
        let ev = wait_for("CreateSubnetFailed event", Duration::from_secs(60), async || {
            warning_events(&client, ns, "CreateSubnetFailed")
                .await
                .into_iter()
                .next()
        })
        .await;
        println!("event: {:?}", ev.note);
        // Retried while the handler keeps running: a subnet pool that does not exist is a
        // configuration error (first retry after 10 s, then 20 s, …), picked up once fixed.
        let metrics = ctl.ctx.metrics.clone();
        wait_for("retries", Duration::from_secs(45), async || {
            let text = metrics.render().ok()?;
            let n = metric_sum(&text, "kuryr_reconcile_total", &["kuryrnetwork", "create_subnet"]);
            (n >= 3.0).then_some(())
        })
        .await;
        let kn = kn_of(&client, ns).await.expect("KuryrNetwork");
        let st = kn.status.clone().unwrap_or_default();
        let net_id = st
            .net_id
            .clone()
            .expect("network created before the failing subnet");
        assert!(st.subnet_id.is_none());
        assert!(ctl.tasks.iter().all(|t| !t.is_finished()), "a handler stopped");
        // Deleting the half-built namespace network still cleans up.
        delete_namespace_and_wait(&client, ns).await;
        assert!(
            n.get_network(&net_id).await.is_err_and(|e| e.is_not_found()),
            "network left"
        );
        let left = n
            .list_networks(&ResourceFilter::tagged([tag.as_str()]))
            .await
            .expect("nets");
        assert!(left.is_empty(), "networks left: {left:?}");
    };
    guarded(body, async {
        cleanup(&n, &router, &tag).await;
    })
    .await;
}

/// The whole chain with the pod and KuryrPort handlers: pods of two namespaces get ports on
/// their namespace's network (from the namespace's pre-populated pools); deleting the pods and
/// then the namespaces leaves nothing tagged in Neutron.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_get_ports_on_their_namespace_network() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = Topology::load();
    let tag = unique_tag("knpods");
    let router = topo.get("ROUTER_ID").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let files = conf(
        dir.path(),
        &topo,
        &tag,
        "vif,kuryrport,namespace,kuryrnetwork,kuryrnetwork_population",
        "vif_pool_driver = neutron\n[vif_pool]\nports_pool_min = 1\nports_pool_batch = 2\nports_pool_cooldown = 1\n",
    );
    let config = load_config(&files);
    let (n, _) = neutron(&config).await;
    let env = sandbox().await;
    let client = env.client.clone();
    let body = async {
        install_crds_and_ns(&client).await;
        let nodes = topo.nodes();
        for node in &nodes {
            ready_node(&client, node).await;
        }
        let ctl = InProcess::start(&client, config.clone()).await;
        let t0 = std::time::Instant::now();
        let namespaces = ["kn-a", "kn-b"];
        for (i, ns) in namespaces.iter().enumerate() {
            labelled_namespace(&client, ns, &[]).await;
            let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
            pods.create(&PostParams::default(), &pod_on(ns, "p", &nodes[i % nodes.len()]))
                .await
                .expect("pod");
        }
        let mut nets = Vec::new();
        for ns in namespaces {
            let kps: Api<kuryr_types::KuryrPort> = Api::namespaced(client.clone(), ns);
            let kp = wait_for("KuryrPort with vifs", Duration::from_secs(120), async || {
                kps.get_opt("p")
                    .await
                    .ok()
                    .flatten()
                    .filter(|k| k.status.as_ref().and_then(|s| s.default_vif()).is_some())
            })
            .await;
            println!("{ns}: pod wired after {} ms", t0.elapsed().as_millis());
            let kn = kn_of(&client, ns).await.expect("KuryrNetwork");
            let st = kn.status.expect("status");
            let net_id = st.net_id.expect("netId");
            let cidr = st.subnet_cidr.expect("cidr");
            let status = kp.status.expect("status");
            let (_, vif) = status.default_vif().expect("vif");
            let port_id = vif.id.clone().expect("port id");
            let port = n.get_port(&port_id).await.expect("port");
            assert_eq!(port.network_id, net_id, "{ns}: port not on the namespace network");
            assert!(port.tags.contains(&tag));
            let ip = &port.fixed_ips[0].ip_address;
            let prefix = cidr.rsplit_once('.').map(|(p, _)| p).unwrap_or_default();
            assert!(ip.starts_with(prefix), "{ns}: IP {ip} not in {cidr}");
            nets.push(net_id);
        }
        assert_ne!(nets[0], nets[1], "namespaces share a network");
        for ns in namespaces {
            delete_namespace_and_wait(&client, ns).await;
        }
        for net in &nets {
            assert!(
                n.get_network(net).await.is_err_and(|e| e.is_not_found()),
                "network {net} left"
            );
        }
        let left_ports = n
            .list_ports(&PortFilter::tagged([tag.as_str()]))
            .await
            .expect("ports");
        let left_nets = n
            .list_networks(&ResourceFilter::tagged([tag.as_str()]))
            .await
            .expect("nets");
        assert!(
            left_ports.is_empty() && left_nets.is_empty(),
            "left behind: ports {left_ports:?} networks {left_nets:?}"
        );
        println!(
            "both namespaces wired and torn down in {} ms",
            t0.elapsed().as_millis()
        );
        drop(ctl);
    };
    guarded(body, async {
        let found = cleanup(&n, &router, &tag).await;
        if found > 0 {
            eprintln!("cleanup removed {found} resources tagged {tag}");
        }
    })
    .await;
}

/// The network janitor: a tagged namespace network (subnet from the pool, attached to the
/// router) that no KuryrNetwork references is deleted on the second pass that sees it; a
/// referenced one is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_namespace_network_is_collected() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    use kube::runtime::{reflector, watcher};
    use kuryr_controller::handlers::kuryrnetwork::{janitor::Janitor, net_settings, neutron as ops};
    let topo = Topology::load();
    let tag = unique_tag("knjan");
    let router = topo.get("ROUTER_ID").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let files = conf(dir.path(), &topo, &tag, "kuryrnetwork", "");
    let config = load_config(&files);
    let (n, _) = neutron(&config).await;
    let s = net_settings(&config).expect("settings");
    let project = topo.get("KURYR_SANDBOX_PROJECT_ID").to_string();
    let body = async {
        let uid = "0c0ffee0-0000-4000-8000-000000000001";
        let mut ids = Vec::new();
        for ns in ["jan-orphan", "jan-used"] {
            let (net, _) = ops::ensure_network(&n, &s, &project, Some(uid), ns)
                .await
                .expect("net");
            let (sub, _) = ops::ensure_subnet(&n, &s, &project, &net.id, Some(uid), ns)
                .await
                .expect("subnet");
            ops::attach(&n, &router, &sub.id).await.expect("attach");
            ids.push((net.id, sub.id));
        }
        let (store, mut writer) = reflector::store::<KuryrNetwork>();
        let mut kn = KuryrNetwork::new(
            "jan-used",
            kuryr_types::KuryrNetworkSpec {
                ns_name: "jan-used".into(),
                project_id: project.clone(),
                ns_labels: Default::default(),
            },
        );
        kn.metadata.namespace = Some("jan-used".into());
        kn.status = Some(kuryr_types::KuryrNetworkStatus {
            net_id: Some(ids[1].0.clone()),
            subnet_id: Some(ids[1].1.clone()),
            ..Default::default()
        });
        writer.apply_watcher_event(&watcher::Event::Apply(kn));
        let j = Janitor::default();
        assert_eq!(j.sweep(&n, &s, &store).await, 0, "first sight only marks");
        assert_eq!(
            j.sweep(&n, &s, &store).await,
            1,
            "second sight deletes the orphan"
        );
        assert!(n.get_network(&ids[0].0).await.is_err_and(|e| e.is_not_found()));
        assert!(
            n.get_network(&ids[1].0).await.is_ok(),
            "referenced network deleted"
        );
        let rports = n
            .list_ports(&PortFilter {
                network_id: Some(ids[0].0.clone()),
                ..Default::default()
            })
            .await
            .expect("ports");
        assert!(rports.is_empty(), "router interface left: {rports:?}");
    };
    guarded(body, async {
        cleanup(&n, &router, &tag).await;
    })
    .await;
}

/// A namespace subnet has DHCP off (as upstream creates it: pods get their addresses from their
/// ports) and the IP version of its subnet pool: an IPv6 pool gives an IPv6 namespace subnet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_subnets_have_dhcp_off_and_the_pools_ip_version() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    use kuryr_controller::handlers::kuryrnetwork::{net_settings, neutron as ops};
    let topo = Topology::load();
    let tag = unique_tag("knv6");
    let router = topo.get("ROUTER_ID").to_string();
    let dir = tempfile::tempdir().expect("tempdir");
    let files = conf(dir.path(), &topo, &tag, "kuryrnetwork", "");
    let config = load_config(&files);
    let (n, _) = neutron(&config).await;
    let project = topo.get("KURYR_SANDBOX_PROJECT_ID").to_string();
    // An IPv6 subnet pool of the project, made with the sandbox's own client (the Neutron trait
    // has no pool creation: kuryr-rs never creates pools).
    let pool_name = format!("ksbx-{tag}-v6");
    let created = std::process::Command::new("openstack")
        .args([
            "--os-cloud",
            "kuryr-sandbox",
            "subnet",
            "pool",
            "create",
            "-f",
            "value",
            "-c",
            "id",
        ])
        .args([
            "--pool-prefix",
            "fd00:ad:beef::/48",
            "--default-prefix-length",
            "64",
            &pool_name,
        ])
        .env("OS_CLIENT_CONFIG_FILE", topo.get("OS_CLIENT_CONFIG_FILE"))
        .output()
        .expect("run openstack");
    assert!(
        created.status.success(),
        "creating an IPv6 subnet pool: {}",
        String::from_utf8_lossy(&created.stderr)
    );
    let v6_pool = String::from_utf8_lossy(&created.stdout).trim().to_string();
    let body = async {
        for (pool, version, ns) in [
            (topo.get("POD_SUBNETPOOL_ID").to_string(), 4, "dhcp-v4"),
            (v6_pool.clone(), 6, "dhcp-v6"),
        ] {
            let mut s = net_settings(&config).expect("settings");
            s.subnet_pool = Some(pool);
            let (net, _) = ops::ensure_network(&n, &s, &project, None, ns)
                .await
                .expect("net");
            let (sub, created) = ops::ensure_subnet(&n, &s, &project, &net.id, None, ns)
                .await
                .expect("subnet");
            assert!(created);
            let live = n.get_subnet(&sub.id).await.expect("subnet read back");
            assert_eq!(live.ip_version, Some(version), "{ns}: {live:?}");
            assert_eq!(
                live.extra.get("enable_dhcp"),
                Some(&serde_json::json!(false)),
                "{ns}: DHCP must be off: {live:?}"
            );
            if version == 6 {
                assert!(live.cidr.starts_with("fd00:ad:beef:"), "{}", live.cidr);
            }
            ops::teardown(&n, None, Some(&sub.id), &net.id, &s.tags)
                .await
                .expect("teardown");
        }
    };
    guarded(body, async {
        cleanup(&n, &router, &tag).await;
        let _ = std::process::Command::new("openstack")
            .args([
                "--os-cloud",
                "kuryr-sandbox",
                "subnet",
                "pool",
                "delete",
                &pool_name,
            ])
            .env("OS_CLIENT_CONFIG_FILE", topo.get("OS_CLIENT_CONFIG_FILE"))
            .output();
    })
    .await;
}
