//! PATCH: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and
//! strategic merge patch (`strategic`). Server-side apply and field
//! ownership are `managed`'s.

pub(crate) mod managed;
pub(crate) mod strategic;

use serde_json::Value;

/// How the body of a PATCH reads, from its content type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or_default().trim();
        Some(match ct {
            "application/json-patch+json" => Self::Json,
            "application/merge-patch+json" => Self::Merge,
            "application/strategic-merge-patch+json" => Self::StrategicMerge,
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Self::Apply,
            _ => return None,
        })
    }
}

/// The patch body, parsed (apply bodies are YAML, of which JSON is a part).
pub fn parse_body(kind: PatchKind, body: &[u8]) -> Result<Value, String> {
    match kind {
        PatchKind::Apply => {
            let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
            crate::yaml::from_str(text).map_err(|e| e.to_string())
        }
        _ => serde_json::from_slice(body).map_err(|e| e.to_string()),
    }
}

/// Applies `patch` to `doc`.
pub fn apply(kind: PatchKind, doc: &mut Value, patch: &Value) -> Result<(), String> {
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch =
                serde_json::from_value(patch.clone()).map_err(|e| e.to_string())?;
            json_patch::patch(doc, &ops).map_err(|e| e.to_string())
        }
        PatchKind::StrategicMerge => crate::patch::strategic::apply(doc, patch),
        PatchKind::Merge | PatchKind::Apply => {
            json_patch::merge(doc, patch);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_removes_fields() {
        let mut doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"x": 1}});
        let p = json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"x": 2}});
        apply(PatchKind::Merge, &mut doc, &p).unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"x": 2}})
        );
    }

    #[test]
    fn json_patch_tests_and_fails_whole() {
        let mut doc = json!({"spec": {"x": 1}});
        let p = json!([{"op": "test", "path": "/spec/x", "value": 2}, {"op": "replace", "path": "/spec/x", "value": 3}]);
        assert!(apply(PatchKind::Json, &mut doc, &p).is_err());
        assert_eq!(doc, json!({"spec": {"x": 1}}));
        let p = json!([{"op": "add", "path": "/spec/y", "value": 2}]);
        apply(PatchKind::Json, &mut doc, &p).unwrap();
        assert_eq!(doc["spec"]["y"], 2);
    }

    #[test]
    fn apply_bodies_read_as_yaml() {
        let v = parse_body(PatchKind::Apply, b"metadata:\n  name: x\nspec:\n  n: 1\n").unwrap();
        assert_eq!(v, json!({"metadata": {"name": "x"}, "spec": {"n": 1}}));
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
    }
}
