//! `gpu-claims plan`: the cluster of a snapshot, run by the controller in
//! memory on a simulated clock (`gpu_claims_testbed::plan`); one JSON
//! object per line on stdout, the contract other tools parse (README,
//! "Commands").

use crate::{config, telemetry::Logging};
use gpu_claims_testbed::plan;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Multi-document YAML (or a List) of the cluster at time 0.
    #[arg(long)]
    snapshot: PathBuf,
    /// The config file (default: config/gpu-claims.yaml when present).
    #[arg(long, env = "GPU_CLAIMS_CONFIG")]
    config: Option<PathBuf>,
    /// Advance the clock by this much and settle again; repeatable.
    #[arg(long = "after", value_parser = humantime::parse_duration)]
    after: Vec<Duration>,
    #[arg(long, value_enum, default_value_t = Output::Writes)]
    output: Output,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    /// One JSON object per write, in order.
    Writes,
    /// One JSON object per object that existed at any point, after the last settle.
    State,
}

pub fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let PlanArgs {
        snapshot,
        config,
        after,
        output,
    } = args;
    let mut config = config::initial(config.or_else(config::default_path).as_deref())?;
    // Logs go to stderr and stay quiet: stdout is the contract.
    config.log.filter = "warn".into();
    Logging::init(&config);
    let (writes, states) = plan::run_snapshot(config, &snapshot, &after, output == Output::State)?;
    let lines: Vec<String> = match output {
        Output::Writes => writes
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?,
        Output::State => states
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?,
    };
    for l in lines {
        println!("{l}");
    }
    Ok(())
}
