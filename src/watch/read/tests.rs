use super::*;
use kube::core::{ObjectList, WatchEvent};
use serde_json::{Value, json};

/// An object of every kind, as the API server lists it (no apiVersion or
/// kind on list items of built-in kinds), and as it watches it (with them).
fn every_kind() -> Vec<(Kind, Value)> {
    use gpu_claims_actors::api::*;
    let objs = [
        Obj::Class(GPUClass::default()),
        Obj::Claim(GPUClaim::default()),
        Obj::Allocation(GPUAllocation::default()),
        Obj::Quota(GPUQuota::default()),
        Obj::Vmi(Vmi::default()),
        Obj::Pod(Default::default()),
        Obj::Node(Default::default()),
        Obj::DeviceClass(Default::default()),
        Obj::ResourceSlice(Default::default()),
        Obj::ResourceClaim(Default::default()),
        Obj::ResourceClaimTemplate(Default::default()),
        Obj::DeviceTaintRule(Default::default()),
    ];
    objs.into_iter()
        .map(|mut o| {
            o.meta_mut().name = Some("a".into());
            o.meta_mut().resource_version = Some("7".into());
            (o.kind(), to_json(&o))
        })
        .collect()
}

fn claim(count: Value) -> Value {
    json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
        "metadata": {"name": "c", "namespace": "t", "resourceVersion": "3"},
        "spec": {"className": "a100", "count": count}})
}

const CLAIM: usize = 1;

#[test]
fn the_readers_hand_over_the_objects_text() {
    // Else every object goes the slow way: correct, but the cold start
    // pays for a JSON tree of each.
    assert!(!raw_token().is_empty());
}

#[test]
fn every_kind_reads_straight_into_its_typed_form_with_or_without_its_type() {
    for (kind, mut v) in every_kind() {
        let text = v.to_string();
        assert!(from_text(kind, &text).is_ok(), "{kind:?}: {text}");
        let fields = v.as_object_mut().expect("an object");
        fields.remove("apiVersion");
        fields.remove("kind");
        let text = v.to_string();
        assert!(from_text(kind, &text).is_ok(), "{kind:?} untyped: {text}");
    }
}

#[test]
fn a_list_reads_every_object_and_names_the_one_it_cannot_read_with_its_field() {
    let page = json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaimList",
        "metadata": {"resourceVersion": "9"},
        "items": [claim(json!(2)), claim(json!(-1)), claim(json!(1))]});
    let list: ObjectList<Watched<CLAIM>> =
        serde_json::from_str(&page.to_string()).expect("the list reads");
    assert_eq!(list.items.len(), 3);
    let read: Vec<_> = list.items.into_iter().map(Watched::into_result).collect();
    assert!(matches!(&read[0], Ok(Obj::Claim(c)) if c.spec.count == 2));
    assert!(matches!(&read[2], Ok(Obj::Claim(c)) if c.spec.count == 1));
    let (name, error) = read[1].as_ref().expect_err("count -1 is no u32");
    assert_eq!(name, "t/c");
    assert_eq!(error.path, "spec.count");
}

#[test]
fn a_watch_event_reads_whichever_of_type_and_object_comes_first() {
    // kube-apiserver writes `type` first; serde buffers the object of an
    // event that has it last, and the object must read all the same.
    let object = claim(json!(2));
    let type_first = format!(r#"{{"type":"MODIFIED","object":{object}}}"#);
    let object_first = format!(r#"{{"object":{object},"type":"MODIFIED"}}"#);
    for line in [type_first, object_first] {
        let ev: WatchEvent<Watched<CLAIM>> = serde_json::from_slice(line.as_bytes()).expect(&line);
        let WatchEvent::Modified(w) = ev else {
            panic!("{line}: not MODIFIED");
        };
        assert_eq!(w.meta().resource_version.as_deref(), Some("3"));
        assert!(matches!(w.into_result(), Ok(Obj::Claim(c)) if c.spec.count == 2));
    }
    let bad = format!(r#"{{"object":{},"type":"ADDED"}}"#, claim(json!("two")));
    let ev: WatchEvent<Watched<CLAIM>> = serde_json::from_str(&bad).expect("the event reads");
    let WatchEvent::Added(w) = ev else {
        panic!("not ADDED");
    };
    let (name, error) = w.into_result().expect_err("\"two\" is no count");
    assert_eq!((name.as_str(), error.path.as_str()), ("t/c", "spec.count"));
}

#[test]
fn a_kind_served_at_an_older_version_reads_as_the_controllers() {
    // DeviceTaintRule at resource.k8s.io/v1beta2 (Kubernetes 1.36): its
    // typed form refuses the version, the slow way reads it as v1.
    const TAINT_RULE: usize = 11;
    assert_eq!(Watched::<TAINT_RULE>::KIND, Kind::DeviceTaintRule);
    let rule = json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
        "metadata": {"name": "r", "resourceVersion": "4"},
        "spec": {"taint": {"key": "k", "effect": "NoExecute"}}});
    let w: Watched<TAINT_RULE> = serde_json::from_str(&rule.to_string()).expect("reads");
    assert!(matches!(w.into_result(), Ok(Obj::DeviceTaintRule(_))));
}

#[test]
fn an_object_whose_metadata_does_not_read_fails_its_page_as_before() {
    let page = json!({"metadata": {}, "items": [{"metadata": {"name": 5}}]});
    let list: Result<ObjectList<Watched<CLAIM>>, _> = serde_json::from_str(&page.to_string());
    assert!(list.is_err());
}
