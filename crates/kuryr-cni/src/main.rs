//! `kuryr-cni`: the CNI plugin executable the container runtime runs (spec 0.3.1, 0.4.0, 1.0.0,
//! 1.1.0: ADD, DEL, CHECK, GC, STATUS, VERSION). It forwards each call to the node's
//! kuryr-daemon and prints the result; every failure is a CNI error object on stdout and exit
//! code 1. `kuryr-cni install ...` installs the plugin into the host (see [`install`]).
//!
//! Synchronous and dependency-light on purpose: it is exec'd once per pod operation.

mod env;
mod http;
mod install;
mod log;
mod plugin;
mod settings;

use std::io::{Read, Write};
use std::process::ExitCode;

use kuryr_cni_api::{CniError, ErrorCode};

fn print_json(v: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, v);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

fn run() -> ExitCode {
    let mut stdin = Vec::new();
    let outcome = env::CniEnv::read(|k| std::env::var_os(k)).and_then(|e| {
        // Fail fast (without waiting on stdin) when not run by a runtime.
        if let Err(err) = e.verb() {
            if e.command.is_empty() {
                eprintln!(
                    "kuryr-cni: kuryr CNI plugin (CNI spec {}); run by a container runtime with CNI_COMMAND set, or `kuryr-cni install --help`",
                    kuryr_cni_api::version::SUPPORTED_VERSIONS.join(", ")
                );
            }
            return Err(err);
        }
        // Every verb gets a JSON document on stdin (VERSION: `{"cniVersion": ...}`).
        std::io::stdin()
            .lock()
            .take(plugin::MAX_STDIN as u64 + 1)
            .read_to_end(&mut stdin)
            .map_err(|err| {
                CniError::new(ErrorCode::IoFailure, "cannot read stdin").with_details(err.to_string())
            })?;
        plugin::handle(&e, &stdin)
    });
    match outcome {
        Ok(Some(v)) => {
            print_json(&v);
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            let e = e.with_version(plugin::error_version(&stdin).as_str());
            print_json(&serde_json::to_value(&e).unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "install") {
        return install::main(&args[2..]);
    }
    // Belt and braces: a bug must still produce a CNI error object, not a bare crash.
    match std::panic::catch_unwind(run) {
        Ok(code) => code,
        Err(_) => {
            let e = CniError::new(ErrorCode::Generic, "kuryr-cni internal error").with_version("1.1.0");
            print_json(&serde_json::to_value(&e).unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}
