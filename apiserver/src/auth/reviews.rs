//! TokenReview and SubjectAccessReview, as kube-apiserver answers them to
//! a component that delegates authentication and authorization (the
//! controller's /metrics and /debug): a review is created, answered with
//! its status, and never stored. Tokens are the ones this server gave
//! (`add_user`); access is judged by the stored RBAC (`rbac.rs`).

use crate::auth::rbac::{self, Request, User};
use crate::registry::validate::{self, Cause};
use crate::{ApiServer, Target, status};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Answers a POST of a review: 201 with its status, or why it is invalid.
pub(crate) fn answer(s: &ApiServer, t: &Target, body: &[u8]) -> Response {
    let plural = t.resource.plural;
    let mut review: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return status(400, "BadRequest", "the body is not an object", None, plural),
        Err(e) => return status(400, "BadRequest", &e.to_string(), None, plural),
    };
    let answered = match t.resource.kind {
        "TokenReview" => token_review(s, &review["spec"]),
        _ => access_review(s, &review["spec"]),
    };
    match answered {
        Ok(st) => {
            review["apiVersion"] = t.resource.api_version().into();
            review["kind"] = t.resource.kind.into();
            review["status"] = st;
            (StatusCode::CREATED, axum::Json(review)).into_response()
        }
        Err(causes) => validate::invalid(&t.resource, "", &causes),
    }
}

/// The groups kube-apiserver gives an authenticated user of this name.
pub fn groups_of(name: &str) -> Vec<String> {
    let mut groups = Vec::new();
    if let Some(rest) = name.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".to_string());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    groups.push("system:authenticated".to_string());
    groups
}

fn token_review(s: &ApiServer, spec: &Value) -> Result<Value, Vec<Cause>> {
    let token = spec["token"].as_str().unwrap_or_default();
    if token.is_empty() {
        return Err(vec![Cause::required("spec.token")]);
    }
    let wanted: Vec<String> = spec["audiences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    let has = s.audiences_of_token(token);
    // As the token authenticator: the audiences asked for (the API
    // server's when none are) that the token has; none is a refusal.
    let wanted = match wanted.is_empty() {
        true => vec![crate::auth::identity::API_AUDIENCE.to_string()],
        false => wanted,
    };
    let granted: Vec<String> = wanted.iter().filter(|a| has.contains(a)).cloned().collect();
    Ok(match s.user_of_token(token) {
        Some(_) if granted.is_empty() => json!({
            "authenticated": false, "user": {},
            "error": format!("[invalid bearer token, token audiences {has:?} is invalid for the target audiences {wanted:?}]"),
        }),
        Some(name) => json!({
            "authenticated": true,
            "user": {"username": name, "uid": "", "groups": groups_of(&name)},
            "audiences": granted,
        }),
        // As kube-apiserver: an unknown token is not an error, only not
        // authenticated.
        None => json!({"authenticated": false, "user": {}}),
    })
}

fn access_review(s: &ApiServer, spec: &Value) -> Result<Value, Vec<Cause>> {
    let user = User {
        name: spec["user"].as_str().unwrap_or_default().to_string(),
        groups: spec["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    };
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(vec![Cause::invalid(
            "spec.user",
            "",
            "at least one of user or group must be specified",
        )]);
    }
    let text = |v: &Value, f: &str| v[f].as_str().unwrap_or_default().to_string();
    let (ra, nra) = (&spec["resourceAttributes"], &spec["nonResourceAttributes"]);
    let request = match (ra.is_object(), nra.is_object()) {
        (true, false) => Request::Resource {
            verb: text(ra, "verb"),
            group: text(ra, "group"),
            resource: text(ra, "resource"),
            subresource: text(ra, "subresource"),
            namespace: text(ra, "namespace"),
            name: text(ra, "name"),
        },
        (false, true) => Request::NonResource {
            verb: text(nra, "verb"),
            path: text(nra, "path"),
        },
        _ => {
            return Err(vec![Cause::invalid(
                "spec.resourceAttributes",
                "null",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )]);
        }
    };
    let d = rbac::authorize(&s.store, &user, &request);
    let mut out = json!({"allowed": d.allowed});
    if !d.reason.is_empty() {
        out["reason"] = d.reason.into();
    }
    Ok(out)
}
