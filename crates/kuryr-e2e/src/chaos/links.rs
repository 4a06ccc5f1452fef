//! The chaos suite's connectivity probe: long-lived pods connect to each other over TCP all the
//! time (one OS thread per client pod inside its network namespace, as the soak does), and for
//! every pair the longest time without an answer is kept — from the last answered probe before
//! a failure to the next answered one. The suite reads and resets it per scenario.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use crate::{
    chaos::netdiag::Snapshots,
    soak::{SoakPod, enter_netns, tcp_probe},
};

/// One pair's state.
#[derive(Debug, Clone)]
struct Pair {
    last_ok: Instant,
    /// `last_ok` on the wall clock (to line outages up with the sandbox's logs).
    last_ok_wall: SystemTime,
    failing: bool,
    /// Longest outage since the last reset (closed outages only).
    worst: Duration,
    /// When that outage began and ended (wall clock).
    worst_span: Option<(SystemTime, SystemTime)>,
    probes: u64,
    failures: u64,
    /// Why the probes of this window failed (the first few).
    why: Vec<String>,
}

/// What the probe saw over one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkWindow {
    /// Probes sent.
    pub probes: u64,
    /// Probes unanswered.
    pub failures: u64,
    /// The longest time a pair went without an answer (an outage still going on counts until now).
    pub max_outage: Duration,
    /// That pair, `from -> to`.
    pub worst_pair: Option<String>,
    /// Why probes failed, `from -> to: why` (a few per pair): a connect that times out is the
    /// network; a connection accepted but not answered in time is the answering pod (the
    /// emulated node's responder) being slow.
    pub failures_why: Vec<String>,
    /// Every pair that lost probes, worst first.
    pub lost_pairs: Vec<PairLoss>,
}

/// One pair's losses over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct PairLoss {
    /// `from -> to`.
    pub pair: String,
    /// Probes unanswered.
    pub failures: u64,
    /// Probes sent.
    pub probes: u64,
    /// Its longest time without an answer.
    pub longest: Duration,
    /// When that began and ended (wall clock; the end is the window's end while it lasts).
    pub span: Option<(SystemTime, SystemTime)>,
}

/// The running probe.
pub struct LinkProbe {
    pairs: Arc<Mutex<BTreeMap<(usize, usize), Pair>>>,
    labels: Vec<String>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Option<String>>>,
}

impl LinkProbe {
    /// Starts probing: every pod connects to every other pod's `port` every `interval`, each
    /// probe waiting at most `timeout`. With `snapshots`, a pair dark for long gets the data
    /// plane's state snapshotted while it lasts.
    pub fn start(
        pods: &[SoakPod],
        port: u16,
        interval: Duration,
        timeout: Duration,
        snapshots: Option<Arc<Snapshots>>,
    ) -> Self {
        let now = Instant::now();
        let mut map = BTreeMap::new();
        for a in 0..pods.len() {
            for b in (0..pods.len()).filter(|b| *b != a) {
                map.insert(
                    (a, b),
                    Pair {
                        last_ok: now,
                        last_ok_wall: SystemTime::now(),
                        failing: false,
                        worst: Duration::ZERO,
                        worst_span: None,
                        probes: 0,
                        failures: 0,
                        why: Vec::new(),
                    },
                );
            }
        }
        let pairs = Arc::new(Mutex::new(map));
        let stop = Arc::new(AtomicBool::new(false));
        let pods: Arc<Vec<SoakPod>> = Arc::new(pods.to_vec());
        let labels: Vec<String> = pods.iter().map(|p| p.label.clone()).collect();
        let mut threads: Vec<_> = (0..pods.len())
            .filter_map(|me| {
                let (pods, pairs, stop) = (pods.clone(), pairs.clone(), stop.clone());
                std::thread::Builder::new()
                    .name(format!("chaos-probe-{me}"))
                    .spawn(move || client(me, &pods, port, interval, timeout, &pairs, &stop))
                    .ok()
            })
            .collect();
        if let Some(snapshots) = snapshots {
            let (pairs, stop, labels) = (pairs.clone(), stop.clone(), labels.clone());
            threads.extend(
                std::thread::Builder::new()
                    .name("chaos-probe-watch".into())
                    .spawn(move || watch(&pairs, &labels, &snapshots, &stop))
                    .ok(),
            );
        }
        Self {
            pairs,
            labels,
            stop,
            threads,
        }
    }

    /// What was seen since the last call, then starts a new window.
    pub fn take_window(&self) -> LinkWindow {
        let now = Instant::now();
        let mut w = LinkWindow::default();
        let mut pairs = lock(&self.pairs);
        let wall = SystemTime::now();
        for ((a, b), p) in pairs.iter_mut() {
            let open = if p.failing {
                now - p.last_ok
            } else {
                Duration::ZERO
            };
            let (worst, span) = if open > p.worst {
                (open, Some((p.last_ok_wall, wall)))
            } else {
                (p.worst, p.worst_span)
            };
            let label = format!("{} -> {}", self.labels[*a], self.labels[*b]);
            if worst > w.max_outage {
                w.max_outage = worst;
                w.worst_pair = Some(label.clone());
            }
            if p.failures > 0 || p.failing {
                w.lost_pairs.push(PairLoss {
                    pair: label,
                    failures: p.failures,
                    probes: p.probes,
                    longest: worst,
                    span,
                });
            }
            w.probes += p.probes;
            w.failures += p.failures;
            for why in p.why.drain(..) {
                w.failures_why
                    .push(format!("{} -> {}: {why}", self.labels[*a], self.labels[*b]));
            }
            p.worst = Duration::ZERO;
            p.worst_span = None;
            p.probes = 0;
            p.failures = 0;
            if p.failing {
                // An outage going on carries into the next window from now.
                p.last_ok = now;
                p.last_ok_wall = wall;
            }
        }
        w.lost_pairs.sort_by_key(|p| std::cmp::Reverse(p.longest));
        w
    }

    /// Stops the threads; returns the setup errors of clients that could not start.
    pub fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.threads
            .into_iter()
            .filter_map(|t| t.join().ok().flatten())
            .collect()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Once a second: the pair dark for longest right now, handed to `snapshots`.
fn watch(
    pairs: &Mutex<BTreeMap<(usize, usize), Pair>>,
    labels: &[String],
    snapshots: &Snapshots,
    stop: &AtomicBool,
) -> Option<String> {
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_secs(1));
        let darkest = {
            let pairs = lock(pairs);
            let now = Instant::now();
            pairs
                .iter()
                .filter(|(_, p)| p.failing)
                .map(|((a, b), p)| ((*a, *b), now - p.last_ok))
                .max_by_key(|(_, d)| *d)
        };
        if let Some(((a, b), dark)) = darkest {
            snapshots.consider(&format!("{} -> {}", labels[a], labels[b]), dark);
        }
    }
    None
}

fn client(
    me: usize,
    pods: &[SoakPod],
    port: u16,
    interval: Duration,
    timeout: Duration,
    pairs: &Mutex<BTreeMap<(usize, usize), Pair>>,
    stop: &AtomicBool,
) -> Option<String> {
    if let Err(e) = enter_netns(&pods[me].netns) {
        return Some(format!("{}: {e}", pods[me].label));
    }
    while !stop.load(Ordering::SeqCst) {
        let round = Instant::now();
        for (to, peer) in pods.iter().enumerate().filter(|(to, _)| *to != me) {
            let outcome = tcp_probe(SocketAddr::new(peer.ip, port), &peer.expect, timeout);
            let ok = outcome.is_ok();
            let at = Instant::now();
            let mut pairs = lock(pairs);
            if let Some(p) = pairs.get_mut(&(me, to)) {
                p.probes += 1;
                if ok {
                    let wall = SystemTime::now();
                    if p.failing {
                        if at - p.last_ok > p.worst {
                            p.worst = at - p.last_ok;
                            p.worst_span = Some((p.last_ok_wall, wall));
                        }
                        p.failing = false;
                    }
                    p.last_ok = at;
                    p.last_ok_wall = wall;
                } else {
                    p.failures += 1;
                    p.failing = true;
                    if let Err(why) = outcome {
                        // Each one logged with its time, to line it up with the sandbox's logs.
                        tracing::info!(from = %pods[me].label, to = %peer.label, %why, "chaos: probe unanswered");
                        if p.why.len() < 3 {
                            p.why.push(why);
                        }
                    }
                }
            }
        }
        if let Some(rest) = interval.checked_sub(round.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    None
}
