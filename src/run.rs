//! `gpu-claims run`: the controller against a real API server.

use crate::clients::Clients;
use crate::config;
use crate::controller::{Controller, Election, Launch};
use crate::http::auth::HttpAuth;
use crate::leader::LeaseArgs;
use crate::telemetry::Logging;
use crate::webhook::{CertFiles, Resolver, TlsListener, watch_certs};
use anyhow::Context as _;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The config file (default: config/gpu-claims.yaml when present); reloaded when it changes.
    #[arg(long, env = "GPU_CLAIMS_CONFIG")]
    config: Option<PathBuf>,
    /// Where /metrics, /healthz, /readyz and /debug listen.
    #[arg(long, env = "GPU_CLAIMS_HTTP_ADDR", default_value = "0.0.0.0:8080")]
    http_addr: SocketAddr,
    /// Who may read /metrics and /debug: `kubernetes` asks the API server
    /// (TokenReview, then SubjectAccessReview of the path), `none` serves
    /// anyone (development on one machine). /healthz and /readyz are open.
    #[arg(long, env = "GPU_CLAIMS_HTTP_AUTH", value_enum, default_value_t = HttpAuth::Kubernetes)]
    http_auth: HttpAuth,
    /// Serve /metrics, /healthz, /readyz and /debug over TLS with this PEM
    /// certificate chain (reloaded when it changes): callers' bearer
    /// tokens then never cross the network in clear.
    #[arg(
        long,
        env = "GPU_CLAIMS_HTTP_TLS_CERT_FILE",
        requires = "http_tls_key_file"
    )]
    http_tls_cert_file: Option<PathBuf>,
    /// The PEM private key of --http-tls-cert-file; reloaded when it changes.
    #[arg(
        long,
        env = "GPU_CLAIMS_HTTP_TLS_KEY_FILE",
        requires = "http_tls_cert_file"
    )]
    http_tls_key_file: Option<PathBuf>,
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
        http_auth,
        http_tls_cert_file,
        http_tls_key_file,
        webhook_addr,
        tls_cert_file,
        tls_key_file,
        lease,
    } = args;
    if lease.leader_elect {
        lease.validate()?;
    }
    let webhook = tls_cert_file
        .zip(tls_key_file)
        .map(|(cert, key)| (webhook_addr, CertFiles { cert, key }));
    let path = config.or_else(config::default_path);
    let config = config::initial(path.as_deref())?;
    let logging = Logging::init(&config);
    let sys = gpu_claims_actors::controller::system();
    sys.block_on(async move {
        let clients = Clients::infer(config.api.request_timeout).await?;
        let election = lease.leader_elect.then(|| Election {
            lease,
            identity: crate::leader::identity(),
        });
        let controller = Controller::start(Launch {
            clients,
            config,
            path,
            logging: Some(logging),
            webhook,
            election,
        })
        .await?;
        let router = controller.router(http_auth);
        match http_tls_cert_file.zip(http_tls_key_file) {
            Some((cert, key)) => {
                let resolver = Resolver::new(CertFiles { cert, key })?;
                let listener = TlsListener::bind(http_addr, &resolver).await?;
                tokio::spawn(watch_certs(resolver));
                tracing::info!(%http_addr, %http_auth, tls = true, "serving /metrics, /healthz, /readyz, /debug");
                crate::serve::serve(listener, router, shutdown()).await;
            }
            None => {
                let listener = tokio::net::TcpListener::bind(http_addr)
                    .await
                    .with_context(|| format!("listen on {http_addr}"))?;
                tracing::info!(%http_addr, %http_auth, tls = false, "serving /metrics, /healthz, /readyz, /debug");
                crate::serve::serve(listener, router, shutdown()).await;
            }
        }
        controller.stop().await;
        Ok(())
    })
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
