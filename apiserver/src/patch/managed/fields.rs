//! Fields as structured-merge-diff names them: the leaves of an object,
//! list items by their merge key (`k:{"name":"c"}`), and `fieldsV1`.

use super::{FieldSet, Path};
use serde_json::{Map, Value};

/// `.spec.containers[name="c"].image`, as kube-apiserver names a field.
pub(super) fn shown(p: &Path) -> String {
    p.iter()
        .map(|s| match item_key(s) {
            Some((k, id)) => format!("[{k}={id}]"),
            None => format!(".{s}"),
        })
        .collect()
}

/// The fields `v` sets (its leaves).
pub fn fields_of(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(top) = v.as_object() else {
        return out;
    };
    for (k, x) in top {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                for owned in ["labels", "annotations"] {
                    if let Some(m) = x[owned].as_object() {
                        for key in m.keys() {
                            out.insert(vec!["metadata".into(), owned.into(), key.clone()]);
                        }
                    }
                }
            }
            _ => leaves(x, vec![k.clone()], &mut out),
        }
    }
    out
}

pub(super) fn leaves(v: &Value, at: Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let mut p = at.clone();
                p.push(k.clone());
                leaves(x, p, out);
            }
        }
        Value::Array(items) if key_of(&at, items).is_some() => {
            let key = key_of(&at, items).unwrap_or_default();
            for item in items {
                let mut p = at.clone();
                p.push(item_element(key, item));
                leaves(item, p, out);
            }
        }
        _ => {
            out.insert(at);
        }
    }
}

/// The merge key of the list at `at`, when every item carries it.
pub(super) fn key_of(at: &Path, items: &[Value]) -> Option<&'static str> {
    let field = at.last()?;
    let key = crate::patch::strategic::merge_key(field, items)?;
    items.iter().all(|i| i.get(key).is_some()).then_some(key)
}

/// A list item's path element: `k:{"name":"c"}`, as fieldsV1 writes it.
pub(super) fn item_element(key: &str, item: &Value) -> String {
    let mut m = Map::new();
    m.insert(key.to_string(), item[key].clone());
    format!("k:{}", Value::Object(m))
}

/// The (key, value) a `k:` element names.
pub(super) fn item_key(element: &str) -> Option<(String, Value)> {
    let m: Map<String, Value> = serde_json::from_str(element.strip_prefix("k:")?).ok()?;
    m.into_iter().next()
}

/// One step down a path: a field, or a list item by its key.
pub(super) fn step<'a>(v: &'a Value, element: &str) -> Option<&'a Value> {
    match item_key(element) {
        Some((k, id)) => v.as_array()?.iter().find(|i| i.get(&k) == Some(&id)),
        None => v.get(element),
    }
}

pub(super) fn step_mut<'a>(v: &'a mut Value, element: &str) -> Option<&'a mut Value> {
    match item_key(element) {
        Some((k, id)) => v
            .as_array_mut()?
            .iter_mut()
            .find(|i| i.get(&k) == Some(&id)),
        None => v.get_mut(element),
    }
}

pub(super) fn get<'a>(v: &'a Value, p: &Path) -> Option<&'a Value> {
    p.iter().try_fold(v, |v, k| step(v, k))
}

pub(super) fn remove(v: &mut Value, p: &Path) {
    let Some((last, parents)) = p.split_last() else {
        return;
    };
    let mut at = v;
    for k in parents {
        match step_mut(at, k) {
            Some(x) => at = x,
            None => return,
        }
    }
    match (item_key(last), at) {
        (Some((k, id)), Value::Array(items)) => items.retain(|i| i.get(&k) != Some(&id)),
        (None, Value::Object(m)) => {
            m.remove(last);
        }
        _ => {}
    }
}

/// Overlapping fields: the same, or one inside the other.
pub(super) fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `fieldsV1`: `{"f:spec":{"f:count":{}}}`.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut at = &mut root;
        for k in p {
            let name = if k.starts_with("k:") {
                k.clone()
            } else {
                format!("f:{k}")
            };
            let e = at.entry(name).or_insert_with(|| Value::Object(Map::new()));
            at = e.as_object_mut().expect("built as an object");
        }
    }
    Value::Object(root)
}

pub fn from_fields_v1(v: &Value) -> FieldSet {
    fn walk(v: &Value, at: Path, out: &mut FieldSet) {
        let Some(m) = v.as_object() else { return };
        let mut inner = false;
        for (k, x) in m {
            let name = match k.strip_prefix("f:") {
                Some(n) => n.to_string(),
                None if k.starts_with("k:") => k.clone(),
                None => continue,
            };
            inner = true;
            let mut p = at.clone();
            p.push(name);
            walk(x, p, out);
        }
        if !inner && !at.is_empty() {
            out.insert(at);
        }
    }
    let mut out = FieldSet::new();
    walk(v, Vec::new(), &mut out);
    out
}
