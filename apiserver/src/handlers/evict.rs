//! `POST pods/{name}/eviction`: a pod deleted if its disruption budget
//! allows it, as the pod registry's eviction subresource decides
//! (`pkg/registry/core/pod/storage/eviction.go`). What `kubectl drain`
//! uses, and what evicts a GPU node's VMs before maintenance.

use super::{Req, not_found, ok, store_error};
use crate::store::{Apply, Subresource};
use crate::{disruption, status};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

impl Req<'_> {
    pub(super) fn evict(&self, n: &str, body: &[u8]) -> Response {
        let eviction: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return status(400, "BadRequest", &e.to_string(), Some(n), "pods"),
        };
        if let Some(named) = eviction["metadata"]["name"].as_str()
            && named != n
        {
            let msg = "name in URL does not match name in Eviction object";
            return status(400, "BadRequest", msg, Some(n), "pods");
        }
        let options = serde_json::to_vec(&eviction["deleteOptions"]).unwrap_or_default();
        let options = if eviction["deleteOptions"].is_object() {
            &options[..]
        } else {
            &[]
        };
        let (opts, how) = match self.delete_options(options) {
            Ok(o) => o,
            Err(r) => return *r,
        };
        let Some(pod) = self.s.store.get("Pod", self.ns(), n) else {
            return not_found(&self.t.resource, n);
        };
        if !ignores_budgets(&pod) {
            let budgets = disruption::budgets_for(&self.s.store, &pod);
            if budgets.len() > 1 {
                let msg = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
                return status(500, "InternalError", msg, Some(n), "pods");
            }
            if let Some(budget) = budgets.first()
                && let Err(refused) = self.take_disruption(budget, n, how)
            {
                return *refused;
            }
        }
        match self.delete_one(n, &opts, how) {
            Ok(_) => ok(
                StatusCode::CREATED,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Success", "code": 201}),
            ),
            Err(e) => store_error(&e, &self.t.resource, n),
        }
    }

    /// One disruption from `budget` for pod `n` (`checkAndDecrement`): the
    /// budget's status as the disruption controller has it now, refused
    /// with 429 when none is allowed; else written less one, the pod
    /// recorded as disrupted until its deletion is seen.
    fn take_disruption(&self, budget: &Value, n: &str, how: Apply) -> Result<(), Box<Response>> {
        let now = disruption::status(&self.s.store, budget);
        let allowed = now["disruptionsAllowed"].as_i64().unwrap_or(0);
        if allowed <= 0 {
            let name = budget["metadata"]["name"].as_str().unwrap_or_default();
            let cause = format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                now["desiredHealthy"], now["currentHealthy"]
            );
            return Err(Box::new(too_many_requests(&cause)));
        }
        if how == Apply::DryRun {
            return Ok(());
        }
        let mut taken = budget.clone();
        taken["status"] = now;
        taken["status"]["disruptionsAllowed"] = json!(allowed - 1);
        let stamp = jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        taken["status"]["disruptedPods"][n] = json!(stamp);
        self.s
            .store
            .update("PodDisruptionBudget", taken, Subresource::Status)
            .map(|_| ())
            .map_err(|e| {
                let name = budget["metadata"]["name"].as_str().unwrap_or_default();
                let msg = format!("writing the status of PodDisruptionBudget {name}: {e}");
                Box::new(status(500, "InternalError", &msg, Some(n), "pods"))
            })
    }
}

/// A pod whose eviction is a plain delete: finished, never started
/// (Pending), or already going (`canIgnorePDB`).
fn ignores_budgets(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed" | "Pending")
    ) || pod["metadata"]["deletionTimestamp"].is_string()
}

/// 429, as `errors.NewTooManyRequests` with the budget's cause.
fn too_many_requests(cause: &str) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests", "code": 429,
        "details": {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
    });
    (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response()
}
