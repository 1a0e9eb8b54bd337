//! Field ownership and server-side apply, as structured-merge-diff keeps
//! them in `metadata.managedFields`: each manager owns the fields it set,
//! by Apply (server-side apply) or by Update (any other write, under its
//! `fieldManager` or its user agent's name). An apply sets the fields of
//! its configuration, removes the fields its manager applied before and
//! no longer applies (unless another manager owns them too), and conflicts
//! (409) when it would change a field another manager owns, unless forced,
//! which takes the field over. An update takes over the fields it changes.
//!
//! Granularity: objects are owned field by field; a list with a merge key
//! in the Kubernetes types (a pod's containers by `name`, ...; the table
//! strategic merge uses) is associative, owned item by item (`k:{"name":
//! "c"}` in fieldsV1) and merged by its key; any other list is one field,
//! set and owned whole (structured-merge-diff's `atomic`, the default of a
//! CRD's lists). `metadata` is owned only in its labels and annotations.

mod fields;
#[cfg(test)]
mod tests;

use fields::*;
pub use fields::{fields_of, from_fields_v1, to_fields_v1};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// A field: the names from the object's root.
pub type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// One entry of `managedFields`.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub time: String,
    pub subresource: String,
    pub fields: FieldSet,
}

/// A field another manager owns that an apply would change.
#[derive(Clone, Debug, PartialEq)]
pub struct Conflict {
    pub manager: String,
    pub api_version: String,
    /// `.spec.count`, as kube-apiserver names it.
    pub field: String,
}

/// The entries of an object's `managedFields`.
pub fn entries(obj: &Value) -> Vec<Entry> {
    let s = |e: &Value, f: &str| e[f].as_str().unwrap_or_default().to_string();
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| Entry {
                    manager: s(e, "manager"),
                    operation: s(e, "operation"),
                    api_version: s(e, "apiVersion"),
                    time: s(e, "time"),
                    subresource: s(e, "subresource"),
                    fields: from_fields_v1(&e["fieldsV1"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn put_entries(obj: &mut Value, list: &[Entry]) {
    let v: Vec<Value> = list
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut x = json!({"manager": e.manager, "operation": e.operation,
                "apiVersion": e.api_version, "time": e.time,
                "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields)});
            if !e.subresource.is_empty() {
                x["subresource"] = e.subresource.clone().into();
            }
            x
        })
        .collect();
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    if v.is_empty() {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
    } else {
        obj["metadata"]["managedFields"] = Value::Array(v);
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Who makes a write: its `fieldManager`, else its user agent's name
/// (`kubectl/v1.32.4 (linux/amd64)` → `kubectl`), as kube-apiserver names it.
pub fn manager_of(field_manager: Option<&str>, user_agent: &str) -> String {
    match field_manager.filter(|m| !m.is_empty()) {
        Some(m) => m.to_string(),
        None => user_agent
            .split('/')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or("unknown")
            .to_string(),
    }
}

/// Records an update's ownership in `new` (from `old`'s managedFields,
/// or none on a create): `manager` takes the fields it changed, fields
/// removed leave every manager. A write that changes nothing keeps the
/// entries as they were.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: &str,
    api_version: &str,
) {
    let mut list = old.map(entries).unwrap_or_default();
    let before = old.map(fields_of).unwrap_or_default();
    let after = fields_of(new);
    let changed: FieldSet = after
        .iter()
        .filter(|p| old.and_then(|o| get(o, p)) != get(new, p))
        .cloned()
        .collect();
    let removed: FieldSet = before.difference(&after).cloned().collect();
    if changed.is_empty() && removed.is_empty() {
        put_entries(new, &list);
        return;
    }
    for e in &mut list {
        e.fields
            .retain(|p| !removed.contains(p) && !changed.iter().any(|c| overlaps(c, p)));
    }
    let mine = list.iter().position(|e| {
        e.manager == manager && e.operation == "Update" && e.subresource == subresource
    });
    let i = match mine {
        Some(i) => i,
        None => {
            list.push(Entry {
                manager: manager.into(),
                operation: "Update".into(),
                api_version: api_version.into(),
                time: String::new(),
                subresource: subresource.into(),
                fields: FieldSet::new(),
            });
            list.len() - 1
        }
    };
    list[i].fields.extend(changed);
    list[i].time = now();
    list[i].api_version = api_version.into();
    put_entries(new, &list);
}

/// Deep merge: objects field by field, associative lists item by item by
/// their key, anything else replaced.
fn merge(into: &mut Value, from: &Value, at: &Path) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                let mut p = at.clone();
                p.push(k.clone());
                match a.get_mut(k) {
                    Some(x)
                        if (x.is_object() && v.is_object()) || (x.is_array() && v.is_array()) =>
                    {
                        merge(x, v, &p)
                    }
                    _ => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b))
            if key_of(at, b).is_some() && key_of(at, a).is_some() =>
        {
            let key = key_of(at, b).unwrap_or_default();
            for item in b {
                let mut p = at.clone();
                p.push(item_element(key, item));
                match a.iter_mut().find(|x| x.get(key) == item.get(key)) {
                    Some(x) => merge(x, item, &p),
                    None => a.push(item.clone()),
                }
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// Server-side apply of `applied` by `manager` onto `live` (None: the
/// object is created): the object to store, or the conflicts.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    api_version: &str,
) -> Result<Value, Vec<Conflict>> {
    let mut list = live.map(entries).unwrap_or_default();
    let wants = fields_of(applied);
    let mut conflicts = Vec::new();
    for e in list
        .iter()
        .filter(|e| e.manager != manager || e.operation != "Apply")
    {
        for p in &wants {
            let theirs = e.fields.iter().any(|q| overlaps(p, q));
            let differs = live.and_then(|l| get(l, p)) != get(applied, p);
            if theirs && differs {
                conflicts.push(Conflict {
                    manager: e.manager.clone(),
                    api_version: e.api_version.clone(),
                    field: shown(p),
                });
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    let mut out = live.cloned().unwrap_or_else(|| json!({}));
    // What this manager applied before and applies no more goes, unless
    // another manager owns it too.
    let before: FieldSet = list
        .iter()
        .filter(|e| e.manager == manager && e.operation == "Apply")
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let others = |p: &Path| {
        list.iter()
            .filter(|e| !(e.manager == manager && e.operation == "Apply"))
            .any(|e| e.fields.iter().any(|q| q.starts_with(p)))
    };
    for p in before.difference(&wants) {
        // A list item this manager no longer applies at all goes whole.
        let item = p
            .iter()
            .position(|e| e.starts_with("k:"))
            .map(|i| p[..=i].to_vec())
            .filter(|item| !wants.iter().any(|w| w.starts_with(item)));
        match item {
            Some(item) if !others(&item) => remove(&mut out, &item),
            _ if !others(p) => remove(&mut out, p),
            _ => {}
        }
    }
    let mut body = applied.clone();
    if let Some(m) = body.as_object_mut() {
        m.remove("status");
    }
    if let Some(m) = body["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    merge(&mut out, &body, &Vec::new());
    // Forced: the fields in conflict leave their owners (a field applied
    // with the value it has is shared, not taken).
    let taken: FieldSet = wants
        .iter()
        .filter(|p| live.and_then(|l| get(l, p)) != get(applied, p))
        .cloned()
        .collect();
    for e in &mut list {
        if !(e.manager == manager && e.operation == "Apply") {
            e.fields.retain(|q| !taken.iter().any(|p| overlaps(p, q)));
        }
    }
    list.retain(|e| !(e.manager == manager && e.operation == "Apply"));
    list.push(Entry {
        manager: manager.into(),
        operation: "Apply".into(),
        api_version: api_version.into(),
        time: now(),
        subresource: String::new(),
        fields: wants,
    });
    put_entries(&mut out, &list);
    Ok(out)
}
