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
use std::collections::{HashMap, HashSet};

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
    // Sets and maps, not searches: a patch may carry a million items (a
    // body up to 3 MiB), and a search per item is a million squared.
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: HashSet<&str> = keep.iter().filter_map(Value::as_str).collect();
        doc.retain(|k, _| keep.contains(k.as_str()));
    }
    for (k, v) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let gone: HashSet<String> = v.as_array().into_iter().flatten().map(ident).collect();
            if let Some(list) = doc.get_mut(field).and_then(Value::as_array_mut) {
                list.retain(|x| !gone.contains(&ident(x)));
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
        let mut have: HashSet<String> = out.iter().map(ident).collect();
        for i in items {
            if have.insert(ident(i)) {
                out.push(i.clone());
            }
        }
        return Ok(Value::Array(out));
    }
    let Some(key) = merge_key(field, items).or_else(|| merge_key(field, &current)) else {
        return Ok(Value::Array(items.iter().map(strip).collect()));
    };
    // Items by their merge key's value; a deleted one leaves a hole,
    // closed at the end (the others keep their places).
    let mut out: Vec<Option<Value>> = current.into_iter().map(Some).collect();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (i, x) in out.iter().enumerate() {
        if let Some(id) = x.as_ref().and_then(|x| x.get(key)) {
            at.entry(ident(id)).or_insert(i);
        }
    }
    for item in items {
        let Some(id) = item.get(key) else {
            return Err(format!(
                "map: {item} does not contain declared merge key: {key}"
            ));
        };
        let id = ident(id);
        match (directive(item), at.get(&id).copied()) {
            (Some("delete"), Some(i)) => {
                out[i] = None;
                at.remove(&id);
            }
            (Some("delete"), None) => {}
            (_, Some(i)) => {
                if let Some(x) = out[i].as_mut() {
                    apply(x, item)?;
                }
            }
            (_, None) => {
                at.insert(id, out.len());
                out.push(Some(strip(item)));
            }
        }
    }
    let mut out: Vec<Value> = out.into_iter().flatten().collect();
    if let Some(order) = order {
        let mut ranks: HashMap<String, usize> = HashMap::new();
        for (i, o) in order.iter().enumerate() {
            if let Some(id) = o.get(key) {
                ranks.entry(ident(id)).or_insert(i);
            }
        }
        let rank = |x: &Value| {
            x.get(key)
                .and_then(|id| ranks.get(&ident(id)).copied())
                .unwrap_or(usize::MAX)
        };
        out.sort_by_cached_key(rank);
    }
    Ok(Value::Array(out))
}

/// A value as a key of a set or map: its JSON text (values of one list
/// are alike in kind, so equal text is equal value).
fn ident(v: &Value) -> String {
    match v {
        Value::String(s) => format!("s{s}"),
        other => other.to_string(),
    }
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
