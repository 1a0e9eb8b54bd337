//! `gpu-claims`: GPU claims for KubeVirt virtual machines.
#![forbid(unsafe_code)]

/// mimalloc rather than glibc's malloc: the webhook's and the watches'
/// request-sized buffers made glibc consolidate its free lists on nearly
/// every review (a quarter of the webhook storm's CPU in `unlink_chunk`);
/// with mimalloc the storm answers 1.4x the reviews per second at two
/// thirds of the p99 (BENCHMARKS.md, "The webhook under a pod storm").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An error ends the process with its chain of causes on one line, not a
/// Debug dump: with RUST_BACKTRACE set, `main -> Result` would print a
/// stack backtrace that reads like a crash. GPU_CLAIMS_BACKTRACE=1 asks
/// for the backtrace when one is wanted.
fn main() -> std::process::ExitCode {
    match gpu_claims::cli::Cli::parse_invoked().run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu-claims: error: {}", gpu_claims::error_words::words(&e));
            if std::env::var_os("GPU_CLAIMS_BACKTRACE").is_some() {
                eprintln!("{}", e.backtrace());
            }
            std::process::ExitCode::FAILURE
        }
    }
}
