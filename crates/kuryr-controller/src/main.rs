//! `kuryr-controller`: loads kuryr.conf (exiting with every error listed if it is wrong), then
//! runs the handlers, the health server and the metrics server.

use std::process::ExitCode;

use clap::Parser;
use kuryr_controller::cli::{self, Args};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(log_filter(std::env::var("RUST_LOG").ok()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    // Configuration first: nothing is touched when it is wrong.
    let config = match cli::load_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kuryr-controller: {e}");
            return ExitCode::from(2);
        }
    };
    // kube and any reqwest-based client must agree on one process-wide rustls provider.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    match cli::run(&args, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kuryr-controller: {}", kuryr_controller::error_chain(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

/// `RUST_LOG` (default `info`), with `openstack_sdk` at `warn` unless `RUST_LOG` names it: at
/// `info` the SDK logs every request with its headers; our Neutron client has its own metrics
/// and error reports.
fn log_filter(rust_log: Option<String>) -> EnvFilter {
    let base = rust_log
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "info".into());
    let spec = if base.contains("openstack_sdk") {
        base
    } else {
        format!("{base},openstack_sdk=warn")
    };
    EnvFilter::try_new(&spec).unwrap_or_else(|e| {
        eprintln!("kuryr-controller: RUST_LOG {spec:?} is not a valid filter ({e}); using info");
        EnvFilter::new("info,openstack_sdk=warn")
    })
}
