//! The CNI verbs: parse (env, stdin) → forward to kuryr-daemon → render the result in the
//! requested spec version. Every failure is a [`CniError`] (printed by `main`).
//!
//! Behaviour towards a daemon without the kuryr-rs extension endpoints (an upstream daemon
//! answers 404):
//! * CHECK → error 11 (try again later): the plugin cannot verify the attachment, and the spec
//!   requires CHECK to fail when it cannot confirm the network is as expected; runtimes that
//!   do not want this set `disableCheck`.
//! * GC → success: nothing the plugin itself holds can leak, and libcni synthesizes DELs for
//!   stale cached attachments anyway.
//! * STATUS → success: the daemon answered, so it can serve ADD.
//!
//! Daemon not listening (connection refused, socket missing, or the connection reset before
//! the request was sent whole or before the daemon answered its `Expect: 100-continue`:
//! restarting during a rolling upgrade of its DaemonSet): ADD,
//! DEL, CHECK and GC keep trying to connect, with a growing pause (50 ms to 1 s), for up to
//! [`CONNECT_RETRY_WINDOW`] and never past the verb's timeout; a request that reached the
//! daemon whole is not re-sent. STATUS does not wait: it reports at once whether the daemon answers.
//! Daemon still unreachable, or timing out: error 11 (ADD, DEL, CHECK, GC: the runtime retries,
//! DEL included), error 50 for STATUS.

use kuryr_cni_api::daemon::{DaemonOutcome, interpret_response};
use kuryr_cni_api::version::SUPPORTED_VERSIONS;
use kuryr_cni_api::{CniError, CniResult, CniVersion, DaemonRequest, ErrorCode, NetConf, Verb, VifInfo};
use serde_json::{Value, json};

use crate::env::{CniEnv, check_netns_exists};
use crate::http::{self, HttpError};
use crate::log::Log;
use std::time::{Duration, Instant};

use crate::settings::{CONNECT_RETRY_WINDOW, CONNECT_TIMEOUT, Settings};

/// Largest accepted network configuration on stdin.
pub const MAX_STDIN: usize = 16 * 1024 * 1024;

/// The spec version to report an error in: the requested one when readable and supported.
pub fn error_version(stdin: &[u8]) -> CniVersion {
    serde_json::from_slice::<Value>(stdin)
        .ok()
        .and_then(|v| {
            v.get("cniVersion")
                .and_then(Value::as_str)
                .and_then(CniVersion::parse)
        })
        .unwrap_or(CniVersion::LATEST)
}

fn incompatible(verb: Verb, version: CniVersion) -> CniError {
    CniError::new(
        ErrorCode::IncompatibleVersion,
        format!("{} is not defined in CNI spec {version}", verb.as_str()),
    )
}

/// Runs one CNI invocation; `Ok(Some(json))` is printed on stdout, `Ok(None)` prints nothing.
pub fn handle(env: &CniEnv, stdin: &[u8]) -> Result<Option<Value>, CniError> {
    let verb = env.verb()?;
    if verb == Verb::Version {
        return Ok(Some(
            json!({"cniVersion": CniVersion::LATEST.as_str(), "supportedVersions": SUPPORTED_VERSIONS}),
        ));
    }
    env.validate(verb)?;
    if stdin.len() > MAX_STDIN {
        return Err(CniError::new(
            ErrorCode::InvalidNetworkConfig,
            format!("network configuration larger than {MAX_STDIN} bytes"),
        ));
    }
    let parsed = NetConf::parse(stdin)?;
    let version = parsed.conf.version()?;
    match verb {
        Verb::Check if !version.has_check() => return Err(incompatible(verb, version)),
        Verb::Gc | Verb::Status if !version.has_gc_and_status() => return Err(incompatible(verb, version)),
        Verb::Check if parsed.conf.prev_result.is_none() => {
            return Err(CniError::new(
                ErrorCode::InvalidNetworkConfig,
                "CHECK requires prevResult",
            ));
        }
        _ => {}
    }
    if matches!(verb, Verb::Add | Verb::Check) {
        check_netns_exists(&env.netns)?;
    }
    let mut log = Log::open(
        parsed.conf.log_file.as_deref(),
        parsed.conf.debug.unwrap_or(false),
    );
    let settings = Settings::resolve(&parsed.conf);
    let Some((method, path)) = verb.endpoint() else {
        return Ok(None);
    };
    let body = (method == "POST").then(|| DaemonRequest {
        command: env.command.clone(),
        container_id: env.container_id.clone(),
        netns: env.netns.clone(),
        ifname: env.ifname.clone(),
        args: env.args.clone(),
        path: env.path.clone(),
        config_kuryr: parsed.raw.clone(),
    });
    let body = match body {
        Some(b) => Some(serde_json::to_vec(&b).map_err(|e| {
            CniError::new(ErrorCode::Generic, "cannot encode daemon request").with_details(e.to_string())
        })?),
        None => None,
    };
    log.debug(&format!(
        "verb={} container={} ifname={} netns={} daemon={}",
        verb.as_str(),
        env.container_id,
        env.ifname,
        env.netns,
        settings.address
    ));
    let timeout = if verb == Verb::Add {
        settings.add_timeout
    } else {
        settings.other_timeout
    };
    let outcome =
        match request_retrying_connect(&mut log, verb, &settings, method, path, body.as_deref(), timeout) {
            Ok(resp) => {
                log.debug(&format!(
                    "verb={} status={} body_len={}",
                    verb.as_str(),
                    resp.status,
                    resp.body.len()
                ));
                interpret_response(verb, resp.status, &resp.body)
            }
            Err(e) => DaemonOutcome::Err(transport_error(verb, &e)),
        };
    let result = finish(verb, version, env, outcome);
    match &result {
        Ok(_) => log.info(&format!(
            "verb={} container={} ok",
            verb.as_str(),
            env.container_id
        )),
        Err(e) => log.info(&format!(
            "verb={} container={} failed: {e}",
            verb.as_str(),
            env.container_id
        )),
    }
    result
}

/// The pause before connection attempt number `attempt + 1` (50 ms, doubling, at most 1 s).
pub fn connect_backoff(attempt: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1u64 << attempt.min(5))).min(Duration::from_secs(1))
}

/// Whether a connection failure is worth another attempt: not for STATUS (it reports the
/// daemon's state now), and only while the pause still ends inside both the retry window
/// (counted from `started`) and the verb's deadline.
pub fn should_retry_connect(
    verb: Verb,
    started: Instant,
    deadline: Instant,
    pause: Duration,
    now: Instant,
) -> bool {
    verb != Verb::Status && now + pause < deadline && now + pause < started + CONNECT_RETRY_WINDOW
}

/// One request to the daemon; while it cannot be connected to (refused, socket missing, reset
/// before the request was sent whole), tries again (see the module docs). Errors after the connection are returned as they are.
fn request_retrying_connect(
    log: &mut Log,
    verb: Verb,
    settings: &Settings,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<http::Response, HttpError> {
    let started = Instant::now();
    let deadline = started + timeout;
    let mut attempt = 0u32;
    loop {
        let remaining = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        match http::request(
            &settings.address,
            method,
            path,
            body,
            CONNECT_TIMEOUT.min(remaining),
            remaining,
        ) {
            Err(e) if e.is_not_listening() => {
                let pause = connect_backoff(attempt);
                if !should_retry_connect(verb, started, deadline, pause, Instant::now()) {
                    return Err(e);
                }
                if attempt == 0 {
                    log.info(&format!(
                        "verb={} daemon={} not reachable ({e}), retrying for up to {:?}",
                        verb.as_str(),
                        settings.address,
                        CONNECT_RETRY_WINDOW.min(timeout)
                    ));
                }
                std::thread::sleep(pause);
                attempt += 1;
            }
            other => {
                if attempt > 0 {
                    log.info(&format!(
                        "verb={} daemon={} reached after {attempt} retries in {:?}",
                        verb.as_str(),
                        settings.address,
                        started.elapsed()
                    ));
                }
                return other;
            }
        }
    }
}

fn transport_error(verb: Verb, e: &HttpError) -> CniError {
    let mut details = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        details.push_str(": ");
        details.push_str(&s.to_string());
        src = s.source();
    }
    let code = match (verb, e) {
        (Verb::Status, _) => ErrorCode::PluginNotAvailable,
        (_, HttpError::Malformed(_)) => ErrorCode::DaemonInternal,
        _ => ErrorCode::TryAgainLater,
    };
    let msg = match e {
        HttpError::Connect { .. } => "kuryr-daemon is not reachable",
        HttpError::Timeout(_) => "timed out waiting for kuryr-daemon",
        HttpError::Send(_) | HttpError::NotTaken(_) | HttpError::Io(_) => "connection to kuryr-daemon failed",
        HttpError::Malformed(_) => "kuryr-daemon sent a malformed response",
    };
    CniError::new(code, msg).with_details(details)
}

fn finish(
    verb: Verb,
    version: CniVersion,
    env: &CniEnv,
    outcome: DaemonOutcome,
) -> Result<Option<Value>, CniError> {
    match (verb, outcome) {
        (Verb::Add, DaemonOutcome::Ok(vif)) => {
            let vif = VifInfo::from_primitive(&vif)?;
            let result = CniResult::from_vif(&vif, &env.ifname, &env.netns)?;
            Ok(Some(result.to_json(version)))
        }
        (_, DaemonOutcome::Ok(_)) => Ok(None),
        (Verb::Check, DaemonOutcome::NotImplemented) => Err(CniError::new(
            ErrorCode::TryAgainLater,
            "kuryr-daemon does not implement CHECK; the attachment cannot be verified",
        )),
        (_, DaemonOutcome::NotImplemented) => Ok(None),
        (Verb::Status, DaemonOutcome::Err(e))
            if !matches!(
                e.code,
                ErrorCode::PluginNotAvailable | ErrorCode::LimitedConnectivity
            ) =>
        {
            Err(CniError {
                code: ErrorCode::PluginNotAvailable,
                ..e
            })
        }
        (_, DaemonOutcome::Err(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_one_second() {
        let pauses: Vec<u64> = (0..8).map(|a| connect_backoff(a).as_millis() as u64).collect();
        assert_eq!(pauses, vec![50, 100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(connect_backoff(u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn retries_stay_inside_the_window_and_the_deadline() {
        let t0 = Instant::now();
        let pause = Duration::from_millis(500);
        let far = t0 + Duration::from_secs(600);
        assert!(should_retry_connect(Verb::Add, t0, far, pause, t0));
        assert!(should_retry_connect(Verb::Del, t0, far, pause, t0));
        assert!(
            !should_retry_connect(Verb::Status, t0, far, pause, t0),
            "STATUS reports at once"
        );
        // The verb's deadline comes first.
        assert!(!should_retry_connect(
            Verb::Add,
            t0,
            t0 + Duration::from_millis(400),
            pause,
            t0
        ));
        // The window ends.
        let late = t0 + CONNECT_RETRY_WINDOW - Duration::from_millis(100);
        assert!(!should_retry_connect(Verb::Add, t0, far, pause, late));
    }
}
