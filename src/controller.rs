//! A controller running in this process, as `run` and `demo` start it:
//! the supervisor and its actors, the watchers that feed it, the config
//! reloader, the gate webhook, and, when elected, the elector and the
//! fence every write passes.

use crate::clients::Clients;
use crate::config::Reloader;
use crate::http::auth::{Delegated, HttpAuth};
use crate::http::{AppState, Metrics, router};
use crate::kube_events::KubeRecorder;
use crate::kube_ports::KubePorts;
use crate::leader::{Elector, Fence, KubeLeases, LeaderView, LeaseArgs};
use crate::telemetry::Logging;
use crate::watch::{WatchHealth, watch};
use crate::webhook::{self, CertFiles, Resolver, TlsListener, WebhookState, watch_certs};
use actix::Actor;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::controller::{ConfigChanged, Env, Leading, Ports, Supervisor};
use gpu_claims_actors::ports::{Guarded, TokioClock, Writer};
use gpu_claims_actors::world::WorldWriter;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a controller is started with.
pub struct Launch {
    pub clients: Clients,
    pub config: Config,
    /// The config file to reload from when it changes.
    pub path: Option<PathBuf>,
    pub logging: Option<Logging>,
    pub webhook: Option<(SocketAddr, CertFiles)>,
    /// Elect a leader on a Lease; None: this process always writes.
    pub election: Option<Election>,
}

pub struct Election {
    pub lease: LeaseArgs,
    /// This process's name in the Lease.
    pub identity: String,
}

/// The elector of a process that elects, and what a clean stop needs.
struct Leadership {
    leases: Arc<KubeLeases>,
    fence: Arc<Fence>,
    view: Arc<Mutex<LeaderView>>,
    elector: tokio::task::JoinHandle<()>,
    identity: String,
    request_timeout: Duration,
}

pub struct Controller {
    pub supervisor: actix::Addr<Supervisor>,
    pub metrics: Arc<Metrics>,
    /// The actors' shared state (the world, the activity counters).
    pub env: Arc<Env>,
    pub watch_health: Arc<WatchHealth>,
    registry: Arc<prometheus_client::registry::Registry>,
    leadership: Option<Leadership>,
    /// For the reviews that guard /metrics and /debug.
    requests: kube::Client,
    request_timeout: Duration,
    webhook_addr: Option<SocketAddr>,
    /// The watch of each kind, stopped with the controller.
    watchers: Vec<tokio::task::JoinHandle<()>>,
}

impl Controller {
    /// Starts the controller; must run inside an actix System. With an
    /// election it starts as a warm standby: its caches fill and stay
    /// current, and it decides from the moment it holds the Lease.
    pub async fn start(launch: Launch) -> crate::Result<Self> {
        let Launch {
            clients,
            config,
            path,
            logging,
            webhook,
            election,
        } = launch;
        let writer_of_world = WorldWriter::new(config.clone());
        let world = writer_of_world.reader();
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = Metrics::register(&mut registry, Some(world.clone()));
        let kube = KubePorts::new(
            clients.requests.clone(),
            metrics.clone(),
            clients.request_timeout,
        );
        let mut webhook_addr = None;
        if let Some((addr, files)) = webhook {
            let state = WebhookState {
                world: world.clone(),
                reader: kube.clone(),
                metrics: Some(metrics.clone()),
            };
            webhook_addr = Some(serve_webhook(addr, files, state).await?);
        }
        let fence = election
            .as_ref()
            .map(|e| Arc::new(Fence::new(e.lease.renew_deadline, e.lease.lease_duration)));
        if let (Some(f), Some(e)) = (&fence, &election) {
            // The same fence at the wire, for what is sent past the writer.
            let wire = crate::leader::wire::WireFence::new(
                f.clone(),
                &e.lease.lease_namespace,
                &e.lease.lease_name,
            );
            let _ = clients.fence.set(wire);
        }
        let writer: Arc<dyn Writer> = match &fence {
            Some(f) => Arc::new(Guarded {
                inner: kube.clone(),
                guard: f.clone(),
            }),
            None => kube.clone(),
        };
        let ports = Ports {
            writer,
            reader: kube,
            clock: Arc::new(TokioClock::real()),
            events: KubeRecorder::new(clients.requests.clone(), fence.clone()),
            telemetry: metrics.clone(),
        };
        let env = Env::new(world, ports);
        let supervisor = match election {
            Some(_) => Supervisor::new(env.clone(), writer_of_world).standby(),
            None => Supervisor::new(env.clone(), writer_of_world),
        }
        .start();
        let watchers = Supervisor::watched_kinds(&config)
            .into_iter()
            .map(|kind| {
                tokio::spawn(watch(
                    clients.watches.clone(),
                    kind,
                    supervisor.clone(),
                    clients.watch_health.clone(),
                ))
            })
            .collect();
        if let Some(path) = path {
            spawn_reloader(path, config, logging, supervisor.clone(), metrics.clone());
        }
        let leadership = match (election, fence) {
            (Some(e), Some(fence)) => Some(elect(&clients, e, fence, &supervisor, &metrics)),
            _ => {
                metrics.leader.set(1);
                None
            }
        };
        Ok(Self {
            supervisor,
            metrics,
            env,
            watch_health: clients.watch_health,
            registry: Arc::new(registry),
            leadership,
            requests: clients.requests,
            request_timeout: clients.request_timeout,
            webhook_addr,
            watchers,
        })
    }

    /// /metrics, /healthz, /readyz and /debug for this controller, the
    /// first and the last guarded as `auth` says.
    pub fn router(&self, auth: HttpAuth) -> axum::Router {
        let guard = (auth == HttpAuth::Kubernetes).then(|| {
            Arc::new(Delegated::new(
                self.requests.clone(),
                self.request_timeout,
                Some(self.metrics.clone()),
            ))
        });
        let state = AppState {
            supervisor: self.supervisor.clone(),
            registry: self.registry.clone(),
            watches: self.watch_health.clone(),
            leader: self.leadership.as_ref().map(|l| l.view.clone()),
        };
        router(state, guard)
    }

    /// What /metrics serves, read in this process (no caller to authorize).
    pub fn metrics_text(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }

    /// Where the gate webhook listens, when it was started.
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook_addr
    }

    /// Who leads, as this process sees it (None: it does not elect).
    pub fn leader(&self) -> Option<LeaderView> {
        let l = self.leadership.as_ref()?;
        Some(l.view.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// A clean stop: the watches stop (a server going away next is no
    /// failure to retry and report), the elector stops, the fence closes,
    /// the writes in flight are answered, and the Lease is given up so
    /// that a standby takes over at once.
    pub async fn stop(self) {
        for w in &self.watchers {
            w.abort();
        }
        if let Some(l) = self.leadership {
            l.elector.abort();
            Elector::release(l.leases.as_ref(), &l.identity, &l.fence, l.request_timeout).await;
        }
    }
}

/// Starts the elector: leadership reaches the supervisor and the metric.
fn elect(
    clients: &Clients,
    e: Election,
    fence: Arc<Fence>,
    supervisor: &actix::Addr<Supervisor>,
    metrics: &Arc<Metrics>,
) -> Leadership {
    let leases = Arc::new(KubeLeases::new(
        clients.requests.clone(),
        &e.lease.lease_namespace,
        &e.lease.lease_name,
        clients.request_timeout,
        metrics.clone(),
    ));
    let elector = Elector::new(
        leases.clone(),
        e.lease,
        e.identity.clone(),
        clients.request_timeout,
        fence.clone(),
    );
    let view = elector.view();
    let (to, m) = (supervisor.clone(), metrics.clone());
    metrics.leader.set(0);
    let elector = tokio::spawn(elector.run(move |leading| {
        m.leader.set(i64::from(leading));
        to.do_send(Leading(leading));
    }));
    Leadership {
        leases,
        fence,
        view,
        elector,
        identity: e.identity,
        request_timeout: clients.request_timeout,
    }
}

fn spawn_reloader(
    path: PathBuf,
    config: Config,
    mut logging: Option<Logging>,
    to: actix::Addr<Supervisor>,
    metrics: Arc<Metrics>,
) {
    let reloader = Reloader::new(path, config);
    tokio::spawn(reloader.run(move |r| {
        metrics.reload(r.as_ref().err());
        if let Ok(c) = r {
            if let Some(l) = logging.as_mut() {
                l.apply(&c);
            }
            to.do_send(ConfigChanged(c));
        }
    }));
}

/// Starts the gate webhook (G1) over TLS, its certificate reloaded when its files change.
pub async fn serve_webhook(
    addr: SocketAddr,
    files: CertFiles,
    state: WebhookState,
) -> crate::Result<SocketAddr> {
    let resolver = Resolver::new(files)?;
    let listener = TlsListener::bind(addr, &resolver).await?;
    let bound = axum::serve::Listener::local_addr(&listener)
        .map_err(|e| crate::Error::Tls(webhook::TlsError::Listen { addr, source: e }))?;
    tokio::spawn(watch_certs(resolver));
    tokio::spawn(crate::serve::serve(
        listener,
        webhook::router(state),
        std::future::pending(),
    ));
    tracing::info!(addr = %bound, "serving the gate webhook at /mutate");
    Ok(bound)
}
