//! G1: the mutating admission webhook that puts launcher pods of VMIs
//! asking for GPUs (by annotations or in their spec), and launcher pods
//! whose containers request a GPUClass's resource, at the gate when they
//! are created, so no GPU pod slips through ungated (its configuration
//! says failurePolicy Fail). Served
//! over TLS with cert and key files that are reloaded when they change.

mod tls;

pub use tls::{CertFiles, Resolver, TlsError, TlsListener, watch_certs};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use gpu_claims_actors::api::{
    LAUNCHER_LABEL, LAUNCHER_LABEL_VALUE, SCHEDULING_GATE, VMI_API_VERSION, VMI_KIND, Vmi,
};
use gpu_claims_actors::ports::{Kind, Obj, ObjRef, Reader};
use gpu_claims_actors::rules::asks_for_gpus;
use gpu_claims_actors::world::{World, key};
use serde_json::{Value, json};
use std::sync::Arc;

/// What the webhook answers for one pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    /// Admitted as it is.
    Allow,
    /// Admitted with this JSON patch (the gate added).
    Patch(Value),
    /// Refused, with why.
    Deny(String),
}

impl std::fmt::Display for Admission {
    /// As a log line says it: `allowed`, `gated`, or `denied: <why>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Admission::Allow => f.write_str("allowed"),
            Admission::Patch(_) => f.write_str("gated"),
            Admission::Deny(why) => write!(f, "denied: {why}"),
        }
    }
}

/// The VMI that controls a launcher pod, if the object is one: (namespace, name).
pub fn launcher_of(request: &Value) -> Option<(String, String)> {
    if request["kind"]["kind"] != "Pod" || request["operation"] != "CREATE" {
        return None;
    }
    let pod = &request["object"];
    if pod["metadata"]["labels"][LAUNCHER_LABEL] != LAUNCHER_LABEL_VALUE {
        return None;
    }
    let owner = pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| {
            r["controller"] == true && r["kind"] == VMI_KIND && r["apiVersion"] == VMI_API_VERSION
        })?;
    let ns = request["namespace"]
        .as_str()
        .or(pod["metadata"]["namespace"].as_str())?;
    Some((ns.to_string(), owner["name"].as_str()?.to_string()))
}

/// The JSON patch that adds the gate, or None when the pod already waits at it.
pub fn gate_patch(pod: &Value) -> Option<Value> {
    let gates = pod["spec"]["schedulingGates"].as_array();
    if gates.is_some_and(|g| g.iter().any(|g| g["name"] == SCHEDULING_GATE)) {
        return None;
    }
    Some(match gates {
        Some(_) => {
            json!([{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": SCHEDULING_GATE}}])
        }
        None => {
            json!([{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": SCHEDULING_GATE}]}])
        }
    })
}

/// Whether a pod's containers request (in limits or requests) a resource
/// that a GPUClass serves.
fn requests_a_class_resource(pod: &Value, world: &World) -> bool {
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    let init = pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten();
    containers.chain(init).any(|c| {
        ["limits", "requests"].iter().any(|part| {
            c["resources"][part]
                .as_object()
                .is_some_and(|m| m.keys().any(|r| world.serves(r)))
        })
    })
}

/// Whether a pod or its VMI asks for any device (an extended resource in
/// a container, a device entry in the VMI's spec, a DRA claim in the
/// pod's `spec.resourceClaims`, by template or by a name that may be a
/// GPUClaim's): what the classes decide is ours.
fn may_ask_for_devices(pod: &Value, vmi: Option<&Vmi>) -> bool {
    let containers = pod["spec"]["containers"].as_array().into_iter().flatten();
    let extended = containers.into_iter().any(|c| {
        ["limits", "requests"].iter().any(|part| {
            c["resources"][part].as_object().is_some_and(|m| {
                m.keys()
                    .any(|r| gpu_claims_actors::api::resources::is_extended(r))
            })
        })
    });
    let dra = pod["spec"]["resourceClaims"]
        .as_array()
        .is_some_and(|r| !r.is_empty());
    extended || dra || vmi.is_some_and(|v| !v.device_request().is_empty())
}

/// G1 for one AdmissionReview request, given its VMI (None: not found)
/// and the world (the classes, for what a spec or a pod asks of them).
pub fn admit(request: &Value, vmi: Option<&Vmi>, world: &World) -> Admission {
    let Some((ns, name)) = launcher_of(request) else {
        return Admission::Allow;
    };
    let pod = &request["object"];
    let gate = || gate_patch(pod).map_or(Admission::Allow, Admission::Patch);
    // Which resources GPUClasses serve is known once they are listed;
    // before, a pod that may ask for GPUs is refused rather than guessed at.
    if !world.listed(Kind::Class) && may_ask_for_devices(pod, vmi) {
        return Admission::Deny(
            "the controller has not listed the GPUClasses yet; retry in a moment".into(),
        );
    }
    // A pod that asks for a class's GPUs is gated whatever its VMI says:
    // the device plugin would hand them out without a placement.
    if requests_a_class_resource(pod, world) {
        return gate();
    }
    let Some(vmi) = vmi else {
        // Its VMI is made before its pod: not finding it means we cannot tell,
        // and an ungated GPU pod is the one thing that must not happen.
        return Admission::Deny(format!(
            "VirtualMachineInstance {ns}/{name} not found; retry once it exists"
        ));
    };
    if let Some(t) = gpu_claims_actors::rules::unseen_template(vmi, world) {
        return Admission::Deny(format!(
            "ResourceClaimTemplate {ns}/{t} is not seen yet, so whether it asks for a GPUClass's devices cannot be told; retry once it exists"
        ));
    }
    if let Some(n) = gpu_claims_actors::rules::unseen_claim(vmi, world) {
        return Admission::Deny(format!(
            "neither a GPUClaim nor a ResourceClaim {ns}/{n} is seen yet, so whether it holds a GPUClass's devices cannot be told; retry once it exists"
        ));
    }
    // An unusable request still asks for GPUs: gated, placement says why it waits.
    if !asks_for_gpus(vmi, world) {
        return Admission::Allow;
    }
    gate()
}

/// Why a body is not an AdmissionReview the webhook can answer. Never
/// allowed: the webhook fails closed on what it cannot read.
#[derive(Debug, thiserror::Error)]
pub enum Malformed {
    #[error("the body is not JSON: {0}")]
    NotJson(String),
    #[error("the body is not an AdmissionReview: {0}")]
    NotReview(String),
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

/// Reads a body as an AdmissionReview with a request, as kube's typed
/// admission API defines it (uid, kind, resource, operation and the rest).
pub fn read_review(body: &[u8]) -> Result<Value, Malformed> {
    use kube::api::DynamicObject;
    use kube::core::admission::{AdmissionRequest, AdmissionReview};
    let raw: Value = serde_json::from_slice(body).map_err(|e| Malformed::NotJson(e.to_string()))?;
    let typed: AdmissionReview<DynamicObject> =
        serde_json::from_value(raw.clone()).map_err(|e| Malformed::NotReview(e.to_string()))?;
    let _: AdmissionRequest<DynamicObject> = typed.try_into().map_err(|_| Malformed::NoRequest)?;
    Ok(raw)
}

/// The answer to a body that is not a review: a denial with the request's
/// uid where there is one (the API server matches answers by uid), else 400.
pub fn refusal(body: &[u8], why: &Malformed) -> (StatusCode, Value) {
    let uid = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["request"]["uid"].as_str().map(str::to_string));
    match uid {
        Some(uid) => (
            StatusCode::OK,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
                "uid": uid, "allowed": false, "status": {"code": 400, "message": why.to_string()}}}),
        ),
        None => (
            StatusCode::BAD_REQUEST,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                   "reason": "BadRequest", "code": 400, "message": why.to_string()}),
        ),
    }
}

/// The AdmissionReview response for a request and its answer.
pub fn response(review: &Value, admission: &Admission) -> Value {
    let uid = review["request"]["uid"].clone();
    let body = match admission {
        Admission::Allow => json!({"uid": uid, "allowed": true}),
        Admission::Patch(p) => json!({
            "uid": uid, "allowed": true, "patchType": "JSONPatch",
            "patch": base64::engine::general_purpose::STANDARD.encode(p.to_string()),
        }),
        Admission::Deny(m) => {
            json!({"uid": uid, "allowed": false, "status": {"code": 403, "message": m}})
        }
    };
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": body})
}

#[derive(Clone)]
pub struct WebhookState {
    pub world: Arc<World>,
    pub reader: Arc<dyn Reader>,
    /// Reviews by result and their latency.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

/// POST /mutate.
pub fn router(state: WebhookState) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .with_state(state)
}

async fn mutate(State(s): State<WebhookState>, body: Bytes) -> Response {
    let started = std::time::Instant::now();
    let count = |result: &str| {
        if let Some(m) = &s.metrics {
            m.webhook_requests
                .get_or_create(&crate::metrics::WebhookLabels {
                    result: result.into(),
                })
                .inc();
            m.webhook_latency.observe(started.elapsed().as_secs_f64());
        }
    };
    let review = match read_review(&body) {
        Ok(r) => r,
        Err(why) => {
            tracing::warn!(rule = "G1", error = %why, "webhook refused a body it cannot read");
            let (code, answer) = refusal(&body, &why);
            count("bad_request");
            return (code, axum::Json(answer)).into_response();
        }
    };
    let request = &review["request"];
    let vmi = match launcher_of(request) {
        None => None,
        // The cache first; a VMI just made may not be there yet, so then live.
        Some((ns, name)) => match s.world.vmi(&key(&ns, &name)) {
            Some(v) => Some(Vmi::clone(&v)),
            None => match s.reader.get(ObjRef::new(Kind::Vmi, Some(&ns), &name)).await {
                Ok(Some(Obj::Vmi(v))) => Some(v),
                _ => None,
            },
        },
    };
    let admission = admit(request, vmi.as_ref(), &s.world);
    if let Admission::Patch(_) | Admission::Deny(_) = &admission {
        let pod = format!(
            "{}/{}",
            request["namespace"].as_str().unwrap_or_default(),
            request["object"]["metadata"]["generateName"]
                .as_str()
                .or(request["object"]["metadata"]["name"].as_str())
                .unwrap_or_default()
        );
        tracing::info!(%pod, rule = "G1", %admission, "launcher pod admitted");
    }
    count(match admission {
        Admission::Allow => "allowed",
        Admission::Patch(_) => "gated",
        Admission::Deny(_) => "denied",
    });
    axum::Json(response(&review, &admission)).into_response()
}
