//! `kube-sandbox probe`: the in-pod connectivity probe conformance suites run through
//! `kubectl exec` (the role agnhost's `connect` plays upstream), made for the emulated
//! containers: a TCP target is reachable when the connection is accepted (the responder's reply,
//! the pod's name, is reported too); a UDP target when a datagram gets the responder's reply.
//! Several targets are probed at once, one line each, so one exec covers a pod's whole row.
//! With `--stdin` one exec serves many rounds ([`serve_lines`]): each input line is a round's
//! targets, answered by a line per target and an [`END_OF_ROUND`] line, so a suite pays for
//! `kubectl exec` once per pod instead of once per pod and round (about 75 ms of CPU each on the
//! two-core machine, enough to starve the cloud under test when nine pods probe every second).

use std::{
    fmt,
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use tokio::{
    io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::UdpSocket,
    task::JoinSet,
};

/// The line that ends the answer to one input line in [`serve_lines`].
pub const END_OF_ROUND: &str = "end";

/// Answers rounds read from `input` until it ends: every line holds whitespace-separated
/// targets; each is answered with `<target> <outcome>` in order, then [`END_OF_ROUND`], flushed.
/// A line with an invalid target is answered `error <why>` and [`END_OF_ROUND`] (the session
/// goes on). Returns when `input` ends or `output` can no longer be written.
pub async fn serve_lines(
    input: impl AsyncBufRead + Unpin,
    mut output: impl AsyncWrite + Unpin,
    timeout: Duration,
) -> std::io::Result<()> {
    let mut lines = input.lines();
    while let Some(line) = lines.next_line().await? {
        let parsed: Result<Vec<Target>, String> = line.split_whitespace().map(str::parse).collect();
        let mut answer = String::new();
        match parsed {
            Ok(targets) => {
                for (t, o) in probe_all(&targets, timeout).await {
                    answer.push_str(&format!("{t} {o}\n"));
                }
            }
            Err(e) => answer.push_str(&format!("error {e}\n")),
        }
        answer.push_str(END_OF_ROUND);
        answer.push('\n');
        output.write_all(answer.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}

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

        // The same rounds as a session: one answer block per line, a bad line told and survived.
        let input = format!("tcp:{tcp_addr} udp:{udp_addr}\nsctp:{closed}\n\ntcp:{closed}\n");
        let mut out = Vec::new();
        serve_lines(input.as_bytes(), &mut out, Duration::from_millis(600))
            .await
            .unwrap();
        let out = String::from_utf8(out).unwrap();
        let want = format!(
            "tcp:{tcp_addr} connected pod-a\nudp:{udp_addr} connected pod-b\nend\n\
             error invalid target \"sctp:{closed}\": want [tcp:|udp:]IP:PORT\nend\n\
             end\n\
             tcp:{closed} refused\nend\n"
        );
        assert_eq!(out, want);
    }
}
