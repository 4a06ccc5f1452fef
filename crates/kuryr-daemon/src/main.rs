//! `kuryr-daemon`: loads kuryr.conf (exit 2 with every error listed if it is wrong), starts
//! logging from its `[DEFAULT]` options, then runs the watchers, the CNI API server, the health
//! server and the metrics server.

use std::process::ExitCode;

use clap::Parser;
use kuryr_config::Role;
use kuryr_daemon::cli::{self, Args};

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Configuration first: nothing is touched when it is wrong.
    let config = match kuryr_runtime::start("kuryr-daemon", &args.config, Role::Daemon) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match cli::run(&args, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %kuryr_runtime::error_chain(&e), "stopped");
            eprintln!("kuryr-daemon: {}", kuryr_runtime::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
