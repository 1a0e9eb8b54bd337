//! The command line (SPEC section 6).

use crate::{cluster, crd, demo, plan, run};
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "gpu-claims",
    version,
    about = "GPU claims for KubeVirt virtual machines"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs the controller against the kubeconfig's (or in-cluster) API server.
    Run(run::RunArgs),
    /// Prints the CRDs, generated from the Rust types.
    Crd,
    /// Runs the controller on a snapshot, in memory, on a simulated clock.
    Plan(plan::PlanArgs),
    /// Shows the controller at work on a small cluster it brings along (no cluster needed).
    Demo(demo::DemoArgs),
    /// Runs only the embedded API server and the KubeVirt stand-in, for `run` replicas to be started (and killed) against it.
    Cluster(cluster::ClusterArgs),
}

impl Cli {
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Run(args) => run::run(args),
            Command::Crd => {
                print!("{}", crd::all_yaml()?);
                Ok(())
            }
            Command::Plan(args) => plan::plan(args),
            Command::Demo(args) => demo::demo(args),
            Command::Cluster(args) => cluster::cluster(args),
        }
    }
}

/// The default config file, when it exists.
pub fn default_config() -> Option<PathBuf> {
    let p = PathBuf::from("config/gpu-claims.yaml");
    p.exists().then_some(p)
}
