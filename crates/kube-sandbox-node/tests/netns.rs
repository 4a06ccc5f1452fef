//! In-process named network namespaces: what `ip netns` sees of them, `lo` up inside, the
//! namespace visible from a mount namespace made earlier by `ip netns exec` (how the sandbox's
//! daemons run), errors for a name in use, and deletion. Needs root, as the node does.

use std::{process::Stdio, time::Duration};

use anyhow::{Context, Result, ensure};
use kube_sandbox_node::netns;

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

async fn ip(args: &[&str]) -> Result<(bool, String)> {
    let out = tokio::process::Command::new("ip")
        .args(args)
        .output()
        .await
        .context("running ip")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

/// Deletes the namespaces of a test even when it fails half-way.
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = std::process::Command::new("ip")
                .args(["netns", "delete", name])
                .stderr(Stdio::null())
                .status();
        }
    }
}

#[tokio::test]
async fn created_namespaces_are_iproute2_namespaces_with_lo_up() -> Result<()> {
    let name = unique("ksbx-test");
    let _cleanup = Cleanup(vec![name.clone()]);
    netns::create(&name).await?;

    let (ok, list) = ip(&["netns", "list"]).await?;
    ensure!(
        ok && list.contains(&name),
        "ip netns list does not show {name}: {list}"
    );
    let (ok, lo) = ip(&["-n", &name, "-o", "link", "show", "lo"]).await?;
    ensure!(ok, "ip -n {name} cannot enter it: {lo}");
    ensure!(lo.contains("<LOOPBACK,UP,LOWER_UP>"), "lo is not up: {lo}");
    // A fresh namespace: nothing but lo.
    let (_, links) = ip(&["-n", &name, "-o", "link", "show"]).await?;
    ensure!(
        links.lines().count() == 1,
        "more than lo in a new namespace: {links}"
    );

    // A name in use is an error and leaves the existing namespace alone.
    let again = netns::create(&name).await;
    ensure!(again.is_err(), "creating {name} twice succeeded");
    let (ok, _) = ip(&["-n", &name, "link", "show", "lo"]).await?;
    ensure!(ok, "the failed second creation broke the first namespace");

    netns::delete(&name).await?;
    ensure!(!netns::exists(&name), "{name} still exists after delete");
    let (_, list) = ip(&["netns", "list"]).await?;
    ensure!(!list.contains(&name), "ip netns list still shows {name}");
    // Deleting what is gone is not an error.
    netns::delete(&name).await?;
    Ok(())
}

#[tokio::test]
async fn a_namespace_created_later_is_seen_from_an_ip_netns_exec_mount_namespace() -> Result<()> {
    // `ip netns exec` gives its command a mount namespace of its own (a slave of this one),
    // made here before the pod's namespace exists: the bind mount must propagate into it.
    let host = unique("ksbx-host");
    let pod = unique("ksbx-pod");
    let _cleanup = Cleanup(vec![host.clone(), pod.clone()]);
    netns::create(&host).await?;
    let script = format!(
        "for i in $(seq 1 100); do ip -n {pod} -o link show lo 2>/dev/null && exit 0; sleep 0.05; done; exit 1"
    );
    let watcher = tokio::process::Command::new("ip")
        .args(["netns", "exec", &host, "sh", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the watcher")?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    netns::create(&pod).await?;
    let out = tokio::time::timeout(Duration::from_secs(20), watcher.wait_with_output())
        .await
        .context("the watcher did not end")??;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && text.contains("UP"),
        "the pod namespace is not usable from the ip-netns-exec mount namespace: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    netns::delete(&pod).await?;
    netns::delete(&host).await?;
    Ok(())
}

#[tokio::test]
async fn names_that_are_not_one_path_component_are_refused() -> Result<()> {
    for bad in ["", "..", "../../etc/passwd", "a/b"] {
        ensure!(netns::create(bad).await.is_err(), "create({bad:?}) accepted");
        ensure!(netns::delete(bad).await.is_err(), "delete({bad:?}) accepted");
    }
    Ok(())
}
