//! End-to-end: in-process API server + scheduler/endpoints controller + one emulated node driving
//! a recording CNI plugin (bash) on real network namespaces.

#![allow(clippy::unwrap_used)]

mod support;

use std::{
    io::Read,
    net::TcpStream,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Endpoints, Event, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use kube_sandbox_node::{netns, node::run_node};
use serde_json::json;
use support::*;
use tokio::sync::oneshot;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_lifecycle_through_scheduler_cni_and_endpoints() -> Result<()> {
    let w = world().await?;
    let (stop_ctl_tx, stop_ctl_rx) = oneshot::channel::<()>();
    let ctl_client = w.client.clone();
    let ctl = tokio::spawn(async move {
        kube_sandbox_node::controllers::run_with_client(ctl_client, async move {
            let _ = stop_ctl_rx.await;
        })
        .await
    });
    let (stop_node, node) = w.start_node("node-a");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let svcs: Api<Service> = Api::namespaced(w.client.clone(), "default");
    svcs.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
        )?,
    )
    .await?;
    pods.create(&PostParams::default(), &web_pod("web-1", None))
        .await?;

    let pod = running_pod(&pods, "web-1").await?;
    let uid = pod.metadata.uid.clone().unwrap();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.node_name.as_deref(), Some("node-a"));
    let st = pod.status.as_ref().unwrap();
    let ip = st.pod_ip.clone().unwrap();
    assert!(ip.starts_with("10.244.0."), "{ip}");
    assert_eq!(st.host_ip.as_deref(), Some("127.0.0.1"));
    let cs = &st.container_statuses.as_ref().unwrap()[0];
    assert!(cs.ready && cs.started == Some(true));
    assert!(cs.container_id.as_deref().unwrap().starts_with("containerd://"));

    // The plugin saw the CRI-style invocation.
    let adds = w.calls_of("ADD");
    assert_eq!(adds.len(), 1, "{adds:?}");
    let add = &adds[0];
    let cid = add["cid"].as_str().unwrap().to_string();
    assert_eq!(cid.len(), 64);
    assert!(cid.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(add["ifname"], "eth0");
    assert_eq!(add["path"], w.bin.display().to_string());
    assert_eq!(add["argc"], 0);
    assert_eq!(
        add["args"],
        format!(
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID={cid};K8S_POD_UID={uid}"
        )
    );
    assert_eq!(
        add["stdin"],
        json!({"type": "test-cni", "extra": 7, "name": "testnet", "cniVersion": "1.0.0",
            "capabilities": {"portMappings": true, "bandwidth": true},
            "runtimeConfig": {"portMappings": []}})
    );
    let ns_path = PathBuf::from(add["netns"].as_str().unwrap());
    assert!(ns_path.starts_with("/var/run/netns"));
    assert!(ns_path.file_name().unwrap().to_str().unwrap().starts_with("cni-"));
    assert!(ns_path.exists());

    // The "containers" answer inside the pod's netns.
    let p = ns_path.clone();
    assert_eq!(
        tokio::task::spawn_blocking(move || ask_tcp(p, 8080)).await??,
        "web-1\n"
    );
    let p = ns_path.clone();
    assert_eq!(
        tokio::task::spawn_blocking(move || ask_udp(p, 5353)).await??,
        "web-1\n"
    );

    // Scheduled event.
    let events: Api<Event> = Api::namespaced(w.client.clone(), "default");
    wait_for("Scheduled event", Duration::from_secs(10), || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Scheduled") && e.involved_object.name.as_deref() == Some("web-1")
            })
            .then_some(())
    })
    .await?;

    // The node registered itself and heartbeats through its Lease.
    let node_obj = Api::<Node>::all(w.client.clone()).get("node-a").await?;
    let labels = node_obj.metadata.labels.clone().unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], "node-a");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    let nst = node_obj.status.as_ref().unwrap();
    assert!(
        nst.conditions
            .as_ref()
            .unwrap()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert_eq!(nst.addresses.as_ref().unwrap()[0].address, "127.0.0.1");
    assert_eq!(
        nst.node_info.as_ref().unwrap().kubelet_version,
        "v1.33.0-kube-sandbox"
    );
    let lease = Api::<Lease>::namespaced(w.client.clone(), "kube-node-lease")
        .get("node-a")
        .await?;
    let lspec = lease.spec.unwrap();
    assert_eq!(lspec.holder_identity.as_deref(), Some("node-a"));
    let first_renew = lspec.renew_time.unwrap().0;
    let leases: Api<Lease> = Api::namespaced(w.client.clone(), "kube-node-lease");
    wait_for("lease renewed", Duration::from_secs(5), || async {
        let l = leases.get("node-a").await.ok()?;
        (l.spec?.renew_time?.0 > first_renew).then_some(())
    })
    .await?;

    // Host-network pods run without CNI, with the node's IP.
    let mut hn = web_pod("hostnet", None);
    hn.metadata.labels = None;
    hn.spec.as_mut().unwrap().host_network = Some(true);
    hn.spec.as_mut().unwrap().containers[0].ports = None;
    pods.create(&PostParams::default(), &hn).await?;
    let hn = running_pod(&pods, "hostnet").await?;
    assert_eq!(hn.status.unwrap().pod_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(w.calls_of("ADD").len(), 1, "host-network pods get no CNI ADD");

    // Endpoints and EndpointSlice with the named targetPort resolved.
    let eps: Api<Endpoints> = Api::namespaced(w.client.clone(), "default");
    let ip2 = ip.clone();
    wait_for("endpoints", Duration::from_secs(15), || {
        let eps = eps.clone();
        let ip = ip2.clone();
        async move {
            let e = eps.get_opt("web").await.ok()??;
            let s = e.subsets.as_ref()?.first()?.clone();
            let ok = s.addresses.as_ref()?.iter().any(|a| a.ip == ip)
                && s.ports
                    .as_ref()?
                    .iter()
                    .any(|p| p.port == 8080 && p.name.as_deref() == Some("http"));
            ok.then_some(())
        }
    })
    .await?;
    let slices: Api<EndpointSlice> = Api::namespaced(w.client.clone(), "default");
    let ip2 = ip.clone();
    let slice = wait_for("endpointslice", Duration::from_secs(15), || {
        let slices = slices.clone();
        let ip = ip2.clone();
        async move {
            let list = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                .await
                .ok()?;
            list.items.into_iter().find(|s| {
                s.endpoints.iter().any(|e| {
                    e.addresses.contains(&ip) && e.conditions.as_ref().and_then(|c| c.ready) == Some(true)
                })
            })
        }
    })
    .await?;
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(slice.ports.as_ref().unwrap()[0].port, Some(8080));
    assert_eq!(
        slice.metadata.labels.as_ref().unwrap()["endpointslice.kubernetes.io/managed-by"],
        "endpointslice-controller.k8s.io"
    );
    assert_eq!(slice.metadata.owner_references.as_ref().unwrap()[0].name, "web");
    assert_eq!(slice.endpoints[0].node_name.as_deref(), Some("node-a"));

    // Deletion: DEL with the same ids (and the cached result), netns gone, object gone.
    pods.delete("web-1", &DeleteParams::default()).await?;
    wait_for("pod removed", Duration::from_secs(30), || async {
        pods.get_opt("web-1").await.ok()?.is_none().then_some(())
    })
    .await?;
    let dels = w.calls_of("DEL");
    assert_eq!(dels.len(), 1, "{dels:?}");
    assert_eq!(dels[0]["cid"], cid.as_str());
    assert_eq!(dels[0]["netns"], add["netns"]);
    assert_eq!(dels[0]["args"], add["args"]);
    assert_eq!(
        dels[0]["stdin"]["prevResult"]["ips"][0]["address"],
        format!("{ip}/32")
    );
    assert!(!ns_path.exists(), "netns must be deleted");
    wait_for("endpoints emptied", Duration::from_secs(15), || async {
        let e = eps.get_opt("web").await.ok()??;
        e.subsets.unwrap_or_default().is_empty().then_some(())
    })
    .await?;

    // Service deleted: its Endpoints and EndpointSlices go too.
    svcs.delete("web", &DeleteParams::default()).await?;
    wait_for(
        "endpoints and slices of a deleted service removed",
        Duration::from_secs(15),
        || async {
            let e = eps.get_opt("web").await.ok()?;
            let s = slices
                .list(&ListParams::default().labels("kubernetes.io/service-name=web"))
                .await
                .ok()?;
            (e.is_none() && s.items.is_empty()).then_some(())
        },
    )
    .await?;

    // No node matches: PodScheduled=False/Unschedulable, then scheduled once a node matches.
    let mut picky = web_pod("picky", None);
    picky.spec.as_mut().unwrap().node_selector = Some([("disk".to_string(), "ssd".to_string())].into());
    pods.create(&PostParams::default(), &picky).await?;
    let cond = wait_for("Unschedulable", Duration::from_secs(15), || async {
        let p = pods.get_opt("picky").await.ok()??;
        p.status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "PodScheduled" && c.status == "False")
    })
    .await?;
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    assert!(cond.message.unwrap().starts_with("0/1 nodes are available"));
    let nodes: Api<Node> = Api::all(w.client.clone());
    nodes
        .patch(
            "node-a",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"disk": "ssd"}}})),
        )
        .await?;
    let picky = running_pod(&pods, "picky").await?;
    assert_eq!(picky.spec.unwrap().node_name.as_deref(), Some("node-a"));
    let scheduled = picky.status.unwrap().conditions.unwrap();
    assert!(
        scheduled
            .iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "True")
    );

    let _ = stop_node.send(());
    node.await?;
    let _ = stop_ctl_tx.send(());
    ctl.await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_plugin_is_retried_and_restart_adopts_or_collects() -> Result<()> {
    let w = world().await?;
    std::fs::write(&w.fail, b"")?;
    let (stop, node) = w.start_node("node-b");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    pods.create(&PostParams::default(), &web_pod("web-2", Some("node-b")))
        .await?;

    // The failure is reported as kubelet does and the half-made sandbox is torn down.
    let events: Api<Event> = Api::namespaced(w.client.clone(), "default");
    let ev = wait_for(
        "FailedCreatePodSandBox event",
        Duration::from_secs(15),
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("FailedCreatePodSandBox")
                    && e.involved_object.name.as_deref() == Some("web-2")
            })
        },
    )
    .await?;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert_eq!(ev.source.as_ref().unwrap().component.as_deref(), Some("kubelet"));
    assert_eq!(ev.source.as_ref().unwrap().host.as_deref(), Some("node-b"));
    let msg = ev.message.unwrap();
    assert!(
        msg.starts_with("Failed to create pod sandbox: rpc error:"),
        "{msg}"
    );
    assert!(
        msg.contains("plugin type=\"test-cni\" failed (add): induced failure"),
        "{msg}"
    );
    // The event names the sandbox of one of the failed ADDs.
    let first_add = w
        .calls_of("ADD")
        .into_iter()
        .find(|a| msg.contains(a["cid"].as_str().unwrap()))
        .expect("event names a sandbox the plugin saw");
    wait_for("DEL of the failed sandbox", Duration::from_secs(10), || async {
        w.calls_of("DEL")
            .iter()
            .any(|d| d["cid"] == first_add["cid"])
            .then_some(())
    })
    .await?;
    let failed_ns = PathBuf::from(first_add["netns"].as_str().unwrap());
    assert!(!failed_ns.exists());
    let pending = pods.get("web-2").await?;
    assert_eq!(pending.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));

    // Retries succeed once the plugin works.
    wait_for("a retry", Duration::from_secs(10), || async {
        (w.calls_of("ADD").len() >= 2).then_some(())
    })
    .await?;
    std::fs::remove_file(&w.fail)?;
    let pod = running_pod(&pods, "web-2").await?;
    let adds = w.calls_of("ADD");
    let good = adds.last().unwrap().clone();
    let ns_path = PathBuf::from(good["netns"].as_str().unwrap());
    assert!(ns_path.exists());
    assert_eq!(
        pod.status
            .as_ref()
            .unwrap()
            .pod_ip
            .as_deref()
            .map(|s| s.starts_with("10.244.0.")),
        Some(true)
    );

    // Restart: the sandbox is adopted (no new ADD, same netns, responders back).
    let _ = stop.send(());
    node.await?;
    assert!(ns_path.exists());
    let (stop, node) = w.start_node("node-b");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(w.calls_of("ADD").len(), adds.len(), "restart must not ADD again");
    let dels_before = w.calls_of("DEL").len();
    assert!(!w.calls_of("DEL").iter().any(|d| d["cid"] == good["cid"]));
    let p = ns_path.clone();
    assert_eq!(
        wait_for("responder back", Duration::from_secs(10), || {
            let p = p.clone();
            async move {
                tokio::task::spawn_blocking(move || ask_tcp(p, 8080))
                    .await
                    .ok()?
                    .ok()
            }
        })
        .await?,
        "web-2\n"
    );
    assert!(running_pod(&pods, "web-2").await.is_ok());

    // Pod force-deleted while the node is down: the restarted node collects the sandbox.
    let _ = stop.send(());
    node.await?;
    pods.delete(
        "web-2",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await?;
    let (stop, node) = w.start_node("node-b");
    wait_for("orphan collected", Duration::from_secs(15), || async {
        (!ns_path.exists() && w.calls_of("DEL").len() > dels_before).then_some(())
    })
    .await
    .context("sandbox of a deleted pod must be collected")?;
    assert!(w.calls_of("DEL").iter().any(|d| d["cid"] == good["cid"]));
    let _ = stop.send(());
    node.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_cni_config_then_failing_del_until_grace_then_collected() -> Result<()> {
    let w = world().await?;
    let conflist = w.conf.join("10-test.conflist");
    let saved = std::fs::read(&conflist)?;
    std::fs::remove_file(&conflist)?;
    let (stop, node) = w.start_node("node-c");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let events: Api<Event> = Api::namespaced(w.client.clone(), "default");
    pods.create(&PostParams::default(), &web_pod("web-3", Some("node-c")))
        .await?;

    // No valid config (only the broken file): network not ready, nothing is run.
    let ev = find_event(&events, "web-3", "NetworkNotReady").await?;
    assert!(ev.message.unwrap().contains("NetworkPluginNotReady"));
    assert!(w.calls().is_empty());
    std::fs::write(&conflist, saved)?;
    running_pod(&pods, "web-3").await?;
    let add = w.calls_of("ADD")[0].clone();
    let ns_path = PathBuf::from(add["netns"].as_str().unwrap());

    // DEL keeps failing: retried until the grace period is over, then the pod goes anyway and
    // garbage collection keeps retrying until DEL works.
    std::fs::write(w.dir.join("faildel"), b"")?;
    pods.delete(
        "web-3",
        &DeleteParams {
            grace_period_seconds: Some(2),
            ..Default::default()
        },
    )
    .await?;
    let ev = find_event(&events, "web-3", "FailedKillPod").await?;
    assert!(
        ev.message
            .unwrap()
            .contains("plugin type=\"test-cni\" failed (delete): induced del failure")
    );
    wait_for("pod removed after grace", Duration::from_secs(20), || async {
        pods.get_opt("web-3").await.ok()?.is_none().then_some(())
    })
    .await?;
    assert!(ns_path.exists(), "netns stays while DEL fails");
    assert!(w.calls_of("DEL").len() >= 2, "DEL retried");
    std::fs::remove_file(w.dir.join("faildel"))?;
    wait_for("sandbox collected", Duration::from_secs(15), || async {
        (!ns_path.exists()).then_some(())
    })
    .await?;
    assert!(w.calls_of("DEL").iter().all(|d| d["cid"] == add["cid"]));
    let _ = stop.send(());
    node.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_netns_runs_plugins_there_and_forwards_the_apiserver() -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let w = world().await?;
    let host = format!("ksb-host-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let st = std::process::Command::new("ip")
        .args(["netns", "add", &host])
        .status()?;
    assert!(st.success());
    let _host_guard = HostNs(host.clone());
    let host_path = netns::path(&host);
    let host_ino = std::fs::metadata(&host_path)?.ino();

    let addr = w.server.as_ref().unwrap().addr;
    let mut cfg = w.node_config("node-d");
    cfg.host_netns = Some(host.clone());
    cfg.apiserver_forward = Some(addr);
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
    pods.create(&PostParams::default(), &web_pod("web-4", Some("node-d")))
        .await?;
    running_pod(&pods, "web-4").await?;
    let add = w.calls_of("ADD")[0].clone();
    assert_eq!(
        add["ownns"],
        format!("net:[{host_ino}]"),
        "plugin must run in the host netns"
    );

    // The API server answers on 127.0.0.1:<its port> inside the host netns.
    let p = host_path.clone();
    let port = addr.port();
    let reply = tokio::task::spawn_blocking(move || {
        netns::run_in(&p, move || -> std::io::Result<String> {
            use std::io::Write;
            let mut s = TcpStream::connect(("127.0.0.1", port))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"GET /version HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
            let mut out = String::new();
            s.read_to_string(&mut out)?;
            Ok(out)
        })
    })
    .await???;
    assert!(
        reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"),
        "{reply}"
    );
    assert!(reply.contains("gitVersion"), "{reply}");

    pods.delete("web-4", &DeleteParams::default()).await?;
    wait_for("pod removed", Duration::from_secs(30), || async {
        pods.get_opt("web-4").await.ok()?.is_none().then_some(())
    })
    .await?;
    assert_eq!(w.calls_of("DEL")[0]["ownns"], format!("net:[{host_ino}]"));
    let _ = tx.send(());
    node.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_pods_in_parallel() -> Result<()> {
    let w = world().await?;
    let (stop, node) = w.start_node("node-e");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let names: Vec<String> = (0..20).map(|i| format!("many-{i}")).collect();
    let started = std::time::Instant::now();
    futures::future::try_join_all(names.iter().map(|n| {
        let pods = pods.clone();
        let pod = web_pod(n, Some("node-e"));
        async move { pods.create(&PostParams::default(), &pod).await }
    }))
    .await?;
    let mut ips = std::collections::HashSet::new();
    for n in &names {
        let p = running_pod(&pods, n).await?;
        ips.insert(p.status.unwrap().pod_ip.unwrap());
    }
    eprintln!("20 pods running after {:?}", started.elapsed());
    assert_eq!(ips.len(), 20, "distinct pod IPs");
    let adds = w.calls_of("ADD");
    assert_eq!(adds.len(), 20);
    // Each pod's responder answers with its own name.
    for add in adds.iter().take(5) {
        let args = add["args"].as_str().unwrap();
        let name = args
            .split(';')
            .find_map(|kv| kv.strip_prefix("K8S_POD_NAME="))
            .unwrap()
            .to_string();
        let p = PathBuf::from(add["netns"].as_str().unwrap());
        let reply = tokio::task::spawn_blocking(move || ask_tcp(p, 8080)).await??;
        assert_eq!(reply, format!("{name}\n"));
    }
    futures::future::try_join_all(names.iter().map(|n| {
        let pods = pods.clone();
        async move { pods.delete(n, &DeleteParams::default()).await }
    }))
    .await?;
    wait_for("all pods removed", Duration::from_secs(30), || async {
        let list = pods.list(&ListParams::default()).await.ok()?;
        list.items.is_empty().then_some(())
    })
    .await?;
    let dels = w.calls_of("DEL");
    assert_eq!(dels.len(), 20);
    for add in &adds {
        assert!(dels.iter().any(|d| d["cid"] == add["cid"]));
        assert!(!Path::new(add["netns"].as_str().unwrap()).exists());
    }
    let _ = stop.send(());
    node.await?;
    Ok(())
}

/// The kubectl binary the fidelity tests use (`$KUBECTL`, else `tools/install-kubectl`'s).
fn kubectl_bin() -> PathBuf {
    let p = std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/kube-sandbox/kubectl/bin/kubectl"));
    assert!(p.exists(), "{} missing: run tools/install-kubectl", p.display());
    p
}

/// Runs kubectl against the world's API server, feeding `stdin`; (exit code, stdout, stderr).
async fn kubectl(w: &World, args: &[&str], stdin: &str) -> Result<(i32, String, String)> {
    use std::io::Write;
    let mut cmd = std::process::Command::new(kubectl_bin());
    cmd.arg("--kubeconfig")
        .arg(w.dir.join("kubeconfig"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let input = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn()?;
        if let Some(mut i) = child.stdin.take() {
            i.write_all(input.as_bytes())?;
        }
        let out = child.wait_with_output()?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    })
    .await?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_runs_in_the_pods_netns_with_streams_and_exit_code() -> Result<()> {
    let w = world().await?;
    let (stop, node) = w.start_node("node-x");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    pods.create(&PostParams::default(), &web_pod("exec-1", Some("node-x")))
        .await?;
    running_pod(&pods, "exec-1").await?;
    let ns_path = PathBuf::from(w.calls_of("ADD")[0]["netns"].as_str().unwrap());
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&ns_path)?);

    // The command runs in the pod's network namespace.
    let (code, out, err) =
        kubectl(&w, &["exec", "exec-1", "--", "readlink", "/proc/self/ns/net"], "").await?;
    assert_eq!(
        (code, out.trim(), err.as_str()),
        (0, format!("net:[{inode}]").as_str(), "")
    );
    // Its listening responder is visible there.
    let (code, out, _) = kubectl(&w, &["exec", "exec-1", "-c", "c", "--", "ss", "-Htln"], "").await?;
    assert_eq!(code, 0);
    assert!(out.contains(":8080"), "{out}");
    // stdout and stderr stay apart; the exit code comes through.
    let (code, out, err) = kubectl(
        &w,
        &[
            "exec",
            "exec-1",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ],
        "",
    )
    .await?;
    assert_eq!((code, out.as_str()), (3, "out\n"));
    assert!(err.starts_with("err\n"), "{err}");
    assert!(err.contains("command terminated with exit code 3"), "{err}");
    // stdin reaches the command and its end closes it.
    let (code, out, _) = kubectl(&w, &["exec", "-i", "exec-1", "--", "wc", "-l"], "a\nb\nc\n").await?;
    assert_eq!((code, out.trim()), (0, "3"));
    // Errors name what was wrong.
    let (code, _, err) = kubectl(&w, &["exec", "nope", "--", "true"], "").await?;
    assert_ne!(code, 0);
    assert!(err.contains("pods \"nope\" not found"), "{err}");
    let (code, _, err) = kubectl(&w, &["exec", "exec-1", "-c", "other", "--", "true"], "").await?;
    assert_ne!(code, 0);
    assert!(
        err.contains("container other is not valid for pod exec-1"),
        "{err}"
    );
    let (code, _, err) = kubectl(&w, &["exec", "exec-1", "--", "no-such-command"], "").await?;
    assert_eq!(code, 127, "{err}");

    let _ = stop.send(());
    node.await?;
    Ok(())
}
