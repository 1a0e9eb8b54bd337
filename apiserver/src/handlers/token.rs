//! `POST serviceaccounts/{name}/token`: a TokenRequest answered with a
//! token for the service account that this server's TokenReviews accept,
//! for the audiences asked (the API server's when none), as the
//! serviceaccount registry's token subresource does.

use super::{Req, ok};
use crate::auth::identity::API_AUDIENCE;
use crate::status;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

/// Upstream's bounds on `spec.expirationSeconds`: at least ten minutes,
/// an hour when not asked.
const MIN_EXPIRATION: i64 = 600;
const DEFAULT_EXPIRATION: i64 = 3600;
const MAX_EXPIRATION: i64 = 1 << 32;

impl Req<'_> {
    pub(super) fn token(&self, n: &str, body: &[u8]) -> Response {
        let mut request: Value = match serde_json::from_slice(body) {
            Ok(v @ Value::Object(_)) => v,
            Ok(_) => {
                return status(
                    400,
                    "BadRequest",
                    "the body is not an object",
                    Some(n),
                    "serviceaccounts",
                );
            }
            Err(e) => {
                return status(
                    400,
                    "BadRequest",
                    &e.to_string(),
                    Some(n),
                    "serviceaccounts",
                );
            }
        };
        let shape_ok = request["metadata"].is_null() || request["metadata"].is_object();
        if !shape_ok || !(request["spec"].is_null() || request["spec"].is_object()) {
            let msg = "the body is not a TokenRequest: metadata and spec must be objects";
            return status(400, "BadRequest", msg, Some(n), "serviceaccounts");
        }
        if let Some(named) = request["metadata"]["name"].as_str()
            && !named.is_empty()
            && named != n
        {
            let msg = format!(
                "TokenRequest.authentication.k8s.io {named:?} is invalid: metadata.name: Invalid value: {named:?}: must match the service account name if specified"
            );
            return status(422, "Invalid", &msg, Some(n), "serviceaccounts");
        }
        if self.s.store.get("ServiceAccount", self.ns(), n).is_none() {
            return self.not_found(n);
        }
        let expiration = request["spec"]["expirationSeconds"]
            .as_i64()
            .unwrap_or(DEFAULT_EXPIRATION);
        if !(MIN_EXPIRATION..=MAX_EXPIRATION).contains(&expiration) {
            let msg = format!(
                "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: {expiration}: {}",
                if expiration < MIN_EXPIRATION {
                    "may not specify a duration less than 10 minutes"
                } else {
                    "may not specify a duration larger than 2^32 seconds"
                }
            );
            return status(422, "Invalid", &msg, Some(n), "serviceaccounts");
        }
        let audiences: Vec<String> = match request["spec"]["audiences"].as_array() {
            Some(a) if !a.is_empty() => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => vec![API_AUDIENCE.to_string()],
        };
        let user = format!("system:serviceaccount:{}:{n}", self.ns());
        let token = self.s.issue_token(&user, audiences.clone());
        let now = self.s.store.wall_now();
        let expires = now
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(expiration))
            .unwrap_or(now);
        request["apiVersion"] = "authentication.k8s.io/v1".into();
        request["kind"] = "TokenRequest".into();
        request["metadata"]["name"] = n.into();
        request["metadata"]["namespace"] = self.ns().into();
        request["spec"]["audiences"] = json!(audiences);
        request["spec"]["expirationSeconds"] = expiration.into();
        request["status"] = json!({
            "token": token,
            "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        });
        ok(StatusCode::CREATED, request)
    }
}
