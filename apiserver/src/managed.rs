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

use serde_json::{Map, Value, json};
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

/// `.spec.containers[name="c"].image`, as kube-apiserver names a field.
fn shown(p: &Path) -> String {
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

fn leaves(v: &Value, at: Path, out: &mut FieldSet) {
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
fn key_of(at: &Path, items: &[Value]) -> Option<&'static str> {
    let field = at.last()?;
    let key = super::strategic::merge_key(field, items)?;
    items.iter().all(|i| i.get(key).is_some()).then_some(key)
}

/// A list item's path element: `k:{"name":"c"}`, as fieldsV1 writes it.
fn item_element(key: &str, item: &Value) -> String {
    let mut m = Map::new();
    m.insert(key.to_string(), item[key].clone());
    format!("k:{}", Value::Object(m))
}

/// The (key, value) a `k:` element names.
fn item_key(element: &str) -> Option<(String, Value)> {
    let m: Map<String, Value> = serde_json::from_str(element.strip_prefix("k:")?).ok()?;
    m.into_iter().next()
}

/// One step down a path: a field, or a list item by its key.
fn step<'a>(v: &'a Value, element: &str) -> Option<&'a Value> {
    match item_key(element) {
        Some((k, id)) => v.as_array()?.iter().find(|i| i.get(&k) == Some(&id)),
        None => v.get(element),
    }
}

fn step_mut<'a>(v: &'a mut Value, element: &str) -> Option<&'a mut Value> {
    match item_key(element) {
        Some((k, id)) => v
            .as_array_mut()?
            .iter_mut()
            .find(|i| i.get(&k) == Some(&id)),
        None => v.get_mut(element),
    }
}

fn get<'a>(v: &'a Value, p: &Path) -> Option<&'a Value> {
    p.iter().try_fold(v, |v, k| step(v, k))
}

fn remove(v: &mut Value, p: &Path) {
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
fn overlaps(a: &Path, b: &Path) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(count: i64, extra: Option<&str>) -> Value {
        let mut v = json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
            "metadata": {"name": "c", "namespace": "a", "labels": {"team": "ml"}},
            "spec": {"className": "h200", "count": count}});
        if let Some(e) = extra {
            v["spec"]["note"] = e.into();
        }
        v
    }

    #[test]
    fn fields_v1_round_trips() {
        let f = fields_of(&claim(1, None));
        let v1 = to_fields_v1(&f);
        assert_eq!(
            v1,
            json!({"f:metadata": {"f:labels": {"f:team": {}}}, "f:spec": {"f:className": {}, "f:count": {}}})
        );
        assert_eq!(from_fields_v1(&v1), f);
    }

    #[test]
    fn an_apply_owns_its_fields_and_drops_what_it_no_longer_applies() {
        let made = apply(None, &claim(1, Some("x")), "alice", false, "v1").unwrap();
        assert_eq!(made["spec"]["note"], "x");
        let e = entries(&made);
        assert_eq!(
            (e[0].manager.as_str(), e[0].operation.as_str()),
            ("alice", "Apply")
        );
        // The same manager applies again without `note`: it goes.
        let again = apply(Some(&made), &claim(2, None), "alice", false, "v1").unwrap();
        assert!(again["spec"].get("note").is_none(), "{again}");
        assert_eq!(again["spec"]["count"], 2);
    }

    #[test]
    fn another_manager_conflicts_unless_forced_or_agreeing() {
        let made = apply(None, &claim(1, None), "alice", false, "v1").unwrap();
        let c = apply(Some(&made), &claim(2, None), "bob", false, "v1").unwrap_err();
        assert_eq!(c[0].field, ".spec.count");
        assert_eq!(c[0].manager, "alice");
        // Applying the same value is no conflict: both own it.
        let shared = apply(Some(&made), &claim(1, None), "bob", false, "v1").unwrap();
        // Alice stops applying count: bob still owns it, so it stays.
        let mut less = claim(1, None);
        less["spec"].as_object_mut().unwrap().remove("count");
        let kept = apply(Some(&shared), &less, "alice", false, "v1").unwrap();
        assert_eq!(kept["spec"]["count"], 1);
        // Forced: bob takes count over.
        let forced = apply(Some(&made), &claim(3, None), "bob", true, "v1").unwrap();
        assert_eq!(forced["spec"]["count"], 3);
        let alice = entries(&forced)
            .into_iter()
            .find(|e| e.manager == "alice")
            .unwrap();
        assert!(
            !alice
                .fields
                .contains(&vec!["spec".to_string(), "count".to_string()])
        );
    }

    #[test]
    fn an_update_takes_what_it_changes_and_an_apply_then_conflicts() {
        let made = apply(None, &claim(1, None), "alice", false, "v1").unwrap();
        let mut edited = made.clone();
        edited["spec"]["count"] = 5.into();
        record_update(Some(&made), &mut edited, "kubectl-edit", "", "v1");
        let e = entries(&edited);
        let edit = e.iter().find(|e| e.manager == "kubectl-edit").unwrap();
        assert_eq!(edit.operation, "Update");
        assert!(
            edit.fields
                .contains(&vec!["spec".to_string(), "count".to_string()])
        );
        let c = apply(Some(&edited), &claim(2, None), "alice", false, "v1").unwrap_err();
        assert_eq!(
            (c[0].manager.as_str(), c[0].field.as_str()),
            ("kubectl-edit", ".spec.count")
        );
        // A write that changes nothing leaves the entries alone.
        let mut same = edited.clone();
        record_update(Some(&edited), &mut same, "other", "", "v1");
        assert_eq!(entries(&same), entries(&edited));
    }

    #[test]
    fn containers_are_owned_item_by_item_by_their_name() {
        let pod = |containers: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": containers}})
        };
        let made = apply(
            None,
            &pod(json!([{"name": "main", "image": "m:1"}])),
            "alice",
            false,
            "v1",
        )
        .unwrap();
        let owned = to_fields_v1(&entries(&made)[0].fields);
        assert!(
            owned["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"]["f:image"].is_object(),
            "{owned}"
        );
        // Bob adds a sidecar: no conflict, both containers kept.
        let both = apply(
            Some(&made),
            &pod(json!([{"name": "side", "image": "s:1"}])),
            "bob",
            false,
            "v1",
        )
        .unwrap();
        let names: Vec<&str> = both["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["main", "side"]);
        // Bob changing alice's container's image conflicts, on that field.
        let c = apply(
            Some(&both),
            &pod(json!([{"name": "main", "image": "m:2"}])),
            "bob",
            false,
            "v1",
        )
        .unwrap_err();
        assert_eq!(c[0].field, ".spec.containers[name=\"main\"].image");
        // Bob stops applying his sidecar: it goes; alice's stays.
        let back = apply(Some(&both), &pod(json!([])), "bob", false, "v1").unwrap();
        assert_eq!(back["spec"]["containers"].as_array().unwrap().len(), 1);
        assert_eq!(back["spec"]["containers"][0]["name"], "main");
        assert_eq!(from_fields_v1(&owned), entries(&made)[0].fields);
    }

    #[test]
    fn a_manager_is_its_field_manager_or_its_user_agents_name() {
        assert_eq!(manager_of(Some("flux"), "kubectl/v1.32"), "flux");
        assert_eq!(manager_of(None, "kubectl/v1.32.4 (linux/amd64)"), "kubectl");
        assert_eq!(manager_of(Some(""), ""), "unknown");
    }
}
