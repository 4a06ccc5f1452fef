//! `kuryrctl`: parses the command line, runs the command, prints errors with their causes and
//! exits with the command's code (never panics on input).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = kuryrctl::cli::Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kuryrctl: starting the runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match rt.block_on(kuryrctl::run(cli)) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("kuryrctl: {}", kuryrctl::error_chain(&e));
            std::process::ExitCode::from(e.exit_code())
        }
    }
}
