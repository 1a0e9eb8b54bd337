//! Serving HTTP on a listener (plain TCP, or the TLS listener) with the
//! deadlines a server exposed to a cluster needs: a client must send its
//! request headers within `HEADER_READ_TIMEOUT` of connecting or of its
//! previous request (axum's own `serve` sets no timer, so a client sending
//! its headers a byte at a time would hold a connection forever), and a
//! kept-alive connection that sends nothing is closed likewise.

use axum::Router;
use axum::serve::Listener;
use hyper::server::conn::http1::Builder;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::time::Duration;

/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `router` on `listener` until `shutdown` completes; each
/// connection in its own task, shut down gracefully (requests under way
/// answered, kept-alive connections closed) at `shutdown`.
pub async fn serve<L>(mut listener: L, router: Router, shutdown: impl Future<Output = ()>)
where
    L: Listener,
{
    let mut shutdown = std::pin::pin!(shutdown);
    let (closing, _) = tokio::sync::watch::channel(false);
    loop {
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
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let conn = b.serve_connection(TokioIo::new(io), service);
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
