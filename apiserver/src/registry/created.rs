//! What kube-apiserver's registries set on an object when it is created
//! or updated, before it is stored (their strategies' `PrepareForCreate`
//! and `PrepareForUpdate`, the defaulting that needs the time, and the
//! Service registry's IP allocation), for the built-in kinds served: what
//! the answer shows a client.

use crate::store::Store;
use serde_json::{Value, json};

/// Sets what the kind's registry sets on create.
pub fn prepare(store: &Store, kind: &str, obj: &mut Value) {
    match kind {
        "CustomResourceDefinition" => crd(obj),
        "Pod" => obj["status"] = json!({"phase": "Pending", "qosClass": qos_class(&obj["spec"])}),
        "Service" => {
            if let Some(spec) = obj.get_mut("spec") {
                allocate_cluster_ip(store, spec);
            }
            // `Status = ServiceStatus{}`: Go writes the empty struct it holds.
            obj["status"] = json!({"loadBalancer": {}});
        }
        "DeviceTaintRule" => time_added(store, obj, None),
        _ => {}
    }
}

/// Sets what the kind's registry sets on update (`old`: the stored object).
pub fn prepare_update(store: &Store, kind: &str, old: &Value, obj: &mut Value) {
    if kind == "DeviceTaintRule" {
        time_added(store, obj, Some(old));
    }
}

/// A DeviceTaintRule's `spec.taint.timeAdded`: `SetDefaults_DeviceTaint`
/// (now, to the second, where a write leaves it out), and its strategy's
/// `PrepareForUpdate`: an effect changed while the time stayed the
/// stored one is stamped now.
fn time_added(store: &Store, obj: &mut Value, old: Option<&Value>) {
    let Some(taint) = obj.get_mut("spec").and_then(|s| s.get_mut("taint")) else {
        return;
    };
    if !taint.is_object() {
        return;
    }
    if taint["timeAdded"].is_null() {
        taint["timeAdded"] = json!(store.now());
        return;
    }
    let was = old.map(|o| &o["spec"]["taint"]);
    if let Some(was) = was
        && was["effect"] != taint["effect"]
        && was["timeAdded"] == taint["timeAdded"]
    {
        taint["timeAdded"] = json!(store.now());
    }
}

/// apiextensions' strategy: the status starts empty but for the storage
/// version, recorded (`storedVersions`); the names are accepted and the
/// CRD Established afterwards, by the CRD controller (`crds`), as
/// upstream's naming and establishing controllers do.
fn crd(obj: &mut Value) {
    let storage: Vec<Value> = obj["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].clone())
        .take(1)
        .collect();
    obj["status"] = json!({
        "acceptedNames": {"plural": "", "kind": ""},
        "storedVersions": storage,
    });
}

/// `qos.ComputePodQOS` over the (defaulted) containers and init
/// containers: BestEffort without cpu or memory requests or limits;
/// Guaranteed when every container limits both and the requests equal the
/// limits; Burstable otherwise.
fn qos_class(spec: &Value) -> &'static str {
    let (mut requests, mut limits) = ([0i128; 2], [0i128; 2]);
    let (mut any_request, mut any_limit) = ([false; 2], [false; 2]);
    let mut guaranteed = true;
    let containers = ["containers", "initContainers"]
        .into_iter()
        .flat_map(|l| spec[l].as_array().into_iter().flatten());
    for c in containers {
        let mut limited = [false; 2];
        for (i, r) in ["cpu", "memory"].into_iter().enumerate() {
            let amount = |what: &str| {
                c["resources"][what][r]
                    .as_str()
                    .and_then(milli)
                    .filter(|q| *q > 0)
            };
            if let Some(q) = amount("requests") {
                requests[i] += q;
                any_request[i] = true;
            }
            if let Some(q) = amount("limits") {
                limits[i] += q;
                any_limit[i] = true;
                limited[i] = true;
            }
        }
        guaranteed &= limited == [true, true];
    }
    if any_request == [false; 2] && any_limit == [false; 2] {
        return "BestEffort";
    }
    let equal = (0..2).all(|i| !any_request[i] || (any_limit[i] && limits[i] == requests[i]));
    if guaranteed && equal && any_request == any_limit {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// A quantity in thousandths of its unit, rounded up (as upstream rounds
/// requests to milli scale): `100m`, `1`, `1.5Gi`, `2e3`.
fn milli(q: &str) -> Option<i128> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let negative = int.starts_with('-');
    let int = int.trim_start_matches(['+', '-']);
    if (int.is_empty() && frac.is_empty()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // The number as an integer and a power of ten.
    let digits: String = format!("{int}{frac}");
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let mut exp10: i32 = -(frac.len() as i32);
    let mut factor: i128 = 1;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                .iter()
                .position(|s| *s == suffix)?
                + 1;
            factor = 1i128 << (10 * power);
        }
        s if s.starts_with(['e', 'E']) => exp10 += s[1..].parse::<i32>().ok()?,
        _ => return None,
    }
    // In thousandths: shift by three more, rounding up what is left.
    exp10 += 3;
    let scaled = mantissa.checked_mul(factor)?;
    let value = if exp10 >= 0 {
        scaled.checked_mul(10i128.checked_pow(exp10 as u32)?)?
    } else {
        let d = 10i128.checked_pow((-exp10) as u32)?;
        (scaled + d - 1) / d
    };
    Some(if negative { -value } else { value })
}

/// The Service registry on create: a ClusterIP, NodePort or LoadBalancer
/// service without a cluster IP gets the next free one of the service
/// range (10.96.0.0/12, as kubeadm's default), and its families; a
/// headless one (`None`) keeps it; an ExternalName one gets none.
fn allocate_cluster_ip(store: &Store, spec: &mut Value) {
    if !spec.is_object() || spec["type"] == "ExternalName" {
        return;
    }
    let asked = spec["clusterIP"].as_str().unwrap_or_default().to_string();
    let ip = if asked.is_empty() {
        match free_cluster_ip(store) {
            Some(ip) => ip,
            None => return,
        }
    } else {
        asked
    };
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    if spec.get("ipFamilies").is_none_or(Value::is_null) {
        spec["ipFamilies"] = json!(["IPv4"]);
    }
    if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
        spec["ipFamilyPolicy"] = json!("SingleStack");
    }
}

/// The lowest address of 10.96.0.0/12 no Service holds (the network and
/// broadcast addresses aside).
fn free_cluster_ip(store: &Store) -> Option<String> {
    let taken: std::collections::HashSet<String> = store
        .list("Service")
        .0
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str().map(str::to_string))
        .collect();
    let base = u32::from(std::net::Ipv4Addr::new(10, 96, 0, 0));
    (1..(1u32 << 20) - 1)
        .map(|i| std::net::Ipv4Addr::from(base + i).to_string())
        .find(|ip| !taken.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_crd_records_its_storage_version_and_accepts_no_names_yet() {
        let mut crd = json!({"spec": {"names": {"plural": "xs", "kind": "X"}, "versions": [
            {"name": "v1beta1", "storage": false}, {"name": "v1", "storage": true}]}});
        crd_status_of(&mut crd);
        assert_eq!(
            crd["status"],
            json!({"acceptedNames": {"plural": "", "kind": ""}, "storedVersions": ["v1"]})
        );
    }

    fn crd_status_of(crd: &mut Value) {
        super::crd(crd);
    }

    #[test]
    fn quantities_compare_in_thousandths_rounded_up() {
        let m = |q: &str| milli(q).unwrap();
        assert_eq!(
            (m("1"), m("100m"), m("1.5"), m("0.0001")),
            (1000, 100, 1500, 1)
        );
        assert_eq!(
            (m("1Ki"), m("2k"), m("1e3"), m("1Gi")),
            (1_024_000, 2_000_000, 1_000_000, 1_073_741_824_000)
        );
        assert_eq!(m("512Mi"), m("0.5Gi"));
        assert!(milli("1x").is_none() && milli("").is_none());
    }

    #[test]
    fn a_pods_qos_class_is_upstreams() {
        let spec = |c: Value| json!({"containers": [c]});
        let r = |req: Value, lim: Value| json!({"name": "a", "resources": {"requests": req, "limits": lim}});
        assert_eq!(qos_class(&spec(json!({"name": "a"}))), "BestEffort");
        assert_eq!(
            qos_class(&spec(r(
                json!({"nvidia.com/gpu": "1"}),
                json!({"nvidia.com/gpu": "1"})
            ))),
            "BestEffort"
        );
        let both = json!({"cpu": "1", "memory": "1Gi"});
        assert_eq!(
            qos_class(&spec(r(both.clone(), both.clone()))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(r(
                json!({"cpu": "1000m", "memory": "1024Mi"}),
                both.clone()
            ))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&spec(r(
                json!({"cpu": "500m", "memory": "1Gi"}),
                both.clone()
            ))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&spec(r(json!({"cpu": "1"}), json!({"cpu": "1"})))),
            "Burstable"
        );
        assert_eq!(
            qos_class(&spec(r(json!({"cpu": "1"}), json!({})))),
            "Burstable"
        );
    }
}
