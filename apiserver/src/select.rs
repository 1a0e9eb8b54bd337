//! Label and field selectors, as list and watch read them.

use super::Resource;
use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// A parsed selector; the empty one matches everything.
#[derive(Debug, Default, PartialEq)]
pub struct Selector {
    labels: Vec<Req>,
    fields: Vec<(String, bool, String)>,
}

/// Splits on commas outside parentheses: `a in (x,y),b` is two terms. An
/// empty selector has none; an empty term in one (`a=b,,`) is refused, as
/// the API server's parser refuses it.
fn terms(s: &str) -> Result<Vec<&str>, String> {
    if s.trim().is_empty() {
        return Ok(Vec::new());
    }
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    let out: Vec<&str> = out.into_iter().map(str::trim).collect();
    if out.iter().any(|t| t.is_empty()) {
        return Err(format!("unable to parse requirement: empty term in {s:?}"));
    }
    Ok(out)
}

/// A label value: empty, or a name part.
fn label_value(v: &str) -> bool {
    v.is_empty() || crate::registry::validate::name_part(v)
}

/// Refuses a requirement whose key or values are not labels can be, as
/// `labels.Parse` does (`!!!`, `a===b`, `=`).
fn valid(r: Req, t: &str) -> Result<Req, String> {
    let (key, values): (&str, Vec<&str>) = match &r {
        Req::Eq(k, v) | Req::Ne(k, v) => (k, vec![v.as_str()]),
        Req::In(k, vs) | Req::NotIn(k, vs) => (k, vs.iter().map(String::as_str).collect()),
        Req::Exists(k) | Req::Absent(k) => (k, Vec::new()),
    };
    if !crate::registry::validate::label_key(key) {
        return Err(format!(
            "unable to parse requirement: {t:?}: invalid label key {key:?}"
        ));
    }
    if let Some(v) = values.iter().find(|v| !label_value(v)) {
        return Err(format!(
            "unable to parse requirement: {t:?}: invalid label value {v:?}"
        ));
    }
    Ok(r)
}

fn set(s: &str) -> Option<Vec<String>> {
    let inner = s.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).collect())
}

fn label_req(t: &str) -> Result<Req, String> {
    let bad = || format!("unable to parse requirement: {t:?}");
    if let Some(k) = t.strip_prefix('!') {
        return Ok(Req::Absent(k.trim().to_string()));
    }
    if let Some((k, v)) = t.split_once("!=") {
        return Ok(Req::Ne(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
        return Ok(Req::Eq(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = t.split_once(" notin ") {
        return Ok(Req::NotIn(k.trim().into(), set(v).ok_or_else(bad)?));
    }
    if let Some((k, v)) = t.split_once(" in ") {
        return Ok(Req::In(k.trim().into(), set(v).ok_or_else(bad)?));
    }
    if t.contains(char::is_whitespace) {
        return Err(bad());
    }
    Ok(Req::Exists(t.to_string()))
}

impl Selector {
    /// Reads `labelSelector` and `fieldSelector`; Err says which term is bad.
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Self, String> {
        let labels = terms(labels.unwrap_or_default())?
            .into_iter()
            .map(|t| label_req(t).and_then(|r| valid(r, t)))
            .collect::<Result<_, _>>()?;
        let fields = terms(fields.unwrap_or_default())?
            .into_iter()
            .map(|t| {
                if let Some((k, v)) = t.split_once("!=") {
                    Ok((k.trim().to_string(), false, v.trim().to_string()))
                } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                    Ok((k.trim().to_string(), true, v.trim().to_string()))
                } else {
                    Err(format!("invalid field selector: {t:?}"))
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { labels, fields })
    }

    /// Reads the selectors of a request to `resource`: a field it has no
    /// field label for is refused, as the API server refuses it.
    pub fn for_resource(
        labels: Option<&str>,
        fields: Option<&str>,
        resource: &Resource,
    ) -> Result<Self, String> {
        let sel = Self::parse(labels, fields)?;
        let supported = field_labels(resource);
        if let Some((f, _, _)) = sel
            .fields
            .iter()
            .find(|(f, _, _)| !supported.contains(&f.as_str()))
        {
            return Err(format!("field label not supported: {f}"));
        }
        let mut sel = sel;
        for (f, _, _) in &mut sel.fields {
            *f = super::events::stored_field(resource, f);
        }
        Ok(sel)
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = &obj["metadata"]["labels"];
        let label = |k: &str| labels.get(k).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|r| match r {
            Req::Eq(k, v) => label(k) == Some(v),
            Req::Ne(k, v) => label(k) != Some(v),
            Req::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            Req::Exists(k) => label(k).is_some(),
            Req::Absent(k) => label(k).is_none(),
        });
        labels_ok
            && self
                .fields
                .iter()
                .all(|(path, eq, want)| (field(obj, path) == *want) == *eq)
    }
}

/// The field labels a resource can be selected by: every object's name
/// and namespace, and what its kind's registry adds (upstream's
/// `GetAttrs` and field label conversion functions). Custom resources
/// have only the two (selectableFields aside, which our CRDs do not use).
fn field_labels(r: &Resource) -> Vec<&'static str> {
    let mut out = vec!["metadata.name", "metadata.namespace"];
    match (r.group, r.kind) {
        ("", "Pod") => out.extend([
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ]),
        ("", "Node") => out.push("spec.unschedulable"),
        ("", "Namespace") => out.push("status.phase"),
        // `resource/v1` conversion: a slice by its node and its driver
        // (what a kubelet's and a driver's watch select).
        ("resource.k8s.io", "ResourceSlice") => out.extend(["spec.nodeName", "spec.driver"]),
        ("", "Event") => {
            out.extend(["reason", "reportingComponent", "source", "type"]);
            out.extend(INVOLVED);
        }
        ("events.k8s.io", "Event") => {
            out.extend(["reason", "reportingController", "type"]);
            out.extend(REGARDING);
        }
        _ => {}
    }
    out
}

const INVOLVED: [&str; 7] = [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
];

const REGARDING: [&str; 7] = [
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
];

/// The field labels whose value is a Go bool upstream: an absent one is
/// its zero value, `false` (`fmt.Sprint(node.Spec.Unschedulable)`,
/// `strconv.FormatBool(pod.Spec.HostNetwork)`), so that
/// `spec.unschedulable=false` selects the nodes never cordoned.
const BOOLEAN_FIELDS: [&str; 2] = ["spec.unschedulable", "spec.hostNetwork"];

/// A dotted field path's value as a selector compares it; absent is "",
/// or `false` for a boolean field.
fn field(obj: &Value, path: &str) -> String {
    let v = path.split('.').fold(obj, |v, seg| &v[seg]);
    match v {
        Value::String(s) => s.clone(),
        Value::Null if BOOLEAN_FIELDS.contains(&path) => "false".into(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "namespace": "a", "labels": {"app": "x", "tier": "gpu"}},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    }

    #[test]
    fn label_selectors_match_as_the_api_server_does() {
        let m = |s: &str| Selector::parse(Some(s), None).unwrap().matches(&pod());
        assert!(m("app=x") && m("app==x") && m("app!=y") && m("app") && m("!missing"));
        assert!(m("app in (x,y),tier notin (cpu)") && m("app=x,tier=gpu"));
        assert!(!m("app=y") && !m("missing") && !m("!app") && !m("app in (y, z)"));
        assert!(m("missing notin (a)") && !m("missing in (a)"));
        assert!(Selector::parse(Some("a b"), None).is_err());
    }

    #[test]
    fn field_selectors_compare_dotted_paths_and_absent_is_empty() {
        let m = |s: &str| Selector::parse(None, Some(s)).unwrap().matches(&pod());
        assert!(m("metadata.name=p") && m("spec.nodeName=n1,status.phase!=Pending"));
        assert!(m("spec.missing=") && !m("metadata.namespace=b"));
        assert!(m("spec.hostNetwork=false") && !m("spec.hostNetwork=true"));
        assert!(Selector::parse(None, Some("nonsense")).is_err());
    }
}
