//! `gpu-claims cluster`: the embedded API server (with `--faults`) and the
//! KubeVirt/kubelet stand-in, seeded as the demo's cluster, for `run`
//! replicas to be started (and killed) against; on Ctrl-C it prints the
//! Lease's history, each replica's writes, and any write made outside its
//! writer's term.

use anyhow::Context as _;
use gpu_claims_apiserver::Faults;
use gpu_claims_testbed::cluster::{LocalCluster, replica_name};
use gpu_claims_testbed::terms::summary;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ClusterArgs {
    /// Where the API server listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    api_addr: SocketAddr,
    /// Where to write the kubeconfigs: replica-1.kubeconfig, ... and admin.kubeconfig.
    #[arg(long, default_value = "gpu-claims-cluster")]
    dir: PathBuf,
    /// How many replica identities (and kubeconfigs) to make.
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Faults the API server injects, e.g. `conflict=0.04,throttle=0.03,error=0.03,cut=5s`.
    #[arg(long, default_value = "")]
    faults: String,
}

pub fn cluster(args: ClusterArgs) -> anyhow::Result<()> {
    let faults = Faults::parse(&args.faults).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let c = LocalCluster::start(args.api_addr, gpu_claims_testbed::demo::seed)
            .await
            .with_context(|| format!("listen on {}", args.api_addr))?;
        c.server.set_faults(faults);
        std::fs::create_dir_all(&args.dir)
            .with_context(|| format!("create {}", args.dir.display()))?;
        let admin = c.kubeconfig(&args.dir, "admin")?;
        println!(
            "gpu-claims cluster: an API server at {} with the demo's cluster, the KubeVirt stand-in running",
            c.server.url()
        );
        println!("  kubectl --kubeconfig {} get gpuclaims -A", admin.display());
        println!("  each replica with its own identity (the server records who writes):");
        for i in 1..=args.replicas {
            let name = replica_name(i);
            let kc = c.kubeconfig(&args.dir, &name)?;
            println!(
                "  KUBECONFIG={} POD_NAME={name} gpu-claims run --http-addr 127.0.0.1:0 --http-auth none --lease-duration 4s --renew-deadline 3s --retry-period 500ms",
                kc.display()
            );
        }
        println!("  Ctrl-C stops it and prints the Lease's history and the writes by replica.");
        tokio::signal::ctrl_c().await?;
        print!("{}", summary(&c.server.writes()));
        Ok(())
    })
}
