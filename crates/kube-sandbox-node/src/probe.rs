//! `kube-sandbox probe`: the in-pod connectivity probe conformance suites run through
//! `kubectl exec` (the role agnhost's `connect` plays upstream), made for the emulated
//! containers: a TCP target is reachable when the connection is accepted (the responder's reply,
//! the pod's name, is reported too); a UDP target when a datagram gets the responder's reply.
//! Several targets are probed at once, one line each, so one exec covers a pod's whole row.

use std::{
    fmt,
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use tokio::{io::AsyncReadExt, net::UdpSocket, task::JoinSet};

/// Transport of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

/// One `proto:ip:port` target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Transport.
    pub proto: Proto,
    /// Address.
    pub addr: SocketAddr,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = match self.proto {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        };
        write!(f, "{p}:{}", self.addr)
    }
}

impl std::str::FromStr for Target {
    type Err = String;
    /// `tcp:10.0.0.5:80`, `udp:10.0.0.5:53`, or `10.0.0.5:80` (TCP).
    fn from_str(s: &str) -> Result<Self, String> {
        let (proto, rest) = match s.split_once(':') {
            Some(("tcp", r)) => (Proto::Tcp, r),
            Some(("udp", r)) => (Proto::Udp, r),
            _ => (Proto::Tcp, s),
        };
        let addr = rest
            .parse()
            .map_err(|_| format!("invalid target {s:?}: want [tcp:|udp:]IP:PORT"))?;
        Ok(Self { proto, addr })
    }
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Reachable; the reply's first line, if one came.
    Connected(Option<String>),
    /// Nothing came back in time (dropped, as a security group drops).
    Timeout,
    /// Actively refused (TCP RST or ICMP port unreachable).
    Refused,
    /// Any other error.
    Error(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connected(Some(r)) => write!(f, "connected {r}"),
            Self::Connected(None) => write!(f, "connected"),
            Self::Timeout => write!(f, "timeout"),
            Self::Refused => write!(f, "refused"),
            Self::Error(e) => write!(f, "error {e}"),
        }
    }
}

/// Probes every target concurrently; results in the targets' order.
pub async fn probe_all(targets: &[Target], timeout: Duration) -> Vec<(Target, Outcome)> {
    let mut set = JoinSet::new();
    for (i, t) in targets.iter().copied().enumerate() {
        set.spawn(async move { (i, t, probe(t, timeout).await) });
    }
    let mut out: Vec<(usize, Target, Outcome)> = Vec::with_capacity(targets.len());
    while let Some(r) = set.join_next().await {
        if let Ok(r) = r {
            out.push(r);
        }
    }
    out.sort_by_key(|(i, ..)| *i);
    out.into_iter().map(|(_, t, o)| (t, o)).collect()
}

/// Probes one target.
pub async fn probe(t: Target, timeout: Duration) -> Outcome {
    match t.proto {
        Proto::Tcp => tcp(t.addr, timeout).await,
        Proto::Udp => udp(t.addr, timeout).await,
    }
}

fn first_line(b: &[u8]) -> Option<String> {
    let s = String::from_utf8_lossy(b);
    let l = s.lines().next()?.trim().to_string();
    (!l.is_empty()).then_some(l)
}

async fn tcp(addr: SocketAddr, timeout: Duration) -> Outcome {
    let mut s = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Err(_) => return Outcome::Timeout,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Outcome::Refused,
        Ok(Err(e)) => return Outcome::Error(e.to_string()),
        Ok(Ok(s)) => s,
    };
    let mut buf = [0u8; 256];
    let reply = match tokio::time::timeout(timeout, s.read(&mut buf)).await {
        Ok(Ok(n)) => first_line(&buf[..n]),
        _ => None,
    };
    Outcome::Connected(reply)
}

async fn udp(addr: SocketAddr, timeout: Duration) -> Outcome {
    let sock = match UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).await {
        Ok(s) => s,
        Err(e) => return Outcome::Error(e.to_string()),
    };
    if let Err(e) = sock.connect(addr).await {
        return Outcome::Error(e.to_string());
    }
    // Three datagrams spread over the timeout: one lost datagram is not a verdict.
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = [0u8; 256];
    for attempt in 0..3u32 {
        if let Err(e) = sock.send(b"hostname\n").await {
            return Outcome::Error(e.to_string());
        }
        let until = (tokio::time::Instant::now() + timeout / 3).min(deadline);
        match tokio::time::timeout_at(until, sock.recv(&mut buf)).await {
            Ok(Ok(n)) => return Outcome::Connected(first_line(&buf[..n])),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Outcome::Refused,
            Ok(Err(e)) => return Outcome::Error(e.to_string()),
            Err(_) if attempt == 2 => {}
            Err(_) => continue,
        }
    }
    Outcome::Timeout
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print() {
        let t: Target = "udp:10.0.0.5:81".parse().unwrap();
        assert_eq!(t.proto, Proto::Udp);
        assert_eq!(t.to_string(), "udp:10.0.0.5:81");
        let t: Target = "10.0.0.5:80".parse().unwrap();
        assert_eq!(t.to_string(), "tcp:10.0.0.5:80");
        assert!(
            "sctp:1.2.3.4:5"
                .parse::<Target>()
                .unwrap_err()
                .contains("sctp:1.2.3.4:5")
        );
        assert!("10.0.0.5".parse::<Target>().is_err());
    }

    #[tokio::test]
    async fn tcp_and_udp_on_loopback() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tcp_addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut s, _)) = l.accept().await {
                let _ = s.write_all(b"pod-a\n").await;
            }
        });
        let u = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let udp_addr = u.local_addr().unwrap();
        tokio::spawn(async move {
            let mut b = [0u8; 64];
            while let Ok((_, from)) = u.recv_from(&mut b).await {
                let _ = u.send_to(b"pod-b\n", from).await;
            }
        });
        // A port nobody listens on: TCP is refused, UDP gets ICMP port unreachable.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let targets = [
            Target {
                proto: Proto::Tcp,
                addr: tcp_addr,
            },
            Target {
                proto: Proto::Udp,
                addr: udp_addr,
            },
            Target {
                proto: Proto::Tcp,
                addr: closed,
            },
            Target {
                proto: Proto::Udp,
                addr: closed,
            },
        ];
        let r = probe_all(&targets, Duration::from_millis(600)).await;
        let got: Vec<String> = r.iter().map(|(_, o)| o.to_string()).collect();
        assert_eq!(got, ["connected pod-a", "connected pod-b", "refused", "refused"]);
    }
}
