//! The soak: every pod connects to every other pod, in rounds, for a while — short TCP
//! connections and UDP request/response, each from a fresh source port, the traffic that
//! short-lived service calls make — and counts what went unanswered. Each client pod's probes run
//! on an OS thread of their own that entered the pod's network namespace (`setns`), never on a
//! tokio worker.

use std::{
    fs::File,
    io::Read,
    net::{IpAddr, SocketAddr, TcpStream, UdpSocket},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use nix::sched::{CloneFlags, setns};

/// What the soak does.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// How long the rounds go on.
    pub duration: Duration,
    /// A new round starts this often (or as soon as the previous one ended, when it took longer).
    pub interval: Duration,
    /// How long one probe waits for its answer.
    pub timeout: Duration,
    /// TCP ports every pod answers on.
    pub tcp_ports: Vec<u16>,
    /// UDP ports every pod answers on.
    pub udp_ports: Vec<u16>,
}

/// One pod of the soak.
#[derive(Debug, Clone)]
pub struct SoakPod {
    /// `namespace/name`, for the report.
    pub label: String,
    /// Its node.
    pub node: String,
    /// Its IP.
    pub ip: IpAddr,
    /// What it answers: its name.
    pub expect: String,
    /// Its network namespace (name under /var/run/netns).
    pub netns: String,
}

/// Transport of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// A TCP connection that reads the answer until the server closes.
    Tcp,
    /// One datagram and its reply.
    Udp,
}

impl Proto {
    fn label(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// One unanswered probe.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Client pod (index into the pods given to [`run`]).
    pub from: usize,
    /// Server pod.
    pub to: usize,
    /// Transport.
    pub proto: Proto,
    /// Server port.
    pub port: u16,
    /// When, since the soak started.
    pub at: Duration,
    /// Why.
    pub why: String,
}

/// Live counters, readable while the soak runs (progress lines).
#[derive(Debug, Default)]
pub struct Progress {
    /// Probes done.
    pub probes: AtomicU64,
    /// Probes unanswered.
    pub unanswered: AtomicU64,
}

/// What one client thread saw.
#[derive(Debug, Default)]
struct ClientResult {
    rounds: u64,
    probes: [u64; 2],
    unanswered: [u64; 2],
    failures: Vec<Failure>,
    setup_error: Option<String>,
}

/// The soak's outcome.
#[derive(Debug, Default)]
pub struct SoakReport {
    /// Pods taking part.
    pub pods: usize,
    /// Rounds every client completed (the smallest count among the clients).
    pub rounds: u64,
    /// Probes in all.
    pub probes: u64,
    /// Probes unanswered in all.
    pub unanswered: u64,
    /// TCP probes / unanswered.
    pub tcp: (u64, u64),
    /// UDP probes / unanswered.
    pub udp: (u64, u64),
    /// The first unanswered probes (at most [`MAX_KEPT_FAILURES`]).
    pub failures: Vec<Failure>,
    /// Clients that could not start (namespace gone...).
    pub setup_errors: Vec<String>,
    /// Seconds since the start in which something went unanswered, as `[from, to]` ranges.
    pub outage_seconds: Vec<(u64, u64)>,
    /// How long it ran.
    pub elapsed: Duration,
}

/// How many failures the report keeps in detail.
pub const MAX_KEPT_FAILURES: usize = 40;

const PROTO_TCP: usize = 0;
const PROTO_UDP: usize = 1;

/// Runs the soak over `pods` (blocking: call it from a blocking task). Every pod probes every
/// other pod on every port of `cfg` once per round.
pub fn run(pods: &[SoakPod], cfg: &SoakConfig, progress: Arc<Progress>) -> SoakReport {
    let start = Instant::now();
    let pods_arc: Arc<Vec<SoakPod>> = Arc::new(pods.to_vec());
    let handles: Vec<_> = (0..pods.len())
        .map(|me| {
            let pods = Arc::clone(&pods_arc);
            let cfg = cfg.clone();
            let progress = Arc::clone(&progress);
            std::thread::Builder::new()
                .name(format!("soak-{me}"))
                .spawn(move || client(me, &pods, &cfg, start, &progress))
        })
        .collect();
    let mut report = SoakReport {
        pods: pods.len(),
        rounds: u64::MAX,
        ..SoakReport::default()
    };
    let mut all_failures = Vec::new();
    for (i, h) in handles.into_iter().enumerate() {
        let r = match h {
            Ok(h) => h.join().unwrap_or_else(|_| ClientResult {
                setup_error: Some(format!("client thread of {} panicked", pods[i].label)),
                ..ClientResult::default()
            }),
            Err(e) => ClientResult {
                setup_error: Some(format!(
                    "cannot start the client thread of {}: {e}",
                    pods[i].label
                )),
                ..ClientResult::default()
            },
        };
        if let Some(e) = r.setup_error {
            report.setup_errors.push(e);
        }
        report.rounds = report.rounds.min(r.rounds);
        report.tcp.0 += r.probes[PROTO_TCP];
        report.tcp.1 += r.unanswered[PROTO_TCP];
        report.udp.0 += r.probes[PROTO_UDP];
        report.udp.1 += r.unanswered[PROTO_UDP];
        all_failures.extend(r.failures);
    }
    if report.rounds == u64::MAX {
        report.rounds = 0;
    }
    report.probes = report.tcp.0 + report.udp.0;
    report.unanswered = report.tcp.1 + report.udp.1;
    all_failures.sort_by_key(|f| f.at);
    report.outage_seconds = outage_ranges(all_failures.iter().map(|f| f.at.as_secs()));
    all_failures.truncate(MAX_KEPT_FAILURES);
    report.failures = all_failures;
    report.elapsed = start.elapsed();
    report
}

/// What the warm-up saw: how long until every pair had answered once.
#[derive(Debug, Default)]
pub struct WarmUp {
    /// Until every pair answered (or the limit).
    pub elapsed: Duration,
    /// Probes that failed before their pair first answered, as `from -> to: why`.
    pub early_failures: Vec<String>,
    /// Pairs that never answered within the limit, as `from -> to: why`.
    pub unreachable: Vec<String>,
}

/// Connects every pod to every other pod (first TCP port), retrying each pair until it answers
/// once or `limit` passes. A pod is Ready when *its own* chassis has installed its flows; the
/// other chassis learn where its port lives a moment later, so the very first packets between
/// pods created together can be lost (TCP would retransmit its SYN after 1 s). The soak measures
/// the steady state after this; the warm-up's own failures are reported, not hidden.
pub fn warm_up(pods: &[SoakPod], cfg: &SoakConfig, limit: Duration) -> WarmUp {
    let start = Instant::now();
    let Some(&port) = cfg.tcp_ports.first() else {
        return WarmUp::default();
    };
    let pods_arc: Arc<Vec<SoakPod>> = Arc::new(pods.to_vec());
    let handles: Vec<_> = (0..pods.len())
        .map(|me| {
            let pods = Arc::clone(&pods_arc);
            let timeout = cfg.timeout;
            std::thread::Builder::new()
                .name(format!("warm-{me}"))
                .spawn(move || {
                    let mut early = Vec::new();
                    let mut unreachable = Vec::new();
                    if let Err(e) = enter_netns(&pods[me].netns) {
                        unreachable.push(format!("{}: {e}", pods[me].label));
                        return (early, unreachable);
                    }
                    for (to, peer) in pods.iter().enumerate().filter(|(to, _)| *to != me) {
                        let addr = SocketAddr::new(peer.ip, port);
                        loop {
                            match tcp_probe(addr, &peer.expect, timeout) {
                                Ok(()) => break,
                                Err(why) => {
                                    let what = format!("{} -> {}: {why}", pods[me].label, pods[to].label);
                                    if start.elapsed() >= limit {
                                        unreachable.push(what);
                                        break;
                                    }
                                    early.push(format!("t={:.1}s {what}", start.elapsed().as_secs_f64()));
                                    std::thread::sleep(Duration::from_millis(100));
                                }
                            }
                        }
                    }
                    (early, unreachable)
                })
        })
        .collect();
    let mut w = WarmUp::default();
    for (i, h) in handles.into_iter().enumerate() {
        match h.map(|h| h.join()) {
            Ok(Ok((early, unreachable))) => {
                w.early_failures.extend(early);
                w.unreachable.extend(unreachable);
            }
            _ => w
                .unreachable
                .push(format!("{}: warm-up thread failed", pods[i].label)),
        }
    }
    w.elapsed = start.elapsed();
    w
}

/// Collapses sorted seconds into inclusive ranges.
fn outage_ranges(secs: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for s in secs {
        match out.last_mut() {
            Some((_, to)) if s <= *to + 1 => *to = (*to).max(s),
            _ => out.push((s, s)),
        }
    }
    out
}

/// Moves the calling OS thread into network namespace `name` (/var/run/netns); threads it then
/// starts are born in it.
pub(crate) fn enter_netns(name: &str) -> Result<(), String> {
    let path = format!("/var/run/netns/{name}");
    let file = File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| format!("setns {path}: {e}"))
}

fn client(
    me: usize,
    pods: &[SoakPod],
    cfg: &SoakConfig,
    start: Instant,
    progress: &Progress,
) -> ClientResult {
    let mut r = ClientResult::default();
    if let Err(e) = enter_netns(&pods[me].netns) {
        r.setup_error = Some(format!("{}: {e}", pods[me].label));
        return r;
    }
    let end = start + cfg.duration;
    let mut round: u32 = 0;
    loop {
        let at = start + cfg.interval * round;
        if at >= end {
            break;
        }
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        for (to, peer) in pods.iter().enumerate().filter(|(to, _)| *to != me) {
            for (proto, ports) in [(Proto::Tcp, &cfg.tcp_ports), (Proto::Udp, &cfg.udp_ports)] {
                for &port in ports {
                    let addr = SocketAddr::new(peer.ip, port);
                    let outcome = match proto {
                        Proto::Tcp => tcp_probe(addr, &peer.expect, cfg.timeout),
                        Proto::Udp => udp_probe(addr, &peer.expect, cfg.timeout),
                    };
                    let idx = if proto == Proto::Tcp { PROTO_TCP } else { PROTO_UDP };
                    r.probes[idx] += 1;
                    progress.probes.fetch_add(1, Ordering::Relaxed);
                    if let Err(why) = outcome {
                        r.unanswered[idx] += 1;
                        progress.unanswered.fetch_add(1, Ordering::Relaxed);
                        if r.failures.len() < MAX_KEPT_FAILURES * 50 {
                            r.failures.push(Failure {
                                from: me,
                                to,
                                proto,
                                port,
                                at: start.elapsed(),
                                why,
                            });
                        }
                    }
                }
            }
        }
        r.rounds += 1;
        round += 1;
        // A round that took longer than the interval: the next one starts now, not in a burst
        // of catch-up rounds.
        let next = start + cfg.interval * round;
        let now = Instant::now();
        if next < now {
            let behind = (now - start).as_micros() / cfg.interval.as_micros().max(1);
            round = u32::try_from(behind).unwrap_or(u32::MAX);
        }
    }
    r
}

/// A fresh TCP connection; the server writes its name and closes.
pub(crate) fn tcp_probe(addr: SocketAddr, expect: &str, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect: {e}"))?;
    let mut got = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "timed out after {:?} reading (got {:?})",
                timeout,
                String::from_utf8_lossy(&got)
            ));
        }
        s.set_read_timeout(Some(left))
            .map_err(|e| format!("set timeout: {e}"))?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return Err(format!("read: {e} (got {:?})", String::from_utf8_lossy(&got))),
        }
    }
    answer_is(&got, expect)
}

/// One datagram from a fresh socket; the server replies its name.
fn udp_probe(addr: SocketAddr, expect: &str, timeout: Duration) -> Result<(), String> {
    let bind: SocketAddr = match addr {
        SocketAddr::V4(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
        SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
    };
    let s = UdpSocket::bind(bind).map_err(|e| format!("bind: {e}"))?;
    s.connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.send(b"soak\n").map_err(|e| format!("send: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| format!("set timeout: {e}"))?;
    let mut buf = [0u8; 512];
    match s.recv(&mut buf) {
        Ok(n) => answer_is(&buf[..n], expect),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(format!("no reply within {timeout:?}"))
        }
        Err(e) => Err(format!("recv: {e}")),
    }
}

fn answer_is(got: &[u8], expect: &str) -> Result<(), String> {
    let text = String::from_utf8_lossy(got);
    if text.trim_end() == expect {
        Ok(())
    } else {
        Err(format!("wrong answer {text:?} (expected {expect:?})"))
    }
}

impl SoakReport {
    /// The machine-readable last line.
    pub fn machine_line(&self, daemon_crashes: usize) -> String {
        format!(
            "soak pods={} rounds={} probes={} unanswered={} daemon_crashes={daemon_crashes}",
            self.pods, self.rounds, self.probes, self.unanswered
        )
    }

    /// A readable summary (unanswered probes first, by pair).
    pub fn summary(&self, pods: &[SoakPod]) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "soak: {} pods, {} rounds in {:.0} s: {} probes (tcp {}, udp {}), unanswered {} (tcp {}, udp {})",
            self.pods,
            self.rounds,
            self.elapsed.as_secs_f64(),
            self.probes,
            self.tcp.0,
            self.udp.0,
            self.unanswered,
            self.tcp.1,
            self.udp.1
        );
        for e in &self.setup_errors {
            let _ = writeln!(s, "soak: client not started: {e}");
        }
        if !self.outage_seconds.is_empty() {
            let ranges: Vec<String> = self
                .outage_seconds
                .iter()
                .map(|(a, b)| {
                    if a == b {
                        format!("{a}")
                    } else {
                        format!("{a}-{b}")
                    }
                })
                .collect();
            let _ = writeln!(
                s,
                "soak: seconds (since start) with unanswered probes: {}",
                ranges.join(", ")
            );
        }
        for f in &self.failures {
            let (from, to) = (&pods[f.from], &pods[f.to]);
            let _ = writeln!(
                s,
                "soak:   t={:>6.1}s {} ({}) -> {} ({}) {}:{} {}: {}",
                f.at.as_secs_f64(),
                from.label,
                from.node,
                to.label,
                to.node,
                to.ip,
                f.port,
                f.proto.label(),
                f.why
            );
        }
        if self.unanswered as usize > self.failures.len() && !self.failures.is_empty() {
            let _ = writeln!(
                s,
                "soak:   ... ({} more)",
                self.unanswered as usize - self.failures.len()
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outage_ranges_merge_adjacent_seconds() {
        assert_eq!(
            outage_ranges([3, 3, 4, 5, 9, 10, 20].into_iter()),
            vec![(3, 5), (9, 10), (20, 20)]
        );
        assert!(outage_ranges(std::iter::empty()).is_empty());
    }

    #[test]
    fn answers_are_compared_without_the_newline() {
        assert!(answer_is(b"web-1\n", "web-1").is_ok());
        assert!(answer_is(b"web-2\n", "web-1").is_err());
        assert!(answer_is(b"", "web-1").is_err());
    }

    #[test]
    fn probes_against_local_responders() {
        // Loopback responders in this process's namespace: one TCP, one UDP.
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("tcp bind");
        let udp = UdpSocket::bind("127.0.0.1:0").expect("udp bind");
        let (tport, uport) = (
            tcp.local_addr().expect("addr").port(),
            udp.local_addr().expect("addr").port(),
        );
        std::thread::spawn(move || {
            for s in tcp.incoming().flatten() {
                let mut s = s;
                let _ = std::io::Write::write_all(&mut s, b"me\n");
            }
        });
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok((_, peer)) = udp.recv_from(&mut buf) {
                let _ = udp.send_to(b"me\n", peer);
            }
        });
        let lo: IpAddr = [127, 0, 0, 1].into();
        let t = Duration::from_secs(2);
        assert_eq!(tcp_probe(SocketAddr::new(lo, tport), "me", t), Ok(()));
        assert_eq!(udp_probe(SocketAddr::new(lo, uport), "me", t), Ok(()));
        assert!(tcp_probe(SocketAddr::new(lo, tport), "you", t).is_err());
        // Nobody listens on port 1 on loopback: refused at once.
        assert!(tcp_probe(SocketAddr::new(lo, 1), "me", t).is_err());
    }
}
