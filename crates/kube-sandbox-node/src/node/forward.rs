//! Exposes the API server inside the node's host netns: a TCP forwarder listening on
//! `127.0.0.1:<apiserver port>` in that netns (socket bound from a helper thread that entered it),
//! relaying to the API server's address in the root netns.

use std::net::{Ipv4Addr, SocketAddr};

use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::Error;
use crate::netns;

/// Starts the forwarder; the returned task serves until aborted.
pub async fn start(host_netns: &str, target: SocketAddr) -> Result<JoinHandle<()>, Error> {
    let path = netns::path(host_netns);
    let out = tokio::process::Command::new("ip")
        .args(["-n", host_netns, "link", "set", "lo", "up"])
        .output()
        .await;
    if let Ok(o) = out
        && !o.status.success()
    {
        warn!(netns = host_netns, "cannot bring lo up in host netns");
    }
    let port = target.port();
    let bound = tokio::task::spawn_blocking(move || netns::bind_in(&path, Ipv4Addr::LOCALHOST, &[port], &[]))
        .await
        .map_err(|_| Error::Netns {
            step: "bind api forwarder",
            source: netns::Error::Thread,
        })?
        .map_err(|source| Error::Netns {
            step: "bind api forwarder",
            source,
        })?;
    let Some((_, std_listener)) = bound.tcp.into_iter().next() else {
        return Err(Error::Forward {
            source: std::io::Error::other("no listener was bound"),
        });
    };
    let listener =
        tokio::net::TcpListener::from_std(std_listener).map_err(|source| Error::Forward { source })?;
    info!(netns = host_netns, %target, "API server forwarded into host netns");
    Ok(tokio::spawn(async move {
        loop {
            let (mut inbound, peer) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    warn!(error = %e, "api forwarder accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            };
            tokio::spawn(async move {
                match tokio::net::TcpStream::connect(target).await {
                    Ok(mut outbound) => {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                    Err(e) => debug!(%peer, error = %e, "api forwarder cannot reach API server"),
                }
            });
        }
    }))
}
