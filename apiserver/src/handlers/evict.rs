//! `POST pods/{name}/eviction`: a pod deleted if its disruption budget
//! allows it, as the pod registry's eviction subresource decides
//! (`pkg/registry/core/pod/storage/eviction.go`). What `kubectl drain`
//! uses, and what evicts a GPU node's VMs before maintenance.

use super::{Req, not_found, ok, store_error};
use crate::store::{Apply, StoreError, Subresource};
use crate::{controllers::disruption, status};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

impl Req<'_> {
    pub(super) fn evict(&self, n: &str, body: &[u8]) -> Response {
        let eviction: Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => return status(400, "BadRequest", &e.to_string(), Some(n), "pods"),
        };
        if eviction["metadata"]["name"].as_str() != Some(n) {
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
                // Upstream's own Status here has a code and no reason.
                let msg = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
                return status(500, "", msg, None, "pods");
            }
            if let Some(budget) = budgets.first()
                && !unhealthy_may_go(&pod, budget, &disruption::status(&self.s.store, budget))
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
        let name = budget["metadata"]["name"].as_str().unwrap_or_default();
        let ns = self.ns();
        // As upstream's retry on a conflict (the disruption controller
        // writes the same status): re-read and decide again, then 504.
        for _ in 0..CONFLICT_RETRIES {
            let Some(budget) = self.s.store.get("PodDisruptionBudget", ns, name) else {
                return Ok(());
            };
            let now = disruption::status(&self.s.store, &budget);
            let allowed = now["disruptionsAllowed"].as_i64().unwrap_or(0);
            if allowed <= 0 {
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
            let stamp = self.s.store.now();
            taken["status"]["disruptedPods"][n] = json!(stamp);
            match self
                .s
                .store
                .update("PodDisruptionBudget", taken, Subresource::Status)
            {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => {
                    let msg = format!("writing the status of PodDisruptionBudget {name}: {e}");
                    return Err(Box::new(status(
                        500,
                        "InternalError",
                        &msg,
                        Some(n),
                        "pods",
                    )));
                }
            }
        }
        let msg = format!("couldn't update PodDisruptionBudget {name:?} due to conflicts");
        Err(Box::new(status(504, "Timeout", &msg, Some(n), "pods")))
    }
}

/// How often an eviction re-reads a budget whose write met a conflict.
const CONFLICT_RETRIES: usize = 20;

/// A pod that is not Ready may go without a disruption when its budget
/// says so (`unhealthyPodEvictionPolicy: AlwaysAllow`), or, by default
/// (`IfHealthyBudget`), while the budget has the healthy pods it wants.
fn unhealthy_may_go(pod: &Value, budget: &Value, now: &Value) -> bool {
    if disruption::healthy(pod) {
        return false;
    }
    if budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow" {
        return true;
    }
    let (current, desired) = (
        now["currentHealthy"].as_i64(),
        now["desiredHealthy"].as_i64(),
    );
    matches!((current, desired), (Some(c), Some(d)) if d > 0 && c >= d)
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
    crate::answers::status_with(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
        Some(json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]})),
    )
}
