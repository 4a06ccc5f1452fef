//! Malformed CRD contents, written by a user or an old version (issue "Chaos suite", bad input):
//! a KuryrPort whose `status.vifs` is garbage, one that names its port in an unreadable entry
//! across a controller restart, a KuryrPort of a pod that never existed, a KuryrNetwork whose
//! recorded subnet does not exist and one with odd label values. Each is told by a Warning Event
//! where the object is repaired, nothing stalls (pods created afterwards get ports), the
//! controller does not crash, and running pods keep their ports.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::Event;
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use kuryr_e2e::{pods, public_ip};
use kuryr_types::{KuryrNetwork, KuryrPort};
use serde_json::json;

const NS: &str = "malformed";

async fn port_of(client: &kube::Client, ns: &str, name: &str) -> Option<String> {
    let kp = Api::<KuryrPort>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .ok()??;
    kp.status?.default_vif().and_then(|(_, v)| v.id.clone())
}

/// Waits until the pod's KuryrPort reads with a default VIF again; its port.
async fn wait_repaired(cluster: &kuryr_e2e::cluster::Cluster, client: &kube::Client, name: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(p) = port_of(client, NS, name).await {
            return p;
        }
        assert_or_logs(
            cluster,
            Instant::now() < deadline,
            format!("KuryrPort {NS}/{name} not repaired in 60 s"),
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn garbage(client: &kube::Client, name: &str, eth0: serde_json::Value) {
    Api::<KuryrPort>::namespaced(client.clone(), NS)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"vifs": {"eth0": eth0}}})),
        )
        .await
        .expect("write garbage into the KuryrPort");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_crd_contents_are_told_and_repaired_without_stalling_anything() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let (_dir, cluster) = start(|o| o.namespace_subnets = true);
    let client = check(&cluster, "client", cluster.client().await);
    check(&cluster, "namespace", pods::ensure_namespace(&client, NS).await);
    let node = cluster.nodes[0].name.clone();
    check(
        &cluster,
        "pod",
        pods::create_pod(&client, NS, "p1", Some(&node)).await,
    );
    let p1 = vec![(NS.to_string(), "p1".to_string())];
    check(&cluster, "p1 Ready", pods::wait_ready(&client, &p1, READY).await);
    let port1 = port_of(&client, NS, "p1").await.expect("p1's port");

    // 1. Garbage in a running pod's KuryrPort: told on the pod, written again with the pod's
    //    own port (the pool knows it is p1's), the pod untouched.
    garbage(&client, "p1", json!({"default": true, "vif": "garbage"})).await;
    let m = check(
        &cluster,
        "InvalidVIF",
        public_ip::wait_warning_on(&client, NS, "Pod", "p1", "unreadable", Duration::from_secs(60)).await,
    );
    eprintln!("told: {m}");
    assert_eq!(
        wait_repaired(&cluster, &client, "p1").await,
        port1,
        "p1 keeps its port"
    );

    // 2. A KuryrPort of a pod that never existed, with garbage: deleted, nothing stalls.
    let ghost: KuryrPort = serde_json::from_value(json!({
        "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
        "metadata": {"name": "ghost", "namespace": NS},
        "spec": {"podUid": "00000000-0000-0000-0000-000000000000", "podNodeName": node}
    }))
    .expect("ghost");
    let kps: Api<KuryrPort> = Api::namespaced(client.clone(), NS);
    kps.create(&PostParams::default(), &ghost)
        .await
        .expect("create ghost");
    kps.patch(
        "ghost",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"vifs": {"eth0": 42, "eth1": [1]}}})),
    )
    .await
    .expect("ghost status");

    // 3. The controller restarts while p1's KuryrPort holds an unreadable entry naming its port:
    //    it starts (one bad KuryrPort does not stall its lists), recovery counts the port as
    //    p1's, and the entry is written again with that same port.
    garbage(
        &client,
        "p1",
        json!({"default": true, "vif": {"versioned_object.data": {"id": port1}}}),
    )
    .await;
    check(
        &cluster,
        "controller restart",
        cluster.restart("controller", true),
    );
    assert_eq!(
        wait_repaired(&cluster, &client, "p1").await,
        port1,
        "p1 keeps its port across the restart"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while kps.get_opt("ghost").await.ok().flatten().is_some() {
        assert_or_logs(
            &cluster,
            Instant::now() < deadline,
            "the ghost KuryrPort is still there after 60 s".into(),
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // 4. A KuryrNetwork whose recorded subnet does not exist (an old status, another cloud): told
    //    on it, built again (the namespace's network is found by name), pods still get ports.
    let kns: Api<KuryrNetwork> = Api::namespaced(client.clone(), NS);
    let kn = kns.get(NS).await.expect("KuryrNetwork");
    let real_subnet = kn
        .status
        .as_ref()
        .and_then(|s| s.subnet_id.clone())
        .expect("subnet");
    kns.patch(
        NS,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"subnetId": "6b9f1f4e-0000-4000-8000-000000000000"}})),
    )
    .await
    .expect("dangling subnet");
    let m = check(
        &cluster,
        "NamespaceSubnetMissing",
        public_ip::wait_warning_on(
            &client,
            NS,
            "KuryrNetwork",
            NS,
            "no longer exists",
            Duration::from_secs(60),
        )
        .await,
    );
    eprintln!("told: {m}");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let st = kns.get(NS).await.ok().and_then(|k| k.status).unwrap_or_default();
        if st.subnet_id.as_deref() == Some(real_subnet.as_str()) && st.router_id.is_some() {
            break;
        }
        assert_or_logs(
            &cluster,
            Instant::now() < deadline,
            format!("KuryrNetwork not rebuilt: {st:?}"),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // 5. Odd label values in a KuryrNetwork's spec: read, not a stall.
    kns.patch(
        NS,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"nsLabels": {"tier": 1, "on": true}}})),
    )
    .await
    .expect("odd labels");

    // Nothing stalled: new pods on both nodes get ports and become Ready; p1 still runs.
    let mut later = Vec::new();
    for (i, n) in cluster.nodes.iter().enumerate() {
        let name = format!("later-{i}");
        check(
            &cluster,
            "pod",
            pods::create_pod(&client, NS, &name, Some(&n.name)).await,
        );
        later.push((NS.to_string(), name));
    }
    check(
        &cluster,
        "later pods Ready",
        pods::wait_ready(&client, &later, READY).await,
    );
    check(
        &cluster,
        "p1 still Ready",
        pods::wait_ready(&client, &p1, Duration::from_secs(5)).await,
    );
    let views = check(
        &cluster,
        "collect",
        pods::collect(&cluster, &client, &[NS.to_string()]).await,
    );
    assert_full_connectivity(&cluster, &views).await;
    // The controller did not crash (the restart above aside) and said nothing internal.
    assert!(
        cluster.pid("controller").is_some(),
        "controller gone\n{}",
        cluster.log_tails(40)
    );
    let events = Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("events");
    let reasons: Vec<String> = events.items.iter().filter_map(|e| e.reason.clone()).collect();
    eprintln!("events in {NS}: {reasons:?}");
}
