//! Two clusters in one project, on the REAL sandbox cloud: ports of "another cluster" — pooled
//! ports tagged with its own identity on a node named like ours (bound and unbound), upstream
//! Kuryr's untagged `compute:kuryr` ports (bound elsewhere and unbound) and a user's port — sit
//! in our pod network while our controller (the binary) serves pods, is killed with SIGKILL,
//! recovers, serves more pods and runs its janitor. Every one of those ports must be left as it
//! was and never appear in one of our pods' VIFs: once with a configured cluster tag, once
//! with none (the identity derived from the cluster). At 9972c9b the tagless run deleted the
//! unbound ones at the restart and handed the other cluster's pooled ports to our pods.

mod common;

use std::{collections::HashSet, path::PathBuf, time::Duration};

use common::{openstack::*, *};
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use kuryr_openstack::{Neutron, OpenStackNeutron, PortCreate};
use kuryr_types::KuryrPort;

/// The tests of this file share one small Neutron: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const NS: &str = "fc";

/// One port of the other cluster, as created: what must not change.
#[derive(Debug, Clone, PartialEq)]
struct Theirs {
    what: &'static str,
    id: String,
    host: String,
    tags: Vec<String>,
    security_groups: Vec<String>,
    device_owner: String,
}

async fn plant(neutron: &OpenStackNeutron, topo: &Topology, other: &str, node: &str) -> Vec<Theirs> {
    let specs: [(&'static str, &str, &str, Vec<String>); 5] = [
        (
            "their pooled port on a node named like ours",
            node,
            "compute:kuryr",
            vec![other.to_string()],
        ),
        ("their unbound port", "", "compute:kuryr", vec![other.to_string()]),
        (
            "upstream's untagged port bound elsewhere",
            "their-node",
            "compute:kuryr",
            vec![],
        ),
        ("upstream's untagged unbound port", "", "compute:kuryr", vec![]),
        ("a user's port", "", "", vec![]),
    ];
    let mut out = Vec::new();
    for (what, host, owner, tags) in specs {
        let create = PortCreate {
            network_id: topo.get("POD_NETWORK_ID").into(),
            project_id: Some(topo.get("KURYR_SANDBOX_PROJECT_ID").into()),
            device_owner: Some(owner.into()),
            binding_host_id: (!host.is_empty()).then(|| host.to_string()),
            security_groups: Some(vec![topo.get("POD_SG_ID").into()]),
            tags: tags.clone(),
            name: Some(format!("other-cluster-{}", out.len())),
            ..Default::default()
        };
        let p = neutron
            .create_ports_bulk(std::slice::from_ref(&create))
            .await
            .expect("planting the other cluster's port")
            .remove(0);
        out.push(Theirs {
            what,
            id: p.id,
            host: p.binding_host_id,
            tags: p.tags,
            security_groups: p.security_groups,
            device_owner: p.device_owner,
        });
    }
    out
}

/// Each planted port still there, as it was.
async fn assert_untouched(neutron: &OpenStackNeutron, theirs: &[Theirs], when: &str) {
    let ids: Vec<String> = theirs.iter().map(|t| t.id.clone()).collect();
    let now = neutron
        .list_ports(&kuryr_openstack::PortFilter::ids(ids))
        .await
        .expect("listing their ports");
    for t in theirs {
        let p = now
            .iter()
            .find(|p| p.id == t.id)
            .unwrap_or_else(|| panic!("{when}: {} ({}) was deleted", t.what, t.id));
        let seen = Theirs {
            what: t.what,
            id: p.id.clone(),
            host: p.binding_host_id.clone(),
            tags: p.tags.clone(),
            security_groups: p.security_groups.clone(),
            device_owner: p.device_owner.clone(),
        };
        assert_eq!(&seen, t, "{when}: {} was changed", t.what);
    }
}

/// The port IDs our pods' KuryrPorts reference.
async fn our_vifs(client: &Client) -> Vec<String> {
    let api: Api<KuryrPort> = Api::namespaced(client.clone(), NS);
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .flat_map(|kp| kp.status.iter().flat_map(|s| s.vifs.values()))
                .filter_map(|e| e.vif.id.clone())
                .collect()
        })
        .unwrap_or_default()
}

async fn wait_wired(client: &Client, pods: usize) -> Vec<String> {
    wait_for("pods wired", Duration::from_secs(240), async || {
        let v = our_vifs(client).await;
        (v.len() >= pods).then_some(v)
    })
    .await
}

async fn controller_ready(health: std::net::SocketAddr) {
    wait_for("controller ready", Duration::from_secs(90), async || {
        tokio::net::TcpStream::connect(health).await.ok()?;
        (http_get(health, "/ready").await.0 == 200).then_some(())
    })
    .await;
}

async fn two_clusters(configured_tag: bool) {
    let _crashes = sandbox_guard::CrashGuard::new();
    let _serial = SERIAL.lock().await;
    let topo = Topology::load();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("controller.log");
    let ours = unique_tag("fc-ours");
    let other = unique_tag("fc-other");
    // Small pools, a janitor every 2 s with no minimum age: every path runs several times.
    let tag_line = if configured_tag {
        format!("[neutron_defaults]\ncluster_tag = {ours}\n")
    } else {
        String::new()
    };
    let conf = dir.path().join("test.conf");
    std::fs::write(
        &conf,
        format!(
            "[kubernetes]\nenabled_handlers = vif,kuryrport\nvif_pool_driver = neutron\nwatch_reconcile_period = 0\n\
             [vif_pool]\nports_pool_min = 2\nports_pool_batch = 4\nports_pool_cooldown = 1\n\
             ports_pool_update_frequency = 1\nports_pool_janitor_interval = 2\nports_pool_janitor_min_age = 1\n\
             [neutron]\ntimeout = 120\n{tag_line}"
        ),
    )
    .expect("write test.conf");
    let files: Vec<PathBuf> = vec![PathBuf::from(topo.get("KURYR_CONF")), conf];
    let config = load_config(&files);
    let (neutron, _) = neutron(&config).await;
    let nodes = topo.nodes();
    let theirs = plant(&neutron, &topo, &other, &nodes[0]).await;
    let our_tag = std::sync::Mutex::new(ours.clone());
    let body = async {
        let env = sandbox().await;
        install_crds_and_ns(&env.client).await;
        create_namespace(&env.client, NS).await;
        for node in &nodes {
            ready_node(&env.client, node).await;
        }
        if !configured_tag {
            let uid = kube_system_uid(&env.client).await;
            *our_tag.lock().expect("tag") = kuryr_runtime::identity::derived_tag(&uid);
        }
        let pods: Api<Pod> = Api::namespaced(env.client.clone(), NS);
        let mk = async |names: std::ops::Range<usize>| {
            for i in names {
                let node = &nodes[i % nodes.len()];
                pods.create(&PostParams::default(), &pod_on(NS, &format!("p-{i}"), node))
                    .await
                    .expect("create pod");
            }
        };
        let (health, metrics) = (free_port(), free_port());
        let mut first = spawn_controller(&env.server.kubeconfig, &files, health, metrics, &log);
        controller_ready(health).await;
        mk(0..6).await;
        let wired = wait_wired(&env.client, 6).await;
        assert_untouched(&neutron, &theirs, "after the first pods").await;
        // SIGKILL, then a restart: recovery reads Neutron with their ports in it.
        first.start_kill().expect("SIGKILL");
        let _ = first.wait().await;
        let (health2, metrics2) = (free_port(), free_port());
        let _second = spawn_controller(&env.server.kubeconfig, &files, health2, metrics2, &log);
        controller_ready(health2).await;
        // Churn: half the pods go, new ones come; the janitor runs meanwhile.
        for i in 0..3 {
            let _ = pods.delete(&format!("p-{i}"), &DeleteParams::default()).await;
        }
        mk(6..10).await;
        let after = wait_wired(&env.client, 7).await;
        tokio::time::sleep(Duration::from_secs(8)).await;
        assert_untouched(&neutron, &theirs, "after the restart, churn and janitor passes").await;
        let their_ids: HashSet<&str> = theirs.iter().map(|t| t.id.as_str()).collect();
        for id in wired
            .iter()
            .chain(after.iter())
            .chain(our_vifs(&env.client).await.iter())
        {
            assert!(
                !their_ids.contains(id.as_str()),
                "one of our pods got their port {id}"
            );
        }
        // What we made carries our identity.
        let tag = our_tag.lock().expect("tag").clone();
        let ours_listed = neutron
            .list_ports(&kuryr_openstack::PortFilter::tagged([tag.as_str()]))
            .await
            .expect("our ports");
        assert!(
            our_vifs(&env.client)
                .await
                .iter()
                .all(|id| ours_listed.iter().any(|p| &p.id == id)),
            "a pod's port does not carry our identity {tag}"
        );
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(text.contains("cluster identity"), "the identity is not logged");
        println!(
            "two clusters ({}): {} of their ports untouched; ours: {} ports tagged {tag}",
            if configured_tag {
                "configured tag"
            } else {
                "derived identity"
            },
            theirs.len(),
            ours_listed.len()
        );
    };
    let cleanup = async {
        for t in &theirs {
            let _ = neutron.delete_port(&t.id).await;
        }
        let tag = our_tag.lock().map(|t| t.clone()).unwrap_or_default();
        let n = cleanup_ports(&neutron, &tag).await;
        println!("cleanup: {} of theirs, {n} of ours deleted", theirs.len());
        print_log_lines(
            &log,
            &[
                "pools recovered",
                "janitor",
                "identity",
                "not this cluster",
                "WARN",
                "ERROR",
            ],
            80,
        );
    };
    guarded(body, cleanup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_clusters_ports_are_untouched_with_a_configured_tag() {
    two_clusters(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_clusters_ports_are_untouched_without_any_tag() {
    two_clusters(false).await;
}
