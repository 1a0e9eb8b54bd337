//! Strategic merge patch, for the built-in kinds (custom resources are
//! refused it with 415): a JSON merge patch, except that a list with a
//! patch merge key in the Kubernetes types (a pod's containers by `name`,
//! its volume mounts by `mountPath`, conditions by `type`, ...) is merged
//! item by item by that key, a list of strings with the merge strategy
//! (`finalizers`) is merged as a set, and the directives are obeyed:
//! `$patch: delete` (an item, or a map), `$patch: replace`, `$retainKeys`,
//! `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` (read
//! for its order). Every other list is replaced whole, as upstream's
//! `atomic` lists (tolerations, a node's taints, args) are.

use serde_json::{Map, Value};

/// The patch merge key of a list field, from the Kubernetes types' tags
/// (`patchMergeKey`); None: the list is replaced whole.
pub(crate) fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "schedulingGates"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "conditions" | "addresses" => "type",
        "ownerReferences" => "uid",
        // A container's ports merge by containerPort, a Service's by port.
        "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => "containerPort",
        "ports" => "port",
        _ => return None,
    })
}

/// Lists of strings merged as sets (`patchStrategy:"merge"` on a []string).
fn merged_as_set(field: &str) -> bool {
    field == "finalizers"
}

/// An item's or a map's `$patch` directive.
fn directive(v: &Value) -> Option<&str> {
    v.get("$patch")?.as_str()
}

/// Applies strategic merge patch `patch` to `doc`.
pub fn apply(doc: &mut Value, patch: &Value) -> Result<(), String> {
    match (doc.as_object_mut(), patch.as_object()) {
        (Some(d), Some(p)) => merge_map(d, p),
        _ => {
            *doc = strip(patch);
            Ok(())
        }
    }
}

/// A patch value with its directives removed (what is stored of it).
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, x)| (k.clone(), strip(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

fn merge_map(doc: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), String> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *doc = strip(&Value::Object(patch.clone()))
                .as_object()
                .cloned()
                .unwrap_or_default();
            return Ok(());
        }
        Some("delete") => {
            doc.clear();
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => return Err(format!("unknown patch type: {other:?}")),
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        doc.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let gone: Vec<&Value> = v.as_array().map(|a| a.iter().collect()).unwrap_or_default();
            if let Some(list) = doc.get_mut(field).and_then(Value::as_array_mut) {
                list.retain(|x| !gone.contains(&x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                doc.remove(k);
            }
            Value::Object(_) if directive(v) == Some("delete") => {
                doc.remove(k);
            }
            Value::Object(p) => match doc.get_mut(k).and_then(Value::as_object_mut) {
                Some(d) => merge_map(d, p)?,
                None => {
                    doc.insert(k.clone(), strip(v));
                }
            },
            Value::Array(items) => {
                let order = patch
                    .get(&format!("$setElementOrder/{k}"))
                    .and_then(Value::as_array);
                let merged = merge_list(k, doc.get(k), items, order)?;
                doc.insert(k.clone(), merged);
            }
            other => {
                doc.insert(k.clone(), other.clone());
            }
        }
    }
    Ok(())
}

fn merge_list(
    field: &str,
    current: Option<&Value>,
    items: &[Value],
    order: Option<&Vec<Value>>,
) -> Result<Value, String> {
    let current: Vec<Value> = current
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if items.iter().any(|i| directive(i) == Some("replace")) {
        let rest: Vec<Value> = items
            .iter()
            .filter(|i| directive(i).is_none())
            .map(strip)
            .collect();
        return Ok(Value::Array(rest));
    }
    if merged_as_set(field) {
        let mut out = current;
        for i in items {
            if !out.contains(i) {
                out.push(i.clone());
            }
        }
        return Ok(Value::Array(out));
    }
    let Some(key) = merge_key(field, items).or_else(|| merge_key(field, &current)) else {
        return Ok(Value::Array(items.iter().map(strip).collect()));
    };
    let mut out = current;
    for item in items {
        let Some(id) = item.get(key) else {
            return Err(format!(
                "map: {item} does not contain declared merge key: {key}"
            ));
        };
        let at = out.iter().position(|x| x.get(key) == Some(id));
        match (directive(item), at) {
            (Some("delete"), Some(i)) => {
                out.remove(i);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => apply(&mut out[i], item)?,
            (_, None) => out.push(strip(item)),
        }
    }
    if let Some(order) = order {
        let rank = |x: &Value| {
            order
                .iter()
                .position(|o| o.get(key) == x.get(key))
                .unwrap_or(usize::MAX)
        };
        out.sort_by_key(rank);
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"finalizers": ["a"], "labels": {"x": "1"}},
        "spec": {
            "containers": [
                {"name": "main", "image": "i:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "side", "image": "s:1"},
            ],
            "tolerations": [{"key": "t1"}],
            "schedulingGates": [{"name": "g1"}, {"name": "g2"}],
        }})
    }

    #[test]
    fn lists_with_a_merge_key_merge_item_by_item() {
        let mut p = pod();
        let patch = json!({"spec": {"containers": [
            {"name": "main", "image": "i:2", "env": [{"name": "B", "value": "2"}]},
            {"name": "new", "image": "n:1"},
        ]}});
        apply(&mut p, &patch).unwrap();
        let c = &p["spec"]["containers"];
        assert_eq!(c.as_array().unwrap().len(), 3);
        assert_eq!(c[0]["image"], "i:2");
        assert_eq!(c[0]["env"].as_array().unwrap().len(), 2, "{c}");
        assert_eq!(c[1]["name"], "side");
        assert_eq!(c[2]["name"], "new");
    }

    #[test]
    fn directives_delete_replace_and_atomic_lists() {
        let mut p = pod();
        let patch = json!({
            "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {
                "schedulingGates": [{"name": "g1", "$patch": "delete"}],
                "containers": [{"name": "side", "$patch": "delete"}],
                "tolerations": [{"key": "t2"}],
            },
        });
        apply(&mut p, &patch).unwrap();
        assert_eq!(p["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(p["spec"]["schedulingGates"], json!([{"name": "g2"}]));
        assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(
            p["spec"]["tolerations"],
            json!([{"key": "t2"}]),
            "atomic: replaced"
        );
        let mut p = pod();
        apply(&mut p, &json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}]}})).unwrap();
        assert_eq!(
            p["spec"]["containers"],
            json!([{"name": "only", "image": "o"}])
        );
        let mut p = pod();
        apply(
            &mut p,
            &json!({"metadata": {"labels": {"$patch": "replace", "y": "2"}}}),
        )
        .unwrap();
        assert_eq!(p["metadata"]["labels"], json!({"y": "2"}));
        assert!(
            apply(
                &mut pod(),
                &json!({"spec": {"containers": [{"image": "no-key"}]}})
            )
            .is_err()
        );
    }
}
