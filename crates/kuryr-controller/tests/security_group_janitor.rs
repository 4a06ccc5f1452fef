//! The security group janitor against the REAL sandbox Neutron: of this test's tagged groups,
//! the one a KuryrNetworkPolicy records and the one named like a policy that exists stay; an
//! orphan is deleted on the second pass (never the first); an orphan a port still carries is
//! refused by Neutron and kept until the port lets it go, then deleted. Everything tagged with
//! the test's tag is deleted at the end, also on failure. Fails (never skips) when the sandbox
//! is down.

mod common;

use std::sync::Arc;

use common::openstack::*;
use kuryr_controller::handlers::kuryrnetworkpolicy::janitor::Janitor;
use kuryr_openstack::{Neutron, OpenStackNeutron, PortCreate, SecurityGroupCreate, SecurityGroupFilter};
use kuryr_types::{KuryrNetworkPolicy, KuryrNetworkPolicySpec, KuryrNetworkPolicyStatus};

fn knp(ns: &str, name: &str, group: Option<&str>) -> KuryrNetworkPolicy {
    let mut k = KuryrNetworkPolicy::new(
        name,
        KuryrNetworkPolicySpec {
            egress_sg_rules: vec![],
            ingress_sg_rules: vec![],
            pod_selector: Default::default(),
            policy_types: vec!["Ingress".into()],
        },
    );
    k.metadata.namespace = Some(ns.into());
    k.status = Some(KuryrNetworkPolicyStatus {
        security_group_id: group.map(Into::into),
        ..Default::default()
    });
    k
}

async fn cleanup(n: &OpenStackNeutron, tag: &str) {
    cleanup_ports(n, tag).await;
    let groups = n
        .list_security_groups(&SecurityGroupFilter {
            tags: vec![tag.to_string()],
            ..Default::default()
        })
        .await
        .unwrap_or_default();
    for g in groups {
        let _ = n.delete_security_group(&g.id).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_policy_groups_are_deleted_on_the_second_pass_once_no_port_has_them() {
    // A crash of a sandbox daemon during this test fails it (never flakiness).
    let _crashes = sandbox_guard::CrashGuard::new();
    let topo = Topology::load();
    let tag = unique_tag("sgjan");
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write_conf(dir.path(), &topo, &tag, "");
    let config = load_config(&files);
    let (n, _) = neutron(&config).await;
    let n = Arc::new(n);
    let project = topo.get("KURYR_SANDBOX_PROJECT_ID").to_string();
    let body = async {
        let mut ids = std::collections::BTreeMap::new();
        for name in ["sg/jan-kept", "sg/jan-named", "sg/jan-gone", "sg/jan-busy"] {
            let g = n
                .create_security_group(&SecurityGroupCreate {
                    name: name.into(),
                    description: "kuryr-rs janitor test".into(),
                    project_id: Some(project.clone()),
                    tags: vec![tag.clone()],
                })
                .await
                .expect("create group");
            ids.insert(name, g.id);
        }
        let port = n
            .create_ports_bulk(&[PortCreate {
                network_id: topo.get("POD_NETWORK_ID").into(),
                project_id: Some(project.clone()),
                security_groups: Some(vec![ids["sg/jan-busy"].clone()]),
                name: Some("sg-janitor-test".into()),
                tags: vec![tag.clone()],
                ..Default::default()
            }])
            .await
            .expect("port")
            .remove(0);
        // "jan/kept" records its group; "jan/named" has none recorded yet (made, not recorded).
        let knps = [
            knp("jan", "kept", Some(&ids["sg/jan-kept"])),
            knp("jan", "named", None),
        ];
        let settings = kuryr_controller::pool::PoolSettings::from_config(&config).expect("pool settings");
        let pool = kuryr_controller::pool::direct::Direct::new(settings, n.clone());
        let j = Janitor::new(n.clone(), pool, vec![tag.clone()], Some(project.clone()));
        assert!(j.sweep(&knps).await.is_empty(), "the first sight only marks");
        assert_eq!(
            j.sweep(&knps).await,
            [ids["sg/jan-gone"].clone()],
            "the second deletes the orphan no port has"
        );
        let left: Vec<String> = n
            .list_security_groups(&SecurityGroupFilter {
                tags: vec![tag.clone()],
                ..Default::default()
            })
            .await
            .expect("list")
            .into_iter()
            .map(|g| g.name)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(left, ["sg/jan-busy", "sg/jan-kept", "sg/jan-named"]);
        n.delete_port(&port.id).await.expect("delete port");
        assert_eq!(
            j.sweep(&knps).await,
            [ids["sg/jan-busy"].clone()],
            "deleted once no port carries it"
        );
    };
    guarded(body, cleanup(&n, &tag)).await;
}
