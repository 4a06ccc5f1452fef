//! A cluster started by `sandbox/cluster` (API server, nodes, controller, daemons on the sandbox
//! cloud), seen from Rust: start it with options, attach to a running one, restart or kill one
//! component, stop it. Everything goes through the script, so tests prove the same commands a
//! user runs.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use tracing::{info, warn};

use crate::error::{Error, Result};

/// The repository root (where `sandbox/` lives): `KURYR_REPO`, else from the build location.
pub fn repo_root() -> PathBuf {
    if let Ok(r) = std::env::var("KURYR_REPO") {
        return PathBuf::from(r);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// The directory holding the workspace's dev binaries: `$CARGO_TARGET_DIR/debug`, else the
/// directory above the running test executable (`target/debug/deps/<test>` → `target/debug`).
pub fn dev_bin_dir() -> PathBuf {
    if let Ok(t) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("debug");
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let dir = exe.parent()?;
            Some(if dir.ends_with("deps") {
                dir.parent()?.to_path_buf()
            } else {
                dir.to_path_buf()
            })
        })
        .unwrap_or_else(|| repo_root().join("target/debug"))
}

/// Network namespace `name` exists (under /var/run/netns).
pub fn netns_exists(name: &str) -> bool {
    !name.is_empty() && Path::new("/var/run/netns").join(name).exists()
}

/// A free TCP port on the loopback for a server of the cluster, below the kernel's ephemeral
/// range (see [`sandbox_guard::ports`] for why).
pub use sandbox_guard::free_port;

/// Options of `sandbox/cluster up`.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// `--state-dir`.
    pub state_dir: PathBuf,
    /// `--bin-dir` (None: the script builds release binaries).
    pub bin_dir: Option<PathBuf>,
    /// `--port` (API server).
    pub api_port: u16,
    /// `--health-port` (controller).
    pub health_port: u16,
    /// `--metrics-port` (controller).
    pub metrics_port: u16,
    /// `--pool on|off`.
    pub pool: bool,
    /// `--subnets namespace` instead of `default`.
    pub namespace_subnets: bool,
    /// `--services on|off` (the Service handlers; off in [`ClusterOptions::for_test`]: tests
    /// of the pod path need no load balancers).
    pub services: bool,
    /// `--policies on|off` (NetworkPolicy; off in [`ClusterOptions::for_test`] like Services).
    pub policies: bool,
    /// `--set GROUP.OPTION=VALUE` items.
    pub sets: Vec<String>,
    /// `--cni bridge` (dry run with the reference plugin).
    pub cni_bridge: bool,
    /// Start kuryr-controller (`--no-controller` when false).
    pub controller: bool,
    /// `--deploy manifests|helm`: kuryr-rs as a Kubernetes app (None: host processes).
    pub deploy: Option<&'static str>,
    /// `--vm-nodes N`: N more nodes that are VMs on trunk ports (nested mode).
    pub vm_nodes: u32,
    /// `--vm-macvlan M`: the last M of those VMs are nested-macvlan nodes.
    pub vm_macvlan: u32,
}

impl ClusterOptions {
    /// Options for a test: its own state dir, the dev binaries, free ports, pools on.
    pub fn for_test(state_dir: &Path) -> Self {
        ClusterOptions {
            state_dir: state_dir.to_path_buf(),
            bin_dir: Some(dev_bin_dir()),
            api_port: free_port(),
            health_port: free_port(),
            metrics_port: free_port(),
            pool: true,
            namespace_subnets: false,
            services: false,
            policies: false,
            sets: Vec::new(),
            cni_bridge: false,
            controller: true,
            deploy: None,
            vm_nodes: 0,
            vm_macvlan: 0,
        }
    }

    /// The command-line arguments of `sandbox/cluster up`.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--state-dir".into(),
            self.state_dir.display().to_string(),
            "--port".into(),
            self.api_port.to_string(),
            "--health-port".into(),
            self.health_port.to_string(),
            "--metrics-port".into(),
            self.metrics_port.to_string(),
            "--pool".into(),
            if self.pool { "on" } else { "off" }.into(),
            "--subnets".into(),
            if self.namespace_subnets {
                "namespace"
            } else {
                "default"
            }
            .into(),
            "--services".into(),
            if self.services { "on" } else { "off" }.into(),
            "--policies".into(),
            if self.policies { "on" } else { "off" }.into(),
        ];
        if let Some(b) = &self.bin_dir {
            a.push("--bin-dir".into());
            a.push(b.display().to_string());
        }
        for s in &self.sets {
            a.push("--set".into());
            a.push(s.clone());
        }
        if self.cni_bridge {
            a.push("--cni".into());
            a.push("bridge".into());
        }
        if !self.controller {
            a.push("--no-controller".into());
        }
        if let Some(d) = self.deploy {
            a.push("--deploy".into());
            a.push(d.into());
        }
        if self.vm_nodes > 0 {
            a.push("--vm-nodes".into());
            a.push(self.vm_nodes.to_string());
        }
        if self.vm_macvlan > 0 {
            a.push("--vm-macvlan".into());
            a.push(self.vm_macvlan.to_string());
        }
        a
    }
}

/// One node of the cluster.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// `node-<i>`.
    pub name: String,
    /// Its host network namespace (`kuryr-node-<i>`).
    pub netns: String,
    /// Its Open vSwitch run dir (for `OVS_RUNDIR=… ovs-vsctl`).
    pub ovs_rundir: String,
}

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    /// `--state-dir`.
    pub state_dir: PathBuf,
    /// The cluster's kubeconfig.
    pub kubeconfig: PathBuf,
    /// The cluster's kuryr.conf.
    pub conf: PathBuf,
    /// Binaries used.
    pub bin_dir: PathBuf,
    /// The nodes.
    pub nodes: Vec<NodeInfo>,
    /// Controller `/metrics` URL.
    pub metrics_url: String,
    /// Controller health base URL.
    pub health_url: String,
    /// The Neutron tag on everything the cluster's controller creates.
    pub tag: String,
    /// A kuryr-daemon binary was there (daemons started).
    pub has_daemon: bool,
    /// `cluster.env` and `topology.env` values.
    pub env: BTreeMap<String, String>,
    down_on_drop: bool,
}

/// Runs a command, returning its combined output; fails with it when it exits non-zero.
pub fn run(what: &str, cmd: &mut Command) -> Result<String> {
    let out = cmd.output().map_err(|source| Error::Spawn {
        what: what.to_string(),
        source,
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(Error::Command {
            what: what.to_string(),
            status: out.status.to_string(),
            output: text,
        })
    }
}

/// Parses shell `KEY=value` / `KEY='value'` / `KEY="value"` lines (comments ignored).
pub fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .or_else(|| v.strip_prefix('"').and_then(|v| v.strip_suffix('"')))
                .unwrap_or(v);
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The sandbox cloud's `topology.env`.
pub fn topology() -> Result<BTreeMap<String, String>> {
    let home = std::env::var("KURYR_SANDBOX_HOME").unwrap_or_else(|_| "/var/lib/kuryr-sandbox".into());
    Ok(parse_env(&read(&Path::new(&home).join("topology.env"))?))
}

impl Cluster {
    /// `sandbox/cluster up` with `opts`; the cluster is stopped (`down`) when dropped.
    pub fn up(opts: &ClusterOptions) -> Result<Cluster> {
        let script = repo_root().join("sandbox/cluster");
        info!(state_dir = %opts.state_dir.display(), "sandbox/cluster up");
        let out = run(
            "sandbox/cluster up",
            Command::new(&script).arg("up").args(opts.args()),
        );
        match out {
            Ok(text) => {
                info!(output = %text, "cluster up");
                let mut c = Cluster::attach(&opts.state_dir)?;
                c.down_on_drop = true;
                Ok(c)
            }
            Err(e) => {
                // Leave nothing behind of a half-started cluster.
                let _ = run(
                    "sandbox/cluster down",
                    Command::new(&script)
                        .args(["down", "--state-dir"])
                        .arg(&opts.state_dir)
                        .env("KEEP_STATE", "1"),
                );
                Err(e)
            }
        }
    }

    /// A cluster already running in `state_dir` (not stopped when dropped).
    pub fn attach(state_dir: &Path) -> Result<Cluster> {
        let mut env = topology()?;
        env.extend(parse_env(&read(&state_dir.join("cluster.env"))?));
        let get = |k: &str| env.get(k).cloned().unwrap_or_default();
        let nodes = get("CLUSTER_NODE_LIST")
            .split_whitespace()
            .map(|n| {
                let i = n.trim_start_matches("node-");
                NodeInfo {
                    name: n.to_string(),
                    netns: env
                        .get(&format!("NODE_{i}_NETNS"))
                        .cloned()
                        .unwrap_or_else(|| format!("kuryr-{n}")),
                    ovs_rundir: env
                        .get(&format!("NODE_{i}_OVS_RUNDIR"))
                        .cloned()
                        .unwrap_or_default(),
                }
            })
            .collect();
        Ok(Cluster {
            state_dir: state_dir.to_path_buf(),
            kubeconfig: state_dir.join("kubeconfig"),
            conf: state_dir.join("kuryr.conf"),
            bin_dir: PathBuf::from(get("BIN_DIR")),
            nodes,
            metrics_url: format!("http://127.0.0.1:{}/metrics", get("METRICS_PORT")),
            health_url: format!("http://127.0.0.1:{}", get("HEALTH_PORT")),
            tag: get("TAG"),
            has_daemon: get("HAVE_DAEMON") == "1",
            env,
            down_on_drop: false,
        })
    }

    /// A kube client of the cluster's API server.
    pub async fn client(&self) -> Result<kube::Client> {
        crate::init_crypto();
        let err = |source: Box<dyn std::error::Error + Send + Sync>| Error::Kubeconfig {
            path: self.kubeconfig.clone(),
            source,
        };
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig).map_err(|e| err(Box::new(e)))?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| err(Box::new(e)))?;
        kube::Client::try_from(cfg).map_err(|e| err(Box::new(e)))
    }

    /// The VM nodes' names (`sandbox/cluster --vm-nodes`), as they register.
    pub fn vm_nodes(&self) -> Vec<String> {
        self.env
            .get("VM_NODE_LIST")
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// The log file of a component (`apiserver`, `controller`, `node-1`, `daemon-1`, …).
    pub fn log(&self, component: &str) -> PathBuf {
        self.state_dir.join("logs").join(format!("{component}.log"))
    }

    /// The pid of a running component, from its pid file.
    pub fn pid(&self, component: &str) -> Option<u32> {
        let text =
            std::fs::read_to_string(self.state_dir.join("run").join(format!("{component}.pid"))).ok()?;
        let pid: u32 = text.split_whitespace().next()?.parse().ok()?;
        Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
    }

    /// The node's sandbox state dir (its sandbox records are in `sandboxes/` there).
    pub fn node_state_dir(&self, node: &str) -> PathBuf {
        self.state_dir.join("nodes").join(node).join("state")
    }

    /// The CNI API socket of `node`'s kuryr-daemon (its `/run/kuryr`: `sandbox/cluster`'s
    /// `node_run_kuryr`).
    pub fn daemon_socket(&self, node: &str) -> PathBuf {
        self.state_dir
            .join("nodes")
            .join(node)
            .join("run-kuryr")
            .join("cni.sock")
    }

    /// `sandbox/cluster restart COMPONENT [--kill]`: stops it (SIGKILL with `kill`) and starts
    /// it again, waiting until it is ready.
    pub fn restart(&self, component: &str, kill: bool) -> Result<String> {
        let mut cmd = Command::new(repo_root().join("sandbox/cluster"));
        cmd.args(["restart", component, "--state-dir"])
            .arg(&self.state_dir);
        if kill {
            cmd.arg("--kill");
        }
        run(&format!("sandbox/cluster restart {component}"), &mut cmd)
    }

    /// The last `n` lines of every log, for a failure message.
    pub fn log_tails(&self, n: usize) -> String {
        let mut out = String::new();
        let Ok(dir) = std::fs::read_dir(self.state_dir.join("logs")) else {
            return out;
        };
        let mut files: Vec<_> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!("----- {} (last {n} lines)\n", f.display()));
            for l in &lines[lines.len().saturating_sub(n)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// Names of the OVS interfaces on `node`'s switch plugged for Neutron port `port_id`
    /// (`external_ids:iface-id`).
    pub fn ovs_interfaces(&self, node: &NodeInfo, port_id: &str) -> Result<Vec<String>> {
        let out = run(
            "ovs-vsctl find Interface",
            Command::new("ovs-vsctl")
                .env("OVS_RUNDIR", &node.ovs_rundir)
                .args(["--bare", "--columns=name", "find", "Interface"])
                .arg(format!("external_ids:iface-id={port_id}")),
        )?;
        Ok(out.split_whitespace().map(str::to_string).collect())
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// `sandbox/cluster down`: deletes the pods, stops everything, removes tagged leftovers.
    pub fn down(&mut self) -> Result<String> {
        self.down_on_drop = false;
        run(
            "sandbox/cluster down",
            Command::new(repo_root().join("sandbox/cluster"))
                .args(["down", "--state-dir"])
                .arg(&self.state_dir),
        )
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.down_on_drop {
            if let Err(e) = self.down() {
                warn!(error = %e, "sandbox/cluster down failed");
                eprintln!("sandbox/cluster down failed: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_env_reads_quoted_and_plain_values() {
        let env = parse_env("# c\nA=1\nB='x y'\nC=\"q\"\nNODES=\"node-1 node-2\"\nbad line\n");
        assert_eq!(env["A"], "1");
        assert_eq!(env["B"], "x y");
        assert_eq!(env["C"], "q");
        assert_eq!(env["NODES"], "node-1 node-2");
        assert_eq!(env.len(), 4);
    }

    #[test]
    fn options_render_the_script_arguments() {
        let mut o = ClusterOptions::for_test(Path::new("/tmp/x"));
        o.pool = false;
        o.sets.push("vif_pool.ports_pool_min=3".into());
        let a = o.args().join(" ");
        assert!(a.contains("--state-dir /tmp/x"), "{a}");
        assert!(a.contains("--pool off"), "{a}");
        assert!(a.contains("--set vif_pool.ports_pool_min=3"), "{a}");
        assert!(a.contains("--bin-dir"), "{a}");
    }
}
