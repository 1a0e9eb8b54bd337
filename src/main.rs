//! `gpu-claims`: GPU claims for KubeVirt virtual machines.
#![forbid(unsafe_code)]

use clap::Parser;

/// An error ends the process with its chain of causes on one line, not a
/// Debug dump: with RUST_BACKTRACE set, `main -> Result` would print a
/// stack backtrace that reads like a crash. GPU_CLAIMS_BACKTRACE=1 asks
/// for the backtrace when one is wanted.
fn main() -> std::process::ExitCode {
    match gpu_claims::cli::Cli::parse().run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu-claims: error: {e:#}");
            if std::env::var_os("GPU_CLAIMS_BACKTRACE").is_some() {
                eprintln!("{}", e.backtrace());
            }
            std::process::ExitCode::FAILURE
        }
    }
}
