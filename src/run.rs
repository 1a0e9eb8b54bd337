//! `gpu-claims run`: the controller against a real API server.

use crate::cli::default_config;
use crate::config::{self, Reloader};
use crate::http::{AppState, Metrics, router};
use crate::kube_ports::{KubePorts, KubeRecorder};
use crate::leader::{Elector, LeaseArgs};
use crate::telemetry::Logging;
use crate::watch::watch;
use crate::webhook::{self, CertFiles, Resolver, TlsListener, WebhookState, watch_certs};
use actix::Actor;
use anyhow::Context as _;
use gpu_claims_actors::controller::{ConfigChanged, Env, Leading, Ports, Supervisor};
use gpu_claims_actors::ports::TokioClock;
use gpu_claims_actors::world::World;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The config file (default: config/gpu-claims.yaml when present); reloaded when it changes.
    #[arg(long, env = "GPU_CLAIMS_CONFIG")]
    config: Option<PathBuf>,
    /// Where /metrics, /healthz, /readyz and /debug listen.
    #[arg(long, env = "GPU_CLAIMS_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// Where the gate webhook (G1) listens, over TLS, when a cert and key are given.
    #[arg(long, env = "GPU_CLAIMS_WEBHOOK_ADDR", default_value = "0.0.0.0:8443")]
    webhook_addr: SocketAddr,
    /// The webhook's PEM certificate chain; reloaded when it changes.
    #[arg(long, env = "GPU_CLAIMS_TLS_CERT_FILE", requires = "tls_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The webhook's PEM private key; reloaded when it changes.
    #[arg(long, env = "GPU_CLAIMS_TLS_KEY_FILE", requires = "tls_cert_file")]
    tls_key_file: Option<PathBuf>,
    #[command(flatten)]
    lease: LeaseArgs,
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let RunArgs {
        config,
        http_addr,
        webhook_addr,
        tls_cert_file,
        tls_key_file,
        lease,
    } = args;
    let webhook_files = tls_cert_file
        .zip(tls_key_file)
        .map(|(cert, key)| CertFiles { cert, key });
    let path = config.or_else(default_config);
    let config = config::initial(path.as_deref())?;
    let logging = Logging::init(&config);
    let sys = system();
    sys.block_on(async move {
        let client = kube::Client::try_default()
            .await
            .context("no kubeconfig or in-cluster config")?;
        let webhook = webhook_files.map(|files| (webhook_addr, files));
        let standby = lease.leader_elect;
        let running =
            Controller::start(client.clone(), config, path, Some(logging), webhook, standby)
                .await?;
        let id = crate::leader::identity();
        if lease.leader_elect {
            let supervisor = running.supervisor.clone();
            let metrics = running.metrics.clone();
            let elector = Elector::new(client.clone(), lease.clone(), id.clone());
            tokio::spawn(async move {
                let why = elector
                    .run(|leading| {
                        metrics.leader.set(i64::from(leading));
                        supervisor.do_send(Leading(leading));
                    })
                    .await;
                // As client-go controllers do: a leader that lost its Lease
                // exits, so that it never writes beside the new leader.
                tracing::error!(reason = %why, "lost the leader Lease; exiting to restart as a standby");
                std::process::exit(1);
            });
        } else {
            running.metrics.leader.set(1);
        }
        let listener = tokio::net::TcpListener::bind(http_addr)
            .await
            .with_context(|| format!("listen on {http_addr}"))?;
        tracing::info!(%http_addr, "serving /metrics, /healthz, /readyz, /debug/claims");
        axum::serve(listener, running.router())
            .with_graceful_shutdown(shutdown())
            .await?;
        if lease.leader_elect {
            Elector::release(client, &lease, &id).await;
        }
        Ok(())
    })
}

/// An actix System over a multi-thread tokio runtime, as `run` and `demo` use.
pub fn system() -> actix::SystemRunner {
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

/// A controller running in this process: the supervisor and its actors,
/// the watchers that feed it, and the config reloader.
pub struct Controller {
    pub supervisor: actix::Addr<Supervisor>,
    pub metrics: Arc<Metrics>,
    /// The actors' shared state (the world, the activity counters).
    pub env: Arc<Env>,
    registry: Arc<prometheus_client::registry::Registry>,
}

impl Controller {
    /// Starts the controller against `client`; must run inside an actix
    /// System. `path`, when set, is the config file to reload from.
    pub async fn start(
        client: kube::Client,
        config: gpu_claims_actors::config::Config,
        path: Option<PathBuf>,
        mut logging: Option<Logging>,
        webhook: Option<(SocketAddr, CertFiles)>,
        standby: bool,
    ) -> anyhow::Result<Self> {
        let world = Arc::new(World::new(config.clone()));
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = Metrics::register(&mut registry, Some(world.clone()));
        let ports = KubePorts::new(client.clone(), metrics.clone());
        if let Some((addr, files)) = webhook {
            let state = WebhookState {
                world: world.clone(),
                reader: ports.clone(),
            };
            serve_webhook(addr, files, state).await?;
        }
        let events = KubeRecorder::new(client.clone());
        let ports = Ports {
            writer: ports.clone(),
            reader: ports,
            clock: Arc::new(TokioClock::real()),
            events,
            telemetry: metrics.clone(),
        };
        let env = Env::new(world, ports);
        let supervisor = if standby {
            Supervisor::new(env.clone()).standby()
        } else {
            Supervisor::new(env.clone())
        }
        .start();
        for kind in Supervisor::watched_kinds(&config) {
            tokio::spawn(watch(client.clone(), kind, supervisor.clone()));
        }
        if let Some(path) = path {
            let to = supervisor.clone();
            let metrics = metrics.clone();
            let reloader = Reloader::new(path, config.clone());
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
        Ok(Self {
            supervisor,
            metrics,
            env,
            registry: Arc::new(registry),
        })
    }

    /// /metrics, /healthz, /readyz and /debug/claims for this controller.
    pub fn router(&self) -> axum::Router {
        router(AppState {
            supervisor: self.supervisor.clone(),
            registry: self.registry.clone(),
        })
    }
}

/// Starts the gate webhook (G1) over TLS, its certificate reloaded when its files change.
pub async fn serve_webhook(
    addr: SocketAddr,
    files: CertFiles,
    state: WebhookState,
) -> anyhow::Result<SocketAddr> {
    let resolver = Resolver::new(files).map_err(anyhow::Error::msg)?;
    let listener = TlsListener::bind(addr, &resolver)
        .await
        .map_err(anyhow::Error::msg)?;
    let bound = axum::serve::Listener::local_addr(&listener)?;
    tokio::spawn(watch_certs(resolver));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, webhook::router(state)).await {
            tracing::error!(error = %e, "the webhook server stopped");
        }
    });
    tracing::info!(addr = %bound, "serving the gate webhook at /mutate");
    Ok(bound)
}

async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("shutting down");
}
