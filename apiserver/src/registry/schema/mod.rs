//! Custom resources checked against their CRD's structural schema, as the
//! API server does before storing one: unknown fields pruned, defaults
//! applied, then types, required fields, bounds, enums and the
//! `x-kubernetes-validations` CEL rules (transition rules, those naming
//! `oldSelf`, only on an update). Metadata is the API machinery's, not the
//! schema's, and is checked apart (`validate.rs`).

mod cel_rules;

use crate::registry::validate::{Cause, CauseKind};
use cel_rules::rules;
use serde_json::{Map, Value};

/// Prunes, defaults and validates `obj` by its CRD's `schema` (None: a
/// built-in kind, untouched). `old` is the stored object on an update.
pub fn admit(schema: Option<&Value>, obj: &mut Value, old: Option<&Value>) -> Vec<Cause> {
    let Some(schema) = schema else {
        return Vec::new();
    };
    let mut causes = Vec::new();
    let Some(fields) = obj.as_object_mut() else {
        return causes;
    };
    let props = &schema["properties"];
    for (k, v) in fields.iter_mut() {
        // apiVersion, kind and metadata are the machinery's.
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(s) = props.get(k) {
            walk(v, s, k, old.and_then(|o| o.get(k)), &mut causes);
        }
    }
    // A root that preserves unknown fields keeps them, as anywhere else.
    if schema["x-kubernetes-preserve-unknown-fields"] != true {
        fields.retain(|k, _| {
            matches!(k.as_str(), "apiVersion" | "kind" | "metadata") || props.get(k).is_some()
        });
    }
    default_fields(fields, schema);
    for r in required(schema) {
        if !fields.contains_key(r) {
            causes.push(Cause::required(r));
        }
    }
    causes
}

/// What the API server makes of a custom resource by its CRD's schema.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaVerdict {
    /// The fields pruning drops, as paths (`spec.extra`).
    pub pruned: Vec<String>,
    /// Why it would be refused (422), one message per cause.
    pub invalid: Vec<String>,
}

impl SchemaVerdict {
    /// Stored as sent: nothing pruned, nothing refused.
    pub fn kept_as_sent(&self) -> bool {
        self.pruned.is_empty() && self.invalid.is_empty()
    }
}

/// `obj` judged by a CRD's `openAPIV3Schema` as `admit` judges a write
/// (`old`: the stored object, for transition rules). For stand-ins that
/// write to a store directly, to show they write only what a cluster's
/// API server would keep.
pub fn verdict(schema: &Value, obj: &Value, old: Option<&Value>) -> SchemaVerdict {
    let mut kept = obj.clone();
    let causes = admit(Some(schema), &mut kept, old);
    let mut pruned = Vec::new();
    dropped(obj, &kept, "", &mut pruned);
    SchemaVerdict {
        pruned,
        invalid: causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message()))
            .collect(),
    }
}

/// Removes the field at a path `dropped` names (`spec.list[0].extra`).
pub fn remove_path(obj: &mut Value, path: &str) {
    let mut steps: Vec<(String, Option<usize>)> = Vec::new();
    for part in path.split('.') {
        match part.split_once('[') {
            Some((name, rest)) => {
                let i = rest.trim_end_matches(']').parse().ok();
                steps.push((name.to_string(), i));
            }
            None => steps.push((part.to_string(), None)),
        }
    }
    let Some(((last, last_index), parents)) = steps.split_last() else {
        return;
    };
    let mut at = obj;
    for (name, index) in parents {
        let Some(next) = at.get_mut(name.as_str()) else {
            return;
        };
        at = match index {
            Some(i) => match next.get_mut(*i) {
                Some(x) => x,
                None => return,
            },
            None => next,
        };
    }
    // An unknown field is a map's key, never a list's item.
    if last_index.is_none()
        && let Some(m) = at.as_object_mut()
    {
        m.remove(last.as_str());
    }
}

/// The fields of `sent` that pruning dropped from `kept`, as paths
/// (`spec.extra`, `spec.list[0].extra`): what `fieldValidation` reports.
pub fn dropped(sent: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    let at = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match (sent, kept) {
        (Value::Object(s), Value::Object(k)) => {
            for (key, v) in s {
                match k.get(key) {
                    None if !v.is_null() => out.push(at(key)),
                    None => {}
                    Some(kv) => dropped(v, kv, &at(key), out),
                }
            }
        }
        (Value::Array(s), Value::Array(k)) => {
            for (i, (v, kv)) in s.iter().zip(k).enumerate() {
                dropped(v, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn required(schema: &Value) -> impl Iterator<Item = &str> {
    schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Fills absent properties that have a default.
fn default_fields(fields: &mut Map<String, Value>, schema: &Value) {
    if let Some(props) = schema["properties"].as_object() {
        for (k, s) in props {
            if !fields.contains_key(k)
                && let Some(d) = s.get("default")
            {
                fields.insert(k.clone(), d.clone());
            }
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(want: &str, v: &Value) -> bool {
    match (want, type_name(v)) {
        ("number", "integer") => true,
        (w, got) => w == got,
    }
}

/// One value against its schema: pruned and defaulted below, then checked.
fn walk(v: &mut Value, s: &Value, path: &str, old: Option<&Value>, out: &mut Vec<Cause>) {
    if v.is_null() {
        // A null where the schema allows none is dropped by the caller's
        // store (it keeps no nulls); nullable or not, there is nothing to check.
        return;
    }
    if let Some(want) = s["type"].as_str()
        && !type_matches(want, v)
    {
        let got = type_name(v);
        out.push(Cause::invalid(
            path,
            format!("{got:?}"),
            format!("{path} in body must be of type {want}: {got:?}"),
        ));
        return;
    }
    counts(v, s, path, out);
    match v {
        Value::Object(fields) => object(fields, s, path, old, out),
        Value::Array(items) => {
            if let Some(item) = s.get("items") {
                for (i, x) in items.iter_mut().enumerate() {
                    let old_item = old.and_then(|o| o.get(i));
                    walk(x, item, &format!("{path}[{i}]"), old_item, out);
                }
            }
        }
        _ => scalar(v, s, path, out),
    }
    rules(v, s, path, old, out);
}

fn object(
    fields: &mut Map<String, Value>,
    s: &Value,
    path: &str,
    old: Option<&Value>,
    out: &mut Vec<Cause>,
) {
    let preserve = s["x-kubernetes-preserve-unknown-fields"] == true;
    if let Some(extra) = s.get("additionalProperties").filter(|a| a.is_object()) {
        for (k, x) in fields.iter_mut() {
            let o = old.and_then(|o| o.get(k));
            walk(x, extra, &format!("{path}.{k}"), o, out);
        }
        return;
    }
    let props = s["properties"].as_object();
    if !preserve {
        fields.retain(|k, _| props.is_some_and(|p| p.contains_key(k)));
    }
    if let Some(props) = props {
        for (k, x) in fields.iter_mut() {
            if let Some(ps) = props.get(k) {
                let o = old.and_then(|o| o.get(k));
                walk(x, ps, &format!("{path}.{k}"), o, out);
            }
        }
    }
    default_fields(fields, s);
    for r in required(s) {
        if !fields.contains_key(r) {
            out.push(Cause::required(format!("{path}.{r}")));
        }
    }
}

/// maxProperties, minProperties, maxItems and minItems, as kube-openapi's
/// validator words them (the maxima as `field.TooMany`).
fn counts(v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) {
    let (n, most, least, what) = match v {
        Value::Object(m) => (m.len(), "maxProperties", "minProperties", "properties"),
        Value::Array(a) => (a.len(), "maxItems", "minItems", "items"),
        _ => return,
    };
    if let Some(max) = s[most].as_u64()
        && n as u64 > max
    {
        out.push(Cause::too_many(path, n, max));
    }
    if let Some(min) = s[least].as_u64()
        && (n as u64) < min
    {
        out.push(Cause::invalid(
            path,
            n.to_string(),
            format!("{path} in body should have at least {min} {what}"),
        ));
    }
}

/// A schema's `pattern`, compiled once per pattern (schemas are few; a
/// pattern that does not compile matches nothing, as the API server would
/// have refused its CRD).
fn pattern_matches(pattern: &str, text: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static COMPILED: OnceLock<Mutex<HashMap<String, Option<regex::Regex>>>> = OnceLock::new();
    let mut cache = COMPILED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let re = cache
        .entry(pattern.to_string())
        .or_insert_with(|| regex::Regex::new(pattern).ok());
    re.as_ref().is_some_and(|re| re.is_match(text))
}

fn scalar(v: &Value, s: &Value, path: &str, out: &mut Vec<Cause>) {
    let shown = Cause::shown(v);
    if let Some(allowed) = s["enum"].as_array()
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed
            .iter()
            .filter(|a| !a.is_null())
            .map(Cause::shown)
            .collect();
        out.push(Cause {
            field: path.into(),
            value: shown.clone(),
            detail: format!("supported values: {}", list.join(", ")),
            kind: CauseKind::NotSupported,
        });
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = s["minimum"].as_f64()
            && n < min
        {
            out.push(Cause::invalid(
                path,
                shown.clone(),
                format!("{path} in body should be greater than or equal to {min}"),
            ));
        }
        if let Some(max) = s["maximum"].as_f64()
            && n > max
        {
            out.push(Cause::invalid(
                path,
                shown.clone(),
                format!("{path} in body should be less than or equal to {max}"),
            ));
        }
    }
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as u64;
        if let Some(min) = s["minLength"].as_u64()
            && len < min
        {
            out.push(Cause::invalid(
                path,
                shown.clone(),
                format!("{path} in body should be at least {min} chars long"),
            ));
        }
        if let Some(max) = s["maxLength"].as_u64()
            && len > max
        {
            out.push(Cause::invalid(
                path,
                shown.clone(),
                format!("{path} in body should be at most {max} chars long"),
            ));
        }
        if let Some(p) = s["pattern"].as_str()
            && !pattern_matches(p, text)
        {
            out.push(Cause::invalid(
                path,
                shown,
                format!("{path} in body should match '{p}'"),
            ));
        }
    }
}

#[cfg(test)]
mod tests;
