use super::*;
use serde_json::json;

fn schema_of(kind: &str) -> Option<Value> {
    crate::resources::served_for_tests()
        .custom(kind)
        .and_then(|c| c.schema.clone())
}

#[test]
fn the_fields_pruning_drops_are_named_by_path() {
    let mut c = claim(json!({"className": "h200", "extra": 1}));
    c["unknown"] = json!({"a": 1});
    let sent = c.clone();
    admit(schema_of("GPUClaim").as_ref(), &mut c, None);
    let mut out = Vec::new();
    dropped(&sent, &c, "", &mut out);
    out.sort();
    assert_eq!(out, ["spec.extra", "unknown"]);
}

fn claim(spec: Value) -> Value {
    json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
        "metadata": {"name": "c"}, "spec": spec})
}

fn fields(causes: &[Cause]) -> Vec<(&str, CauseKind)> {
    causes.iter().map(|c| (c.field.as_str(), c.kind)).collect()
}

#[test]
fn a_valid_claim_is_defaulted_and_pruned() {
    let mut c = claim(json!({"className": "h200", "extra": 1}));
    c["unknown"] = json!(true);
    assert!(admit(schema_of("GPUClaim").as_ref(), &mut c, None).is_empty());
    assert_eq!(c["spec"], json!({"className": "h200", "count": 1}));
    assert!(c.get("unknown").is_none());
    assert_eq!(c["metadata"]["name"], "c", "metadata is left alone");
}

#[test]
fn types_bounds_required_and_enums_are_causes() {
    let mut c = claim(json!({"count": -1}));
    let causes = admit(schema_of("GPUClaim").as_ref(), &mut c, None);
    assert_eq!(
        fields(&causes),
        [
            ("spec.count", CauseKind::Invalid),
            ("spec.className", CauseKind::Required)
        ]
    );
    assert_eq!(
        causes[0].detail,
        "spec.count in body should be greater than or equal to 1"
    );
    let mut c = claim(json!({"className": "h200", "count": "two"}));
    let causes = admit(schema_of("GPUClaim").as_ref(), &mut c, None);
    assert_eq!(
        causes[0].detail,
        "spec.count in body must be of type integer: \"string\""
    );
    let mut c = claim(json!({"className": ""}));
    assert_eq!(
        fields(&admit(schema_of("GPUClaim").as_ref(), &mut c, None)),
        [("spec.className", CauseKind::Invalid)]
    );
    let mut c = claim(json!({"className": "h200"}));
    c["status"] = json!({"phase": "Sideways"});
    let causes = admit(schema_of("GPUClaim").as_ref(), &mut c, None);
    assert_eq!(fields(&causes), [("status.phase", CauseKind::NotSupported)]);
    assert!(causes[0].detail.contains("\"Pending\", \"Bound\""));
    let mut no_spec = json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
        "metadata": {"name": "c"}});
    assert_eq!(
        fields(&admit(schema_of("GPUClaim").as_ref(), &mut no_spec, None)),
        [("spec", CauseKind::Required)]
    );
}

#[test]
fn transition_rules_hold_on_update_only() {
    let old = claim(json!({"className": "h200", "count": 1}));
    let mut same = old.clone();
    assert!(admit(schema_of("GPUClaim").as_ref(), &mut same, Some(&old)).is_empty());
    let mut moved = claim(json!({"className": "l40s", "count": 2}));
    let causes = admit(schema_of("GPUClaim").as_ref(), &mut moved, Some(&old));
    assert_eq!(
        fields(&causes),
        [
            ("spec.className", CauseKind::Invalid),
            ("spec.count", CauseKind::Invalid)
        ]
    );
    assert_eq!(causes[0].detail, "className is immutable");
    // On create there is no oldSelf: the rule is not evaluated.
    assert!(admit(schema_of("GPUClaim").as_ref(), &mut moved, None).is_empty());
}

#[test]
fn maps_check_their_values_and_other_kinds_pass() {
    let mut k = json!({"kind": "GPUClass", "metadata": {"name": "k"},
        "spec": {"resourceName": "r", "nodeSelector": {"a": 1}}});
    let causes = admit(schema_of("GPUClass").as_ref(), &mut k, None);
    assert_eq!(
        fields(&causes),
        [("spec.nodeSelector.a", CauseKind::Invalid)]
    );
    let mut pod = json!({"kind": "Pod", "spec": {"anything": 1}});
    assert!(admit(schema_of("Pod").as_ref(), &mut pod, None).is_empty());
    assert_eq!(pod["spec"]["anything"], 1);
}

#[test]
fn a_root_that_preserves_unknown_fields_keeps_them() {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut obj = json!({"apiVersion": "example.com/v1", "kind": "Foo",
        "metadata": {"name": "f"}, "spec": {"replicas": 2}, "extra": 1});
    assert!(admit(Some(&schema), &mut obj, None).is_empty());
    assert_eq!(
        (obj["spec"]["replicas"].as_i64(), obj["extra"].as_i64()),
        (Some(2), Some(1))
    );
    let pruning = json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}}});
    assert!(admit(Some(&pruning), &mut obj, None).is_empty());
    assert_eq!(obj.get("extra"), None);
}

/// A schema of its own, for the keywords our CRDs do not all use.
fn with_schema(schema: Value, v: &mut Value) -> Vec<Cause> {
    let wrapped = json!({"type": "object", "properties": {"spec": schema}});
    let mut obj =
        json!({"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "x"}, "spec": v.clone()});
    let causes = admit(Some(&wrapped), &mut obj, None);
    *v = obj["spec"].take();
    causes
}

#[test]
fn pattern_and_the_counts_of_properties_and_items_are_checked_as_kube_openapi_words_them() {
    let s = json!({"type": "object", "maxProperties": 2, "minProperties": 1,
        "additionalProperties": {"type": "string", "pattern": "^[a-z]+$"}});
    let mut v = json!({"a": "ok", "b": "NO", "c": "x"});
    let causes = with_schema(s.clone(), &mut v);
    let said: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message()))
        .collect();
    assert_eq!(
        said,
        [
            "spec: Too many: 3: must have at most 2 items",
            "spec.b: Invalid value: \"NO\": spec.b in body should match '^[a-z]+$'",
        ]
    );
    assert_eq!(causes[0].reason(), "FieldValueTooMany");
    let causes = with_schema(s, &mut json!({}));
    assert_eq!(
        causes[0].detail,
        "spec in body should have at least 1 properties"
    );
    let s = json!({"type": "array", "maxItems": 1, "minItems": 1, "items": {"type": "string"}});
    let causes = with_schema(s.clone(), &mut json!(["a", "b"]));
    assert_eq!(
        causes[0].message(),
        "Too many: 2: must have at most 1 items"
    );
    let causes = with_schema(s, &mut json!([]));
    assert_eq!(
        causes[0].detail,
        "spec in body should have at least 1 items"
    );
}
