//! One host pod's life: volumes and tokens, init containers in order, app containers each in a
//! restart loop with back-off and probes, the status writer, and the graceful stop.

use std::{
    collections::BTreeMap,
    net::IpAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use kube::{Api, ResourceExt, api::PostParams};
use nix::{sys::signal::Signal, unistd::Pid};
use serde_json::{Value, json};
use tokio::{sync::watch, task::JoinSet};
use tracing::{debug, info, warn};

use super::{
    Shared, env, fetch_sources, images, launch, normal_event, pod_dir, security,
    status::{self, ContainerState, Phase, Terminated},
    volumes, warn_event,
};
use crate::{netns, node::Ctx};

type StopRx = watch::Receiver<Option<Duration>>;

/// `<pod dir>/logs/<container>/<restart count>.log`.
pub fn container_log_path(pod_dir: &Path, container: &str, restarts: u32) -> PathBuf {
    pod_dir
        .join("logs")
        .join(container)
        .join(format!("{restarts}.log"))
}

fn stopping(rx: &StopRx) -> Option<Duration> {
    *rx.borrow()
}

async fn wait_stop(rx: &mut StopRx) -> Duration {
    loop {
        if let Some(g) = *rx.borrow_and_update() {
            return g;
        }
        if rx.changed().await.is_err() {
            return Duration::ZERO;
        }
    }
}

/// Sleeps `d` unless a stop comes first (then returns false).
async fn sleep_or_stop(rx: &mut StopRx, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = wait_stop(rx) => false,
    }
}

/// Everything the container loops share.
struct PodRun {
    ctx: Arc<Ctx>,
    pod: Pod,
    dir: PathBuf,
    volumes: BTreeMap<String, PathBuf>,
    sources: env::Sources,
    shared: Arc<Shared>,
}

/// Runs the pod until stopped.
pub(crate) async fn run_pod(ctx: Arc<Ctx>, pod: Pod, mut stop: StopRx) -> Result<(), String> {
    let spec = pod.spec.clone().unwrap_or_default();
    let init: Vec<Container> = spec.init_containers.clone().unwrap_or_default();
    let main: Vec<Container> = spec.containers.clone();
    let img = |c: &Container| c.image.clone().unwrap_or_default();
    let shared = Arc::new(Shared {
        state: std::sync::Mutex::new(status::PodState {
            init: init
                .iter()
                .map(|c| ContainerState::new(&c.name, &img(c), "PodInitializing"))
                .collect(),
            main: main
                .iter()
                .map(|c| {
                    let reason = if init.is_empty() {
                        "ContainerCreating"
                    } else {
                        "PodInitializing"
                    };
                    ContainerState::new(&c.name, &img(c), reason)
                })
                .collect(),
            finished: None,
        }),
        changed: tokio::sync::Notify::new(),
    });
    let writer = tokio::spawn(status_writer(ctx.clone(), pod.clone(), shared.clone()));
    shared.changed.notify_one();
    let dir = pod_dir(&ctx, &pod);
    // Volumes (and the ServiceAccount tokens they project), retried until they can be set up.
    let mut backoff = ctx.cfg.sandbox_backoff_base;
    let (volumes, sources, token_ttl) = loop {
        match setup_volumes(&ctx, &pod, &dir).await {
            Ok(v) => break v,
            Err(e) => {
                warn_event(&ctx, &pod, "FailedMount", &e).await;
                if !sleep_or_stop(&mut stop, backoff).await {
                    writer.abort();
                    return Ok(());
                }
                backoff = (backoff * 2).min(ctx.cfg.sandbox_backoff_cap);
            }
        }
    };
    let run = Arc::new(PodRun {
        ctx: ctx.clone(),
        pod: pod.clone(),
        dir,
        volumes,
        sources,
        shared: shared.clone(),
    });
    let refresher = token_ttl.map(|ttl| tokio::spawn(refresh_tokens(run.clone(), ttl)));
    let policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());
    let mut ok = true;
    for (i, c) in init.iter().enumerate() {
        // Init containers restart on failure unless the policy is Never.
        let init_policy = if policy == "Never" { "Never" } else { "OnFailure" };
        match container_loop(&run, c, i, true, init_policy, stop.clone()).await {
            Some(0) => {}
            Some(_) => {
                ok = false;
                break;
            }
            None => {
                ok = false;
                break;
            }
        }
    }
    if ok && stopping(&stop).is_none() {
        let mut set = JoinSet::new();
        for (i, c) in main.iter().enumerate() {
            let (run, c, stop, policy) = (run.clone(), c.clone(), stop.clone(), policy.clone());
            set.spawn(async move { container_loop(&run, &c, i, false, &policy, stop).await });
        }
        let mut codes = Vec::new();
        while let Some(r) = set.join_next().await {
            codes.push(r.ok().flatten());
        }
        if stopping(&stop).is_none() && !codes.is_empty() {
            let all_ok = codes.iter().all(|c| *c == Some(0));
            shared.update(|s| s.finished = Some(if all_ok { "Succeeded" } else { "Failed" }));
        }
    } else if !ok && stopping(&stop).is_none() {
        shared.update(|s| s.finished = Some("Failed"));
    }
    if let Some(r) = refresher {
        r.abort();
    }
    if stopping(&stop).is_none() {
        // Finished for good: keep reporting until the pod is deleted.
        wait_stop(&mut stop).await;
    }
    // Let the last status out, then stop writing.
    tokio::time::sleep(Duration::from_millis(100)).await;
    writer.abort();
    Ok(())
}

/// Prepares the volumes; returns them, the ConfigMap/Secret data and the shortest token TTL.
async fn setup_volumes(
    ctx: &Ctx,
    pod: &Pod,
    dir: &Path,
) -> Result<(BTreeMap<String, PathBuf>, env::Sources, Option<Duration>), String> {
    let sources = fetch_sources(ctx, pod)
        .await
        .map_err(|e| format!("reading the pod's ConfigMaps and Secrets: {e}"))?;
    let (tokens, ttl) = issue_tokens(ctx, pod).await?;
    let ip = ctx.cfg.node_ip.to_string();
    let pod2 = pod.clone();
    let dir2 = dir.to_path_buf();
    let map = ctx.cfg.host_paths.clone();
    let src2 = sources.clone();
    let vols = tokio::task::spawn_blocking(move || volumes::prepare(&pod2, &dir2, &src2, &tokens, &map, &ip))
        .await
        .map_err(|e| format!("volume setup task: {e}"))??;
    Ok((vols, sources, ttl))
}

/// A bound token for every projected `serviceAccountToken` source (volume name → token).
async fn issue_tokens(ctx: &Ctx, pod: &Pod) -> Result<(BTreeMap<String, String>, Option<Duration>), String> {
    let mut out = BTreeMap::new();
    let mut ttl: Option<Duration> = None;
    let ns = pod.namespace().unwrap_or_default();
    let sa = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let api: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(ctx.client.clone(), &ns);
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(p) = &v.projected else { continue };
        for src in p.sources.iter().flatten() {
            let Some(t) = &src.service_account_token else {
                continue;
            };
            let secs = t.expiration_seconds.unwrap_or(3600);
            let mut spec = json!({"expirationSeconds": secs,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(), "uid": pod.uid()}});
            if let Some(a) = &t.audience {
                spec["audiences"] = json!([a]);
            }
            let body =
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
            let resp: Value = api
                .create_subresource("token", &sa, &PostParams::default(), &body)
                .await
                .map_err(|e| format!("requesting a token for service account {ns}/{sa}: {e}"))?;
            let token = resp["status"]["token"]
                .as_str()
                .ok_or_else(|| format!("the TokenRequest for {ns}/{sa} returned no token"))?;
            out.insert(v.name.clone(), token.to_string());
            let d = Duration::from_secs(secs.max(1) as u64);
            ttl = Some(ttl.map_or(d, |t| t.min(d)));
        }
    }
    Ok((out, ttl))
}

/// Rewrites the projected tokens at 80% of their lifetime, as kubelet does.
async fn refresh_tokens(run: Arc<PodRun>, ttl: Duration) {
    loop {
        tokio::time::sleep(ttl.mul_f64(0.8)).await;
        match setup_volumes(&run.ctx, &run.pod, &run.dir).await {
            Ok(_) => debug!(pod = %run.pod.name_any(), "projected tokens refreshed"),
            Err(e) => warn!(pod = %run.pod.name_any(), error = %e, "token refresh failed"),
        }
    }
}

fn set_state(run: &PodRun, init: bool, idx: usize, f: impl FnOnce(&mut ContainerState)) {
    run.shared.update(|s| {
        let list = if init { &mut s.init } else { &mut s.main };
        if let Some(c) = list.get_mut(idx) {
            f(c);
        }
    });
}

/// Runs one container until it ends for good or the pod stops; returns its last exit code
/// (`None` when stopped or never started).
async fn container_loop(
    run: &PodRun,
    c: &Container,
    idx: usize,
    init: bool,
    policy: &str,
    mut stop: StopRx,
) -> Option<i32> {
    let ctx = &run.ctx;
    let mut backoff = ctx.cfg.sandbox_backoff_base;
    let mut restarts = 0u32;
    loop {
        if stopping(&stop).is_some() {
            return None;
        }
        let child = match spawn(run, c, restarts).await {
            Ok(ch) => ch,
            Err((reason, msg)) => {
                warn_event(ctx, &run.pod, "Failed", &format!("Error: {msg}")).await;
                set_state(run, init, idx, |s| {
                    s.phase = Phase::Waiting {
                        reason: reason.into(),
                        message: Some(msg),
                    }
                });
                if !sleep_or_stop(&mut stop, backoff).await {
                    return None;
                }
                backoff = (backoff * 2).min(ctx.cfg.sandbox_backoff_cap);
                continue;
            }
        };
        let started_at = crate::k8s_now();
        let started = Instant::now();
        let pid = child.id();
        let id = format!("containerd://{}", uuid::Uuid::new_v4().simple());
        normal_event(ctx, &run.pod, "Started", &format!("Started container {}", c.name)).await;
        set_state(run, init, idx, |s| {
            s.phase = Phase::Running {
                started_at: started_at.clone(),
            };
            s.id = id.clone();
            s.ready = !init && c.readiness_probe.is_none();
        });
        let (live_tx, mut live_rx) = tokio::sync::mpsc::channel::<String>(1);
        let mut probes = JoinSet::new();
        if !init {
            if let Some(p) = c.readiness_probe.clone() {
                probes.spawn(probe_loop(
                    run.ctx.clone(),
                    run.shared.clone(),
                    idx,
                    p,
                    true,
                    live_tx.clone(),
                ));
            }
            if let Some(p) = c.liveness_probe.clone() {
                probes.spawn(probe_loop(
                    run.ctx.clone(),
                    run.shared.clone(),
                    idx,
                    p,
                    false,
                    live_tx.clone(),
                ));
            }
        }
        let mut child = child;
        let (code, stopped) = tokio::select! {
            r = child.wait() => (exit_code(r), false),
            grace = wait_stop(&mut stop) => {
                (terminate(&mut child, pid, grace).await, true)
            }
            Some(why) = live_rx.recv() => {
                normal_event(ctx, &run.pod, "Killing", &format!("Container {} failed liveness probe, will be restarted", c.name)).await;
                debug!(reason = %why, "liveness probe failed");
                (terminate(&mut child, pid, grace_of(&run.pod)).await, false)
            }
        };
        probes.abort_all();
        let term = Terminated {
            exit_code: code,
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            started_at,
            finished_at: crate::k8s_now(),
        };
        info!(pod = %run.pod.name_any(), container = %c.name, exit_code = code, "container ended");
        let restart = !stopped
            && match policy {
                "Always" => true,
                "OnFailure" => code != 0,
                _ => false,
            };
        if !restart {
            set_state(run, init, idx, |s| {
                s.phase = Phase::Terminated(term);
                s.ready = false;
            });
            return if stopped { None } else { Some(code) };
        }
        if started.elapsed() > Duration::from_secs(60) {
            backoff = ctx.cfg.sandbox_backoff_base;
        }
        restarts += 1;
        let msg = format!(
            "back-off {}s restarting failed container={} pod={}_{}({})",
            backoff.as_secs().max(1),
            c.name,
            run.pod.name_any(),
            run.pod.namespace().unwrap_or_default(),
            run.pod.uid().unwrap_or_default()
        );
        if code != 0 {
            warn_event(ctx, &run.pod, "BackOff", "Back-off restarting failed container").await;
        }
        set_state(run, init, idx, |s| {
            s.last = Some(term);
            s.restarts = restarts;
            s.ready = false;
            s.phase = Phase::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: Some(msg),
            };
        });
        if !sleep_or_stop(&mut stop, backoff).await {
            return None;
        }
        backoff = (backoff * 2).min(ctx.cfg.sandbox_backoff_cap);
    }
}

fn grace_of(pod: &Pod) -> Duration {
    let s = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(s.max(0) as u64)
}

fn exit_code(r: std::io::Result<std::process::ExitStatus>) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    match r {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 255,
    }
}

/// SIGTERM to the container's process group, SIGKILL after `grace`.
async fn terminate(child: &mut tokio::process::Child, pid: Option<u32>, grace: Duration) -> i32 {
    let pg = pid.and_then(|p| i32::try_from(p).ok()).map(Pid::from_raw);
    if let Some(pg) = pg {
        let _ = nix::sys::signal::killpg(pg, Signal::SIGTERM);
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(r) => exit_code(r),
        Err(_) => {
            if let Some(pg) = pg {
                let _ = nix::sys::signal::killpg(pg, Signal::SIGKILL);
            }
            exit_code(child.wait().await)
        }
    }
}

/// Starts one run of a container; `Err((reason, message))` when it cannot.
async fn spawn(
    run: &PodRun,
    c: &Container,
    restarts: u32,
) -> Result<tokio::process::Child, (&'static str, String)> {
    let ctx = &run.ctx;
    let image = c.image.clone().unwrap_or_default();
    let entry = images::lookup(&ctx.cfg.images, &image).ok_or((
        "ErrImagePull",
        format!("image {image:?} is not in the node's image table"),
    ))?;
    let ip = ctx.cfg.node_ip.to_string();
    let api = env::ApiEndpoint {
        host: "127.0.0.1".into(),
        port: ctx.cfg.apiserver_forward.map_or(443, |a| a.port()),
    };
    let envs =
        env::build(&run.pod, c, &run.sources, &ip, &api).map_err(|m| ("CreateContainerConfigError", m))?;
    // `$(VAR)` in command and args is the container's variable, as kubelet expands it.
    let vars: BTreeMap<String, String> = envs.iter().cloned().collect();
    let mut argv: Vec<String> = c.command.clone().unwrap_or_default();
    argv.extend(c.args.clone().unwrap_or_default());
    let argv: Vec<String> = argv.iter().map(|a| env::expand(a, &vars)).collect();
    let Some(first) = argv.first().cloned() else {
        return Err((
            "CreateContainerError",
            format!(
                "container {}: no command (emulated images have no entrypoint)",
                c.name
            ),
        ));
    };
    let security = security::of(&run.pod, c).map_err(|m| ("CreateContainerConfigError", m))?;
    let mut program = images::resolve(entry, &first).map_err(|m| ("CreateContainerError", m))?;
    if security.non_root() {
        program = images::stage_for_non_root(&program, std::path::Path::new(images::STORE))
            .map_err(|m| ("CreateContainerError", m))?;
    }
    let mounts = volumes::mounts(c, &run.volumes).map_err(|m| ("CreateContainerConfigError", m))?;
    let spec = launch::LaunchSpec {
        program,
        args: argv[1..].to_vec(),
        env: envs,
        working_dir: c.working_dir.clone().unwrap_or_else(|| "/".into()).into(),
        netns: ctx.cfg.host_netns.as_deref().map(netns::path),
        mounts,
        security,
    };
    let spec_path = run.dir.join("specs").join(format!("{}.json", c.name));
    let log_path = container_log_path(&run.dir, &c.name, restarts);
    let io_err = |e: std::io::Error| ("CreateContainerError", e.to_string());
    for p in [&spec_path, &log_path] {
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io_err)?;
        }
    }
    std::fs::write(&spec_path, serde_json::to_vec(&spec).unwrap_or_default()).map_err(io_err)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(io_err)?;
    let log2 = log.try_clone().map_err(io_err)?;
    tokio::process::Command::new(&ctx.cfg.launcher)
        .arg("run-container")
        .arg(&spec_path)
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(|e| {
            (
                "CreateContainerError",
                format!("starting {}: {e}", ctx.cfg.launcher.display()),
            )
        })
}

/// One probe attempt: `Ok` when it passes.
async fn probe_once(ctx: &Ctx, p: &Probe) -> Result<(), String> {
    let timeout = Duration::from_secs(p.timeout_seconds.unwrap_or(1).max(1) as u64);
    let node_ip = ctx.cfg.node_ip;
    let (host, port, http_path) = if let Some(h) = &p.http_get {
        let host: IpAddr = h.host.as_deref().and_then(|h| h.parse().ok()).unwrap_or(node_ip);
        (
            host,
            port_of(&h.port)?,
            Some(h.path.clone().unwrap_or_else(|| "/".into())),
        )
    } else if let Some(t) = &p.tcp_socket {
        let host: IpAddr = t.host.as_deref().and_then(|h| h.parse().ok()).unwrap_or(node_ip);
        (host, port_of(&t.port)?, None)
    } else {
        return Ok(());
    };
    let ns = ctx.cfg.host_netns.as_deref().map(netns::path);
    let attempt = move || -> Result<(), String> {
        use std::io::{Read, Write};
        let addr = std::net::SocketAddr::new(host, port);
        let mut s =
            std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("dial {addr}: {e}"))?;
        let Some(path) = http_path else { return Ok(()) };
        s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
        write!(
            s,
            "GET {path} HTTP/1.0\r\nHost: {addr}\r\nUser-Agent: kube-probe/1.31\r\n\r\n"
        )
        .map_err(|e| e.to_string())?;
        let mut buf = [0u8; 64];
        let n = s
            .read(&mut buf)
            .map_err(|e| format!("reading from {addr}: {e}"))?;
        let line = String::from_utf8_lossy(&buf[..n]);
        let code: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        if (200..400).contains(&code) {
            Ok(())
        } else {
            Err(format!("HTTP probe failed with statuscode: {code}"))
        }
    };
    tokio::task::spawn_blocking(move || match ns {
        Some(ns) => netns::run_in(&ns, attempt).map_err(|e| e.to_string())?,
        None => attempt(),
    })
    .await
    .map_err(|e| e.to_string())?
}

fn port_of(p: &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString) -> Result<u16, String> {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    match p {
        IntOrString::Int(i) => u16::try_from(*i).map_err(|_| format!("invalid probe port {i}")),
        IntOrString::String(s) => Err(format!("named probe port {s:?} is not emulated")),
    }
}

/// A readiness (sets `ready`) or liveness (asks for a restart) probe loop.
async fn probe_loop(
    ctx: Arc<Ctx>,
    shared: Arc<Shared>,
    idx: usize,
    p: Probe,
    readiness: bool,
    live_tx: tokio::sync::mpsc::Sender<String>,
) {
    tokio::time::sleep(Duration::from_secs(
        p.initial_delay_seconds.unwrap_or(0).max(0) as u64
    ))
    .await;
    let period = Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64);
    let need_ok = p.success_threshold.unwrap_or(1).max(1);
    let need_fail = p.failure_threshold.unwrap_or(3).max(1);
    let (mut oks, mut fails) = (0, 0);
    loop {
        match probe_once(&ctx, &p).await {
            Ok(()) => {
                oks += 1;
                fails = 0;
                if readiness && oks >= need_ok {
                    shared.update(|s| {
                        if let Some(c) = s.main.get_mut(idx) {
                            c.ready = true;
                        }
                    });
                }
            }
            Err(e) => {
                oks = 0;
                fails += 1;
                debug!(error = %e, readiness, "probe failed");
                if fails >= need_fail {
                    if readiness {
                        shared.update(|s| {
                            if let Some(c) = s.main.get_mut(idx) {
                                c.ready = false;
                            }
                        });
                    } else {
                        let _ = live_tx.send(e).await;
                        return;
                    }
                }
            }
        }
        tokio::time::sleep(period).await;
    }
}

/// Writes the pod status whenever the containers' state changes.
async fn status_writer(ctx: Arc<Ctx>, pod: Pod, shared: Arc<Shared>) {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let start = crate::k8s_now();
    let mut last: Value = serde_json::to_value(pod.status.clone()).unwrap_or(Value::Null);
    loop {
        shared.changed.notified().await;
        let st = shared.snapshot();
        let mut desired = status::pod_status(&st, &ctx.cfg.node_ip.to_string(), &start, &crate::k8s_now());
        status::keep_transition_times(&last, &mut desired);
        if desired == last {
            continue;
        }
        let body = json!({"status": desired});
        match api
            .patch_status(
                &pod.name_any(),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&body),
            )
            .await
        {
            Ok(_) => last = desired,
            Err(e) => {
                warn!(pod = %pod.name_any(), error = %e, "cannot write pod status; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                shared.changed.notify_one();
            }
        }
    }
}
