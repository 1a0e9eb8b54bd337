//! `gpu-claims-chaos`: the chaos harness for as long as asked. Replicas
//! of the controller (this binary again, as `gpu-claims-chaos replica
//! run ...`, so that one build is enough) against the embedded API
//! server, the leader killed, frozen and cut off again and again; prints
//! the figures as a table, writes them as JSON, and fails when a replica
//! wrote outside its term, an invariant broke, or the cluster did not
//! converge. See docs/operations.md.
#![forbid(unsafe_code)]

use clap::Parser;
use gpu_claims_testbed::chaos::{self, Launcher, LeaseTimes, Options};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "gpu-claims-chaos",
    about = "Kills, freezes and cuts off the leader of gpu-claims replicas; checks that nothing is written outside a term"
)]
struct Args {
    /// How long the chaos lasts (then the cluster must converge).
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Where to write the figures as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    #[arg(long, default_value = "4s", value_parser = humantime::parse_duration)]
    lease_duration: Duration,
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    renew_deadline: Duration,
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    retry_period: Duration,
    /// The churn's random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The API server's faults during the chaos.
    #[arg(long, default_value = Options::FAULTS)]
    faults: String,
    /// Where the kubeconfigs and the replicas' logs go (default: a new temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// How long the cluster may take to converge after the chaos.
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
    converge_within: Duration,
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    // A replica: this binary runs the controller (`gpu-claims run ...`).
    if argv.get(1).map(String::as_str) == Some("replica") {
        let cli = gpu_claims::cli::Cli::parse_from(
            std::iter::once("gpu-claims".to_string()).chain(argv[2..].iter().cloned()),
        );
        return match cli.run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("gpu-claims: error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let args = Args::parse();
    match chaos_run(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("gpu-claims-chaos: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn chaos_run(args: Args) -> anyhow::Result<bool> {
    let filter =
        std::env::var("RUST_LOG").unwrap_or_else(|_| "error,gpu_claims_testbed::chaos=info".into());
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
    let (dir, _keep) = match args.dir {
        Some(d) => (d, None),
        None => {
            let t = tempdir()?;
            (t.clone(), Some(RemoveDir(t)))
        }
    };
    let lease = LeaseTimes {
        duration: args.lease_duration,
        renew: args.renew_deadline,
        retry: args.retry_period,
    };
    gpu_claims::leader::LeaseArgs {
        lease_duration: lease.duration,
        renew_deadline: lease.renew,
        retry_period: lease.retry,
        ..Default::default()
    }
    .validate()?;
    eprintln!(
        "gpu-claims-chaos: {} replicas for {}, lease {:?}, logs in {}",
        args.replicas,
        humantime::format_duration(args.duration),
        lease.duration,
        dir.display()
    );
    let report = chaos::run(Options {
        duration: args.duration,
        replicas: args.replicas,
        lease,
        seed: args.seed,
        faults: args.faults,
        dir: dir.clone(),
        launcher: Launcher {
            program: std::env::current_exe()?,
            prefix: vec!["replica".into()],
        },
        converge_within: args.converge_within,
    })?;
    print!("{}", report.table());
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
        println!("figures written to {}", path.display());
    }
    if !report.clean() {
        eprintln!("{}", report.logs);
        // Kept for a look when the run failed.
        std::mem::forget(_keep);
        eprintln!(
            "gpu-claims-chaos: not clean; logs kept in {}",
            dir.display()
        );
    }
    Ok(report.clean())
}

fn tempdir() -> std::io::Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("gpu-claims-chaos-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

/// A directory removed when the value goes.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
