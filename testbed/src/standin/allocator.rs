//! kube-scheduler's structured allocator for the claims of a pod it
//! schedules (`k8s.io/dynamic-resource-allocation/structured`), as far as
//! the stand-in's clusters use it: each `exactly` request of `count`
//! devices (ExactCount, default one) or `All`, from complete pools on the
//! node, devices its DeviceClass's and its own selectors take, not
//! allocated to another claim, whose `NoSchedule` and `NoExecute` taints
//! (the slice's, and those DeviceTaintRules put on it, as the scheduler's
//! ResourceSlice tracker patches them in) the request tolerates
//! (`taintPreventsAllocation`, `resourceclaim.ToleratesTaint`), and
//! sharing the value of every `matchAttribute` constraint; first fit by
//! pool, then device order. The allocation it writes is the scheduler's:
//! results (with the request's tolerations), the class's and the claim's
//! config, a node selector for the node by `metadata.name`.

use gpu_claims_actors::dra::{ClassSelectors, Published, complete_devices};
use k8s_openapi::api::resource::v1::{DeviceAttribute, ResourceSlice};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// A device by its driver, pool and name.
pub type DeviceId = (String, String, String);

fn id(d: &Published) -> DeviceId {
    (d.driver.into(), d.pool.into(), d.device.name.clone())
}

/// The devices some ResourceClaim's allocation names.
pub fn in_use(claims: &[Value]) -> BTreeSet<DeviceId> {
    let mut out = BTreeSet::new();
    for c in claims {
        for r in c["status"]["allocation"]["devices"]["results"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let f = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            out.insert((f("driver"), f("pool"), f("device")));
        }
    }
    out
}

/// The taints on a device: its slice's, and those of the DeviceTaintRules
/// whose selector takes it (the tracker's reading: every field set must
/// match, and a rule without a selector takes every device).
fn taints<'a>(d: &'a Published, rules: &'a [Value]) -> Vec<Value> {
    let mut out: Vec<Value> = d
        .device
        .taints
        .iter()
        .flatten()
        .filter_map(|t| serde_json::to_value(t).ok())
        .collect();
    for r in rules {
        let s = &r["spec"]["deviceSelector"];
        let is = |f: &str, v: &str| s[f].as_str().is_none_or(|x| x == v);
        if is("driver", d.driver) && is("pool", d.pool) && is("device", &d.device.name) {
            out.push(r["spec"]["taint"].clone());
        }
    }
    out
}

/// `resourceclaim.ToleratesTaint`: the effect matches unless the
/// toleration names none; the key unless it names none; `Exists` takes any
/// value, `Equal` (or none) the same value.
fn tolerates(toleration: &Value, taint: &Value) -> bool {
    let field = |v: &Value, f: &str| v[f].as_str().unwrap_or_default().to_string();
    let effect = field(toleration, "effect");
    if !effect.is_empty() && effect != field(taint, "effect") {
        return false;
    }
    let key = field(toleration, "key");
    if !key.is_empty() && key != field(taint, "key") {
        return false;
    }
    match toleration["operator"].as_str().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => field(toleration, "value") == field(taint, "value"),
        _ => false,
    }
}

/// `taintPreventsAllocation`: a NoSchedule or NoExecute taint the request
/// does not tolerate (others, `None` among them, are ignored).
fn prevented(taints: &[Value], tolerations: &Value) -> bool {
    taints.iter().any(|t| {
        matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute"))
            && !tolerations
                .as_array()
                .into_iter()
                .flatten()
                .any(|tol| tolerates(tol, t))
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["cel"]["expression"].as_str().map(str::to_string))
        .collect()
}

/// An attribute's value as a constraint compares it.
fn attribute(d: &Published, name: &str) -> Option<String> {
    let (domain, id) = name.split_once('/')?;
    let key = if domain == d.driver { id } else { name };
    let a: &DeviceAttribute = d
        .device
        .attributes
        .as_ref()?
        .get(key)
        .or_else(|| d.device.attributes.as_ref()?.get(name))?;
    serde_json::to_string(a).ok()
}

/// The claim's allocation on `node`, or None where it does not fit.
/// `taken`: devices already in use, to which the chosen ones are added.
pub fn allocate(
    claim: &Value,
    node: &str,
    slices: &[ResourceSlice],
    classes: &[Value],
    rules: &[Value],
    taken: &mut BTreeSet<DeviceId>,
) -> Option<Value> {
    let devices: Vec<(Published, Vec<Value>)> = complete_devices(slices)
        .into_iter()
        .filter(|d| d.node == node)
        .map(|d| {
            let t = taints(&d, rules);
            (d, t)
        })
        .collect();
    let spec = &claim["spec"]["devices"];
    let constraints: Vec<&str> = spec["constraints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["matchAttribute"].as_str())
        .collect();
    let mut results = Vec::new();
    let mut config = Vec::new();
    let mut chosen: BTreeSet<DeviceId> = BTreeSet::new();
    let mut pinned: Vec<(String, String)> = Vec::new();
    for r in spec["requests"].as_array().into_iter().flatten() {
        let request = r["name"].as_str()?;
        let exact = &r["exactly"];
        let class_name = exact["deviceClassName"].as_str()?;
        let class = classes
            .iter()
            .find(|c| c["metadata"]["name"] == class_name)?;
        let selectors = ClassSelectors::compile(
            class_name,
            &strings(&class["spec"]["selectors"]),
            request,
            &strings(&exact["selectors"]),
        )
        .ok()?;
        let fits: Vec<&Published> = devices
            .iter()
            .filter(|(_, t)| !prevented(t, &exact["tolerations"]))
            .map(|(d, _)| d)
            .filter(|d| !taken.contains(&id(d)) && !chosen.contains(&id(d)))
            .filter(|d| selectors.serves(d).unwrap_or(false))
            .filter(|d| {
                pinned
                    .iter()
                    .all(|(name, value)| attribute(d, name).as_deref() == Some(value))
            })
            .collect();
        let all = exact["allocationMode"] == "All";
        let count = if all {
            fits.len()
        } else {
            usize::try_from(exact["count"].as_u64().unwrap_or(1)).ok()?
        };
        // With constraints, the first value of each that has room.
        let group: Vec<&Published> = if constraints.is_empty() {
            fits.into_iter().take(count).collect()
        } else {
            let key = |d: &Published| -> Option<Vec<String>> {
                constraints.iter().map(|c| attribute(d, c)).collect()
            };
            let mut values: Vec<Vec<String>> = fits.iter().filter_map(|d| key(d)).collect();
            values.dedup();
            let pick = values
                .into_iter()
                .find(|v| fits.iter().filter(|d| key(d).as_ref() == Some(v)).count() >= count)?;
            for (c, v) in constraints.iter().zip(&pick) {
                pinned.push((c.to_string(), v.clone()));
            }
            fits.into_iter()
                .filter(|d| key(d).as_ref() == Some(&pick))
                .take(count)
                .collect()
        };
        if group.len() < count || count == 0 {
            return None;
        }
        for d in group {
            chosen.insert(id(d));
            let mut result = json!({"request": request, "driver": d.driver, "pool": d.pool,
                "device": d.device.name});
            if exact["tolerations"].is_array() {
                result["tolerations"] = exact["tolerations"].clone();
            }
            results.push(result);
        }
        for c in class["spec"]["config"].as_array().into_iter().flatten() {
            let mut c = c.clone();
            c["source"] = "FromClass".into();
            c["requests"] = json!([request]);
            config.push(c);
        }
    }
    for c in spec["config"].as_array().into_iter().flatten() {
        let mut c = c.clone();
        c["source"] = "FromClaim".into();
        config.push(c);
    }
    taken.extend(chosen);
    let mut devices = json!({"results": results});
    if !config.is_empty() {
        devices["config"] = config.into();
    }
    Some(json!({"devices": devices,
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}))
}
