//! The node driving the reference CNI plugins (`bridge` + `host-local` IPAM, chained `tuning`)
//! from the `containernetworking-plugins` package, inside a dedicated host netns: the pod gets a
//! real veth on a real bridge and its responder is reachable over it. Skipped (with a message)
//! when the plugins are not installed (`apt-get install containernetworking-plugins`).

#![allow(clippy::unwrap_used)]

mod support;

use std::{io::Read, net::TcpStream, path::Path, time::Duration};

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use kube_sandbox_node::{netns, node::run_node};
use serde_json::json;
use support::*;
use tokio::sync::oneshot;

const PLUGIN_DIR: &str = "/usr/lib/cni";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_bridge_plugin_wires_a_reachable_pod() -> Result<()> {
    // Never skip silently: tools/test-all installs the package; a developer without it gets told how.
    anyhow::ensure!(
        Path::new(PLUGIN_DIR).join("bridge").exists(),
        "reference CNI plugins missing in {PLUGIN_DIR}: apt-get install containernetworking-plugins \
         (tools/test-all does this)"
    );
    let w = world().await?;
    let host = format!("ksb-host-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    assert!(
        std::process::Command::new("ip")
            .args(["netns", "add", &host])
            .status()?
            .success()
    );
    let _host_guard = HostNs(host.clone());
    // Only the reference network: replace the test conflist.
    std::fs::remove_file(w.conf.join("10-test.conflist"))?;
    let ipam_dir = w.dir.join("ipam");
    std::fs::write(
        w.conf.join("20-real.conflist"),
        serde_json::to_vec(&json!({"cniVersion": "1.0.0", "name": "realnet", "plugins": [
            {"type": "bridge", "bridge": "ksb0", "isGateway": true, "ipMasq": false,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.99.0.0/24"}]],
                      "dataDir": ipam_dir.display().to_string()}},
            {"type": "tuning"}
        ]}))?,
    )?;
    let mut cfg = w.node_config("node-r");
    cfg.cni_bin_dirs = vec![PLUGIN_DIR.into()];
    cfg.host_netns = Some(host.clone());
    cfg.apiserver_forward = Some(w.server.as_ref().unwrap().addr);
    let (tx, rx) = oneshot::channel::<()>();
    let client = w.client.clone();
    let node = tokio::spawn(async move {
        run_node(client, cfg, async move {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    pods.create(&PostParams::default(), &web_pod("web-5", Some("node-r")))
        .await?;
    let pod = running_pod(&pods, "web-5").await?;
    let ip = pod.status.unwrap().pod_ip.unwrap();
    assert!(ip.starts_with("10.99.0."), "{ip}");
    assert!(
        ipam_dir.join("realnet").join(&ip).exists(),
        "host-local reserved the IP"
    );

    // Reach the pod from the node's host netns over the bridge.
    let host_path = netns::path(&host);
    let ip2 = ip.clone();
    let reply = tokio::task::spawn_blocking(move || {
        netns::run_in(&host_path, move || -> std::io::Result<String> {
            let mut s =
                TcpStream::connect_timeout(&format!("{ip2}:8080").parse().unwrap(), Duration::from_secs(5))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        })
    })
    .await???;
    assert_eq!(reply, "web-5\n");

    pods.delete("web-5", &DeleteParams::default()).await?;
    wait_for("pod removed", Duration::from_secs(30), || async {
        pods.get_opt("web-5").await.ok()?.is_none().then_some(())
    })
    .await?;
    assert!(
        !ipam_dir.join("realnet").join(&ip).exists(),
        "DEL released the IP"
    );
    let _ = tx.send(());
    node.await?;
    Ok(())
}
