//! The emulated "containers": tiny TCP/UDP responders inside a pod's netns that answer with the
//! pod's name (TCP: write `<name>\n` and close; UDP: reply `<name>\n` to every datagram).

use std::net::Ipv4Addr;
use std::path::Path;

use tokio::{io::AsyncWriteExt, task::JoinSet};
use tracing::debug;

use crate::netns;

/// Responders of one pod; dropping it stops them (the sockets close).
#[derive(Debug)]
pub struct Responders {
    tasks: JoinSet<()>,
}

impl Responders {
    /// Stops every responder.
    pub fn stop(mut self) {
        self.tasks.abort_all();
    }
}

/// Binds the ports inside the namespace at `ns_path` and serves them on the current runtime.
pub fn start(
    ns_path: &Path,
    pod_name: &str,
    tcp_ports: &[u16],
    udp_ports: &[u16],
) -> Result<Responders, netns::Error> {
    let bound = netns::bind_in(ns_path, Ipv4Addr::UNSPECIFIED, tcp_ports, udp_ports)?;
    let reply = format!("{pod_name}\n").into_bytes();
    let mut tasks = JoinSet::new();
    for (port, l) in bound.tcp {
        let reply = reply.clone();
        let listener = match tokio::net::TcpListener::from_std(l) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(port, error = %e, "cannot register tcp responder");
                continue;
            }
        };
        tasks.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((mut s, peer)) => {
                        debug!(port, %peer, "tcp responder accepted");
                        let reply = reply.clone();
                        tokio::spawn(async move {
                            let _ = s.write_all(&reply).await;
                            let _ = s.shutdown().await;
                        });
                    }
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
                }
            }
        });
    }
    for (port, s) in bound.udp {
        let reply = reply.clone();
        let sock = match tokio::net::UdpSocket::from_std(s) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(port, error = %e, "cannot register udp responder");
                continue;
            }
        };
        tasks.spawn(async move {
            let mut buf = vec![0u8; 65536];
            loop {
                match sock.recv_from(&mut buf).await {
                    Ok((_, peer)) => {
                        let _ = sock.send_to(&reply, peer).await;
                    }
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
                }
            }
        });
    }
    Ok(Responders { tasks })
}
