//! HTTPS with the generated CA and bearer-token authentication, through kube-rs.

mod common;

use common::{client_for, env_with, status};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api,
    api::ListParams,
    config::{KubeConfigOptions, Kubeconfig},
};

#[tokio::test]
async fn https_with_token() -> anyhow::Result<()> {
    let e = env_with(|c| {
        c.tls = true;
        c.token = Some("s3cret".into());
    })
    .await?;
    assert!(e.server.url.starts_with("https://"));
    let ns: Api<Namespace> = Api::all(e.client.clone());
    assert_eq!(ns.list(&ListParams::default()).await?.items.len(), 4);

    // Same CA, no token → 401 Status.
    let kc = Kubeconfig::read_from(&e.server.kubeconfig)?;
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?;
    cfg.auth_info.token = None;
    let anon: Api<Namespace> = Api::all(kube::Client::try_from(cfg)?);
    let s = status(anon.list(&ListParams::default()).await.expect_err("unauthorized"));
    assert_eq!((s.code, s.reason.as_str()), (401, "Unauthorized"));
    // A fresh client from the kubeconfig works again.
    let again: Api<Namespace> = Api::all(client_for(&e.server.kubeconfig).await?);
    assert!(again.get_opt("default").await?.is_some());
    e.server.shutdown().await;
    Ok(())
}
