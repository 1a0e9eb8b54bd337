//! `gpu-claims`: GPU claims for KubeVirt virtual machines.
#![forbid(unsafe_code)]

use clap::Parser;

fn main() -> anyhow::Result<()> {
    gpu_claims::cli::Cli::parse().run()
}
