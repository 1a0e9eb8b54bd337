//! kube-scheduler's structured allocator for the claims of a pod it
//! schedules (`k8s.io/dynamic-resource-allocation/structured`), as far as
//! the stand-in's clusters use it: each `exactly` request of `count`
//! devices (ExactCount, default one) or `All`, from complete pools on the
//! node, devices its DeviceClass's and its own selectors take, not
//! allocated to another claim, not tainted `NoSchedule`/`NoExecute`, and
//! sharing the value of every `matchAttribute` constraint; first fit by
//! pool, then device order. The allocation it writes is the scheduler's:
//! results, the class's and the claim's config, a node selector for the
//! node by `metadata.name`.

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

fn tainted(d: &Published) -> bool {
    d.device
        .taints
        .iter()
        .flatten()
        .any(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
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
    taken: &mut BTreeSet<DeviceId>,
) -> Option<Value> {
    let devices: Vec<Published> = complete_devices(slices)
        .into_iter()
        .filter(|d| d.node == node && !tainted(d))
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
            results.push(
                json!({"request": request, "driver": d.driver, "pool": d.pool,
                "device": d.device.name}),
            );
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
