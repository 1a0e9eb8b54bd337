//! The server: what it holds (the store, the CRDs' registry, faults,
//! callers, the write log), how it starts serving with its controllers,
//! shuts down and restarts as kube-apiserver restarts (watch caches gone).

use crate::auth;
use crate::controllers;
use crate::faults::{Dice, Faults};
use crate::handlers;
use crate::journal::{WriteJournal, WriteRecord};
use crate::store::Store;
use crate::{Access, Registry, Served, admission, kinds_without_generation, status_kinds};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// A running server: its store, its address, the faults it injects.
pub struct ApiServer {
    pub store: Arc<Store>,
    pub(crate) addr: SocketAddr,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) dice: Dice,
    /// Every write over HTTP, in the order applied (`writes()`).
    pub(crate) written: Mutex<Vec<WriteRecord>>,
    /// When set, every write over HTTP is told there too (a test's
    /// invariant checker judges a controller's writes by it).
    pub(crate) journal: Option<Arc<dyn WriteJournal>>,
    /// Bumped on restart: every watch stream of the old process ends.
    pub(crate) epoch: tokio::sync::watch::Sender<u64>,
    pub(crate) serving: Mutex<Option<JoinHandle<()>>>,
    /// Garbage collection, CRD establishment, namespace finalization.
    pub(crate) controllers: Mutex<Vec<JoinHandle<()>>>,
    /// Shut down: a restart does not serve again.
    pub(crate) stopped: std::sync::atomic::AtomicBool,
    pub(crate) started: tokio::time::Instant,
    /// Every kind of request served, as RBAC would judge it.
    pub(crate) audit: auth::audit::Audit,
    /// Callers by token, and who is cut off.
    pub(crate) identities: auth::identity::Identities,
    /// Held while a write is applied and logged.
    pub(crate) write_order: Mutex<()>,
    /// Where the Services that webhooks name are served.
    pub(crate) services: admission::Services,
    /// The custom resources of the stored CRDs.
    pub(crate) registry: Registry,
}

/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A store with the API server's status subresources and the real wall clock.
pub fn new_store() -> Arc<Store> {
    let wall = Arc::new(k8s_openapi::jiff::Timestamp::now);
    Arc::new(Store::new(wall, &status_kinds()).without_generation(&kinds_without_generation()))
}

impl ApiServer {
    /// Serves `store` on `listener` with its controllers.
    pub(crate) fn serve_listener(
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
            written: Mutex::default(),
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
        crate::registry::priorities::adopt(&store);
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
        if let Some(task) = self.stop_serving() {
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

    /// Ends every connection and watch stream (a new epoch), and takes the
    /// serving task, for shutdown to abort or restart to wait for.
    fn stop_serving(&self) -> Option<JoinHandle<()>> {
        self.epoch.send_modify(|e| *e += 1);
        self.serving
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
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
        if let Some(task) = self.stop_serving()
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

/// A kubeconfig for a server at `url`, without auth (`Handle::kubeconfig`;
/// `kubeconfig_for` adds a token).
pub(crate) fn kubeconfig(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: embedded\n  cluster:\n    server: {url}\ncontexts:\n- name: embedded\n  context:\n    cluster: embedded\n    user: embedded\n    namespace: default\ncurrent-context: embedded\nusers:\n- name: embedded\n  user: {{}}\n"
    )
}
