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
    // Pod p applying the one container `name` of `image`.
    let one = |name: &str, image: &str| pod(json!([{"name": name, "image": image}]));
    let made = apply(None, &one("main", "m:1"), "alice", false, "v1").unwrap();
    let owned = to_fields_v1(&entries(&made)[0].fields);
    assert!(
        owned["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"]["f:image"].is_object(),
        "{owned}"
    );
    // Bob adds a sidecar: no conflict, both containers kept.
    let both = apply(Some(&made), &one("side", "s:1"), "bob", false, "v1").unwrap();
    let names: Vec<&str> = both["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "side"]);
    // Bob changing alice's container's image conflicts, on that field.
    let c = apply(Some(&both), &one("main", "m:2"), "bob", false, "v1").unwrap_err();
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
