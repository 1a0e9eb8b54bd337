#![doc = include_str!("../README.md")]

mod admission;
mod answers;
mod auth;
mod builder;
mod controllers;
mod discovery;
mod events;
pub mod faults;
mod handlers;
mod partial;
pub mod patch;
#[cfg(feature = "conformance")]
mod protobuf;
mod quantity;
mod registry;
mod resources;
mod select;
pub mod store;
mod table;
mod watch;
mod yaml;

pub use admission::conditions_hold;
pub use auth::audit::Access;
pub use auth::identity::{ANONYMOUS, WriteRecord};
pub use builder::{Builder, CrdError, Handle, StartError, install_crd};
pub use controllers::namespaces;
pub use faults::Faults;
pub use registry::pods;
pub use registry::schema::{SchemaVerdict, verdict as schema_verdict};
pub use resources::Served;

/// Why the API server would refuse this write of a DRA kind (`old`: the
/// stored object), in the words of its causes; None when it takes it.
/// For stand-ins that write the store directly as the components they
/// play (kube-scheduler's PreBind) write through the API server.
pub fn dra_refusal(kind: &str, old: Option<&Value>, new: &Value) -> Option<String> {
    let causes = registry::dra_rules::check(kind, old, new);
    let said: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.detail))
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}
pub(crate) use resources::{
    Custom, Registry, Resource, Sub, Target, kinds_without_generation, status_kinds,
};

use crate::store::Store;
pub(crate) use answers::{object_status, status, status_with};
use faults::Dice;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// One write made over HTTP, as the server applied or refused it.
#[derive(Clone, Debug)]
pub struct JournaledWrite {
    /// Who wrote (the token's user; `system:anonymous` without one).
    pub user: String,
    /// Since the server started.
    pub elapsed: Duration,
    /// create, update, update_status, add_finalizer, remove_finalizer,
    /// update_pod, patch, delete.
    pub op: &'static str,
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    /// False for a write that changed nothing.
    pub changed: bool,
    /// Why it was refused.
    pub error: Option<String>,
    /// Refused as invalid (422): a write Kubernetes would refuse too.
    pub invalid: bool,
    /// The store's resourceVersion the write made (0 for a refused write):
    /// what the objects were just before it is `objects_at(rv - 1)`.
    pub resource_version: u64,
}

/// Where a server tells each write over HTTP (a test's checker).
pub trait WriteJournal: Send + Sync {
    fn wrote(&self, w: JournaledWrite);
}

/// A running server: its store, its address, the faults it injects.
pub struct ApiServer {
    pub store: Arc<Store>,
    addr: SocketAddr,
    faults: Mutex<Faults>,
    dice: Dice,
    /// When set, every write over HTTP is told there (the gpu-claims
    /// tests' I1-I5 checker judges the controller's writes by it).
    journal: Option<Arc<dyn WriteJournal>>,
    /// Bumped on restart: every watch stream of the old process ends.
    epoch: tokio::sync::watch::Sender<u64>,
    serving: Mutex<Option<JoinHandle<()>>>,
    /// Garbage collection, CRD establishment, namespace finalization.
    controllers: Mutex<Vec<JoinHandle<()>>>,
    /// Shut down: a restart does not serve again.
    stopped: std::sync::atomic::AtomicBool,
    started: tokio::time::Instant,
    /// Every kind of request served, as RBAC would judge it.
    audit: auth::audit::Audit,
    /// Callers by token, their writes, and who is cut off.
    identities: auth::identity::Identities,
    /// Held while a write is applied and logged.
    write_order: Mutex<()>,
    /// Where the Services that webhooks name are served.
    services: admission::Services,
    /// The custom resources of the stored CRDs.
    registry: Registry,
}

/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A store with the API server's status subresources and the real wall clock.
pub fn new_store() -> Arc<Store> {
    let wall = Arc::new(k8s_openapi::jiff::Timestamp::now);
    Arc::new(Store::new(wall, &status_kinds()).without_generation(&kinds_without_generation()))
}

impl ApiServer {
    /// What a server starts with: its CRDs, namespaces, store, address.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Serves `store` on `listener` with its controllers.
    fn serve_listener(
        store: Arc<Store>,
        listener: tokio::net::TcpListener,
        journal: Option<Arc<dyn WriteJournal>>,
        versions: Vec<(&'static str, &'static str)>,
    ) -> std::io::Result<Arc<Self>> {
        let server = Arc::new(Self {
            addr: listener.local_addr()?,
            store: store.clone(),
            faults: Mutex::default(),
            dice: Dice::new(0x6770_752d_636c_6169),
            journal,
            epoch: tokio::sync::watch::channel(0).0,
            serving: Mutex::default(),
            controllers: Mutex::default(),
            stopped: std::sync::atomic::AtomicBool::new(false),
            started: tokio::time::Instant::now(),
            audit: auth::audit::Audit::default(),
            identities: auth::identity::Identities::default(),
            write_order: Mutex::default(),
            services: admission::Services::default(),
            registry: Registry::with_versions(versions.clone()),
        });
        controllers::namespaces::adopt(&store);
        controllers::bootstrap::kubernetes_service(&store, server.addr);
        controllers::bootstrap::api_services(&store, &versions);
        #[cfg(feature = "conformance")]
        controllers::bootstrap::component_statuses(&store);
        let (changes, _) = store.watch();
        controllers::bootstrap::default_accounts(&store);
        controllers::aggregation::builtin_roles(&store);
        controllers::crds::accept_stored(&store);
        *server.controllers.lock().unwrap_or_else(|e| e.into_inner()) = vec![
            tokio::spawn(controllers::gc::collect(store.clone())),
            tokio::spawn(controllers::crds::control(store.clone())),
            tokio::spawn(controllers::namespaces::control(store, changes)),
        ];
        server.serve_on(listener);
        Ok(server)
    }

    /// Stops serving for good: the listener, every connection and watch,
    /// and the controllers. The store stays readable.
    pub fn shutdown(&self) {
        use std::sync::atomic::Ordering;
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        self.epoch.send_modify(|e| *e += 1);
        let serving = self
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = serving {
            task.abort();
        }
        for task in self
            .controllers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }

    fn serve_on(self: &Arc<Self>, listener: tokio::net::TcpListener) {
        let mut epoch = self.epoch.subscribe();
        let app = handlers::router(self.clone());
        let task = tokio::spawn(async move {
            let stop = async move {
                let _ = epoch.changed().await;
            };
            gpu_claims_serve::serve(listener, app, HEADER_READ_TIMEOUT, stop).await;
        });
        *self.serving.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// What this server serves now: the built-ins and the stored CRDs' resources.
    pub fn served(&self) -> Arc<Served> {
        self.registry.served(&self.store)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Time since the server started: the clock of its write log.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The kinds of request served so far.
    pub fn audit(&self) -> Vec<Access> {
        self.audit.kinds()
    }

    pub(crate) fn audit_request(&self, a: Access) {
        self.audit.record(a);
    }

    pub fn set_faults(&self, f: Faults) {
        *self.faults.lock().unwrap_or_else(|e| e.into_inner()) = f;
    }

    pub(crate) fn faults(&self) -> Faults {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops serving (every connection and watch ends), stays down for
    /// `down`, and serves again on the same address with the same data but
    /// an empty watch cache: clients that rewatch from an old
    /// resourceVersion get `410 Gone` and must relist.
    pub async fn restart(self: &Arc<Self>, down: Duration) -> std::io::Result<()> {
        if self.stopped.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("the server was shut down"));
        }
        self.epoch.send_modify(|e| *e += 1);
        let task = self
            .serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(task) = task
            && tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
        {
            tracing::warn!("the API server's connections did not close within 5s");
        }
        self.store.forget_history();
        tokio::time::sleep(down).await;
        let listener = tokio::net::TcpListener::bind(self.addr).await?;
        self.serve_on(listener);
        Ok(())
    }
}

/// A kubeconfig for a server at `url`, without auth.
pub fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: gpu-claims\n  cluster:\n    server: {url}\ncontexts:\n- name: gpu-claims\n  context:\n    cluster: gpu-claims\n    user: gpu-claims\n    namespace: default\ncurrent-context: gpu-claims\nusers:\n- name: gpu-claims\n  user: {{}}\n"
    )
}

pub(crate) fn in_namespace(obj: &Value, ns: Option<&str>) -> bool {
    ns.is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
}
