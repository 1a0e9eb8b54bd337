//! HTTP endpoints (the metrics themselves are in `metrics.rs`): `/metrics`,
//! `/healthz`, `/readyz` (caches synced and every watch current), `/debug`
//! (who leads, the watches, the actors) and `/debug/claims/<ns>/<name>`
//! (a claim actor's recent decisions, on the leader). /metrics and /debug
//! are behind delegated authentication and authorization (`auth.rs`).

pub mod auth;

use crate::leader::LeaderView;
use crate::watch::WatchHealth;
use actix::Addr;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use gpu_claims_actors::controller::{GetClaimTrace, Settled, StatsQuery, Supervisor};
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct AppState {
    pub supervisor: Addr<Supervisor>,
    pub registry: Arc<Registry>,
    pub watches: Arc<WatchHealth>,
    /// Who leads, when this process elects.
    pub leader: Option<Arc<Mutex<LeaderView>>>,
}

impl AppState {
    fn leader(&self) -> Option<LeaderView> {
        let v = self.leader.as_ref()?;
        Some(v.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

/// The routes; /metrics and /debug pass `guard` when one is given.
pub fn router(state: AppState, guard: Option<Arc<auth::Delegated>>) -> Router {
    let protected = Router::new()
        .route("/metrics", get(metrics))
        .route("/debug", get(debug))
        .route("/debug/claims/{ns}/{name}", get(debug_claim));
    let protected = match guard {
        Some(d) => protected.route_layer(axum::middleware::from_fn_with_state(d, auth::guard)),
        None => protected,
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .merge(protected)
        .with_state(state)
}

/// Ready: the caches synced once and every watch is current (a watch
/// that fails makes the process unready until it is answered again). A
/// standby is ready too: it is what takes over.
async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    let stats = match s.supervisor.send(StatsQuery).await {
        Ok(stats) => stats,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    };
    if !stats.synced {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "caches not synced".to_string(),
        );
    }
    let failing = s.watches.unhealthy();
    if !failing.is_empty() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("watches failing: {}", failing.join("; ")),
        );
    }
    (StatusCode::OK, "ready".to_string())
}

/// This process at a glance: who leads, the watches, the actors, and
/// whether they have settled (a leader whose actors have handled every
/// change and have no write in flight; it asks each actor, so it costs a
/// message per actor).
async fn debug(State(s): State<AppState>) -> impl IntoResponse {
    let stats = s.supervisor.send(StatsQuery).await.ok();
    let settled = s.supervisor.send(Settled).await.unwrap_or(false);
    Json(serde_json::json!({
        "leader": s.leader(),
        "watches": s.watches.states(),
        "stats": stats,
        "settled": settled,
    }))
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
        // A standby runs no claim actors: say who does.
        Ok(None) if s.leader().is_some_and(|v| !v.leading) => {
            let v = s.leader().unwrap_or_default();
            let body = serde_json::json!({
                "error": format!("this process ({}) is a standby; the leader runs the claim actors", v.identity),
                "leader": v.holder,
            });
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            format!("no actor for claim {ns}/{name}"),
        )
            .into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

pub use crate::metrics::Metrics;
