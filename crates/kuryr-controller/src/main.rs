//! `kuryr-controller`: loads kuryr.conf (exiting with every error listed if it is wrong), starts
//! logging from its `[DEFAULT]` options, then runs the handlers, the health server and the
//! metrics server.

use std::process::ExitCode;

use clap::Parser;
use kuryr_config::Role;
use kuryr_controller::cli::{self, Args};

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    // Configuration first: nothing is touched when it is wrong.
    let config = match kuryr_runtime::start(kuryr_controller::COMPONENT, &args.config, Role::Controller) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match cli::run(&args, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %kuryr_runtime::error_chain(&e), "stopped");
            eprintln!("kuryr-controller: {}", kuryr_runtime::error_chain(&e));
            ExitCode::from(e.exit_code())
        }
    }
}
