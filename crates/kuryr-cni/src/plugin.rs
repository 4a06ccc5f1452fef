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
//! Daemon unreachable or timing out: error 11 (ADD, DEL, CHECK, GC: the runtime retries, DEL
//! included), error 50 for STATUS.

use kuryr_cni_api::daemon::{DaemonOutcome, interpret_response};
use kuryr_cni_api::version::SUPPORTED_VERSIONS;
use kuryr_cni_api::{CniError, CniResult, CniVersion, DaemonRequest, ErrorCode, NetConf, Verb, VifInfo};
use serde_json::{Value, json};

use crate::env::{CniEnv, check_netns_exists};
use crate::http::{self, HttpError};
use crate::log::Log;
use crate::settings::{CONNECT_TIMEOUT, Settings};

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
    let outcome = match http::request(
        &settings.address,
        method,
        path,
        body.as_deref(),
        CONNECT_TIMEOUT,
        timeout,
    ) {
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
        HttpError::Io(_) => "connection to kuryr-daemon failed",
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
