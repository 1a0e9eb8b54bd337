//! HTTP endpoints (the metrics themselves are in `metrics.rs`): `/metrics`, `/healthz`, `/readyz` and
//! `/debug/claims/<ns>/<name>` (a claim actor's recent decisions).

use actix::Addr;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use gpu_claims_actors::controller::{GetClaimTrace, StatsQuery, Supervisor};
use prometheus_client::registry::Registry;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub supervisor: Addr<Supervisor>,
    pub registry: Arc<Registry>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/debug/claims/{ns}/{name}", get(debug_claim))
        .with_state(state)
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    match s.supervisor.send(StatsQuery).await {
        Ok(stats) if stats.synced => (StatusCode::OK, "ready".to_string()),
        Ok(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "caches not synced".to_string(),
        ),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &s.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                "content-type",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            out,
        ),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [("content-type", "text/plain")],
            e.to_string(),
        ),
    }
}

async fn debug_claim(
    State(s): State<AppState>,
    Path((ns, name)): Path<(String, String)>,
) -> impl IntoResponse {
    match s
        .supervisor
        .send(GetClaimTrace(format!("{ns}/{name}")))
        .await
    {
        Ok(Some(trace)) => Json(trace).into_response(),
        Ok(None) => (
            StatusCode::NOT_FOUND,
            format!("no actor for claim {ns}/{name}"),
        )
            .into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

pub use crate::metrics::Metrics;
