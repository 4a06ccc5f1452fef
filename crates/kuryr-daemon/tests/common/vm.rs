//! Helpers of the VM node tests (`vlan_vm`, `macvlan_vm`): `sandbox/vm`, the VMs' topology, a
//! shell inside the VM, and the run of a test body between `sandbox/vm up` and `down`.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use super::{Os, Topo, openstack, topology};

/// `sandbox/vm ARGS`: its output, or why it failed.
pub fn sandbox_vm(args: &[&str]) -> Result<String, String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sandbox/vm");
    let out = Command::new(&path)
        .args(args)
        .output()
        .map_err(|e| format!("running {}: {e}", path.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!(
            "sandbox/vm {} failed ({}): {text}",
            args.join(" "),
            out.status
        ))
    }
}

/// `$KURYR_SANDBOX_HOME/vm/topology.env` as a map.
pub fn vm_topology(topo: &Topo) -> HashMap<String, String> {
    let path = Path::new(topo.get("KURYR_SANDBOX_HOME")).join("vm/topology.env");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// `sh -c CMD` (inside the VM): whether it succeeded, and its output.
pub fn sh(cmd: &str) -> (bool, String) {
    let out = Command::new("sh").args(["-c", cmd]).output().expect("sh");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Boots one VM node (`sandbox/vm up --vms 1`), runs `body` on the host, then deletes the
/// test's Neutron ports and stops the VM whatever happened.
pub async fn with_one_vm<F, Fut>(body: F)
where
    F: FnOnce(Topo, std::sync::Arc<Os>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = topology();
    let os = openstack(&topo).await;
    let booted = Instant::now();
    let up = tokio::task::spawn_blocking(|| sandbox_vm(&["up", "--vms", "1"]))
        .await
        .expect("join");
    if let Err(e) = up {
        let _ = sandbox_vm(&["down"]);
        panic!("{e}");
    }
    println!("sandbox/vm up --vms 1: {} ms", booted.elapsed().as_millis());
    let result = std::panic::AssertUnwindSafe(body(topo, os.clone()));
    let outcome = futures::FutureExt::catch_unwind(result).await;
    os.cleanup().await;
    let down = tokio::task::spawn_blocking(|| sandbox_vm(&["down"]))
        .await
        .expect("join");
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
    down.expect("sandbox/vm down");
}
