//! One step's world, every component in its own process: the model cloud, the emulated API
//! server, the controller and the hollow fleet, started in that order and stopped together.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::core::v1::{Namespace, Node},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde_json::json;

use crate::{
    Error,
    procs::{Bins, Component, free_port},
};

/// How a world is made.
#[derive(Debug, Clone)]
pub struct WorldSpec {
    /// Hollow nodes.
    pub nodes: usize,
    /// Where the binaries are.
    pub bins: Bins,
    /// The step's directory (logs, kubeconfig, fleet state).
    pub dir: PathBuf,
    /// The model's service times, as a fraction of the sandbox's.
    pub time_scale: f64,
    /// Services handled (the controller's `service`, `endpoints` and `kuryrloadbalancer`
    /// handlers on, load balancers in the model's Octavia).
    pub services: bool,
    /// A JSON file replacing parts of the model (`kuryr-modelcloud --model`), e.g. more
    /// Neutron API workers than the sandbox's one.
    pub model: Option<PathBuf>,
}

/// A running world.
pub struct World {
    /// The model cloud.
    pub cloud: Component,
    /// The API server.
    pub apiserver: Component,
    /// The controller (replaced on fail-over).
    pub controller: Component,
    /// The hollow fleet.
    pub fleet: Component,
    /// The model cloud's URL.
    pub cloud_url: String,
    /// The API server's URL.
    pub api_url: String,
    /// A client of the API server.
    pub client: Client,
    conf: PathBuf,
    kubeconfig: PathBuf,
    bins: Bins,
    logs: PathBuf,
    restarts: usize,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("cloud_url", &self.cloud_url)
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

/// The pods' network: room for 30 000 pods and more.
pub const POD_CIDR: &str = "10.128.0.0/14";
/// The Services' network: the emulated API server's ClusterIPs (its default 10.96.0.0/17) are
/// the load balancers' VIPs on it, as in the sandbox.
pub const SERVICE_CIDR: &str = "10.96.0.0/16";

async fn client_of(kubeconfig: &Path) -> Result<Client, Error> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(|e| Error::io(kubeconfig, e))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::io(kubeconfig, e))?;
    Client::try_from(cfg).map_err(Error::kube("a client of the API server"))
}

fn conf_text(auth_url: &str, subnet: &str, service_subnet: Option<&str>) -> String {
    let (handlers, service_subnet, octavia) = match service_subnet {
        // The sandbox's Octavia settings (its kuryr.conf): the ovn provider, L2 members.
        Some(s) => (
            "vif,kuryrport,service,endpoints,kuryrloadbalancer",
            format!("service_subnet = {s}\n"),
            "[octavia_defaults]\nlb_algorithm = SOURCE_IP_PORT\nmember_mode = L2\nenforce_sg_rules = False\n",
        ),
        None => ("vif,kuryrport", String::new(), ""),
    };
    // Upstream's defaults otherwise: `vif_pool_driver = noop` (a port per pod, created on demand,
    // concurrent creations coalesced into one bulk).
    format!(
        "[kubernetes]\nenabled_handlers = {handlers}\nendpoints_driver_octavia_provider = ovn\n\
         [neutron]\nauth_type = password\nauth_url = {auth_url}\nusername = kuryr\npassword = model\n\
         project_name = k8s\nuser_domain_name = Default\nproject_domain_name = Default\n\
         [neutron_defaults]\nproject = model-project\npod_subnet = {subnet}\npod_security_groups = sg-scale\n\
         cluster_tag = kuryr-cluster=scale\novs_bridge = br-int\n{service_subnet}{octavia}"
    )
}

impl World {
    /// Starts the four components and waits until every hollow node is Ready.
    pub async fn start(spec: &WorldSpec) -> Result<World, Error> {
        let logs = spec.dir.join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| Error::io(&logs, e))?;
        let mut cloud_args = vec![
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--network".into(),
            format!("pods={POD_CIDR}"),
            "--network".into(),
            format!("services={SERVICE_CIDR}"),
            "--time-scale".into(),
            spec.time_scale.to_string(),
        ];
        if let Some(m) = &spec.model {
            cloud_args.extend(["--model".into(), m.display().to_string()]);
        }
        let mut cloud = Component::start(
            "modelcloud",
            &spec.bins.get("kuryr-modelcloud")?,
            &cloud_args,
            &logs,
            true,
        )?;
        let lines = cloud
            .read_lines(Duration::from_secs(30), |l| {
                l.iter().any(|x| x.contains("name=services "))
            })
            .await?;
        let field = |prefix: &str, key: &str| {
            lines.iter().filter(|l| l.starts_with(prefix)).find_map(|l| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .map(String::from)
            })
        };
        let (Some(cloud_url), Some(subnet), Some(service_subnet)) = (
            field("modelcloud", "url="),
            field("network name=pods ", "subnet="),
            field("network name=services ", "subnet="),
        ) else {
            return Err(Error::Start {
                what: "modelcloud".into(),
                message: format!("unexpected first lines {lines:?}"),
            });
        };
        let port = free_port()?;
        let kubeconfig = spec.dir.join("kubeconfig");
        let apiserver = Component::start(
            "apiserver",
            &spec.bins.get("kube-sandbox")?,
            &[
                "apiserver".into(),
                "--listen".into(),
                format!("127.0.0.1:{port}"),
                "--kubeconfig".into(),
                kubeconfig.display().to_string(),
            ],
            &logs,
            false,
        )?;
        let api_url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut apiserver = apiserver;
        while crate::http::get_text(&format!("{api_url}/version"))
            .await
            .is_err()
            || !kubeconfig.is_file()
        {
            if apiserver.exited() {
                return Err(Error::Start {
                    what: "apiserver".into(),
                    message: format!("exited (see {}/apiserver.log)", logs.display()),
                });
            }
            if Instant::now() > deadline {
                return Err(Error::Start {
                    what: "apiserver".into(),
                    message: "not serving after 30 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let client = client_of(&kubeconfig).await?;
        install(&client).await?;
        let conf = spec.dir.join("kuryr.conf");
        let text = conf_text(
            &format!("{cloud_url}/identity/v3"),
            &subnet,
            spec.services.then_some(service_subnet.as_str()),
        );
        std::fs::write(&conf, text).map_err(|e| Error::io(&conf, e))?;
        let fleet = Component::start(
            "fleet",
            &spec.bins.get("kuryr-hollow")?,
            &[
                "--nodes".into(),
                spec.nodes.to_string(),
                "--config-file".into(),
                conf.display().to_string(),
                "--kubeconfig".into(),
                kubeconfig.display().to_string(),
                "--state-dir".into(),
                spec.dir.join("fleet").display().to_string(),
                "--model-url".into(),
                cloud_url.clone(),
                "--report-every".into(),
                "3600s".into(),
            ],
            &logs,
            false,
        )?;
        let mut w = World {
            controller: Component::start(
                "controller-0",
                &spec.bins.get("kuryr-controller")?,
                &controller_args(&conf, &kubeconfig),
                &logs,
                false,
            )?,
            cloud,
            apiserver,
            fleet,
            cloud_url,
            api_url,
            client,
            conf,
            kubeconfig,
            bins: spec.bins.clone(),
            logs,
            restarts: 0,
        };
        w.wait_nodes(spec.nodes).await?;
        Ok(w)
    }

    async fn wait_nodes(&mut self, n: usize) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(120 + n as u64 / 2);
        loop {
            let ready = nodes
                .list(&ListParams::default())
                .await
                .map_err(Error::kube("listing nodes"))?
                .items
                .iter()
                .filter(|n| {
                    n.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            if ready >= n {
                return Ok(());
            }
            if self.fleet.exited() {
                return Err(Error::Start {
                    what: "fleet".into(),
                    message: format!("exited (see {}/fleet.log)", self.logs.display()),
                });
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout(format!("{ready} of {n} hollow nodes Ready")));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The first component that has exited, if any (every one should run until stopped).
    pub fn exited(&mut self) -> Option<String> {
        for c in [
            &mut self.cloud,
            &mut self.apiserver,
            &mut self.controller,
            &mut self.fleet,
        ] {
            if c.exited() {
                return Some(format!(
                    "{} exited (see {}/{}.log)",
                    c.name,
                    self.logs.display(),
                    c.name
                ));
            }
        }
        None
    }

    /// Kills the controller (SIGKILL, a crash) and starts a new one; returns when it is started.
    pub async fn replace_controller(&mut self) -> Result<(), Error> {
        self.controller.kill().await;
        self.restarts += 1;
        self.controller = Component::start(
            &format!("controller-{}", self.restarts),
            &self.bins.get("kuryr-controller")?,
            &controller_args(&self.conf, &self.kubeconfig),
            &self.logs,
            false,
        )?;
        Ok(())
    }

    /// Stops everything (the fleet first, the cloud last).
    pub async fn stop(mut self) {
        self.fleet.stop().await;
        self.controller.stop().await;
        self.apiserver.stop().await;
        self.cloud.stop().await;
    }
}

fn controller_args(conf: &Path, kubeconfig: &Path) -> Vec<String> {
    vec![
        "--config-file".into(),
        conf.display().to_string(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        // Ports the kernel picks (nothing here reads them; a port picked in advance was once
        // taken meanwhile by a hollow node's kubelet endpoint).
        "--health-bind".into(),
        "127.0.0.1:0".into(),
        "--metrics-bind".into(),
        "127.0.0.1:0".into(),
    ]
}

/// kuryr-rs' CRDs, served.
async fn install(client: &Client) -> Result<(), Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for (_, crd) in kuryr_types::crds::all() {
        crds.create(&PostParams::default(), &crd)
            .await
            .map_err(Error::kube("creating kuryr-rs' CRDs"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Api::<kuryr_types::KuryrPort>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            return Err(Error::Timeout(
                "KuryrPorts not served 10 s after their CRD".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Creates namespace `name`.
pub async fn namespace(client: &Client, name: &str) -> Result<(), Error> {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).map_err(|e| Error::Start {
            what: format!("namespace {name}"),
            message: e.to_string(),
        })?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(Error::kube(format!("creating namespace {name}")))?;
    Ok(())
}
