//! Upstream's validation of the `resource.k8s.io/v1` kinds where a client
//! meets it (`pkg/apis/resource/validation`): a claim's and a template's
//! spec immutable, an allocation that names requests the claim has and
//! never changes once set, `reservedFor` only with an allocation, a
//! slice's one node field, names in their formats, and upstream's size
//! limits. Checked on the object as it will be stored: a main write keeps
//! the stored status and a status write the stored spec (`prepare`), so
//! both are checked every time and the part not written passes as it was.

mod slices;
mod taint_rules;

use slices::slice;
use taint_rules::taint_rule;

use crate::registry::validate::{Cause, LABEL, SUBDOMAIN, dns_label, dns_subdomain};
use serde_json::Value;

/// `DeviceRequestsMaxSize`, `AllocationResultsMaxSize`,
/// `DeviceConstraintsMaxSize`, `DeviceConfigMaxSize`, `DeviceSelectorsMaxSize`.
const LIST_MAX: usize = 32;
/// `ResourceClaimReservedForMaxSize`.
const RESERVED_FOR_MAX: usize = 256;
/// `CELSelectorExpressionMaxLength`.
const CEL_MAX_BYTES: usize = 10 * 1024;
/// `ResourceSliceMaxDevices`, and with taints, counters or list attributes
/// (`ResourceSliceMaxDevicesWithAdvancedFeatures`).
const SLICE_DEVICES_MAX: usize = 128;
const SLICE_ADVANCED_DEVICES_MAX: usize = 64;
/// `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
const DEVICE_FIELDS_MAX: usize = 32;
/// `DriverNameMaxLength`, `PoolNameMaxLength`.
const DRIVER_MAX: usize = 63;
const POOL_MAX: usize = 253;

/// The causes to refuse a write of a DRA `kind` (`old`: the stored object).
pub fn check(kind: &str, old: Option<&Value>, new: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    match kind {
        "ResourceClaim" => {
            immutable("spec", old.map(|o| &o["spec"]), &new["spec"], &mut out);
            if old.is_none() {
                claim_spec("spec", &new["spec"], &mut out);
            }
            claim_status(old, new, &mut out);
        }
        "ResourceClaimTemplate" => {
            immutable("spec", old.map(|o| &o["spec"]), &new["spec"], &mut out);
            if old.is_none() {
                claim_spec("spec.spec", &new["spec"]["spec"], &mut out);
            }
        }
        "DeviceClass" => {
            let spec = &new["spec"];
            selectors("spec.selectors", &spec["selectors"], &mut out);
            at_most("spec.config", &spec["config"], LIST_MAX, &mut out);
        }
        "ResourceSlice" => slice(old, new, &mut out),
        "DeviceTaintRule" => taint_rule(old, new, &mut out),
        _ => {}
    }
    out
}

fn list(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// `field.TooMany`: a list longer than upstream's bound.
fn at_most(path: &str, v: &Value, max: usize, out: &mut Vec<Cause>) -> bool {
    let n = list(v).len();
    if n > max {
        out.push(Cause::too_many(path, n, max as u64));
        return false;
    }
    true
}

/// `ValidateImmutableField`: an update may not change it.
fn immutable(path: &str, old: Option<&Value>, new: &Value, out: &mut Vec<Cause>) {
    if let Some(old) = old
        && old != new
    {
        out.push(Cause::invalid(
            path,
            Cause::shown(new),
            "field is immutable",
        ));
    }
}

fn named(path: &str, v: &Value, label: bool, out: &mut Vec<Cause>) {
    match v.as_str() {
        None | Some("") => out.push(Cause::required(path)),
        Some(s) if label && !dns_label(s) => {
            out.push(Cause::invalid(path, Cause::shown(v), LABEL));
        }
        Some(s) if !label && !dns_subdomain(s) => {
            out.push(Cause::invalid(path, Cause::shown(v), SUBDOMAIN));
        }
        Some(_) => {}
    }
}

/// Selectors: at most 32, each a CEL expression of at most 10 KiB.
fn selectors(path: &str, v: &Value, out: &mut Vec<Cause>) {
    if !at_most(path, v, LIST_MAX, out) {
        return;
    }
    for (i, s) in list(v).iter().enumerate() {
        let expr = format!("{path}[{i}].cel.expression");
        match s["cel"]["expression"].as_str() {
            None | Some("") => out.push(Cause::required(expr)),
            Some(e) if e.len() > CEL_MAX_BYTES => out.push(Cause::too_long(expr, CEL_MAX_BYTES)),
            // Compiled as upstream compiles it on write: one that does not
            // is refused, never stored to fail every allocation; one whose
            // estimated cost is over upstream's limit too, never stored to
            // stall every allocator that evaluates it.
            Some(e) => match cel::Program::compile(e) {
                Err(err) => out.push(Cause::invalid(
                    expr,
                    Cause::shown(&s["cel"]["expression"]),
                    format!("compilation failed: {err}"),
                )),
                Ok(p) if dra_cel_cost::too_complex(p.expression()) => {
                    out.push(Cause::forbidden(expr, dra_cel_cost::TOO_COMPLEX));
                }
                Ok(_) => {}
            },
        }
    }
}

/// `validateDeviceClaim`: requests (each exactly one of `exactly` and
/// `firstAvailable`), constraints and config within their bounds.
fn claim_spec(path: &str, spec: &Value, out: &mut Vec<Cause>) {
    let devices = &spec["devices"];
    let requests = format!("{path}.devices.requests");
    if at_most(&requests, &devices["requests"], LIST_MAX, out) {
        let mut seen = std::collections::BTreeSet::new();
        for (i, r) in list(&devices["requests"]).iter().enumerate() {
            let at = format!("{requests}[{i}]");
            named(&format!("{at}.name"), &r["name"], true, out);
            if !seen.insert(r["name"].as_str().unwrap_or_default()) {
                out.push(Cause::invalid(
                    format!("{at}.name"),
                    Cause::shown(&r["name"]),
                    "Duplicate value",
                ));
            }
            match (r.get("exactly"), r.get("firstAvailable")) {
                (Some(e), None) => {
                    let exact = format!("{at}.exactly");
                    named(
                        &format!("{exact}.deviceClassName"),
                        &e["deviceClassName"],
                        false,
                        out,
                    );
                    selectors(&format!("{exact}.selectors"), &e["selectors"], out);
                }
                (None, Some(subrequests)) => {
                    for (k, sub) in list(subrequests).iter().enumerate() {
                        let sub_at = format!("{at}.firstAvailable[{k}].selectors");
                        selectors(&sub_at, &sub["selectors"], out);
                    }
                }
                (None, None) => out.push(Cause {
                    detail: "exactly one of `exactly` or `firstAvailable` is required".into(),
                    ..Cause::required(at)
                }),
                (Some(_), Some(_)) => out.push(Cause::invalid(
                    at,
                    "{...}",
                    "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
                )),
            }
        }
    }
    at_most(
        &format!("{path}.devices.constraints"),
        &devices["constraints"],
        LIST_MAX,
        out,
    );
    at_most(
        &format!("{path}.devices.config"),
        &devices["config"],
        LIST_MAX,
        out,
    );
}

/// `validateResourceClaimStatusUpdate`: `reservedFor` only with an
/// allocation; an allocation, once set, only cleared; its results within
/// bounds, each naming a request of the claim (or `request/subrequest`).
fn claim_status(old: Option<&Value>, new: &Value, out: &mut Vec<Cause>) {
    let status = &new["status"];
    let allocation = &status["allocation"];
    let reserved = list(&status["reservedFor"]);
    let mut uids = std::collections::BTreeSet::new();
    for (i, r) in reserved.iter().enumerate() {
        if !uids.insert(r["uid"].as_str().unwrap_or_default()) {
            out.push(Cause::invalid(
                format!("status.reservedFor[{i}].uid"),
                Cause::shown(&r["uid"]),
                "Duplicate value",
            ));
        }
    }
    // No new consumer for a claim on its way out.
    if let Some(old) = old
        && old["metadata"]["deletionTimestamp"].is_string()
    {
        let before = list(&old["status"]["reservedFor"]);
        if reserved
            .iter()
            .any(|r| !before.iter().any(|b| b["uid"] == r["uid"]))
        {
            out.push(Cause::forbidden(
                "status.reservedFor",
                "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set",
            ));
        }
    }
    if !reserved.is_empty() && !allocation.is_object() {
        out.push(Cause::forbidden(
            "status.reservedFor",
            "may not be specified when `allocated` is not set",
        ));
    }
    at_most(
        "status.reservedFor",
        &status["reservedFor"],
        RESERVED_FOR_MAX,
        out,
    );
    let was = old.map(|o| &o["status"]["allocation"]);
    if let Some(was) = was.filter(|w| w.is_object())
        && allocation.is_object()
    {
        immutable("status.allocation", Some(was), allocation, out);
        return;
    }
    if !allocation.is_object() {
        return;
    }
    let results = &allocation["devices"]["results"];
    let path = "status.allocation.devices.results";
    if !at_most(path, results, LIST_MAX, out) {
        return;
    }
    let requests: Vec<&Value> = list(&new["spec"]["devices"]["requests"]).iter().collect();
    let names = |r: &Value| -> Vec<String> {
        let name = r["name"].as_str().unwrap_or_default();
        let mut names = vec![name.to_string()];
        names.extend(
            list(&r["firstAvailable"])
                .iter()
                .filter_map(|s| s["name"].as_str())
                .map(|s| format!("{name}/{s}")),
        );
        names
    };
    let known: Vec<String> = requests.iter().flat_map(|r| names(r)).collect();
    for (i, r) in list(results).iter().enumerate() {
        let request = r["request"].as_str().unwrap_or_default();
        if !known.iter().any(|k| k == request) {
            out.push(Cause::invalid(
                format!("{path}[{i}].request"),
                Cause::shown(&r["request"]),
                "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
            ));
        }
        for f in ["driver", "pool", "device"] {
            if r[f].as_str().is_none_or(str::is_empty) {
                out.push(Cause::required(format!("{path}[{i}].{f}")));
            }
        }
    }
}

/// Why the API server would refuse this write of a DRA kind (`old`: the
/// stored object), in the words of its causes; None when it takes it.
/// For stand-ins that write the store directly as the components they
/// play (kube-scheduler's PreBind) write through the API server.
pub fn refusal(kind: &str, old: Option<&Value>, new: &Value) -> Option<String> {
    let causes = check(kind, old, new);
    let said: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.detail))
        .collect();
    (!said.is_empty()).then(|| said.join("; "))
}

#[cfg(test)]
mod tests;
