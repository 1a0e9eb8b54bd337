//! The command line (README, "Commands").

use crate::{crd, run};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    Run(Box<run::RunArgs>),
    /// Prints the CRDs, generated from the Rust types.
    Crd,
    /// Where the GPUs are: per class, node, quota, and each set waiting at
    /// the gate (also `kubectl gpu-claims status`, as kubectl-gpu_claims).
    Status(crate::status::StatusArgs),
    /// Cordons a node, taints it for evacuation, and waits until the
    /// controller has restarted its GPU VMs elsewhere (E2, E3); also
    /// `kubectl gpu-claims drain`. Exit 1 at the timeout, saying what blocks.
    Drain(crate::drain::DrainArgs),
    /// Undoes `drain`: the node schedulable again, its evacuation taint gone.
    Uncordon(crate::drain::UncordonArgs),
    /// Runs the controller on a snapshot, in memory, on a simulated clock.
    #[cfg(feature = "dev")]
    Plan(crate::dev::plan::PlanArgs),
    /// Shows the controller at work on a small cluster it brings along (no cluster needed).
    #[cfg(feature = "dev")]
    Demo(crate::dev::demo::DemoArgs),
    /// Runs only the embedded API server and the KubeVirt stand-in, for `run` replicas to be started (and killed) against it.
    #[cfg(feature = "dev")]
    Cluster(crate::dev::cluster::ClusterArgs),
}

/// What a kubectl user runs; the rest is the operator's and developers'.
const PLUGIN_COMMANDS: [&str; 3] = ["status", "drain", "uncordon"];

impl Cli {
    /// The command line as invoked. Named `kubectl-…` (kubectl's plugin,
    /// `kubectl gpu-claims`), help speaks of `kubectl gpu-claims` and
    /// lists only what a kubectl user runs; the others still run.
    pub fn parse_invoked() -> Self {
        let invoked = std::env::args_os().next().unwrap_or_default();
        let name = std::path::Path::new(&invoked)
            .file_name()
            .unwrap_or_default();
        let mut cmd = Cli::command();
        if name.to_string_lossy().starts_with("kubectl-") {
            cmd = cmd
                .name("kubectl gpu-claims")
                .bin_name("kubectl gpu-claims");
            let others: Vec<String> = cmd
                .get_subcommands()
                .map(|s| s.get_name().to_string())
                .filter(|n| !PLUGIN_COMMANDS.contains(&n.as_str()))
                .collect();
            for other in others {
                cmd = cmd.mut_subcommand(other, |s| s.hide(true));
            }
        }
        Cli::from_arg_matches(&cmd.get_matches()).unwrap_or_else(|e| e.exit())
    }

    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Run(args) => run::run(*args),
            Command::Crd => {
                print!("{}", crd::all_yaml()?);
                Ok(())
            }
            Command::Status(args) => crate::status::status(args),
            Command::Drain(args) => crate::drain::drain(args),
            Command::Uncordon(args) => crate::drain::uncordon(args),
            #[cfg(feature = "dev")]
            Command::Plan(args) => crate::dev::plan::plan(args),
            #[cfg(feature = "dev")]
            Command::Demo(args) => crate::dev::demo::demo(args),
            #[cfg(feature = "dev")]
            Command::Cluster(args) => crate::dev::cluster::cluster(args),
        }
    }
}
