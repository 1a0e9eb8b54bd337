//! A ResourceSlice as upstream validates it: its one node field, its pool,
//! its devices within their limits, and each attribute's one value.

use super::*;
use crate::registry::validate::{Cause, SUBDOMAIN, dns_subdomain};
use serde_json::Value;

/// `ValidateResourceSlice`: one node field, driver and pool named and
/// fixed for the slice's life, devices within bounds and named as labels.
pub(super) fn slice(old: Option<&Value>, new: &Value, out: &mut Vec<Cause>) {
    let spec = &new["spec"];
    let set = [
        spec["nodeName"].as_str().is_some_and(|n| !n.is_empty()),
        spec["nodeSelector"].is_object(),
        spec["allNodes"] == true,
        spec["perDeviceNodeSelection"] == true,
    ]
    .iter()
    .filter(|s| **s)
    .count();
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set {
        0 => out.push(Cause {
            detail: ONE_OF.into(),
            ..Cause::required("spec")
        }),
        1 => {}
        _ => out.push(Cause::invalid(
            "spec",
            "{...}",
            format!("{ONE_OF}, but multiple fields are set"),
        )),
    }
    match spec["driver"].as_str() {
        None | Some("") => out.push(Cause::required("spec.driver")),
        Some(d) if d.len() > DRIVER_MAX => out.push(Cause::too_long("spec.driver", DRIVER_MAX)),
        Some(d) if !dns_subdomain(&d.to_lowercase()) => {
            out.push(Cause::invalid(
                "spec.driver",
                Cause::shown(&spec["driver"]),
                SUBDOMAIN,
            ));
        }
        Some(_) => {}
    }
    let pool = &spec["pool"];
    match pool["name"].as_str() {
        None | Some("") => out.push(Cause::required("spec.pool.name")),
        Some(p) if p.len() > POOL_MAX => out.push(Cause::too_long("spec.pool.name", POOL_MAX)),
        Some(p) if !p.split('/').all(dns_subdomain) => {
            out.push(Cause::invalid(
                "spec.pool.name",
                Cause::shown(&pool["name"]),
                SUBDOMAIN,
            ));
        }
        Some(_) => {}
    }
    if pool["resourceSliceCount"].as_i64().is_none_or(|n| n <= 0) {
        out.push(Cause::invalid(
            "spec.pool.resourceSliceCount",
            Cause::shown(&pool["resourceSliceCount"]),
            "must be greater than zero",
        ));
    }
    if let Some(old) = old {
        for f in ["driver", "nodeName"] {
            immutable(&format!("spec.{f}"), Some(&old["spec"][f]), &spec[f], out);
        }
        immutable(
            "spec.pool.name",
            Some(&old["spec"]["pool"]["name"]),
            &pool["name"],
            out,
        );
    }
    let devices = list(&spec["devices"]);
    if !devices.is_empty() && !list(&spec["sharedCounters"]).is_empty() {
        out.push(Cause::invalid(
            "spec",
            "{...}",
            "only one of `sharedCounters` or `devices` is allowed",
        ));
    }
    let advanced = devices
        .iter()
        .any(|d| !list(&d["taints"]).is_empty() || !list(&d["consumesCounters"]).is_empty());
    let max = if advanced {
        SLICE_ADVANCED_DEVICES_MAX
    } else {
        SLICE_DEVICES_MAX
    };
    if !at_most("spec.devices", &spec["devices"], max, out) {
        return;
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, d) in devices.iter().enumerate() {
        let at = format!("spec.devices[{i}]");
        named(&format!("{at}.name"), &d["name"], true, out);
        if !names.insert(d["name"].as_str().unwrap_or_default()) {
            out.push(Cause::invalid(
                format!("{at}.name"),
                Cause::shown(&d["name"]),
                "Duplicate value",
            ));
        }
        for (name, a) in d["attributes"].as_object().into_iter().flatten() {
            attribute(&format!("{at}.attributes[{name}]"), a, out);
        }
        let count = |f: &str| d[f].as_object().map_or(0, |m| m.len());
        let n = count("attributes") + count("capacity");
        if n > DEVICE_FIELDS_MAX {
            out.push(Cause::invalid(
                at,
                n.to_string(),
                format!("the total number of attributes and capacities must not exceed {DEVICE_FIELDS_MAX}"),
            ));
        }
    }
}

/// `DeviceAttributeMaxValueLength`: a string or version value.
pub(super) const ATTRIBUTE_VALUE_MAX: usize = 64;

/// `validateDeviceAttribute`: exactly one value; strings and versions
/// within upstream's length, versions semver 2.0.0.
pub(super) fn attribute(path: &str, a: &Value, out: &mut Vec<Cause>) {
    const FIELDS: [&str; 8] = [
        "bool", "int", "string", "version", "bools", "ints", "strings", "versions",
    ];
    let set = FIELDS
        .iter()
        .filter(|f| a.get(**f).is_some_and(|v| !v.is_null()))
        .count();
    if set != 1 {
        out.push(Cause::invalid(
            path,
            Cause::shown(a),
            "exactly one value must be specified",
        ));
        return;
    }
    for f in ["string", "version"] {
        if let Some(v) = a[f].as_str() {
            if v.len() > ATTRIBUTE_VALUE_MAX {
                out.push(Cause::too_long(format!("{path}.{f}"), ATTRIBUTE_VALUE_MAX));
            } else if f == "version" && !semver(v) {
                out.push(Cause::invalid(
                    format!("{path}.version"),
                    Cause::shown(&a[f]),
                    "must be a string compatible with semver.org spec 2.0.0",
                ));
            }
        }
    }
}

/// A semver 2.0.0 version: three numbers without leading zeros, then an
/// optional pre-release and build.
pub(super) fn semver(v: &str) -> bool {
    let core = v.split('+').next().unwrap_or_default();
    let nums = core.split('-').next().unwrap_or_default();
    let parts: Vec<&str> = nums.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (*p == "0" || !p.starts_with('0'))
        })
        && core.split_once('-').is_none_or(|(_, pre)| {
            pre.split('.')
                .all(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        })
}
