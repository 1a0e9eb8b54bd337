//! Starting a server the way a test does: a builder that takes the CRDs
//! and namespaces the test needs, and a handle that gives a `kube::Client`
//! and a kubeconfig and shuts the server down when it is dropped (as
//! controller-runtime's envtest `Environment` does, without the binaries).

use crate::resources::custom_of;
use crate::store::Store;
use crate::{ApiServer, WriteJournal, controllers::namespaces};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;

impl ApiServer {
    /// What a server starts with: its CRDs, namespaces, store, address.
    pub fn builder() -> Builder {
        Builder::default()
    }
}

/// Why a CustomResourceDefinition cannot be installed.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// Not a CustomResourceDefinition as apiextensions.k8s.io/v1 has it.
    #[error("not a CustomResourceDefinition: {0}")]
    Undecodable(#[source] serde_json::Error),
    /// No version of it is served, so it would have no resource.
    #[error("CustomResourceDefinition {name} serves no version")]
    NoServedVersion { name: String },
}

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Crd(#[from] CrdError),
}

/// Stores a CustomResourceDefinition (JSON) before the server starts, as
/// `kubectl apply` of it would: it is served once the server runs, and
/// objects written straight to the store meet its status subresource.
pub fn install_crd(store: &Store, crd: Value) -> Result<(), CrdError> {
    let decoded: CustomResourceDefinition =
        serde_json::from_value(crd.clone()).map_err(CrdError::Undecodable)?;
    let served = custom_of(&decoded).ok_or_else(|| CrdError::NoServedVersion {
        name: decoded.metadata.name.clone().unwrap_or_default(),
    })?;
    store.set_status_subresource(served.resource.store_kind, served.resource.status);
    store.seed("CustomResourceDefinition", crd);
    Ok(())
}

/// What a server starts with. `ApiServer::builder()` makes one.
pub struct Builder {
    store: Option<Arc<Store>>,
    crds: Vec<Value>,
    namespaces: Vec<String>,
    addr: SocketAddr,
    journal: Option<Arc<dyn WriteJournal>>,
    versions: Vec<(&'static str, &'static str)>,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            store: None,
            crds: Vec::new(),
            namespaces: Vec::new(),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            journal: None,
            versions: Vec::new(),
        }
    }
}

impl Builder {
    /// Serves the custom resource `K` (its CRD as kube's derive generates it).
    pub fn crd<K: CustomResourceExt>(self) -> Self {
        match serde_json::to_value(K::crd()) {
            Ok(crd) => self.crd_json(crd),
            // A CRD that does not serialize is one `start` refuses.
            Err(_) => self.crd_json(Value::Null),
        }
    }

    /// Serves a CustomResourceDefinition given as JSON (a kind that is not
    /// ours, or one read from a chart's YAML).
    pub fn crd_json(mut self, crd: Value) -> Self {
        self.crds.push(crd);
        self
    }

    /// A namespace that exists when the server starts (`default` and the
    /// system namespaces always do).
    pub fn namespace(mut self, name: &str) -> Self {
        self.namespaces.push(name.to_string());
        self
    }

    /// Serves this store (seeded beforehand, or shared with a simulation)
    /// instead of a new one.
    pub fn store(mut self, store: Arc<Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Where to listen; `127.0.0.1:0` (a free port) unless set.
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Where every write over HTTP is told, as applied or refused (a
    /// test's checker of what its controller wrote).
    pub fn journal(mut self, journal: Arc<dyn WriteJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Installs the CRDs and namespaces and serves. A CRD it cannot take
    /// is an error, not a kind silently missing.
    /// Serves the built-in `kind` at `version` instead of its newest, as
    /// an older Kubernetes does (`DeviceTaintRule` at `v1beta2`: 1.36);
    /// objects keep the newest version's fields, which these share.
    pub fn serve_kind_at(mut self, kind: &'static str, version: &'static str) -> Self {
        self.versions.push((kind, version));
        self
    }

    pub async fn start(self) -> Result<Handle, StartError> {
        let store = self.store.unwrap_or_else(crate::new_store);
        for crd in self.crds {
            install_crd(&store, crd)?;
        }
        for ns in &self.namespaces {
            namespaces::ensure(&store, ns);
        }
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .map_err(|source| StartError::Bind {
                addr: self.addr,
                source,
            })?;
        let server = ApiServer::serve_listener(store, listener, self.journal, self.versions)
            .map_err(|source| StartError::Bind {
                addr: self.addr,
                source,
            })?;
        Ok(Handle { server })
    }
}

/// A running server. Dropping it shuts the server down: its listener, its
/// connections and watches, and its controllers (garbage collection, CRD
/// establishment, namespace finalization).
pub struct Handle {
    server: Arc<ApiServer>,
}

impl Handle {
    /// A client of the server, without auth (the server lets anonymous
    /// callers on loopback do anything). Must be called in a tokio runtime.
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config()).expect("a plain-HTTP kube client builds")
    }

    /// The config `client` builds its client from, for a client of other
    /// settings (`default_retry = false` to see a 429 rather than retry it).
    pub fn config(&self) -> kube::Config {
        let url = self
            .server
            .url()
            .parse()
            .expect("the server's own URL parses");
        kube::Config::new(url)
    }

    /// A client of the server as user `name`, with a bearer token of its
    /// own: the server records who wrote what, and judges `name` by the
    /// stored RBAC where a review asks.
    pub async fn client_as(&self, name: &str) -> Result<kube::Client, kube::Error> {
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&self.server.kubeconfig_for(name))
            .map_err(kube::Error::InferKubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(kube::Error::InferKubeconfig)?;
        kube::Client::try_from(config)
    }

    /// A kubeconfig for kubectl, helm or `kube::Config::from_custom_kubeconfig`.
    pub fn kubeconfig(&self) -> String {
        crate::kubeconfig(&self.server.url())
    }

    /// The server, to share with what runs beside the test (it stays up
    /// only as long as this handle).
    pub fn server(&self) -> &Arc<ApiServer> {
        &self.server
    }
}

impl std::ops::Deref for Handle {
    type Target = Arc<ApiServer>;
    fn deref(&self) -> &Arc<ApiServer> {
        &self.server
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.server.shutdown();
    }
}
