//! The chaos suite's workload: pods created at a steady rate on the live nodes and deleted after
//! a short life, and Services over the long-lived pods created and deleted the same way, while
//! faults are injected. Calls that fail (the API server is down, say) are counted and the work
//! goes on: a deletion that failed is tried again on the next tick.

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use kube::Client;

use crate::{pods, services};

/// The namespace of the churned pods and Services.
pub const CHURN_NS: &str = "chaos-churn";

/// How fast things come and go.
#[derive(Debug, Clone, Copy)]
pub struct ChurnConfig {
    /// A pod is created this often.
    pub pod_interval: Duration,
    /// and deleted after this long.
    pub pod_lifetime: Duration,
    /// A Service is created this often (zero: no Services).
    pub service_interval: Duration,
    /// and deleted after this long.
    pub service_lifetime: Duration,
}

/// What the churn did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChurnStats {
    /// Pods created.
    pub pods_created: u64,
    /// Pods deleted.
    pub pods_deleted: u64,
    /// Services created.
    pub services_created: u64,
    /// Services deleted.
    pub services_deleted: u64,
    /// API calls that failed (and were not done, or were retried).
    pub api_errors: u64,
}

impl ChurnStats {
    /// The difference since `before`.
    pub fn since(&self, before: &ChurnStats) -> ChurnStats {
        ChurnStats {
            pods_created: self.pods_created - before.pods_created,
            pods_deleted: self.pods_deleted - before.pods_deleted,
            services_created: self.services_created - before.services_created,
            services_deleted: self.services_deleted - before.services_deleted,
            api_errors: self.api_errors - before.api_errors,
        }
    }
}

/// The running churn.
pub struct Churn {
    stats: Arc<Mutex<ChurnStats>>,
    paused: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Churn {
    /// Starts churning on the nodes in `nodes` (read on every tick: a lost node is taken out of
    /// it by the scenario), with Services selecting `backend` (`key=value`).
    pub fn start(
        client: Client,
        cfg: ChurnConfig,
        nodes: Arc<Mutex<Vec<String>>>,
        backend: (String, String),
    ) -> Self {
        let stats = Arc::new(Mutex::new(ChurnStats::default()));
        let paused = Arc::new(AtomicBool::new(true));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(run(
            client,
            cfg,
            nodes,
            backend,
            stats.clone(),
            paused.clone(),
            stop.clone(),
        ));
        Self {
            stats,
            paused,
            stop,
            task,
        }
    }

    /// Creates and deletes (true) or holds still (false; deletions of pods past their life
    /// still go on, so that what is left converges).
    pub fn set_running(&self, on: bool) {
        self.paused.store(!on, Ordering::SeqCst);
    }

    /// The counts so far.
    pub fn stats(&self) -> ChurnStats {
        *lock(&self.stats)
    }

    /// Stops the task.
    pub async fn stop(self) -> ChurnStats {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        *lock(&self.stats)
    }
}

async fn run(
    client: Client,
    cfg: ChurnConfig,
    nodes: Arc<Mutex<Vec<String>>>,
    backend: (String, String),
    stats: Arc<Mutex<ChurnStats>>,
    paused: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
) {
    let mut live_pods: VecDeque<(String, Instant)> = VecDeque::new();
    let mut live_svcs: VecDeque<(String, Instant)> = VecDeque::new();
    let (mut pod_seq, mut svc_seq) = (0u64, 0u64);
    let mut next_pod = Instant::now();
    let mut next_svc = Instant::now() + cfg.service_interval;
    let tick = Duration::from_millis(100);
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        let running = !paused.load(Ordering::SeqCst);
        if running && now >= next_pod {
            next_pod = now + cfg.pod_interval;
            let node = {
                let n = lock(&nodes);
                (!n.is_empty()).then(|| n[(pod_seq as usize) % n.len()].clone())
            };
            if let Some(node) = node {
                let name = format!("c-{pod_seq}");
                pod_seq += 1;
                match pods::create_pod(&client, CHURN_NS, &name, Some(&node)).await {
                    Ok(()) => {
                        lock(&stats).pods_created += 1;
                        live_pods.push_back((name, now));
                    }
                    Err(_) => lock(&stats).api_errors += 1,
                }
            }
        }
        if running && !cfg.service_interval.is_zero() && now >= next_svc {
            next_svc = now + cfg.service_interval;
            let name = format!("s-{svc_seq}");
            svc_seq += 1;
            let ports = [("http", 80u16, "TCP", pods::POD_PORT)];
            match services::create_service(
                &client,
                CHURN_NS,
                &name,
                &ports,
                Some((backend.0.as_str(), backend.1.as_str())),
                false,
            )
            .await
            {
                Ok(_) => {
                    lock(&stats).services_created += 1;
                    live_svcs.push_back((name, now));
                }
                Err(_) => lock(&stats).api_errors += 1,
            }
        }
        while let Some((name, born)) = live_pods.front().cloned() {
            if now.duration_since(born) < cfg.pod_lifetime {
                break;
            }
            match pods::delete_pod(&client, CHURN_NS, &name).await {
                Ok(()) => {
                    live_pods.pop_front();
                    lock(&stats).pods_deleted += 1;
                }
                Err(_) => {
                    lock(&stats).api_errors += 1;
                    break;
                }
            }
        }
        while let Some((name, born)) = live_svcs.front().cloned() {
            if now.duration_since(born) < cfg.service_lifetime {
                break;
            }
            match services::delete_service(&client, CHURN_NS, &name).await {
                Ok(()) => {
                    live_svcs.pop_front();
                    lock(&stats).services_deleted += 1;
                }
                Err(_) => {
                    lock(&stats).api_errors += 1;
                    break;
                }
            }
        }
        tokio::time::sleep(tick).await;
    }
}
