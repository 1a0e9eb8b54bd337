use super::*;

fn conds(exprs: &[&str]) -> Vec<MatchCondition> {
    exprs
        .iter()
        .map(|e| MatchCondition {
            name: "c".into(),
            expression: e.to_string(),
        })
        .collect()
}

#[test]
fn a_condition_that_is_no_bool_or_fails_to_compile_is_an_error() {
    let obj = json!({"metadata": {}});
    assert!(match_conditions_hold(&conds(&["1 + 1"]), &obj, &json!({})).is_err());
    assert!(match_conditions_hold(&conds(&["object.("]), &obj, &json!({})).is_err());
    assert_eq!(
        match_conditions_hold(&conds(&["true", "false"]), &obj, &json!({})),
        Ok(false)
    );
}

#[test]
fn label_selectors_as_upstream() {
    let sel: LabelSelector = serde_json::from_value(json!({
        "matchLabels": {"a": "1"},
        "matchExpressions": [
            {"key": "b", "operator": "In", "values": ["x", "y"]},
            {"key": "c", "operator": "DoesNotExist"},
        ],
    }))
    .unwrap();
    assert!(selects(Some(&sel), &json!({"a": "1", "b": "y"})));
    assert!(!selects(Some(&sel), &json!({"a": "1", "b": "z"})));
    assert!(!selects(Some(&sel), &json!({"a": "1", "b": "x", "c": ""})));
    assert!(!selects(Some(&sel), &Value::Null));
    assert!(selects(None, &Value::Null));
    assert!(selects(Some(&LabelSelector::default()), &Value::Null));
}

#[test]
fn a_denial_is_worded_as_upstream() {
    let body = |r: Response| {
        let code = r.status().as_u16();
        (code, r)
    };
    let (code, _) = body(denied(
        "g",
        &json!({"code": 403, "message": "no"}),
        "p",
        "pods",
    ));
    assert_eq!(code, 403);
    let (code, _) = body(denied("g", &json!({"code": 200}), "p", "pods"));
    assert_eq!(code, 400);
}
