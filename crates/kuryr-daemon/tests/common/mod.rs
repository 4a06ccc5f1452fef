//! Helpers of the sandbox integration tests: the sandbox topology, an in-process emulated API
//! server reachable from the node namespaces (a forwarder per node), real `kuryr-daemon`
//! processes started with `ip netns exec kuryr-node-N`, pod namespaces, the real `kuryr-cni`
//! plugin, hand-written KuryrPorts and real Neutron ports (deleted whatever happens).
//! These tests fail — never skip — when the sandbox is down.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod vm;

use std::{
    collections::HashMap,
    io::{Read, Write},
    net::{SocketAddr, TcpListener as StdTcpListener, TcpStream},
    os::unix::net::UnixStream,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::core::v1::Namespace, apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use kuryr_config::CloudAuth;
use kuryr_openstack::{ConnectOptions, Neutron, OpenStackNeutron, Port, PortCreate, PortFilter};
use kuryr_types::{KuryrPort, Vif, constants::KURYRPORT_LABEL};
use serde_json::{Value, json};

pub const HINT: &str = "the sandbox is not up: run `sandbox/up --nodes 2` (and check `sandbox/status`)";
pub const NS: &str = "kdt";
const DAEMON: &str = env!("CARGO_BIN_EXE_kuryr-daemon");

/// `topology.env` of the running sandbox.
pub struct Topo(HashMap<String, String>);

impl Topo {
    pub fn get(&self, k: &str) -> &str {
        self.0
            .get(k)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("{HINT} (topology.env lacks {k})"))
    }
    /// Node `i` (1-based): (name, netns, OVS rundir).
    pub fn node(&self, i: usize) -> (String, String, String) {
        (
            self.get(&format!("NODE_{i}_NAME")).to_owned(),
            self.get(&format!("NODE_{i}_NETNS")).to_owned(),
            self.get(&format!("NODE_{i}_OVS_RUNDIR")).to_owned(),
        )
    }
}

pub fn topology() -> Topo {
    let path = std::env::var("KURYR_SANDBOX_TOPOLOGY")
        .unwrap_or_else(|_| "/var/lib/kuryr-sandbox/topology.env".into());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{HINT} ({path}: {e})"));
    let t = Topo(
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim().to_owned(), v.trim().trim_matches('"').to_owned()))
            .collect(),
    );
    for i in 1..=2 {
        let (_, netns, rundir) = t.node(i);
        assert!(
            Path::new(&format!("/run/netns/{netns}")).exists(),
            "{HINT} (no netns {netns})"
        );
        assert!(
            Path::new(&format!("{rundir}/db.sock")).exists(),
            "{HINT} (no OVS of {netns})"
        );
    }
    t
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

pub fn unique(prefix: &str) -> String {
    format!("{prefix}{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Runs `f` on a thread inside `/run/netns/<ns>`.
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("netns thread")
}

/// A port free (right now) on 127.0.0.1 in `ns`, below the ephemeral range (a port-0 pick was
/// taken before the daemon bound it, once in CI).
pub fn free_port(ns: &str) -> u16 {
    in_netns(ns, sandbox_guard::free_port)
}

fn http_exchange(s: &mut impl ReadWrite, req: &str) -> Option<(u16, String)> {
    s.write_all(req.as_bytes()).ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// `GET path` on 127.0.0.1:port inside `ns`.
pub fn http_get(ns: &str, port: u16, path: &str) -> Option<(u16, String)> {
    let path = path.to_owned();
    in_netns(ns, move || {
        let mut s =
            TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], port)), Duration::from_secs(2))
                .ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        http_exchange(&mut s, &format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n"))
    })
}

/// Runs a command; returns its output.
pub fn run(cmd: &[&str]) -> Output {
    Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

/// Runs a command that must succeed; returns stdout.
pub fn run_ok(cmd: &[&str]) -> String {
    let o = run(cmd);
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `ip netns exec ns …`, must succeed.
pub fn netns_exec(ns: &str, cmd: &[&str]) -> String {
    let mut full = vec!["ip", "netns", "exec", ns];
    full.extend_from_slice(cmd);
    run_ok(&full)
}

/// `ovs-vsctl` against a node's OVS.
pub fn ovs_vsctl(rundir: &str, args: &[&str]) -> Output {
    Command::new("ovs-vsctl")
        .env("OVS_RUNDIR", rundir)
        .args(args)
        .output()
        .expect("ovs-vsctl")
}

/// The emulated API server plus what the node namespaces need to reach it.
pub struct Cluster {
    pub server: kube_sandbox_apiserver::RunningServer,
    pub client: Client,
    pub dir: tempfile::TempDir,
    /// Per node netns: a kubeconfig pointing at the forwarder inside that netns.
    pub node_kubeconfigs: HashMap<String, PathBuf>,
}

/// Accepts in `ns` on 127.0.0.1:<port> and forwards to `upstream` (in the test's namespace).
async fn forwarder(ns: &str, upstream: SocketAddr) -> u16 {
    let std_l = in_netns(ns, || {
        let l = StdTcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        l
    });
    let port = std_l.local_addr().unwrap().port();
    let l = tokio::net::TcpListener::from_std(std_l).unwrap();
    tokio::spawn(async move {
        while let Ok((mut down, _)) = l.accept().await {
            tokio::spawn(async move {
                if let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }
            });
        }
    });
    port
}

pub async fn cluster(topo: &Topo) -> Cluster {
    init_tracing();
    let dir = tempfile::tempdir().unwrap();
    let server = kube_sandbox_apiserver::start(kube_sandbox_apiserver::Config::local(
        dir.path().join("kubeconfig"),
    ))
    .await
    .expect("sandbox apiserver");
    let kc = Kubeconfig::read_from(&server.kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = Client::try_from(cfg).unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in kuryr_types::crds::all() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("create CRD");
    }
    let kps: Api<KuryrPort> = Api::all(client.clone());
    wait_for("KuryrPort CRD served", Duration::from_secs(10), async || {
        kps.list(&ListParams::default().limit(1))
            .await
            .is_ok()
            .then_some(())
    })
    .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let text = std::fs::read_to_string(&server.kubeconfig).unwrap();
    let mut node_kubeconfigs = HashMap::new();
    for i in 1..=2 {
        let (_, netns, _) = topo.node(i);
        let port = forwarder(&netns, server.addr).await;
        let path = dir.path().join(format!("kubeconfig-{netns}"));
        let replaced = text.replace(&server.url, &format!("http://127.0.0.1:{port}"));
        assert_ne!(replaced, text, "kubeconfig does not contain {}", server.url);
        std::fs::write(&path, replaced).unwrap();
        node_kubeconfigs.insert(netns, path);
    }
    Cluster {
        server,
        client,
        dir,
        node_kubeconfigs,
    }
}

pub async fn wait_for<T>(what: &str, timeout: Duration, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A running `kuryr-daemon` in a node's namespace.
pub struct DaemonProc {
    pub child: Option<Child>,
    pub node: String,
    pub netns: String,
    pub ovs_rundir: String,
    /// `unix:/…` address of the CNI API.
    pub address: String,
    pub sock: PathBuf,
    pub health_port: u16,
    pub metrics_port: u16,
    pub log: PathBuf,
    pub state_dir: PathBuf,
    pub conf: PathBuf,
    pub kubeconfig: PathBuf,
}

impl DaemonProc {
    /// Starts a daemon for node `i` with `state_dir`; `extra_conf` is appended to kuryr.conf.
    pub fn start(cluster: &Cluster, topo: &Topo, i: usize, state_dir: &Path, extra_conf: &str) -> Self {
        let (node, netns, ovs_rundir) = topo.node(i);
        let dir = cluster.dir.path().join(unique(&format!("daemon-{node}-")));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("kuryr.conf");
        std::fs::write(
            &conf,
            format!("[cni_daemon]\nvif_annotation_timeout = 30\n\n[neutron_defaults]\novs_bridge = br-int\n{extra_conf}\n"),
        )
        .unwrap();
        let sock = dir.join("cni.sock");
        let mut d = DaemonProc {
            child: None,
            node,
            health_port: free_port(&netns),
            metrics_port: free_port(&netns),
            netns: netns.clone(),
            ovs_rundir,
            address: format!("unix:{}", sock.display()),
            sock,
            log: dir.join("daemon.log"),
            state_dir: state_dir.to_owned(),
            conf,
            kubeconfig: cluster.node_kubeconfigs[&netns].clone(),
        };
        d.spawn();
        d
    }

    /// (Re)starts the process with the same settings.
    pub fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        // KURYR_DAEMON_BIN: another build of the daemon (e.g. release, for measurements).
        let bin = std::env::var("KURYR_DAEMON_BIN").unwrap_or_else(|_| DAEMON.to_owned());
        let child = Command::new("ip")
            .args(["netns", "exec", &self.netns, &bin])
            .arg("--config-file")
            .arg(&self.conf)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["--node-name", &self.node])
            .arg("--state-dir")
            .arg(&self.state_dir)
            .args(["--bind-address", &self.address])
            .args(["--health-bind", &format!("127.0.0.1:{}", self.health_port)])
            .args(["--metrics-bind", &format!("127.0.0.1:{}", self.metrics_port)])
            .env("OVS_RUNDIR", &self.ovs_rundir)
            .env(
                "RUST_LOG",
                std::env::var("KURYR_DAEMON_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn kuryr-daemon");
        self.child = Some(child);
    }

    /// Waits for `/ready` = 200.
    pub async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some((200, _)) = http_get(&self.netns, self.health_port, "/ready") {
                return;
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    panic!("kuryr-daemon exited with {st}: {}", self.log_text());
                }
            }
            assert!(Instant::now() < deadline, "daemon not ready: {}", self.log_text());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM, then wait.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn metrics(&self) -> String {
        http_get(&self.netns, self.metrics_port, "/metrics")
            .expect("metrics")
            .1
    }

    pub fn health(&self, path: &str) -> (u16, String) {
        http_get(&self.netns, self.health_port, path).expect("health")
    }

    /// A cheap handle for talking to the CNI API (usable from other threads).
    pub fn shim(&self) -> Shim {
        Shim {
            netns: self.netns.clone(),
            address: self.address.clone(),
            sock: self.sock.clone(),
        }
    }

    /// See [`Shim::raw`].
    pub fn raw(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        self.shim().raw(method, path, body)
    }
}

/// Talks to a daemon's CNI API: raw HTTP or the real plugin.
#[derive(Debug, Clone)]
pub struct Shim {
    pub netns: String,
    pub address: String,
    pub sock: PathBuf,
}

impl Shim {
    /// A raw HTTP request on the CNI API socket.
    pub fn raw(&self, method: &str, path: &str, body: &[u8]) -> (u16, String) {
        let mut s = UnixStream::connect(&self.sock).expect("connect daemon socket");
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        s.write_all(&req).unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf).into_owned();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (status, body)
    }

    /// Runs the real `kuryr-cni` plugin in the node namespace for this daemon.
    pub fn cni(&self, verb: &str, container: &str, netns: &str, pod: &str, uid: &str) -> (bool, Value) {
        self.cni_prev(verb, container, netns, pod, uid, None)
    }

    /// [`Shim::cni`] with a `prevResult` (CHECK needs one).
    pub fn cni_prev(
        &self,
        verb: &str,
        container: &str,
        netns: &str,
        pod: &str,
        uid: &str,
        prev: Option<&Value>,
    ) -> (bool, Value) {
        let mut conf = json!({"cniVersion": "1.0.0", "name": "kuryr", "type": "kuryr-cni",
            "daemon_address": self.address, "add_timeout": 60});
        if let Some(p) = prev {
            conf["prevResult"] = p.clone();
        }
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.netns, &kuryr_cni_bin().display().to_string()])
            .env("CNI_COMMAND", verb)
            .env("CNI_CONTAINERID", container)
            .env("CNI_NETNS", netns)
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", "/opt/cni/bin")
            .env(
                "CNI_ARGS",
                format!("IgnoreUnknown=1;K8S_POD_NAMESPACE={NS};K8S_POD_NAME={pod};K8S_POD_INFRA_CONTAINER_ID={container};K8S_POD_UID={uid}"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn kuryr-cni");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(conf.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.success(), v)
    }
}

impl Drop for DaemonProc {
    /// Kills the daemon and, when a test failed half-way, removes what its state files say is
    /// still wired (OVS ports and host veths live on in the shared sandbox otherwise).
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let Ok(dir) = std::fs::read_dir(&self.state_dir) else {
            return;
        };
        for entry in dir.flatten() {
            let Ok(a) = std::fs::read(entry.path()).map(|b| serde_json::from_slice::<Value>(&b)) else {
                continue;
            };
            let Ok(a) = a else { continue };
            for v in a["vifs"].as_array().into_iter().flatten() {
                if let Some(dev) = v["spec"]["host_dev"].as_str() {
                    let _ = ovs_vsctl(&self.ovs_rundir, &["--if-exists", "del-port", dev]);
                    let _ = run(&["ip", "netns", "exec", &self.netns, "ip", "link", "del", dev]);
                    eprintln!("cleaned up {dev} left by a failed test");
                }
            }
        }
    }
}

/// The `kuryr-cni` binary of this workspace (built on demand).
pub fn kuryr_cni_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap().to_owned();
    let bin = dir.join("kuryr-cni");
    if !bin.exists() {
        let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "-p", "kuryr-cni", "--bin", "kuryr-cni"])
            .status()
            .expect("cargo build kuryr-cni");
        assert!(st.success(), "building kuryr-cni failed");
    }
    bin
}

/// A pod network namespace (`ip netns add`), deleted on drop.
pub struct PodNs {
    pub name: String,
    pub path: String,
}

impl PodNs {
    pub fn new() -> Self {
        let name = unique("kdt-");
        run_ok(&["ip", "netns", "add", &name]);
        PodNs {
            path: format!("/run/netns/{name}"),
            name,
        }
    }
}

impl Drop for PodNs {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// Creates (or replaces) the KuryrPort of pod `name` with `vif` as `eth0`.
pub async fn put_kuryrport(client: &Client, name: &str, node: &str, pod_uid: &str, vif: &Vif) {
    let api: Api<KuryrPort> = Api::namespaced(client.clone(), NS);
    let kp = json!({
        "apiVersion": "openstack.org/v1", "kind": "KuryrPort",
        "metadata": {"name": name, "namespace": NS, "labels": {KURYRPORT_LABEL: node}},
        "spec": {"podUid": pod_uid, "podNodeName": node},
        "status": {"vifs": {"eth0": {"default": true, "vif": vif.to_primitive()}}},
    });
    let kp: KuryrPort = serde_json::from_value(kp).unwrap();
    let _ = api.delete(name, &Default::default()).await;
    api.create(&PostParams::default(), &kp)
        .await
        .expect("create KuryrPort");
}

/// Marks the VIF of pod `name` active (what the controller does once Neutron says ACTIVE).
pub async fn set_active(client: &Client, name: &str, vif: &Vif) {
    let api: Api<KuryrPort> = Api::namespaced(client.clone(), NS);
    let mut v = vif.clone();
    v.active = Some(true);
    let patch = json!({"status": {"vifs": {"eth0": {"default": true, "vif": v.to_primitive()}}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch KuryrPort");
}

/// Neutron access and what the tests create there.
pub struct Os {
    pub client: OpenStackNeutron,
    pub network: kuryr_openstack::Network,
    pub subnets: Vec<kuryr_openstack::Subnet>,
    pub tag: String,
    pub topo_sg: String,
}

pub async fn openstack(topo: &Topo) -> Arc<Os> {
    init_tracing();
    let auth = CloudAuth::CloudsYaml {
        cloud: topo.get("OS_CLOUD").to_owned(),
        region_name: None,
    };
    let opts = ConnectOptions {
        clouds_file: Some(topo.get("OS_CLIENT_CONFIG_FILE").into()),
        ..Default::default()
    };
    let client = tokio::time::timeout(
        Duration::from_secs(60),
        OpenStackNeutron::connect_unobserved(&auth, &opts),
    )
    .await
    .unwrap_or_else(|_| panic!("{HINT}: connecting to Neutron timed out"))
    .unwrap_or_else(|e| panic!("{HINT}: {e}"));
    let network = client
        .get_network(topo.get("POD_NETWORK_ID"))
        .await
        .expect("pod network");
    let subnets = vec![
        client
            .get_subnet(topo.get("POD_SUBNET_ID"))
            .await
            .expect("pod subnet"),
    ];
    Arc::new(Os {
        client,
        network,
        subnets,
        tag: unique("kuryr-daemon-test-"),
        topo_sg: topo.get("POD_SG_ID").to_owned(),
    })
}

impl Os {
    /// `n` ports bound to `host`, tagged for cleanup.
    pub async fn ports(&self, host: &str, n: usize) -> Vec<Port> {
        let reqs: Vec<PortCreate> = (0..n)
            .map(|_| PortCreate {
                network_id: self.network.id.clone(),
                subnet_ids: self.subnets.iter().map(|s| s.id.clone()).collect(),
                security_groups: Some(vec![self.topo_sg.clone()]),
                device_owner: Some("compute:kuryr".into()),
                binding_host_id: Some(host.into()),
                name: Some(self.tag.clone()),
                tags: vec![self.tag.clone()],
                ..Default::default()
            })
            .collect();
        // Small batches, retried: Neutron (one API worker here, shared with other tests) can
        // take over the client's 30 s on a large bulk request. Ports of a request that timed
        // out but went through carry the tag and are deleted by the cleanup.
        let mut out = Vec::new();
        for chunk in reqs.chunks(5) {
            let mut attempt = 0;
            loop {
                attempt += 1;
                match self.client.create_ports_bulk(chunk).await {
                    Ok(p) => {
                        out.extend(p);
                        break;
                    }
                    Err(e) if attempt < 3 => eprintln!("creating ports failed ({e}), retrying"),
                    Err(e) => panic!("creating ports: {e}"),
                }
            }
        }
        out
    }

    pub fn vif(&self, port: &Port) -> Vif {
        kuryr_types::from_neutron::vif_from_port(port, &self.network, &self.subnets, Some("br-int"))
            .expect("vif")
    }

    pub async fn wait_active(&self, id: &str, timeout: Duration) -> Port {
        wait_for(&format!("port {id} ACTIVE"), timeout, async || {
            self.client
                .get_port(id)
                .await
                .ok()
                .filter(|p| p.status == "ACTIVE")
        })
        .await
    }

    /// Deletes every port carrying the tag; returns how many.
    pub async fn cleanup(&self) -> usize {
        let ports = self
            .client
            .list_ports(&PortFilter::tagged([self.tag.as_str()]))
            .await
            .unwrap_or_default();
        for p in &ports {
            let _ = self.client.delete_port(&p.id).await;
        }
        ports.len()
    }
}

/// Runs `body`, then deletes the test's Neutron ports whatever happened.
pub async fn with_cleanup<F: std::future::Future<Output = ()>>(os: &Os, body: F) {
    use futures::FutureExt;
    let outcome = std::panic::AssertUnwindSafe(body).catch_unwind().await;
    let n = os.cleanup().await;
    eprintln!("deleted {n} Neutron port(s) tagged {}", os.tag);
    if let Err(p) = outcome {
        std::panic::resume_unwind(p);
    }
}

/// Serves one TCP connection on `0.0.0.0:port` inside `ns` (answers `reply`); returns the port.
pub fn tcp_server(ns: &str, reply: &'static str) -> u16 {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let l = StdTcpListener::bind("0.0.0.0:0").unwrap();
        tx.send(l.local_addr().unwrap().port()).unwrap();
        if let Ok((mut s, _)) = l.accept() {
            let _ = s.write_all(reply.as_bytes());
        }
    });
    rx.recv().unwrap()
}

/// Connects from `ns` to `ip:port` and reads everything.
pub fn tcp_fetch(ns: &str, ip: &str, port: u16) -> Result<String, String> {
    let addr: SocketAddr = format!("{ip}:{port}").parse().map_err(|e| format!("{e}"))?;
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(|e| e.to_string())?;
        let mut out = String::new();
        s.read_to_string(&mut out).map_err(|e| e.to_string())?;
        Ok(out)
    })
}

/// The first IPv4 address of `port`.
pub fn ip_of(port: &Port) -> String {
    port.fixed_ips[0].ip_address.clone()
}

/// An active `VIFOpenVSwitch` on the sandbox's pod network with a generated port ID and MAC.
pub fn synthetic_vif(topo: &Topo, i: usize) -> kuryr_types::Vif {
    use kuryr_types::vif::{FixedIp, Network, Subnet};
    let port_id = uuid::Uuid::new_v4().to_string();
    let mut vif = kuryr_types::Vif::new(kuryr_types::VifKind::OpenVSwitch, &port_id);
    let b = uuid::Uuid::new_v4();
    let b = b.as_bytes();
    vif.address = Some(format!("fa:16:3f:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2]));
    vif.active = Some(true);
    vif.vif_name = Some(kuryr_daemon::binding::spec::host_dev_name(&port_id));
    let mut subnet = Subnet::new(topo.get("POD_SUBNET_CIDR"));
    subnet.gateway = Some(topo.get("POD_SUBNET_GATEWAY").to_owned());
    subnet
        .ips
        .push(FixedIp::new(&format!("10.10.0.{}", 200 + i % 50)));
    let mut net = Network::new(topo.get("POD_NETWORK_ID"));
    net.mtu = topo.get("POD_NETWORK_MTU").parse().ok();
    net.bridge = Some("br-int".into());
    net.subnets.push(subnet);
    vif.network = Some(net);
    vif
}
