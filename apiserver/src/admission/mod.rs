//! Admission webhooks, called as kube-apiserver calls them on a create:
//! every stored MutatingWebhookConfiguration, in name order, each webhook
//! in order, then every ValidatingWebhookConfiguration's (whose patches
//! count for nothing); a webhook is called when one of its rules names the
//! operation and resource, its namespaceSelector matches the namespace's
//! labels, its objectSelector the object's, and each of its
//! matchConditions (CEL over `object`, `oldObject`, `request`) is true.
//! Its JSON patch is applied before the next one sees the object. A call
//! that fails (no endpoint, TLS, timeoutSeconds, a bad answer) refuses the
//! request under failurePolicy Fail and is skipped under Ignore; a denial
//! refuses it with the webhook's status, worded as upstream's
//! (staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook).
//!
//! Not modelled: UPDATE, DELETE and CONNECT operations (only creates are
//! sent through here), reinvocationPolicy IfNeeded, `authorizer` in
//! matchConditions; validating webhooks are called one after another (in
//! parallel upstream), before the CRD's schema defaults the object (after,
//! upstream).

mod call;

pub use call::CallError;

use super::resources::Resource;
use super::{ApiServer, status};
use axum::response::Response;
use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, RuleWithOperations,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

/// The cluster network the server lacks: where each Service port is served.
#[derive(Default)]
pub(crate) struct Services {
    /// (namespace, name, port) to the endpoints behind it.
    routes: Mutex<HashMap<(String, String, i32), Vec<SocketAddr>>>,
}

impl ApiServer {
    /// Serves Service `namespace/name`'s `port` from `addr` too, as an
    /// endpoint behind it: what a webhook's `clientConfig.service` reaches.
    pub fn add_service_endpoint(&self, namespace: &str, name: &str, port: i32, addr: SocketAddr) {
        let mut r = self
            .services
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let eps = r
            .entry((namespace.to_string(), name.to_string(), port))
            .or_default();
        if !eps.contains(&addr) {
            eps.push(addr);
        }
    }

    fn endpoints(&self, namespace: &str, name: &str, port: i32) -> Vec<SocketAddr> {
        self.services
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(namespace.to_string(), name.to_string(), port))
            .cloned()
            .unwrap_or_default()
    }
}

/// What the request is, for the webhooks.
pub(crate) struct Attributes<'a> {
    pub resource: &'a Resource,
    pub namespace: Option<&'a str>,
    pub user: &'a str,
    pub dry_run: bool,
}

/// The webhooks of every stored configuration of `kind`, in the order
/// kube-apiserver calls them: configurations by name (the store lists a
/// cluster-scoped kind in name order), each one's webhooks in order. A
/// validating webhook has a mutating one's fields, less one, so both read
/// as a `MutatingWebhook`.
fn webhooks(s: &ApiServer, kind: &str) -> Vec<MutatingWebhook> {
    s.store
        .list(kind)
        .0
        .into_iter()
        .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
        .filter_map(|h| serde_json::from_value(h).ok())
        .collect()
}

/// Runs `obj`, to be created, through every mutating webhook that
/// matches; the object as they leave it, or the refusal.
pub(crate) async fn mutate(
    s: &ApiServer,
    a: &Attributes<'_>,
    mut obj: Value,
) -> Result<Value, Response> {
    for hook in webhooks(s, "MutatingWebhookConfiguration") {
        obj = through(s, a, &hook, obj, false).await?;
    }
    Ok(obj)
}

/// Runs `obj` through every matching validating webhook: Ok(obj) as it
/// came, or the first refusal.
pub(crate) async fn validate(
    s: &ApiServer,
    a: &Attributes<'_>,
    mut obj: Value,
) -> Result<Value, Response> {
    for hook in webhooks(s, "ValidatingWebhookConfiguration") {
        obj = through(s, a, &hook, obj, true).await?;
    }
    Ok(obj)
}

/// One webhook: skipped, called, or failed as its failurePolicy says.
async fn through(
    s: &ApiServer,
    a: &Attributes<'_>,
    hook: &MutatingWebhook,
    obj: Value,
    validating: bool,
) -> Result<Value, Response> {
    let plural = a.resource.plural;
    let name = obj["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !hook
        .rules
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|r| rule_matches(r, a))
    {
        return Ok(obj);
    }
    if !selects(hook.object_selector.as_ref(), &obj["metadata"]["labels"]) {
        return Ok(obj);
    }
    if let Some(ns) = a.namespace {
        let labels = s
            .store
            .get("Namespace", "", ns)
            .map(|n| n["metadata"]["labels"].clone())
            .unwrap_or(Value::Null);
        if !selects(hook.namespace_selector.as_ref(), &labels) {
            return Ok(obj);
        }
    }
    let request = request(a, &obj);
    match match_conditions_hold(
        hook.match_conditions.as_deref().unwrap_or_default(),
        &obj,
        &request,
    ) {
        Ok(true) => {}
        Ok(false) => return Ok(obj),
        Err(e) => return failed(hook, &e, obj, plural),
    }
    if a.dry_run && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        let msg = format!("admission webhook {:?} does not support dry run", hook.name);
        return Err(status(400, "BadRequest", &msg, Some(&name), plural));
    }
    let timeout = Duration::from_secs(hook.timeout_seconds.unwrap_or(10).clamp(1, 30) as u64);
    let review =
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let answer = call::call(s, &hook.client_config, &review, timeout).await;
    let response = match answer.and_then(|r| read_response(&r, &request["uid"])) {
        Ok(r) => r,
        Err(e) => return failed(hook, &e, obj, plural),
    };
    if response["allowed"] != true {
        return Err(denied(&hook.name, &response["status"], &name, plural));
    }
    if validating {
        return Ok(obj);
    }
    apply_patch(&hook.name, obj, &response).map_err(|e| {
        let msg = format!("Internal error occurred: {e}");
        status(500, "InternalError", &msg, Some(&name), plural)
    })
}

/// A webhook that could not be asked (a match condition that does not
/// evaluate, a call that failed): its failurePolicy decides.
#[allow(clippy::result_large_err)]
fn failed(
    hook: &MutatingWebhook,
    error: &dyn std::fmt::Display,
    obj: Value,
    plural: &str,
) -> Result<Value, Response> {
    if hook.failure_policy.as_deref() == Some("Ignore") {
        tracing::warn!(webhook = %hook.name, %error, "webhook not asked; failurePolicy Ignore admits");
        return Ok(obj);
    }
    let msg = format!(
        "Internal error occurred: failed calling webhook {:?}: {error}",
        hook.name
    );
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    Err(status(500, "InternalError", &msg, Some(name), plural))
}

/// The AdmissionReview request for a create.
fn request(a: &Attributes<'_>, obj: &Value) -> Value {
    let r = a.resource;
    let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
    let gvr = json!({"group": r.group, "version": r.version, "resource": r.plural});
    json!({
        "uid": uuid(),
        "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": obj["metadata"]["name"].as_str().unwrap_or_default(),
        "namespace": a.namespace.unwrap_or_default(),
        "operation": "CREATE",
        "userInfo": {"username": a.user, "groups": crate::auth::reviews::groups_of(a.user)},
        "object": obj, "oldObject": null, "dryRun": a.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    })
}

fn uuid() -> String {
    let n: u128 = fastrand::u128(..);
    let h = format!("{n:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn rule_matches(rule: &RuleWithOperations, a: &Attributes<'_>) -> bool {
    let any = |list: &Option<Vec<String>>, want: &str| {
        list.as_deref()
            .unwrap_or_default()
            .iter()
            .any(|v| v == "*" || v == want)
    };
    let scope_ok = match rule.scope.as_deref() {
        Some("Cluster") => !a.resource.namespaced,
        Some("Namespaced") => a.resource.namespaced,
        _ => true,
    };
    any(&rule.operations, "CREATE")
        && any(&rule.api_groups, a.resource.group)
        && any(&rule.api_versions, a.resource.version)
        && any(&rule.resources, a.resource.plural)
        && scope_ok
}

/// A LabelSelector against labels; no selector (or an empty one) selects all.
pub fn selects(sel: Option<&LabelSelector>, labels: &Value) -> bool {
    let Some(sel) = sel else { return true };
    let label = |k: &str| labels[k].as_str();
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| label(k) == Some(v.as_str()));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => label(&e.key).is_some_and(|v| values.iter().any(|w| w == v)),
            "NotIn" => label(&e.key).is_none_or(|v| !values.iter().any(|w| w == v)),
            "Exists" => label(&e.key).is_some(),
            "DoesNotExist" => label(&e.key).is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// Whether a webhook's `matchConditions` (CEL over `object`, `oldObject`
/// and `request`) all hold, as kube-apiserver decides before it calls the
/// webhook: what a chart's test asks of its webhook configuration. Err
/// names the condition that could not be compiled or evaluated.
pub fn match_conditions_hold(
    conds: &[MatchCondition],
    obj: &Value,
    request: &Value,
) -> Result<bool, String> {
    for c in conds {
        let program = cel::Program::compile(&c.expression)
            .map_err(|e| format!("compilation failed for match condition {:?}: {e}", c.name))?;
        let mut ctx = cel::Context::default();
        for (k, v) in [
            ("object", obj),
            ("oldObject", &Value::Null),
            ("request", request),
        ] {
            ctx.add_variable(k, v.clone())
                .map_err(|e| format!("match condition {:?}: {e}", c.name))?;
        }
        match program.execute(&ctx) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => return Ok(false),
            Ok(other) => {
                return Err(format!(
                    "match condition {:?} evaluated to {other:?}, not a bool",
                    c.name
                ));
            }
            Err(e) => {
                return Err(format!(
                    "failed evaluating match condition {:?}: {e}",
                    c.name
                ));
            }
        }
    }
    Ok(true)
}

/// The review's response, checked: it answers this request.
fn read_response(review: &Value, uid: &Value) -> Result<Value, CallError> {
    let r = &review["response"];
    if !r.is_object() {
        return Err(CallError::Answer(
            "the webhook's answer has no response".into(),
        ));
    }
    if r["uid"] != *uid {
        return Err(CallError::Answer(format!(
            "expected response.uid={uid}, got {}",
            r["uid"]
        )));
    }
    Ok(r.clone())
}

/// A denial as upstream's ToStatusErr words it: the webhook's code when
/// it is an error code (else 400), its reason, its message prefixed.
fn denied(hook: &str, st: &Value, name: &str, plural: &str) -> Response {
    let by = format!("admission webhook {hook:?} denied the request");
    let code = st["code"].as_u64().filter(|c| *c >= 400).unwrap_or(400) as u16;
    let reason = st["reason"].as_str().unwrap_or_default();
    let message = match (st["message"].as_str(), reason) {
        (Some(m), _) if !m.is_empty() => format!("{by}: {m}"),
        (_, r) if !r.is_empty() => format!("{by}: {r}"),
        _ => format!("{by} without explanation"),
    };
    status(code, reason, &message, Some(name), plural)
}

/// The response's JSON patch applied to `obj`.
fn apply_patch(hook: &str, mut obj: Value, response: &Value) -> Result<Value, String> {
    let Some(encoded) = response["patch"].as_str() else {
        return Ok(obj);
    };
    if response["patchType"] != "JSONPatch" {
        return Err(format!(
            "webhook {hook:?} returned a patch of type {}, not JSONPatch",
            response["patchType"]
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| format!("webhook {hook:?} returned a patch that is not base64: {e}"))?;
    let patch: json_patch::Patch = serde_json::from_slice(&bytes)
        .map_err(|e| format!("webhook {hook:?} returned a patch that is not a JSON patch: {e}"))?;
    json_patch::patch(&mut obj, &patch)
        .map_err(|e| format!("webhook {hook:?} returned a patch that does not apply: {e}"))?;
    Ok(obj)
}

#[cfg(test)]
mod tests;
