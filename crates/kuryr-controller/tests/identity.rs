//! The cluster identity on the emulated API server: without `cluster_tag`/`resource_tags` the
//! controller derives `kuryr-cluster=<UID of kube-system>` and writes it into its configuration
//! (every tag-based decision then uses it); configured tags win.

mod common;

use common::*;
use kuryr_runtime::identity::{self, Identity};

fn conf(text: &str) -> kuryr_config::Config {
    kuryr_config::from_strs(&[("kuryr.conf", text)], kuryr_config::Role::Any, &|_| None)
        .expect("config")
        .0
}

#[tokio::test]
async fn without_tags_the_identity_is_derived_from_kube_system() {
    let env = sandbox().await;
    let uid = kube_system_uid(&env.client).await;
    let mut config = conf("");
    let id = identity::resolve(&env.client, &mut config)
        .await
        .expect("identity");
    let tag = format!("kuryr-cluster={uid}");
    assert_eq!(id, Identity::Derived { tag: tag.clone() });
    assert_eq!(config.neutron_defaults.cluster_tag.as_deref(), Some(tag.as_str()));
    // The pools, networks and groups all read it from there.
    let settings = kuryr_controller::pool::PoolSettings::from_config(&config).expect("settings");
    assert_eq!(settings.tags.tags(), vec![tag.clone()]);
    // Stable: the same cluster gives the same identity.
    let mut again = conf("");
    assert_eq!(
        identity::resolve(&env.client, &mut again)
            .await
            .expect("identity"),
        id
    );
    // Configured tags win and nothing is read.
    let mut configured = conf("[neutron_defaults]\ncluster_tag = mine\n");
    assert_eq!(
        identity::resolve(&env.client, &mut configured)
            .await
            .expect("identity"),
        Identity::Configured(vec!["mine".into()])
    );
}
