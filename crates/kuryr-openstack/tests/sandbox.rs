//! Integration tests against the REAL sandbox cloud (Keystone + Neutron ML2/OVN started by
//! `sandbox/up`). They fail — never skip — when the sandbox is not up. Each test tags what it
//! creates with a unique tag and deletes everything carrying it at the end, also after a
//! failure. Figures are printed: run with `--nocapture` to see them.

use anyhow::{Context, anyhow, ensure};
use futures::FutureExt;
use kuryr_config::CloudAuth;
use kuryr_openstack::{
    ConnectOptions, CountingObserver, Error, NetworkCreate, Neutron, OpenStackNeutron, PortCreate,
    PortFilter, PortUpdate, ResourceFilter, SecurityGroupCreate, SecurityGroupFilter,
    SecurityGroupRuleCreate, SecurityGroupRuleFilter, SubPort, SubnetCreate, TagMode, TrunkCreate, ops,
};
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

const HINT: &str = "the sandbox cloud is not up: run `sandbox/up` (and check `sandbox/status`)";

/// `topology.env` of the running sandbox: `$KURYR_SANDBOX_TOPOLOGY`, else
/// `/var/lib/kuryr-sandbox/topology.env`, else `$HOME/topology.env`.
fn topology() -> HashMap<String, String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("KURYR_SANDBOX_TOPOLOGY") {
        candidates.push(p.into());
    }
    candidates.push("/var/lib/kuryr-sandbox/topology.env".into());
    if let Some(h) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(h).join("topology.env"));
    }
    let Some(text) = candidates.iter().find_map(|p| std::fs::read_to_string(p).ok()) else {
        panic!("{HINT} (no topology.env in {candidates:?})");
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

fn get<'a>(t: &'a HashMap<String, String>, k: &str) -> &'a str {
    t.get(k)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("{HINT} (topology.env lacks {k})"))
}

fn unique_tag(test: &str) -> String {
    format!("kuryr-rs-test-{test}-{}", uuid::Uuid::new_v4().simple())
}

async fn connect_clouds_yaml(t: &HashMap<String, String>, obs: Arc<CountingObserver>) -> OpenStackNeutron {
    let auth = CloudAuth::CloudsYaml {
        cloud: get(t, "OS_CLOUD").to_string(),
        region_name: None,
    };
    let opts = ConnectOptions {
        clouds_file: Some(get(t, "OS_CLIENT_CONFIG_FILE").into()),
        ..Default::default()
    };
    let start = Instant::now();
    let client = OpenStackNeutron::connect(&auth, &opts, obs)
        .await
        .unwrap_or_else(|e| panic!("{HINT}: {e} ({:?})", std::error::Error::source(&e)));
    println!(
        "connect (clouds.yaml, auth + discovery + extensions): {} ms",
        start.elapsed().as_millis()
    );
    client
}

/// Runs `body`, then deletes every port, subnet and network tagged `tag` whatever happened.
async fn with_cleanup<F>(client: &OpenStackNeutron, tag: &str, body: F)
where
    F: Future<Output = anyhow::Result<()>>,
{
    let outcome = AssertUnwindSafe(body).catch_unwind().await;
    let leftovers = cleanup(client, tag).await;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e:#}"),
        Err(p) => std::panic::resume_unwind(p),
    }
    let leftovers = leftovers.expect("cleanup listing");
    assert_eq!(
        leftovers, 0,
        "resources tagged {tag} were left behind and had to be cleaned up"
    );
}

/// Deletes everything tagged `tag`; returns how many resources it found.
async fn cleanup(client: &OpenStackNeutron, tag: &str) -> anyhow::Result<usize> {
    let mut found = 0;
    // Trunks first: a trunk's parent port cannot be deleted.
    let trunks = client.list_trunks(&ResourceFilter::tagged([tag])).await?;
    found += trunks.len();
    for t in trunks {
        client.delete_trunk(&t.id).await?;
    }
    let ports = client.list_ports(&PortFilter::tagged([tag])).await?;
    found += ports.len();
    for p in ports {
        client.delete_port(&p.id).await?;
    }
    let subnets = client.list_subnets(&ResourceFilter::tagged([tag])).await?;
    found += subnets.len();
    for s in subnets {
        client.delete_subnet(&s.id).await?;
    }
    let nets = client.list_networks(&ResourceFilter::tagged([tag])).await?;
    found += nets.len();
    for n in nets {
        client.delete_network(&n.id).await?;
    }
    let sgs = client
        .list_security_groups(&SecurityGroupFilter {
            tags: vec![tag.to_string()],
            ..Default::default()
        })
        .await?;
    found += sgs.len();
    for g in sgs {
        client.delete_security_group(&g.id).await?;
    }
    Ok(found)
}

#[tokio::test]
async fn bulk_ports_lifecycle_with_clouds_yaml() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    let has_ext = client
        .known_extensions()
        .iter()
        .any(|a| a == "tag-ports-during-bulk-creation");
    println!(
        "extension tag-ports-during-bulk-creation present: {has_ext}; tag mode: {:?}",
        client.tag_mode()
    );
    let tag = unique_tag("bulk");
    let body = async {
        let net = get(&t, "POD_NETWORK_ID");
        let subnet = get(&t, "POD_SUBNET_ID");
        let sg = get(&t, "POD_SG_ID");
        let host = get(&t, "LOCAL_CHASSIS");
        let reqs: Vec<PortCreate> = (0..10)
            .map(|_| PortCreate {
                network_id: net.into(),
                subnet_ids: vec![subnet.into()],
                security_groups: Some(vec![sg.into()]),
                device_owner: Some("compute:kuryr".into()),
                binding_host_id: Some(host.into()),
                tags: vec![tag.clone(), "kuryr-rs-test".into()],
                ..Default::default()
            })
            .collect();

        let start = Instant::now();
        let ports = client.create_ports_bulk(&reqs).await.context("bulk create")?;
        let bulk_ms = start.elapsed().as_millis();
        println!("bulk create of 10 ports (binding host {host}) in one request: {bulk_ms} ms");
        ensure!(ports.len() == 10, "created {} ports", ports.len());
        ensure!(obs.count(ops::PORT_BULK_CREATE, "ok") == 1, "one bulk request");
        // The sandbox enables the ML2 `tag_ports_during_bulk_creation` driver (as production clouds
        // do); Neutron 21 does not advertise its alias, so the client learns it from this create.
        println!("tag mode after the first bulk create: {:?}", client.tag_mode());
        ensure!(
            client.tag_mode() == TagMode::InCreateBody && obs.total(ops::PORT_SET_TAGS) == 0,
            "tags must ride in the create body (zero extra writes); saw {} tag PUTs",
            obs.total(ops::PORT_SET_TAGS)
        );
        let cidr_prefix = get(&t, "POD_SUBNET_CIDR").trim_end_matches(".0/24");
        for p in &ports {
            ensure!(p.tags.contains(&tag), "port {} lacks the tag: {:?}", p.id, p.tags);
            ensure!(p.binding_host_id == host, "binding host {:?}", p.binding_host_id);
            ensure!(
                p.security_groups == [sg.to_string()],
                "sgs {:?}",
                p.security_groups
            );
            ensure!(p.mac_address.len() == 17, "mac {:?}", p.mac_address);
            let ip = &p
                .fixed_ips
                .first()
                .ok_or_else(|| anyhow!("no fixed ip"))?
                .ip_address;
            ensure!(ip.starts_with(cidr_prefix), "ip {ip} outside {cidr_prefix}");
        }
        println!(
            "first port: status {} vif_type {} ip {}",
            ports[0].status, ports[0].binding_vif_type, ports[0].fixed_ips[0].ip_address
        );

        let lists_before = obs.total(ops::PORT_LIST);
        let by_tag = client.list_ports(&PortFilter::tagged([tag.as_str()])).await?;
        ensure!(by_tag.len() == 10, "by tag: {}", by_tag.len());

        let ids: Vec<String> = ports.iter().map(|p| p.id.clone()).collect();
        let filter = PortFilter {
            ids: ids.clone(),
            fields: vec!["id".into(), "status".into()],
            ..Default::default()
        };
        let start = Instant::now();
        let statuses = client.list_ports(&filter).await?;
        println!(
            "batched status list of 10 ids in one request: {} ms",
            start.elapsed().as_millis()
        );
        ensure!(statuses.len() == 10, "by ids: {}", statuses.len());
        ensure!(
            statuses
                .iter()
                .all(|p| !p.status.is_empty() && ids.contains(&p.id))
        );
        ensure!(
            obs.total(ops::PORT_LIST) == lists_before + 2,
            "each list is one request"
        );

        let start = Instant::now();
        for (i, p) in ports.iter().enumerate() {
            let name = format!("kuryr-rs-test/pod-{i}");
            let up = PortUpdate {
                name: Some(name.clone()),
                device_id: Some(format!("uid-{i}")),
                ..Default::default()
            };
            let updated = client.update_port(&p.id, &up).await?;
            ensure!(updated.name == name && updated.device_id == format!("uid-{i}"));
        }
        println!("10 port renames: {} ms", start.elapsed().as_millis());

        let start = Instant::now();
        for p in &ports {
            client.delete_port(&p.id).await?;
        }
        println!("10 port deletes: {} ms", start.elapsed().as_millis());
        // Deleting again is success (404 = Ok).
        client.delete_port(&ports[0].id).await?;
        let left = client.list_ports(&PortFilter::tagged([tag.as_str()])).await?;
        ensure!(left.is_empty(), "{} ports left", left.len());
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
    println!("observer: {:?}", obs.snapshot());
}

#[tokio::test]
async fn connects_with_kuryr_conf_keystone_options() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let conf = get(&t, "KURYR_CONF");
    let sources = kuryr_config::ConfigSources {
        config_files: vec![conf.into()],
        config_dirs: vec![],
    };
    let (config, _warnings) =
        kuryr_config::load(&sources).unwrap_or_else(|e| panic!("{HINT}: {conf}: {e:?}"));
    let auth = kuryr_config::resolve_cloud_auth(&config, &|_| None).expect("credentials in kuryr.conf");
    assert!(matches!(auth, CloudAuth::Neutron(_)), "{auth:?}");
    let start = Instant::now();
    let client = OpenStackNeutron::connect_unobserved(&auth, &ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{HINT}: {e} ({:?})", std::error::Error::source(&e)));
    println!(
        "connect ([neutron] keystone options): {} ms",
        start.elapsed().as_millis()
    );
    let net = client
        .get_network(get(&t, "POD_NETWORK_ID"))
        .await
        .expect("pod network");
    assert_eq!(net.mtu, get(&t, "POD_NETWORK_MTU").parse().ok());
    let subnet = client
        .get_subnet(get(&t, "POD_SUBNET_ID"))
        .await
        .expect("pod subnet");
    assert_eq!(subnet.cidr, get(&t, "POD_SUBNET_CIDR"));
    assert_eq!(subnet.gateway_ip.as_deref(), Some(get(&t, "POD_SUBNET_GATEWAY")));
    let subnets = client
        .list_subnets(&ResourceFilter {
            network_id: Some(net.id.clone()),
            ..Default::default()
        })
        .await
        .expect("list subnets");
    assert!(subnets.iter().any(|s| s.id == subnet.id));
}

#[tokio::test]
async fn errors_are_typed() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    let missing = uuid::Uuid::new_v4().to_string();

    let e = client.get_port(&missing).await.expect_err("missing port");
    println!("get missing port -> {e}");
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
    assert_eq!(e.neutron_kind(), "PortNotFound");
    assert!(!e.is_retryable());
    assert_eq!(obs.count(ops::PORT_GET, "not_found"), 1);

    let e = client
        .update_port(
            &missing,
            &PortUpdate {
                name: Some("x".into()),
                ..Default::default()
            },
        )
        .await
        .expect_err("update missing port");
    assert!(e.is_not_found(), "{e:?}");
    client
        .delete_port(&missing)
        .await
        .expect("deleting a missing port is success");

    let tag = unique_tag("errors");
    let req = [PortCreate {
        network_id: missing.clone(),
        tags: vec![tag.clone()],
        ..Default::default()
    }];
    let body = async {
        let e = client
            .create_ports_bulk(&req)
            .await
            .err()
            .ok_or_else(|| anyhow!("port on a missing network was created"))?;
        println!(
            "bulk create on a missing network -> {} [{}] {e}",
            e.metric_label(),
            e.neutron_kind()
        );
        ensure!(
            matches!(e, Error::NotFound { .. } | Error::BadRequest { .. }),
            "{e:?}"
        );
        let e = client
            .create_ports_bulk(&[PortCreate {
                network_id: get(&t, "POD_NETWORK_ID").into(),
                subnet_ids: vec![missing.clone()],
                tags: vec![tag.clone()],
                ..Default::default()
            }])
            .await
            .err()
            .ok_or_else(|| anyhow!("port on a missing subnet was created"))?;
        println!(
            "bulk create on a missing subnet -> {} [{}] {e}",
            e.metric_label(),
            e.neutron_kind()
        );
        ensure!(!e.is_retryable());
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
}

#[tokio::test]
async fn namespace_network_lifecycle() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    let tag = unique_tag("ns");
    let body = async {
        let start = Instant::now();
        let net = client
            .create_network(&NetworkCreate {
                name: "ns/kuryr-rs-test-net".into(),
                description: Some(tag.clone()),
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .await
            .context("create network")?;
        ensure!(net.tags.contains(&tag), "network tags {:?}", net.tags);
        let subnet = client
            .create_subnet(&SubnetCreate {
                network_id: net.id.clone(),
                name: "ns/kuryr-rs-test-subnet".into(),
                subnetpool_id: Some(get(&t, "POD_SUBNETPOOL_ID").into()),
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .await
            .context("create subnet from pool")?;
        ensure!(
            !subnet.cidr.is_empty() && subnet.tags.contains(&tag),
            "{subnet:?}"
        );
        let router = get(&t, "ROUTER_ID");
        let rport = client
            .add_router_interface(router, &subnet.id)
            .await
            .context("add router interface")?;
        println!(
            "namespace network + pool subnet {} + router interface {rport}: {} ms",
            subnet.cidr,
            start.elapsed().as_millis()
        );
        let listed = client
            .list_networks(&ResourceFilter::tagged([tag.as_str()]))
            .await?;
        ensure!(listed.len() == 1 && listed[0].id == net.id);
        client
            .remove_router_interface(router, &subnet.id)
            .await
            .context("remove interface")?;
        client
            .remove_router_interface(router, &subnet.id)
            .await
            .context("remove again = ok")?;
        client.delete_subnet(&subnet.id).await?;
        client.delete_network(&net.id).await?;
        client
            .delete_network(&net.id)
            .await
            .context("delete again = ok")?;
        println!("network ops: {:?}", obs.snapshot().keys().collect::<Vec<_>>());
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
}

/// The SDK pitfall: after a 401 it logs in again and forgets the discovered `/v2.0` URLs, so
/// the request after the retried one 404s. The client must re-discover and carry on.
#[tokio::test]
async fn survives_token_revocation_and_relogin() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    use secrecy::ExposeSecret;
    let t = topology();
    let auth = CloudAuth::CloudsYaml {
        cloud: get(&t, "OS_CLOUD").to_string(),
        region_name: None,
    };
    let opts = ConnectOptions {
        clouds_file: Some(get(&t, "OS_CLIENT_CONFIG_FILE").into()),
        ..Default::default()
    };
    let cfg = kuryr_openstack::connect::cloud_config(&auth, &opts).expect("cloud config");
    let session = kuryr_openstack::connect::connect_session(&cfg, &opts)
        .await
        .unwrap_or_else(|e| panic!("{HINT}: {e}"));
    // Revoke the token before Neutron has seen (and cached) it.
    let token = session
        .get_auth_token()
        .expect("token")
        .expose_secret()
        .to_string();
    let auth_url = "http://127.0.0.1:5000/v3/auth/tokens";
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "DELETE",
            auth_url,
        ])
        .arg("-H")
        .arg(format!("X-Auth-Token: {token}"))
        .arg("-H")
        .arg(format!("X-Subject-Token: {token}"))
        .output()
        .expect("curl");
    let code = String::from_utf8_lossy(&out.stdout).to_string();
    println!("token revocation: HTTP {code}");
    assert_eq!(code, "204", "revoking the token");

    let obs = Arc::new(CountingObserver::default());
    let client = OpenStackNeutron::from_session(session, opts.request_timeout, obs.clone())
        .await
        .expect("first request after revocation (SDK re-login on 401)");
    for i in 0..3 {
        let net = client
            .get_network(get(&t, "POD_NETWORK_ID"))
            .await
            .unwrap_or_else(|e| panic!("request {i} after re-login: {e}"));
        assert_eq!(net.id, get(&t, "POD_NETWORK_ID"));
    }
    println!(
        "after revocation: rediscoveries = {}, observer = {:?}",
        client.rediscoveries(),
        obs.snapshot()
    );
}

/// Figure for the pool design: the same bulk create without `binding:host_id`.
#[tokio::test]
async fn bulk_create_without_binding_figure() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    let tag = unique_tag("unbound");
    let body = async {
        let reqs: Vec<PortCreate> = (0..10)
            .map(|_| PortCreate {
                network_id: get(&t, "POD_NETWORK_ID").into(),
                subnet_ids: vec![get(&t, "POD_SUBNET_ID").into()],
                security_groups: Some(vec![get(&t, "POD_SG_ID").into()]),
                device_owner: Some("compute:kuryr".into()),
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .collect();
        let start = Instant::now();
        let ports = client.create_ports_bulk(&reqs).await?;
        println!(
            "bulk create of 10 ports WITHOUT binding host: {} ms (incl. {} tag PUTs)",
            start.elapsed().as_millis(),
            obs.total(ops::PORT_SET_TAGS)
        );
        ensure!(ports.len() == 10 && ports.iter().all(|p| p.binding_vif_type == "unbound"));
        for p in &ports {
            client.delete_port(&p.id).await?;
        }
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
}

/// Long ID lists are split into requests of `MAX_IDS_PER_REQUEST` IDs (Neutron answered
/// `414 URI Too Long` to 400 IDs in one URL before the split existed).
#[tokio::test]
async fn large_id_batches() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    for n in [100usize, 200, 400, 800] {
        let ids: Vec<String> = (0..n).map(|_| uuid::Uuid::new_v4().to_string()).collect();
        let start = Instant::now();
        let r = client.list_ports(&PortFilter::ids(ids)).await;
        println!(
            "list by {n} ids: {} in {} ms ({} list requests so far)",
            match &r {
                Ok(v) => format!("ok ({} found)", v.len()),
                Err(e) => format!("ERROR {e}"),
            },
            start.elapsed().as_millis(),
            obs.total(ops::PORT_LIST)
        );
        r.unwrap_or_else(|e| panic!("{n} ids: {e}"));
    }
    let chunk = kuryr_openstack::client::MAX_IDS_PER_REQUEST as u64;
    assert_eq!(obs.total(ops::PORT_LIST), (100 + 200 + 400 + 800) / chunk);
}

/// The controller shares one client as `Arc<dyn Neutron>` between tasks; figure for pools
/// populating concurrently (three bulk creates of 10 at once).
#[tokio::test]
async fn concurrent_bulk_creates_through_dyn() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    let shared: Arc<dyn Neutron> = Arc::new(client.clone());
    let tag = unique_tag("concurrent");
    let body = async {
        let reqs: Vec<PortCreate> = (0..10)
            .map(|_| PortCreate {
                network_id: get(&t, "POD_NETWORK_ID").into(),
                subnet_ids: vec![get(&t, "POD_SUBNET_ID").into()],
                device_owner: Some("compute:kuryr".into()),
                binding_host_id: Some(get(&t, "LOCAL_CHASSIS").into()),
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .collect();
        let start = Instant::now();
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let n = shared.clone();
                let reqs = reqs.clone();
                tokio::spawn(async move { n.create_ports_bulk(&reqs).await })
            })
            .collect();
        let mut created = 0;
        for task in tasks {
            created += task.await??.len();
        }
        println!(
            "3 concurrent bulk creates of 10 bound ports: {} ms",
            start.elapsed().as_millis()
        );
        ensure!(created == 30 && obs.count(ops::PORT_BULK_CREATE, "ok") == 3);
        let listed = shared.list_ports(&PortFilter::tagged([tag.as_str()])).await?;
        ensure!(listed.len() == 30, "listed {}", listed.len());
        for p in listed {
            shared.delete_port(&p.id).await?;
        }
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
}

/// The Octavia client against the sandbox's Octavia (OVN provider): version discovery, a load
/// balancer with a listener, a pool and members set in ONE batch call, the status tree in one
/// request, a second batch that removes a member, adoption-style lookup by name and tag, and a
/// cascade delete; typed errors for a missing load balancer.
#[tokio::test]
async fn octavia_load_balancer_lifecycle_with_batch_members() {
    use kuryr_openstack::octavia::{LbCreate, LbFilter, ListenerCreate, MemberSpec, PoolCreate, status};
    use kuryr_openstack::{Octavia, OpenStackOctavia};
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let neutron = connect_clouds_yaml(&t, obs.clone()).await;
    let octavia = OpenStackOctavia::from_session(
        neutron.session().clone(),
        std::time::Duration::from_secs(30),
        obs.clone(),
    )
    .await
    .expect("Octavia version discovery");
    println!("Octavia API {}", octavia.version());
    assert!(octavia.version().tags(), "the sandbox's Octavia takes tags");
    let tag = unique_tag("octavia");
    let subnet = get(&t, "SERVICE_SUBNET_ID").to_string();
    let project = get(&t, "KURYR_SANDBOX_PROJECT_ID").to_string();
    let name = format!("kuryr-rs-test/{}", &tag[tag.len() - 8..]);
    let wait_active = |id: String| {
        let octavia = octavia.clone();
        async move {
            let start = Instant::now();
            loop {
                let lb = octavia.get_load_balancer(&id).await?;
                if lb.provisioning_status == status::ACTIVE {
                    return anyhow::Ok(start.elapsed());
                }
                ensure!(
                    lb.provisioning_status != status::ERROR,
                    "load balancer went to ERROR"
                );
                ensure!(
                    start.elapsed().as_secs() < 60,
                    "not ACTIVE after 60 s: {}",
                    lb.provisioning_status
                );
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    let body = async {
        let lb = octavia
            .create_load_balancer(&LbCreate {
                name: name.clone(),
                description: "kuryr-rs test".into(),
                project_id: project.clone(),
                vip_subnet_id: subnet.clone(),
                vip_address: None,
                provider: Some("ovn".into()),
                tags: vec![tag.clone()],
                listeners: Vec::new(),
            })
            .await?;
        ensure!(
            !lb.vip_port_id.is_empty(),
            "VIP port exists when the create answers"
        );
        println!(
            "load balancer ACTIVE after {:?}",
            wait_active(lb.id.clone()).await?
        );
        let listener = octavia
            .create_listener(&ListenerCreate {
                loadbalancer_id: lb.id.clone(),
                name: format!("{name}:TCP:80"),
                protocol: "TCP".into(),
                protocol_port: 80,
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .await?;
        wait_active(lb.id.clone()).await?;
        let pool = octavia
            .create_pool(&PoolCreate {
                listener_id: listener.clone(),
                name: format!("{name}:TCP:80"),
                protocol: "TCP".into(),
                lb_algorithm: "SOURCE_IP_PORT".into(),
                source_ip_persistence: false,
                tags: vec![tag.clone()],
            })
            .await?;
        wait_active(lb.id.clone()).await?;
        let members: Vec<MemberSpec> = (10..13)
            .map(|i| MemberSpec {
                address: format!("10.96.200.{i}"),
                protocol_port: 8080,
                name: format!("ns/pod-{i}:8080"),
                subnet_id: Some(subnet.clone()),
            })
            .collect();
        octavia.replace_members(&pool, &members).await?;
        println!(
            "3 members (one batch call) ACTIVE after {:?}",
            wait_active(lb.id.clone()).await?
        );
        let tree = octavia.status_tree(&lb.id).await?;
        ensure!(
            tree.listeners.len() == 1 && tree.listeners[0].id == listener,
            "tree: {tree:?}"
        );
        let got: Vec<(String, i32)> = tree.listeners[0].pools[0]
            .members
            .iter()
            .map(|m| (m.address.clone(), m.protocol_port))
            .collect();
        ensure!(got.len() == 3, "members in the tree: {got:?}");
        octavia.replace_members(&pool, &members[..1]).await?;
        wait_active(lb.id.clone()).await?;
        let tree = octavia.status_tree(&lb.id).await?;
        ensure!(
            tree.listeners[0].pools[0].members.len() == 1,
            "batch removed two members: {tree:?}"
        );
        let found = octavia
            .list_load_balancers(&LbFilter {
                name: Some(name.clone()),
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .await?;
        ensure!(
            found.len() == 1 && found[0].id == lb.id,
            "lookup by name and tag: {found:?}"
        );
        ensure!(
            obs.count(ops::MEMBER_BATCH_UPDATE, "ok") == 2,
            "two batch calls recorded"
        );
        let listeners = octavia.list_listeners(&lb.id).await?;
        ensure!(
            listeners.len() == 1 && listeners[0].protocol_port == 80,
            "{listeners:?}"
        );
        octavia.delete_load_balancer(&lb.id).await?;
        octavia.delete_load_balancer(&lb.id).await?;
        // Fully populated: the whole tree in ONE write.
        let full = octavia
            .create_load_balancer(&LbCreate {
                name: format!("{name}-full"),
                description: "kuryr-rs test".into(),
                project_id: project.clone(),
                vip_subnet_id: subnet.clone(),
                vip_address: None,
                provider: Some("ovn".into()),
                tags: vec![tag.clone()],
                listeners: vec![kuryr_openstack::octavia::FullListener {
                    listener: ListenerCreate {
                        name: format!("{name}-full:UDP:53"),
                        protocol: "UDP".into(),
                        protocol_port: 53,
                        tags: vec![tag.clone()],
                        ..Default::default()
                    },
                    pool: PoolCreate {
                        name: format!("{name}-full:UDP:53"),
                        protocol: "UDP".into(),
                        lb_algorithm: "SOURCE_IP_PORT".into(),
                        tags: vec![tag.clone()],
                        ..Default::default()
                    },
                    members: members[..2].to_vec(),
                }],
            })
            .await?;
        println!(
            "fully populated load balancer ACTIVE after {:?}",
            wait_active(full.id.clone()).await?
        );
        let tree = octavia.status_tree(&full.id).await?;
        ensure!(
            tree.listeners.len() == 1 && tree.listeners[0].pools.first().map(|p| p.members.len()) == Some(2),
            "fully populated tree: {tree:?}"
        );
        octavia.delete_load_balancer(&full.id).await?;
        let missing = octavia.status_tree("00000000-0000-0000-0000-000000000000").await;
        ensure!(
            matches!(missing, Err(Error::NotFound { .. })),
            "typed 404: {missing:?}"
        );
        anyhow::Ok(())
    };
    let outcome = AssertUnwindSafe(body).catch_unwind().await;
    // Cleanup whatever happened.
    if let Ok(left) = octavia
        .list_load_balancers(&LbFilter {
            tags: vec![tag.clone()],
            ..Default::default()
        })
        .await
    {
        for lb in left {
            if lb.provisioning_status != status::PENDING_DELETE {
                let _ = octavia.delete_load_balancer(&lb.id).await;
            }
        }
    }
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e:#}"),
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// Security groups as NetworkPolicy uses them: a new group admits nothing (Neutron's default
/// egress rules removed), many rules go in with one request per
/// `MAX_RULES_PER_REQUEST`, a duplicate rule and a group still on a port are typed Conflicts.
#[tokio::test]
async fn security_group_lifecycle_with_bulk_rules() {
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    let tag = unique_tag("sg");
    let body = async {
        let sg = client
            .create_security_group(&SecurityGroupCreate {
                name: "sg/kuryr-rs-test-policy".into(),
                description: "kuryr-rs sandbox test".into(),
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .await
            .context("create security group")?;
        ensure!(sg.tags.contains(&tag), "tags {:?}", sg.tags);
        let only = SecurityGroupRuleFilter {
            security_group_ids: vec![sg.id.clone()],
        };
        let rules = client.list_security_group_rules(&only).await?;
        ensure!(rules.is_empty(), "a new group must admit nothing, has {rules:?}");

        // 120 /32 rules: two bulk requests (100 + 20).
        let wanted: Vec<SecurityGroupRuleCreate> = (0..120u32)
            .map(|i| SecurityGroupRuleCreate {
                security_group_id: sg.id.clone(),
                direction: if i % 2 == 0 { "ingress" } else { "egress" }.into(),
                ethertype: "IPv4".into(),
                protocol: Some("tcp".into()),
                port_range_min: Some(80),
                port_range_max: Some(81),
                remote_ip_prefix: Some(format!("10.250.{}.{}/32", i / 200, i % 200)),
                description: Some("kuryr-rs test rule".into()),
            })
            .collect();
        let before = obs.count(ops::SG_RULE_BULK_CREATE, "ok");
        let start = Instant::now();
        let created = client
            .create_security_group_rules(&wanted)
            .await
            .context("bulk rules")?;
        let took = start.elapsed();
        let requests = obs.count(ops::SG_RULE_BULK_CREATE, "ok") - before;
        println!(
            "120 security-group rules in {requests} requests: {} ms",
            took.as_millis()
        );
        ensure!(
            created.len() == 120 && requests == 2,
            "created {} in {requests} requests",
            created.len()
        );
        ensure!(client.list_security_group_rules(&only).await?.len() == 120);

        let dup = client.create_security_group_rules(&wanted[..1]).await;
        ensure!(
            matches!(&dup, Err(Error::Conflict { kind, .. }) if kind == "SecurityGroupRuleExists"),
            "a duplicate rule must be a typed Conflict: {dup:?}"
        );

        // On a port, the group cannot go.
        let port = client
            .create_ports_bulk(&[PortCreate {
                network_id: get(&t, "POD_NETWORK_ID").into(),
                security_groups: Some(vec![sg.id.clone()]),
                tags: vec![tag.clone()],
                ..Default::default()
            }])
            .await
            .context("port with the group")?;
        let busy = client.delete_security_group(&sg.id).await;
        ensure!(
            matches!(&busy, Err(Error::Conflict { kind, .. }) if kind == "SecurityGroupInUse"),
            "deleting a group in use: {busy:?}"
        );
        for p in &port {
            client.delete_port(&p.id).await?;
        }
        client.delete_security_group_rule(&created[0].id).await?;
        client
            .delete_security_group_rule(&created[0].id)
            .await
            .context("delete again = ok")?;
        ensure!(client.list_security_group_rules(&only).await?.len() == 119);
        client.delete_security_group(&sg.id).await?;
        client
            .delete_security_group(&sg.id)
            .await
            .context("delete again = ok")?;
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
}

/// What OVN's northbound database says a port's groups are (ML2/OVN writes them into the
/// logical switch port's `external_ids`).
fn ovn_port_groups(t: &HashMap<String, String>, port_id: &str) -> anyhow::Result<Vec<String>> {
    let db = format!("--db=unix:{}/run/ovnnb_db.sock", get(t, "KURYR_SANDBOX_HOME"));
    let out = std::process::Command::new("ovn-nbctl")
        .args([
            &db,
            "get",
            "Logical_Switch_Port",
            port_id,
            "external_ids:\"neutron:security_group_ids\"",
        ])
        .output()
        .context("running ovn-nbctl")?;
    ensure!(
        out.status.success(),
        "ovn-nbctl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_matches('"')
        .split_whitespace()
        .map(String::from)
        .collect();
    v.sort();
    Ok(v)
}

#[tokio::test]
async fn a_group_deleted_while_ports_leave_it_keeps_ovn_in_step() {
    // ML2/OVN applies a port's group change to OVN after its commit; a group deleted in between
    // would leave the port's OVN ACLs stale for good. The client never lets the two overlap.
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let client = connect_clouds_yaml(&t, Arc::new(CountingObserver::default())).await;
    let tag = unique_tag("sgrace");
    let body = async {
        let base = get(&t, "POD_SG_ID").to_string();
        for round in 0..2 {
            let sg = client
                .create_security_group(&SecurityGroupCreate {
                    name: format!("sg/kuryr-rs-test-race-{round}"),
                    description: "kuryr-rs sandbox test".into(),
                    tags: vec![tag.clone()],
                    ..Default::default()
                })
                .await?;
            let reqs: Vec<PortCreate> = (0..10)
                .map(|_| PortCreate {
                    network_id: get(&t, "POD_NETWORK_ID").into(),
                    security_groups: Some(vec![base.clone(), sg.id.clone()]),
                    tags: vec![tag.clone()],
                    ..Default::default()
                })
                .collect();
            let ports = client.create_ports_bulk(&reqs).await?;
            let leave = PortUpdate {
                security_groups: Some(vec![base.clone()]),
                ..Default::default()
            };
            // The ports leave the group while the group is deleted as soon as Neutron lets it.
            let updates =
                futures::future::try_join_all(ports.iter().map(|p| client.update_port(&p.id, &leave)));
            let delete = async {
                let start = Instant::now();
                loop {
                    match client.delete_security_group(&sg.id).await {
                        Ok(()) => return Ok(()),
                        Err(Error::Conflict { .. }) if start.elapsed().as_secs() < 30 => {
                            tokio::task::yield_now().await;
                        }
                        Err(e) => return Err(anyhow!(e)),
                    }
                }
            };
            let (u, d) = tokio::join!(updates, delete);
            u.context("updates")?;
            d.context("delete")?;
            for p in &ports {
                let ovn = ovn_port_groups(&t, &p.id)?;
                ensure!(
                    ovn == vec![base.clone()],
                    "round {round}: OVN has groups {ovn:?} for port {} (Neutron: [{base}])",
                    p.id
                );
                client.delete_port(&p.id).await?;
            }
        }
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
}

/// Nested mode's Neutron side: a trunk on a node VM's port, subports added in ONE request with
/// VLAN IDs from `kuryr_core::nested::VlanIds`, what the parent port's `trunk_details` shows,
/// conflicts typed, removal in one request.
#[tokio::test]
async fn trunk_lifecycle_with_vlan_ids() {
    use kuryr_core::nested::{VlanIds, node_trunk, trunk_of};
    let _crashes = sandbox_guard::CrashGuard::new();
    let t = topology();
    let obs = Arc::new(CountingObserver::default());
    let client = connect_clouds_yaml(&t, obs.clone()).await;
    let tag = unique_tag("trunk");
    let body = async {
        let net = get(&t, "POD_NETWORK_ID").to_string();
        let port = |name: &str| PortCreate {
            network_id: net.clone(),
            name: Some(name.into()),
            tags: vec![tag.clone()],
            ..Default::default()
        };
        let parent = client
            .create_ports_bulk(&[port("kuryr-rs-test-vm")])
            .await
            .context("parent port")?
            .remove(0);
        let trunk = client
            .create_trunk(&TrunkCreate {
                port_id: parent.id.clone(),
                name: Some("kuryr-rs-test-trunk".into()),
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .await
            .context("create trunk")?;
        ensure!(
            trunk.tags.contains(&tag) && trunk.port_id == parent.id,
            "{trunk:?}"
        );

        // The node's trunk, found by the node's IP on the worker subnet.
        let node_ip = parent.fixed_ips[0].ip_address.clone();
        let workers = vec![parent.fixed_ips[0].subnet_id.clone()];
        let seen = node_trunk(&[client.get_port(&parent.id).await?], &node_ip, &workers)?;
        ensure!(seen.trunk_id == trunk.id && seen.subports.is_empty(), "{seen:?}");

        // Three subports in one request, VLAN IDs from the allocator.
        let mut ids = VlanIds::default();
        ids.observe(&seen);
        let vlans = ids.reserve(&trunk.id, 3)?;
        let subs = client
            .create_ports_bulk(&[
                port("kuryr-rs-test-sub-0"),
                port("kuryr-rs-test-sub-1"),
                port("kuryr-rs-test-sub-2"),
            ])
            .await
            .context("subport ports")?;
        let wanted: Vec<SubPort> = subs
            .iter()
            .zip(&vlans)
            .map(|(p, v)| SubPort::vlan(p.id.clone(), *v))
            .collect();
        let before = obs.count(ops::TRUNK_ADD_SUBPORTS, "ok");
        let after = client
            .add_subports(&trunk.id, &wanted)
            .await
            .context("add subports")?;
        ensure!(
            obs.count(ops::TRUNK_ADD_SUBPORTS, "ok") - before == 1,
            "one request"
        );
        ensure!(after.sub_ports.len() == 3, "{after:?}");
        ids.confirm(&trunk.id, &vlans);

        // The parent port shows them; a restart's view gives the same IDs in use.
        let shown = trunk_of(&client.get_port(&parent.id).await?)?.context("trunk_details")?;
        let mut shown_ids: Vec<u16> = shown.subports.iter().map(|s| s.segmentation_id).collect();
        shown_ids.sort_unstable();
        ensure!(
            shown_ids == vlans,
            "trunk_details shows {shown_ids:?}, added {vlans:?}"
        );
        let mut fresh = VlanIds::default();
        fresh.observe(&shown);
        ensure!(
            fresh.reserve(&trunk.id, 1)? == vec![4],
            "the next free ID after 1, 2, 3"
        );

        // A VLAN ID already on the trunk: a typed Conflict, nothing added.
        let extra = client
            .create_ports_bulk(&[port("kuryr-rs-test-sub-3")])
            .await?
            .remove(0);
        let dup = client
            .add_subports(&trunk.id, &[SubPort::vlan(extra.id.clone(), vlans[0])])
            .await;
        println!("duplicate VLAN ID: {dup:?}");
        ensure!(
            matches!(&dup, Err(Error::Conflict { kind, .. }) if kind == "DuplicateSubPort"),
            "duplicate VLAN ID: {dup:?}"
        );
        ensure!(client.get_trunk(&trunk.id).await?.sub_ports.len() == 3);
        // The parent port cannot be deleted while the trunk exists.
        let busy = client.delete_port(&parent.id).await;
        println!("deleting a trunk's parent: {busy:?}");
        ensure!(
            matches!(&busy, Err(Error::Conflict { kind, .. }) if kind == "PortInUseAsTrunkParent"),
            "deleting a trunk's parent: {busy:?}"
        );
        // A subport's port cannot be deleted either while it is on the trunk.
        let sub_busy = client.delete_port(&subs[2].id).await;
        println!("deleting a subport's port: {sub_busy:?}");
        ensure!(
            matches!(&sub_busy, Err(Error::Conflict { kind, .. }) if kind == "PortInUseAsSubPort"),
            "deleting a subport's port: {sub_busy:?}"
        );

        // All three out in one request; the trunk, then the ports, go.
        let gone: Vec<String> = subs.iter().map(|p| p.id.clone()).collect();
        let left = client
            .remove_subports(&trunk.id, &gone)
            .await
            .context("remove subports")?;
        ensure!(left.sub_ports.is_empty(), "{left:?}");
        ids.release(&trunk.id, &vlans);
        client.delete_trunk(&trunk.id).await?;
        client
            .delete_trunk(&trunk.id)
            .await
            .context("delete again = ok")?;
        for p in subs.iter().chain([&extra, &parent]) {
            client.delete_port(&p.id).await?;
        }
        Ok(())
    };
    with_cleanup(&client, &tag, body).await;
}
