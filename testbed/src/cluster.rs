//! A cluster to run `gpu-claims run` replicas against, and to kill them
//! in (`gpu-claims cluster`, the chaos harness): the embedded API server
//! and the KubeVirt/kubelet stand-in over one store, journaled for the
//! invariant checker. Each replica gets a kubeconfig with its own bearer
//! token, so the server knows who made each write.

use crate::memory::MemCluster;
use crate::memory::store::Store;
use crate::standin::StandIn;
use gpu_claims_apiserver::{ApiServer, Handle, StartError};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The embedded API server, its journal for the invariant checker, and the
/// stand-in, over one store.
pub struct LocalCluster {
    pub store: Arc<Store>,
    pub journal: Arc<MemCluster>,
    /// The server, up as long as the cluster is.
    pub server: Handle,
    pub standin: Arc<StandIn>,
}

impl LocalCluster {
    /// Starts the server on `addr` and the stand-in, seeded by `seed`;
    /// inside a tokio runtime.
    pub async fn start(
        addr: SocketAddr,
        seed: impl FnOnce(&MemCluster),
    ) -> Result<Self, StartError> {
        let store = crate::crds::cluster_store();
        let journal = MemCluster::new(store.clone());
        seed(&journal);
        let server = ApiServer::builder()
            .store(store.clone())
            .addr(addr)
            .journal(journal.clone())
            .start()
            .await?;
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
