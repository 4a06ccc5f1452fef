//! `kuryr-daemon`: loads kuryr.conf (exit 2 with every error listed if it is wrong), then runs
//! the watchers, the CNI API server, the health server and the metrics server.

use std::process::ExitCode;

use clap::Parser;
use kuryr_daemon::cli::{self, Args};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    // Configuration first: nothing is touched when it is wrong.
    let config = match cli::load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kuryr-daemon: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    match cli::run(&args, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kuryr-daemon: {}", kuryr_daemon::daemon::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
