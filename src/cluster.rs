//! `gpu-claims cluster`: a cluster to run `gpu-claims run` replicas
//! against, and to kill them in: the embedded API server (with `--faults`)
//! and the KubeVirt/kubelet stand-in, seeded as the demo's cluster. Each
//! replica gets a kubeconfig with its own bearer token, so the server
//! knows who made each write; on Ctrl-C it prints the Lease's history and
//! each replica's writes, and any write made outside its writer's term.

use crate::apiserver::{ApiServer, Faults, WriteRecord};
use crate::standin::StandIn;
use anyhow::Context as _;
use gpu_claims_actors::memory::MemCluster;
use gpu_claims_actors::memory::store::Store;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// The embedded API server, its journal for the invariant checker, and the
/// stand-in, over one store.
pub struct LocalCluster {
    pub store: Arc<Store>,
    pub journal: Arc<MemCluster>,
    pub server: Arc<ApiServer>,
    pub standin: Arc<StandIn>,
}

impl LocalCluster {
    /// Starts the server on `addr` and the stand-in, seeded by `seed`;
    /// inside a tokio runtime.
    pub async fn start(addr: SocketAddr, seed: impl FnOnce(&MemCluster)) -> std::io::Result<Self> {
        let store = crate::crd::cluster_store();
        let journal = MemCluster::new(store.clone());
        seed(&journal);
        let server = ApiServer::start(store.clone(), addr, Some(journal.clone())).await?;
        let standin = StandIn::new(store.clone());
        standin.spawn();
        Ok(Self {
            store,
            journal,
            server,
            standin,
        })
    }

    /// Writes `name.kubeconfig` into `dir` for a new user `name`.
    pub fn kubeconfig(&self, dir: &Path, name: &str) -> std::io::Result<PathBuf> {
        let path = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&path, self.server.kubeconfig_for(name))?;
        Ok(path)
    }
}

/// The replica's name for its `i`th identity, from 1.
pub fn replica_name(i: usize) -> String {
    format!("replica-{i}")
}

pub fn cluster(args: ClusterArgs) -> anyhow::Result<()> {
    let faults = Faults::parse(&args.faults).map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let c = LocalCluster::start(args.api_addr, crate::demo::seed)
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

/// The Lease's holders in order, each replica's writes, and the writes
/// made outside their writer's term.
pub fn summary(log: &[WriteRecord]) -> String {
    let terms = crate::chaos::terms::Terms::of(log);
    let mut out = String::from("\nLease holders, in order:\n");
    for t in &terms.history {
        out.push_str(&format!(
            "  {:>8.3}s  {}\n",
            t.at_s,
            t.holder.as_deref().unwrap_or("(none)")
        ));
    }
    out.push_str("writes by user (Lease renewals aside):\n");
    for (user, n) in &terms.writes_by_user {
        out.push_str(&format!("  {user}: {n}\n"));
    }
    out.push_str(&format!(
        "writes outside their writer's term: {}\n",
        terms.outside.len()
    ));
    for w in terms.outside.iter().take(20) {
        out.push_str(&format!(
            "  #{} {:.3}s {} {} {} {}/{}\n",
            w.seq,
            w.at_s,
            w.user,
            w.op,
            w.kind,
            w.namespace.as_deref().unwrap_or_default(),
            w.name
        ));
    }
    out
}
