//! The listener: plain HTTP/1.1 or HTTPS (rustls, generated certificate), one hyper connection
//! task per client, all stopped on shutdown.

use std::sync::Arc;

use axum::Router;
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use kube_sandbox_machinery::tls::TlsMaterial;
use tokio::{net::TcpListener, sync::watch, task::JoinSet};
use tokio_rustls::TlsAcceptor;
use tracing::debug;

use crate::error::Error;

/// Builds the rustls acceptor from PEM material (HTTP/1.1 only; the config is machinery's).
pub fn tls_acceptor(m: &TlsMaterial) -> Result<TlsAcceptor, Error> {
    let cfg = kube_sandbox_machinery::tls::server_config(m).map_err(Error::Tls)?;
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
