//! Serving an axum `Router` on a listener (plain TCP, or a TLS listener)
//! with the deadlines a server exposed to a cluster needs. axum's own
//! `serve` sets no timer, so a client sending its headers a byte at a time
//! would hold a connection forever: here a client must send a request's
//! headers within `header_read_timeout` of connecting or of its previous
//! request, and a kept-alive connection that sends nothing is closed
//! likewise. Connections may be upgraded (kubectl's `exec`, `attach` and
//! `port-forward` against the embedded API server). The operator's
//! webhook, probes and metrics and the embedded API server are served by
//! this one loop.

use axum::Router;
use axum::serve::Listener;
use hyper::server::conn::http1::Builder;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::time::Duration;

/// Serves `router` on `listener` until `shutdown` completes; each
/// connection in its own task, shut down gracefully at `shutdown`
/// (requests under way answered, kept-alive connections closed: their
/// clients see the server go, as with a restart).
pub async fn serve<L>(
    mut listener: L,
    router: Router,
    header_read_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) where
    L: Listener,
{
    let mut shutdown = std::pin::pin!(shutdown);
    let (closing, _) = tokio::sync::watch::channel(false);
    loop {
        // axum's `Listener` retries a failed accept itself (after a pause,
        // as a full file table needs).
        let (io, _) = tokio::select! {
            c = listener.accept() => c,
            _ = &mut shutdown => {
                let _ = closing.send(true);
                return;
            }
        };
        let service = TowerToHyperService::new(router.clone());
        let mut close = closing.subscribe();
        tokio::spawn(async move {
            let mut b = Builder::new();
            b.timer(TokioTimer::new())
                .header_read_timeout(header_read_timeout);
            let conn = b
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            let mut conn = std::pin::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => Some(r),
                _ = close.wait_for(|c| *c) => {
                    conn.as_mut().graceful_shutdown();
                    None
                }
            };
            let r = match ended {
                Some(r) => r,
                None => conn.await,
            };
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
}
