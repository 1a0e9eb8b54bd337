//! The operator's HTTP servers (the webhook, probes and metrics) on the
//! workspace's one serve loop (`gpu_claims_serve`), with the operator's
//! header read deadline.

use axum::Router;
use axum::serve::Listener;
use std::time::Duration;

/// How long a client may take to send a request's headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves `router` on `listener` until `shutdown` completes, shutting its
/// connections down gracefully then.
pub async fn serve<L>(listener: L, router: Router, shutdown: impl Future<Output = ()>)
where
    L: Listener,
{
    gpu_claims_serve::serve(listener, router, HEADER_READ_TIMEOUT, shutdown).await
}
