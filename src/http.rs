//! HTTP endpoints: `/metrics`, `/healthz`, `/readyz` and
//! `/debug/claims/<ns>/<name>` (a claim actor's recent decisions).

use actix::Addr;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use gpu_claims_actors::actors::{GetClaimTrace, StatsQuery, Supervisor};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use std::sync::Arc;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub op: String,
    pub kind: String,
    pub rule: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    pub result: String,
}

/// The controller's metrics.
#[derive(Default)]
pub struct Metrics {
    pub writes: Family<WriteLabels, Counter>,
    pub reloads: Family<ReloadLabels, Counter>,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Arc<Self> {
        let m = Metrics::default();
        registry.register(
            "gpu_claims_writes",
            "Writes to the API server by op, kind, rule and result",
            m.writes.clone(),
        );
        registry.register(
            "gpu_claims_config_reloads",
            "Config reloads by result",
            m.reloads.clone(),
        );
        Arc::new(m)
    }

    pub fn write(&self, op: &str, kind: &str, rule: &str, result: &str) {
        let l = WriteLabels {
            op: op.into(),
            kind: kind.into(),
            rule: rule.into(),
            result: result.into(),
        };
        self.writes.get_or_create(&l).inc();
    }

    pub fn reload(&self, ok: bool) {
        let result = if ok { "ok" } else { "refused" };
        self.reloads
            .get_or_create(&ReloadLabels {
                result: result.into(),
            })
            .inc();
    }
}

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
