//! What the API server refuses before storing: names that are not DNS
//! names, label keys and values that are not qualified names, answered
//! `422 Invalid` with a cause per field, in apimachinery's words.

use crate::Resource;
use axum::response::Response;
use serde_json::{Value, json};

/// One field that fails validation.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    pub field: String,
    pub value: String,
    pub detail: String,
    pub kind: CauseKind,
}

/// apimachinery's `field.ErrorType`s the server uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CauseKind {
    /// `Invalid value: <v>: <detail>`
    #[default]
    Invalid,
    /// `Required value`
    Required,
    /// `Unsupported value: <v>: supported values: ...`
    NotSupported,
    /// `Forbidden: <detail>`
    Forbidden,
    /// `Too many: <n>: must have at most <max> items` (`field.TooMany`:
    /// maxItems and maxProperties).
    TooMany,
    /// `Too long: may not be more than <n> bytes` (`field.TooLong`: the
    /// value itself is not shown).
    TooLong,
}

impl Cause {
    pub fn invalid(
        field: impl Into<String>,
        value: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            value: value.into(),
            detail: detail.into(),
            kind: CauseKind::Invalid,
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            value: String::new(),
            detail: detail.into(),
            kind: CauseKind::Forbidden,
        }
    }

    /// `field.TooMany(path, n, max)`.
    pub fn too_many(field: impl Into<String>, n: usize, max: u64) -> Self {
        Self {
            field: field.into(),
            value: n.to_string(),
            detail: format!("must have at most {max} items"),
            kind: CauseKind::TooMany,
        }
    }

    /// `field.TooLong(path, _, max)`.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Self {
            field: field.into(),
            value: String::new(),
            detail: format!("may not be more than {max} bytes"),
            kind: CauseKind::TooLong,
        }
    }

    pub fn required(field: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            value: String::new(),
            detail: String::new(),
            kind: CauseKind::Required,
        }
    }

    /// The value as Go's `%v` quotes it: strings quoted, the rest bare.
    pub fn shown(v: &Value) -> String {
        match v {
            Value::String(s) => format!("{s:?}"),
            v => v.to_string(),
        }
    }

    pub(crate) fn reason(&self) -> &'static str {
        match self.kind {
            CauseKind::Invalid => "FieldValueInvalid",
            CauseKind::Required => "FieldValueRequired",
            CauseKind::NotSupported => "FieldValueNotSupported",
            CauseKind::Forbidden => "FieldValueForbidden",
            CauseKind::TooMany => "FieldValueTooMany",
            CauseKind::TooLong => "FieldValueTooLong",
        }
    }

    /// The cause's message, without its field.
    pub(crate) fn message(&self) -> String {
        match self.kind {
            CauseKind::Invalid => format!("Invalid value: {}: {}", self.value, self.detail),
            CauseKind::Required if self.detail.is_empty() => "Required value".into(),
            CauseKind::Required => format!("Required value: {}", self.detail),
            CauseKind::TooLong => format!("Too long: {}", self.detail),
            CauseKind::NotSupported => {
                format!("Unsupported value: {}: {}", self.value, self.detail)
            }
            CauseKind::Forbidden => format!("Forbidden: {}", self.detail),
            CauseKind::TooMany => format!("Too many: {}: {}", self.value, self.detail),
        }
    }
}

pub(crate) const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
pub(crate) const LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

pub(crate) fn dns_label(p: &str) -> bool {
    let b = p.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 63
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter().all(|c| edge(*c) || *c == b'-')
}

/// `IsDNS1123Subdomain`: at most 253 characters in all, and its regex;
/// unlike a label, a part between dots has no bound of its own (a
/// 100-character name with no dot is a valid object name).
pub(crate) fn dns_subdomain(s: &str) -> bool {
    let part = |p: &str| {
        let b = p.as_bytes();
        let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && edge(b[0])
            && edge(b[b.len() - 1])
            && b.iter().all(|c| edge(*c) || *c == b'-')
    };
    !s.is_empty() && s.len() <= 253 && s.split('.').all(part)
}

pub(crate) fn name_part(s: &str) -> bool {
    s.len() <= 63 && qualified_regex(s)
}

/// A qualified name's name part by its regex alone
/// (`([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`), whatever its length.
fn qualified_regex(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(*c, b'-' | b'_' | b'.'))
}

/// `IsQualifiedName`'s messages (none: a qualified name): an optional
/// DNS subdomain prefix and '/', then a name part of at most 63
/// characters.
pub(crate) fn qualified_name_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !dns_subdomain(prefix) {
                    errs.push(format!("prefix part {SUBDOMAIN}"));
                }
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                &QUALIFIED["name part ".len()..]
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !qualified_regex(name) {
        errs.push(QUALIFIED.to_string());
    }
    errs
}

/// `TotalAnnotationSizeLimitB`: keys and values of all annotations.
const ANNOTATIONS_MAX_BYTES: usize = 256 << 10;

/// `ValidateAnnotations`: keys are qualified names (lowercased), and all
/// of them together at most 256 KiB.
fn annotations(m: &Value, out: &mut Vec<Cause>) {
    let Some(annotations) = m["annotations"].as_object() else {
        return;
    };
    let mut total = 0usize;
    for (k, v) in annotations {
        for msg in qualified_name_errors(&k.to_lowercase()) {
            out.push(Cause::invalid(
                "metadata.annotations",
                format!("{k:?}"),
                msg,
            ));
        }
        total = total.saturating_add(k.len() + v.as_str().map_or(0, str::len));
    }
    if total > ANNOTATIONS_MAX_BYTES {
        out.push(Cause::too_long(
            "metadata.annotations",
            ANNOTATIONS_MAX_BYTES,
        ));
    }
}

/// `ValidateFinalizers`: each a qualified name. A name given twice says
/// what it said once (upstream's message prints each distinct error once,
/// `ToAggregate`), so it is judged once: a body of a million empty
/// finalizers costs a million set lookups and two causes, not two million.
/// Past `MOST_CAUSES` bad names no more are judged.
fn finalizers(m: &Value, out: &mut Vec<Cause>) {
    let mut seen = std::collections::HashSet::new();
    let mut bad = 0;
    for f in m["finalizers"].as_array().into_iter().flatten() {
        let name = f.as_str().unwrap_or_default();
        if !seen.insert(name) {
            continue;
        }
        let errors = qualified_name_errors(name);
        bad += usize::from(!errors.is_empty());
        if bad > MOST_CAUSES {
            break;
        }
        for msg in errors {
            out.push(Cause::invalid(
                "metadata.finalizers",
                format!("{name:?}"),
                msg,
            ));
        }
    }
}

pub(crate) fn label_key(k: &str) -> bool {
    match k.split_once('/') {
        Some((prefix, name)) => dns_subdomain(prefix) && name_part(name),
        None => name_part(k),
    }
}

/// The causes an object's metadata gives to refuse it (empty: valid).
/// Namespaces are named by DNS labels; everything else served here by
/// DNS subdomains.
pub fn metadata(r: &Resource, obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let m = &obj["metadata"];
    // A generated name is checked once the store has made it; the prefix
    // alone may end in '-'.
    if let Some(name) = m["name"].as_str().filter(|n| !n.is_empty()) {
        let (ok, detail) = if r.kind == "Namespace" {
            (dns_label(name), LABEL)
        } else {
            (dns_subdomain(name), SUBDOMAIN)
        };
        if !ok {
            out.push(Cause::invalid("metadata.name", format!("{name:?}"), detail));
        }
    }
    if let Some(labels) = m["labels"].as_object() {
        for (k, v) in labels {
            if !label_key(k) {
                out.push(Cause::invalid(
                    "metadata.labels",
                    format!("{k:?}"),
                    QUALIFIED,
                ));
            }
            match v.as_str() {
                Some(s) if s.is_empty() || name_part(s) => {}
                _ => out.push(Cause::invalid("metadata.labels", Cause::shown(v), VALUE)),
            }
        }
    }
    annotations(m, &mut out);
    finalizers(m, &mut out);
    out
}

/// The most causes a 422 carries. kube-apiserver keeps every one; a body
/// of 3 MiB can hold a million bad items, whose causes and message would
/// cost gigabytes to build and send: past this many distinct ones, the
/// rest say nothing new (a documented departure; below it, the same).
pub const MOST_CAUSES: usize = 100;

/// The causes as a 422 carries them: each distinct one once, in order
/// (upstream's `ToAggregate` prints each distinct error once), at most
/// `MOST_CAUSES`.
pub fn distinct(causes: &[Cause]) -> Vec<&Cause> {
    let mut seen = std::collections::HashSet::new();
    causes
        .iter()
        .filter(|c| seen.insert((c.field.as_str(), c.message())))
        .take(MOST_CAUSES)
        .collect()
}

/// `422 Invalid`, as the API server words it: the qualified kind, the
/// name, and each cause as `field: Invalid value: "v": detail`.
pub fn invalid(r: &Resource, name: &str, causes: &[Cause]) -> Response {
    let qualified = if r.group.is_empty() {
        r.kind.to_string()
    } else {
        format!("{}.{}", r.kind, r.group)
    };
    let causes = distinct(causes);
    let each: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message()))
        .collect();
    let message = if each.len() == 1 {
        format!("{qualified} {name:?} is invalid: {}", each[0])
    } else {
        format!("{qualified} {name:?} is invalid: [{}]", each.join(", "))
    };
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "Invalid", "code": 422,
        "details": {
            "name": name, "group": r.group, "kind": r.kind,
            "causes": causes.iter().map(|c| json!({
                "reason": c.reason(),
                "message": c.message(),
                "field": c.field,
            })).collect::<Vec<_>>(),
        },
    });
    crate::answers::status_response(axum::http::StatusCode::UNPROCESSABLE_ENTITY, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    fn kind(k: &str) -> &'static Resource {
        let r = *crate::resources::served_for_tests()
            .all()
            .find(|r| r.kind == k)
            .unwrap();
        Box::leak(Box::new(r))
    }

    #[test]
    fn names_are_dns_subdomains_and_namespaces_dns_labels() {
        let claim = kind("GPUClaim");
        let ns = kind("Namespace");
        let named = |n: &str| json!({"metadata": {"name": n}});
        // A single part of 100 characters: Kubernetes bounds only the whole.
        let long_part = "a".repeat(100);
        for good in ["a", "vm-1", "a.b", "y", "0", &long_part] {
            assert!(metadata(claim, &named(good)).is_empty(), "{good}");
        }
        for bad in ["Bad_Name", "-a", "a-", "A", "a..b", &"a".repeat(254)] {
            let c = metadata(claim, &named(bad));
            assert_eq!(c.len(), 1, "{bad}");
            assert_eq!(c[0].field, "metadata.name");
        }
        assert!(metadata(ns, &named("tenant-a")).is_empty());
        assert_eq!(metadata(ns, &named("a.b"))[0].detail, LABEL);
    }

    #[test]
    fn label_keys_and_values_are_qualified_names() {
        let claim = kind("GPUClaim");
        let labeled = |k: &str, v: &str| json!({"metadata": {"name": "c", "labels": {k: v}}});
        assert!(metadata(claim, &labeled("app.kubernetes.io/name", "x")).is_empty());
        assert!(metadata(claim, &labeled("a", "")).is_empty());
        assert_eq!(metadata(claim, &labeled("a b", "x")).len(), 1);
        assert_eq!(metadata(claim, &labeled("a", "-x")).len(), 1);
        assert_eq!(metadata(claim, &labeled("Bad_/x", "x")).len(), 1);
    }
}
