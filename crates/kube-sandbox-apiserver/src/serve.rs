//! The listener: plain HTTP/1.1 or HTTPS (rustls, generated certificate), one hyper connection
//! task per client, all stopped on shutdown.

use std::sync::Arc;

use axum::Router;
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use kube_sandbox_machinery::tls::{TlsError, TlsMaterial};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use tokio::{net::TcpListener, sync::watch, task::JoinSet};
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use crate::error::Error;

/// Builds the rustls acceptor from PEM material (HTTP/1.1 only).
pub fn tls_acceptor(m: &TlsMaterial) -> Result<TlsAcceptor, Error> {
    let cfg_err = |e: String| Error::Tls(TlsError::Config(e));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(m.cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| cfg_err(format!("server certificate: {e}")))?;
    let key = PrivateKeyDer::from_pem_slice(m.key_pem.as_bytes())
        .map_err(|e| cfg_err(format!("server key: {e}")))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cfg_err(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| cfg_err(e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(cfg)))
}

/// Accepts connections until `shutdown` flips, then drops every connection.
pub async fn accept_loop(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    debug!(error = %e, "accept failed");
                    continue;
                }
            },
            _ = shutdown.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        let _ = stream.set_nodelay(true);
        let svc = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        conns.spawn(async move {
            let builder = hyper::server::conn::http1::Builder::new();
            let res = match tls {
                Some(acc) => match acc.accept(stream).await {
                    Ok(s) => {
                        builder
                            .serve_connection(TokioIo::new(s), svc)
                            .with_upgrades()
                            .await
                    }
                    Err(e) => {
                        debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                },
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), svc)
                        .with_upgrades()
                        .await
                }
            };
            if let Err(e) = res {
                debug!(%peer, error = %e, "connection ended with error");
            }
        });
    }
    conns.abort_all();
}
