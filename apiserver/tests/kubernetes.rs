//! The embedded API server against Kubernetes' own behaviour, one area per
//! test (issue 12): dry run, generation, selector-aware watches, namespace
//! lifecycle, what validation refuses, collection deletes, health and
//! discovery. Status codes, reasons and causes are upstream's.

use futures::{StreamExt, TryStreamExt};
mod common;

use common::{GPUClaim, GPUClass, clear_finalizers, fake_webhook, from, refusal, server, until};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};
use std::time::Duration;

fn pod(name: &str, labels: Value) -> Pod {
    from(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }))
}

fn class(name: &str) -> GPUClass {
    from(json!({"metadata": {"name": name}, "spec": {"resourceName": "nvidia.com/H200"}}))
}

#[tokio::test]
async fn dry_run_all_decides_every_verb_and_stores_nothing() {
    let (s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let before = s.store.resource_version();
    // create: answered as made (uid, timestamp), not stored.
    let made = pods.create(&dry, &pod("p", json!({}))).await.unwrap();
    assert!(made.metadata.uid.is_some() && made.metadata.creation_timestamp.is_some());
    assert!(pods.get_opt("p").await.unwrap().is_none());
    assert_eq!(s.store.resource_version(), before);
    // A dry run meets the same refusals: an existing name is 409.
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let e = refusal(pods.create(&dry, &pod("p", json!({}))).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    let stored = s.store.resource_version();
    // update, patch, delete: the answer shows the change; the store has none.
    let mut changed = pods.get("p").await.unwrap();
    changed.metadata.labels = Some([("x".to_string(), "1".to_string())].into());
    let answered = pods.replace("p", &dry, &changed).await.unwrap();
    assert_eq!(answered.metadata.labels.unwrap()["x"], "1");
    let patch = Patch::Merge(json!({"metadata": {"labels": {"y": "2"}}}));
    let answered = pods
        .patch("p", &PatchParams::default().dry_run(), &patch)
        .await
        .unwrap();
    assert_eq!(answered.metadata.labels.unwrap()["y"], "2");
    let delete = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    pods.delete("p", &delete).await.unwrap();
    let still = pods.get("p").await.unwrap();
    assert!(still.metadata.labels.unwrap_or_default().is_empty());
    assert_eq!(
        s.store.resource_version(),
        stored,
        "a dry run stored something"
    );
    // A collection delete too.
    pods.delete_collection(&delete, &ListParams::default())
        .await
        .unwrap();
    assert!(pods.get_opt("p").await.unwrap().is_some());
    // Only "All" is a dry run.
    let url = format!("{}/api/v1/namespaces/a/pods?dryRun=Some", s.url());
    let body = serde_json::to_vec(&pod("q", json!({}))).unwrap();
    let req = http::Request::post(url)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let e = refusal(c.request::<Value>(req).await);
    common::invalid_saying(&e, "dryRun: Unsupported value");
}

#[tokio::test]
async fn generation_starts_at_one_and_grows_with_the_spec_and_the_deletion_only() {
    let (_s, c) = server().await;
    let classes: Api<GPUClass> = Api::all(c.clone());
    let pp = PostParams::default();
    let mut k = class("h200");
    k.metadata.finalizers = Some(vec!["test/hold".into()]);
    let made = classes.create(&pp, &k).await.unwrap();
    assert_eq!(made.metadata.generation, Some(1));
    let gen_after = |p: Value| {
        let classes = classes.clone();
        async move {
            classes
                .patch("h200", &PatchParams::default(), &Patch::Merge(p))
                .await
                .unwrap()
                .metadata
                .generation
        }
    };
    // Metadata is not the spec.
    assert_eq!(
        gen_after(json!({"metadata": {"labels": {"a": "b"}}})).await,
        Some(1)
    );
    assert_eq!(gen_after(json!({"spec": {"budget": 4}})).await, Some(2));
    // The same spec again changes nothing.
    assert_eq!(gen_after(json!({"spec": {"budget": 4}})).await, Some(2));
    // Status is not the spec.
    let status = classes
        .patch_status(
            "h200",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": 8}})),
        )
        .await
        .unwrap();
    assert_eq!(status.metadata.generation, Some(2));
    // A deletion that waits on a finalizer is a change to observe.
    classes
        .delete("h200", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = classes.get("h200").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(deleting.metadata.generation, Some(3));
    // Built-ins without a generation: a Lease has none.
    let leases: Api<Lease> = Api::namespaced(c, "a");
    let lease = leases
        .create(&pp, &from(json!({"metadata": {"name": "l"}})))
        .await
        .unwrap();
    assert_eq!(lease.metadata.generation, None);
}

#[tokio::test]
async fn a_watch_with_a_selector_sees_an_object_leave_as_deleted_and_return_as_added() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    let made = pods
        .create(&PostParams::default(), &pod("p", json!({"gpu": "yes"})))
        .await
        .unwrap();
    let rv = made.metadata.resource_version.clone().unwrap();
    let mut events = pods
        .watch(&WatchParams::default().labels("gpu=yes"), &rv)
        .await
        .unwrap()
        .boxed();
    let relabel = |v: &str| {
        let pods = pods.clone();
        let p = Patch::Merge(json!({"metadata": {"labels": {"gpu": v}}}));
        async move { pods.patch("p", &PatchParams::default(), &p).await.unwrap() }
    };
    let mut next = async || match tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("an event")
        .unwrap()
        .unwrap()
    {
        WatchEvent::Added(p) => ("ADDED", p),
        WatchEvent::Modified(p) => ("MODIFIED", p),
        WatchEvent::Deleted(p) => ("DELETED", p),
        other => panic!("{other:?}"),
    };
    let left = relabel("no").await;
    let (t, p) = next().await;
    // The last state that matched, at the change's version.
    assert_eq!(t, "DELETED");
    assert_eq!(p.metadata.labels.unwrap()["gpu"], "yes");
    assert_eq!(p.metadata.resource_version, left.metadata.resource_version);
    relabel("no-still").await;
    relabel("yes").await;
    let (t, p) = next().await;
    assert_eq!(
        (t, p.metadata.labels.unwrap()["gpu"].as_str()),
        ("ADDED", "yes")
    );
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"n": "1"}}})),
    )
    .await
    .unwrap();
    assert_eq!(next().await.0, "MODIFIED");
    pods.delete("p", &DeleteParams::default()).await.unwrap();
    assert_eq!(next().await.0, "DELETED");
}

#[tokio::test]
async fn namespaces_exist_from_the_start_a_missing_one_is_404_and_a_deleted_one_takes_its_objects()
{
    let (s, c) = server().await;
    let nss: Api<Namespace> = Api::all(c.clone());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for system in gpu_claims_apiserver::namespaces::SYSTEM {
        assert!(names.iter().any(|n| n == system), "{system} in {names:?}");
    }
    // A create into a namespace that does not exist: 404 naming it.
    let e = refusal(
        Api::<Pod>::namespaced(c.clone(), "nope")
            .create(&PostParams::default(), &pod("p", json!({})))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "namespaces \"nope\" not found");
    // A new namespace is Active, labelled with its name.
    let made = nss
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "t"}})),
        )
        .await
        .unwrap();
    assert_eq!(made.status.unwrap().phase.as_deref(), Some("Active"));
    assert_eq!(
        made.metadata.labels.unwrap()["kubernetes.io/metadata.name"],
        "t"
    );
    let pods: Api<Pod> = Api::namespaced(c.clone(), "t");
    pods.create(&PostParams::default(), &pod("plain", json!({})))
        .await
        .unwrap();
    let mut held = pod("held", json!({}));
    held.metadata.finalizers = Some(vec!["test/hold".into()]);
    pods.create(&PostParams::default(), &held).await.unwrap();
    // Deleted: Terminating, no new content, its objects deleted.
    nss.delete("t", &DeleteParams::default()).await.unwrap();
    let t = nss.get("t").await.unwrap();
    assert_eq!(t.status.unwrap().phase.as_deref(), Some("Terminating"));
    let e = refusal(
        pods.create(&PostParams::default(), &pod("late", json!({})))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert!(e.message.contains("because it is being terminated"));
    until("the plain pod goes", || async {
        pods.get_opt("plain").await.unwrap().is_none()
    })
    .await;
    // A finalizer holds the namespace until its controller lets go.
    let h = pods.get("held").await.unwrap();
    assert!(h.metadata.deletion_timestamp.is_some());
    assert!(nss.get_opt("t").await.unwrap().is_some());
    clear_finalizers(&pods, "held").await;
    until("the namespace goes", || async {
        nss.get_opt("t").await.unwrap().is_none()
    })
    .await;
    assert!(s.store.in_namespace("t").is_empty());
}

#[tokio::test]
async fn names_kinds_unconditional_updates_and_field_labels_are_refused_as_upstream() {
    let (s, c) = server().await;
    let claims: Api<GPUClaim> = Api::namespaced(c.clone(), "a");
    let pp = PostParams::default();
    let claim = |name: &str| -> GPUClaim {
        from(json!({"metadata": {"name": name}, "spec": {"className": "h200", "count": 1}}))
    };
    // A name that is not a DNS subdomain: 422 with the field's cause.
    let e = refusal(claims.create(&pp, &claim("Bad_Name")).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    assert!(
        e.message
            .starts_with("GPUClaim.gpu.cozystack.io \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"),
        "{}",
        e.message
    );
    let causes = &e.details.as_ref().unwrap().causes;
    assert_eq!(causes.len(), 1);
    assert_eq!(
        (causes[0].field.as_str(), causes[0].reason.as_str()),
        ("metadata.name", "FieldValueInvalid")
    );
    // A body of another kind, to this resource: 400.
    let url = format!(
        "{}/apis/gpu.cozystack.io/v1alpha1/namespaces/a/gpuclaims",
        s.url()
    );
    let mut other = serde_json::to_value(claim("c")).unwrap();
    other["kind"] = "GPUClass".into();
    let req = http::Request::post(&url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&other).unwrap())
        .unwrap();
    let e = refusal(c.request::<Value>(req).await);
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert!(
        e.message.contains("the kind in the data (GPUClass)"),
        "{}",
        e.message
    );
    // A custom resource's update must name the version it replaces.
    let made = claims.create(&pp, &claim("c")).await.unwrap();
    let mut blind = made.clone();
    blind.metadata.resource_version = None;
    let e = refusal(claims.replace("c", &pp, &blind).await);
    common::invalid_saying(
        &e,
        "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
    );
    // A pod's need not (built-ins allow unconditional updates).
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    let mut p = pods.create(&pp, &pod("p", json!({}))).await.unwrap();
    p.metadata.resource_version = None;
    pods.replace("p", &pp, &p).await.unwrap();
    // A field selector on a field the kind has no label for: 400.
    let e = refusal(
        claims
            .list(&ListParams::default().fields("spec.className=h200"))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert!(
        e.message
            .contains("field label not supported: spec.className")
    );
    let on_node = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert!(on_node.items.is_empty());
    assert_eq!(
        claims
            .list(&ListParams::default().fields("metadata.name=c"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test]
async fn a_collection_delete_takes_what_its_selector_matches() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    for (name, tier) in [("g1", "gpu"), ("g2", "gpu"), ("c1", "cpu")] {
        pods.create(&PostParams::default(), &pod(name, json!({"tier": tier})))
            .await
            .unwrap();
    }
    let gone = pods
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("tier=gpu"),
        )
        .await
        .unwrap();
    let names: Vec<String> = gone
        .left()
        .expect("the deleted objects")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(names, ["g1", "g2"]);
    let left: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(left, ["c1"]);
    // A pod's delete answers with the pod (as the pod registry does).
    let deleted = pods.delete("c1", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        deleted.left().expect("the pod").metadata.name.as_deref(),
        Some("c1")
    );
}

#[tokio::test]
async fn health_short_names_and_categories_are_served() {
    let (_s, c) = server().await;
    for path in ["/healthz", "/livez", "/readyz"] {
        let req = http::Request::get(path).body(Vec::new()).unwrap();
        assert_eq!(c.request_text(req).await.unwrap(), "ok", "{path}");
    }
    let list: Value = c
        .request(
            http::Request::get("/apis/gpu.cozystack.io/v1alpha1")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let claims = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gpuclaims")
        .unwrap();
    assert_eq!(claims["shortNames"], json!(["gc"]));
    assert!(
        claims["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("deletecollection"))
    );
    let core: Value = c
        .request(http::Request::get("/api/v1").body(Vec::new()).unwrap())
        .await
        .unwrap();
    let pods = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "pods")
        .unwrap();
    assert_eq!(pods["categories"], json!(["all"]));
}

#[tokio::test]
async fn strategic_merge_on_custom_resources_is_415() {
    // Protobuf bodies: tests/protobuf.rs.
    let (_s, c) = server().await;
    let claims: Api<GPUClaim> = Api::namespaced(c.clone(), "a");
    claims
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "c"}, "spec": {"className": "h200"}})),
        )
        .await
        .unwrap();
    let e = refusal(
        claims
            .patch(
                "c",
                &PatchParams::default(),
                &Patch::Strategic(json!({"metadata": {"labels": {"a": "b"}}})),
            )
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (415, "UnsupportedMediaType"));
    // Built-ins take it.
    let pods: Api<Pod> = Api::namespaced(c, "a");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    pods.patch(
        "p",
        &PatchParams::default(),
        &Patch::Strategic(json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn node_and_namespace_tables_say_their_status() {
    let (s, c) = server().await;
    s.store.seed(
        "Node",
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/gpu": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.33.1"}}}),
    );
    let nodes = common::table(&c, "/api/v1/nodes").await;
    let names: Vec<&str> = nodes["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Status", "Roles", "Age", "Version"]);
    let cells = &nodes["rows"][0]["cells"];
    assert_eq!(cells[1], "Ready,SchedulingDisabled");
    assert_eq!(cells[2], "gpu");
    assert_eq!(cells[4], "v1.33.1");
    let nss = common::table(&c, "/api/v1/namespaces/a").await;
    assert_eq!(nss["rows"][0]["cells"][1], "Active");
}

#[tokio::test]
async fn a_custom_resource_is_pruned_defaulted_and_validated_by_its_crd_schema() {
    let (s, c) = server().await;
    let url = format!(
        "{}/apis/gpu.cozystack.io/v1alpha1/namespaces/a/gpuclaims",
        s.url()
    );
    let post = |body: Value| {
        let c = c.clone();
        let req = http::Request::post(&url)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        async move { c.request::<Value>(req).await }
    };
    let claim = |name: &str, spec: Value| {
        json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
            "metadata": {"name": name}, "spec": spec})
    };
    // Bad values: 422, a cause per field, nothing stored.
    let e = refusal(post(claim("bad", json!({"count": -1}))).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    let causes: Vec<(String, String)> = e
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| (c.field, c.reason))
        .collect();
    assert_eq!(
        causes,
        [
            ("spec.count".to_string(), "FieldValueInvalid".to_string()),
            (
                "spec.className".to_string(),
                "FieldValueRequired".to_string()
            )
        ]
    );
    let e = refusal(post(claim("bad", json!({"className": "h200", "count": "two"}))).await);
    assert!(
        e.message.contains(
            "spec.count: Invalid value: \"string\": spec.count in body must be of type integer"
        ),
        "{}",
        e.message
    );
    assert!(s.store.get("GPUClaim", "a", "bad").is_none());
    // Unknown fields pruned, defaults applied.
    let mut body = claim("ok", json!({"className": "h200", "colour": "red"}));
    body["extra"] = json!(1);
    let made = post(body).await.unwrap();
    assert_eq!(made["spec"], json!({"className": "h200", "count": 1}));
    assert!(made.get("extra").is_none());
    // An immutable field (a CEL transition rule) cannot change.
    let claims: Api<GPUClaim> = Api::namespaced(c.clone(), "a");
    let e = refusal(
        claims
            .patch(
                "ok",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"className": "l40s"}})),
            )
            .await,
    );
    common::invalid_saying(&e, "className is immutable");
    // The status subresource is validated too; the spec it carries is ignored.
    let e = refusal(
        claims
            .patch_status(
                "ok",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"phase": "Sideways"}})),
            )
            .await,
    );
    assert!(
        e.message.contains("Unsupported value: \"Sideways\""),
        "{}",
        e.message
    );
    let bound = claims
        .patch_status(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"count": 9}, "status": {"phase": "Bound"}})),
        )
        .await
        .unwrap();
    assert_eq!(bound.spec.count, 1);
}

#[tokio::test]
async fn events_written_through_either_api_are_one_store() {
    use k8s_openapi::api::core::v1::Event as CoreEvent;
    use k8s_openapi::api::events::v1::Event;
    let (_s, c) = server().await;
    let new_api: Api<Event> = Api::namespaced(c.clone(), "a");
    let core: Api<CoreEvent> = Api::namespaced(c.clone(), "a");
    let made = new_api
        .create(
            &PostParams::default(),
            &from(json!({
                "metadata": {"name": "c.1"},
                "eventTime": "2026-11-30T00:00:00.000000Z",
                "regarding": {"kind": "GPUClaim", "namespace": "a", "name": "c", "uid": "u-c"},
                "note": "placed on n1", "reason": "Bound", "type": "Normal", "action": "G4",
                "reportingController": "gpu-claims", "reportingInstance": "gpu-claims-0",
            })),
        )
        .await
        .unwrap();
    assert_eq!(made.note.as_deref(), Some("placed on n1"));
    // The same object, as core/v1 names its fields.
    let old = core.get("c.1").await.unwrap();
    assert_eq!(old.message.as_deref(), Some("placed on n1"));
    assert_eq!(old.involved_object.name.as_deref(), Some("c"));
    assert_eq!(old.reporting_component.as_deref(), Some("gpu-claims"));
    // kubectl describe's search, and its events.k8s.io twin.
    let found = core
        .list(&ListParams::default().fields("involvedObject.name=c,involvedObject.uid=u-c"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    let found = new_api
        .list(&ListParams::default().fields("regarding.name=c"))
        .await
        .unwrap();
    assert_eq!(found.items.len(), 1);
    assert_eq!(found.items[0].note.as_deref(), Some("placed on n1"));
    // A core write is an events.k8s.io change, watched as one.
    let rv = made.metadata.resource_version.clone().unwrap();
    let mut watch = new_api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    core.patch(
        "c.1",
        &PatchParams::default(),
        &Patch::Merge(json!({"message": "moved to n2"})),
    )
    .await
    .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(10), watch.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let WatchEvent::Modified(e) = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(e.note.as_deref(), Some("moved to n2"));
    // Patched through events.k8s.io, by its own field names.
    let patched = new_api
        .patch(
            "c.1",
            &PatchParams::default(),
            &Patch::Merge(json!({"note": "back on n1"})),
        )
        .await
        .unwrap();
    assert_eq!(patched.note.as_deref(), Some("back on n1"));
    assert_eq!(
        core.get("c.1").await.unwrap().message.as_deref(),
        Some("back on n1")
    );
}

#[tokio::test]
async fn a_pod_on_a_node_is_terminating_until_its_kubelet_confirms() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    let mut p = pod("vm", json!({}));
    p.spec.as_mut().unwrap().node_name = Some("n1".into());
    let made = pods.create(&PostParams::default(), &p).await.unwrap();
    pods.patch_status(
        "vm",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let rv = made.metadata.resource_version.clone().unwrap();
    let mut events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    // DELETE answers with the pod, Terminating, still on its node.
    let answer = pods.delete("vm", &DeleteParams::default()).await.unwrap();
    let terminating = answer.left().expect("the pod");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get_opt("vm").await.unwrap().is_some());
    // The kubelet's confirmation removes it.
    pods.delete("vm", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(pods.get_opt("vm").await.unwrap().is_none());
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let ev = tokio::time::timeout(Duration::from_secs(10), events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push(match ev {
            WatchEvent::Modified(p) if p.metadata.deletion_timestamp.is_some() => "Terminating",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            other => panic!("{other:?}"),
        });
    }
    assert_eq!(seen, ["MODIFIED", "Terminating", "DELETED"]);
}

#[tokio::test]
async fn later_pages_are_a_snapshot_at_the_first_and_an_expired_token_is_410() {
    let (s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    let pp = PostParams::default();
    for name in ["p1", "p2", "p3"] {
        pods.create(&pp, &pod(name, json!({"v": "old"})))
            .await
            .unwrap();
    }
    let first = pods.list(&ListParams::default().limit(1)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    assert_eq!(first.items[0].metadata.name.as_deref(), Some("p1"));
    // Changes after the first page: none of them shows in the later pages.
    pods.delete("p2", &DeleteParams::default()).await.unwrap();
    pods.create(&pp, &pod("p2b", json!({}))).await.unwrap();
    pods.patch(
        "p3",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"v": "new"}}})),
    )
    .await
    .unwrap();
    let rest = pods
        .list(&ListParams::default().limit(5).continue_token(&token))
        .await
        .unwrap();
    let seen: Vec<(String, String)> = rest
        .items
        .iter()
        .map(|p| {
            (
                p.metadata.name.clone().unwrap(),
                p.metadata.labels.clone().unwrap_or_default()["v"].clone(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [("p2".into(), "old".into()), ("p3".into(), "old".into())]
    );
    assert_eq!(rest.metadata.resource_version.as_deref(), Some(rv.as_str()));
    // resourceVersionMatch=Exact reads at that version; it needs one.
    let at_rv = pods
        .list(
            &ListParams::default()
                .at(&rv)
                .matching(kube::api::VersionMatch::Exact),
        )
        .await
        .unwrap();
    assert_eq!(at_rv.items.len(), 3);
    let url = format!(
        "{}/api/v1/namespaces/a/pods?resourceVersionMatch=Exact",
        s.url()
    );
    let req = http::Request::get(url).body(Vec::new()).unwrap();
    let e = refusal(c.request::<Value>(req).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    // Once the history no longer reaches the first page: 410 Expired.
    s.store.forget_history();
    let e = refusal(
        pods.list(&ListParams::default().limit(5).continue_token(&token))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn openapi_v3_describes_the_custom_resources_for_kubectl_explain() {
    let (_s, c) = server().await;
    let get = |path: &str| {
        let c = c.clone();
        let req = http::Request::get(path.to_string())
            .body(Vec::new())
            .unwrap();
        async move { c.request::<Value>(req).await.unwrap() }
    };
    let root = get("/openapi/v3").await;
    let url = root["paths"]["apis/gpu.cozystack.io/v1alpha1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = get(&url).await;
    let claim = &doc["components"]["schemas"]["io.cozystack.gpu.v1alpha1.GPUClaim"];
    assert_eq!(
        claim["x-kubernetes-group-version-kind"][0],
        json!({"group": "gpu.cozystack.io", "version": "v1alpha1", "kind": "GPUClaim"})
    );
    assert_eq!(
        claim["properties"]["spec"]["required"],
        json!(["className"])
    );
    // The read operation names the kind, as kubectl explain looks it up.
    let op = &doc["paths"]["/apis/gpu.cozystack.io/v1alpha1/namespaces/{namespace}/gpuclaims/{name}"]
        ["get"];
    assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "GPUClaim");
    assert!(root["paths"]["api/v1"].is_object());
}

#[tokio::test]
async fn token_and_access_reviews_are_answered_from_the_tokens_and_the_stored_rbac() {
    use k8s_openapi::api::authentication::v1::TokenReview;
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let (s, c) = server().await;
    let pp = PostParams::default();
    let token = s.add_user("system:serviceaccount:monitoring:prometheus");
    let reviews: Api<TokenReview> = Api::all(c.clone());
    let known = reviews
        .create(&pp, &from(json!({"spec": {"token": token}})))
        .await
        .unwrap();
    let st = known.status.unwrap();
    assert_eq!(st.authenticated, Some(true));
    let user = st.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:monitoring:prometheus")
    );
    assert_eq!(
        user.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:monitoring",
            "system:authenticated"
        ]
    );
    let unknown = reviews
        .create(&pp, &from(json!({"spec": {"token": "nope"}})))
        .await
        .unwrap();
    assert_eq!(unknown.status.unwrap().authenticated, Some(false));
    // Reviews are created only, never stored or read.
    let r = refusal(reviews.list(&ListParams::default()).await);
    assert_eq!((r.code, r.reason.as_str()), (405, "MethodNotAllowed"));

    // RBAC, applied as objects, decides the access reviews.
    Api::<ClusterRole>::all(c.clone())
        .create(
            &pp,
            &from(json!({"metadata": {"name": "metrics-reader"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})),
        )
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(c.clone())
        .create(
            &pp,
            &from(json!({"metadata": {"name": "prometheus"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}]})),
        )
        .await
        .unwrap();
    let sars: Api<SubjectAccessReview> = Api::all(c.clone());
    let ask = |path: &str| -> SubjectAccessReview {
        from(json!({"spec": {
            "user": "system:serviceaccount:monitoring:prometheus",
            "groups": ["system:authenticated"],
            "nonResourceAttributes": {"path": path, "verb": "get"},
        }}))
    };
    let allowed = sars
        .create(&pp, &ask("/metrics"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(allowed.allowed);
    assert_eq!(
        allowed.reason.as_deref(),
        Some(
            "RBAC: allowed by ClusterRoleBinding \"prometheus\" of ClusterRole \"metrics-reader\" to ServiceAccount \"prometheus\""
        )
    );
    let denied = sars
        .create(&pp, &ask("/debug"))
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!denied.allowed);
    // Neither attributes, or no one asking: 422 with the field, as upstream.
    let r = refusal(
        sars.create(&pp, &from(json!({"spec": {"user": "u"}})))
            .await,
    );
    assert_eq!((r.code, r.reason.as_str()), (422, "Invalid"));
    assert!(
        r.message
            .contains("exactly one of nonResourceAttributes or resourceAttributes"),
        "{}",
        r.message
    );
    let r = refusal(
        sars.create(
            &pp,
            &from(json!({"spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}})),
        )
        .await,
    );
    assert!(
        r.message.contains("at least one of user or group"),
        "{}",
        r.message
    );
}

fn webhook_config(name: &str, ca_pem: &str, extra: Value) -> Value {
    use base64::Engine;
    let mut hook = json!({
        "name": format!("{name}.example.com"),
        "admissionReviewVersions": ["v1"], "sideEffects": "None", "timeoutSeconds": 1,
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
        "clientConfig": {"service": {"namespace": "gpu-claims", "name": "gpu-claims", "path": "/mutate"},
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca_pem)},
    });
    for (k, v) in extra.as_object().unwrap() {
        hook[k] = v.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name}, "webhooks": [hook]})
}

#[tokio::test]
async fn admission_webhooks_are_called_selected_and_obeyed_as_kube_apiserver_does() {
    use std::sync::atomic::Ordering::SeqCst;
    let (s, c) = server().await;
    let (ca, calls) = fake_webhook(&s).await;
    let configs: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(c.clone());
    let pp = PostParams::default();
    configs
        .create(
            &pp,
            &from(webhook_config(
                "labelled",
                &ca,
                json!({"objectSelector": {"matchLabels": {"hook": "on"}},
                       "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a"]}]},
                       "matchConditions": [{"name": "not-skipped", "expression": "!has(object.metadata.annotations) || !('skip' in object.metadata.annotations)"}]}),
            )),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    let hooked = json!({"hook": "on"});

    // Not selected: no label, another namespace, a false match condition.
    pods.create(&pp, &pod("deny-unlabelled", json!({})))
        .await
        .unwrap();
    gpu_claims_apiserver::namespaces::ensure(&s.store, "b");
    Api::<Pod>::namespaced(c.clone(), "b")
        .create(&pp, &pod("deny-elsewhere", hooked.clone()))
        .await
        .unwrap();
    let mut skipped = pod("deny-skipped", hooked.clone());
    skipped.metadata.annotations = Some([("skip".to_string(), "1".to_string())].into());
    pods.create(&pp, &skipped).await.unwrap();
    assert_eq!(
        calls.load(SeqCst),
        0,
        "no call for what the webhook does not select"
    );

    // Selected: refused with its status, as upstream words it.
    let r = refusal(pods.create(&pp, &pod("deny-me", hooked.clone())).await);
    assert_eq!((r.code, r.reason.as_str()), (403, ""));
    assert_eq!(
        r.message,
        "admission webhook \"labelled.example.com\" denied the request: not this one"
    );
    assert!(pods.get_opt("deny-me").await.unwrap().is_none());
    // Its JSON patch is applied; a dry run is sent as one (sideEffects None).
    let made = pods
        .create(&pp, &pod("patch-me", hooked.clone()))
        .await
        .unwrap();
    assert_eq!(made.metadata.labels.unwrap()["patched"], "yes");
    assert_eq!(calls.load(SeqCst), 2);

    // timeoutSeconds: failurePolicy Fail refuses (500), Ignore admits.
    let r = refusal(pods.create(&pp, &pod("slow-fail", hooked.clone())).await);
    assert_eq!((r.code, r.reason.as_str()), (500, "InternalError"));
    assert!(
        r.message.starts_with("Internal error occurred: failed calling webhook \"labelled.example.com\": failed to call webhook: Post \"https://gpu-claims.gpu-claims.svc:443/mutate?timeout=1s\": context deadline exceeded"),
        "{}",
        r.message
    );
    let mut ignore = configs.get("labelled").await.unwrap();
    ignore.webhooks.as_mut().unwrap()[0].failure_policy = Some("Ignore".into());
    configs.replace("labelled", &pp, &ignore).await.unwrap();
    pods.create(&pp, &pod("slow-ignored", hooked.clone()))
        .await
        .unwrap();

    // A validating webhook: its denial refuses, its patch counts for nothing.
    let mut checker = webhook_config(
        "checker",
        &ca,
        json!({"objectSelector": {"matchLabels": {"check": "on"}}}),
    );
    checker["kind"] = "ValidatingWebhookConfiguration".into();
    Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(
        c.clone(),
    )
    .create(&pp, &from(checker))
    .await
    .unwrap();
    let checked = json!({"check": "on"});
    let r = refusal(
        pods.create(&pp, &pod("deny-checked", checked.clone()))
            .await,
    );
    assert_eq!(
        r.message,
        "admission webhook \"checker.example.com\" denied the request: not this one"
    );
    let kept = pods
        .create(&pp, &pod("patch-checked", checked.clone()))
        .await
        .unwrap();
    assert!(!kept.metadata.labels.unwrap().contains_key("patched"));

    // No endpoint behind a Service (every replica down): Fail refuses.
    configs
        .create(
            &pp,
            &from(webhook_config(
                "nowhere",
                &ca,
                json!({"clientConfig": {"service": {"namespace": "x", "name": "gone", "path": "/mutate"}}}),
            )),
        )
        .await
        .unwrap();
    let r = refusal(pods.create(&pp, &pod("any", json!({}))).await);
    assert_eq!(r.code, 500);
    assert!(
        r.message.contains("service \"x/gone\" has no endpoints"),
        "{}",
        r.message
    );
}

#[tokio::test]
async fn server_side_apply_tracks_managers_removes_dropped_fields_and_conflicts() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let (_s, c) = server().await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "a");
    let manifest = |size: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": labels}, "data": {"size": size}})
    };
    let alice = PatchParams::apply("alice");
    let made = cms
        .patch(
            "c",
            &alice,
            &Patch::Apply(manifest("1", json!({"team": "ml", "tier": "gold"}))),
        )
        .await
        .unwrap();
    let mf = made.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf.len(), 1);
    assert_eq!(
        (mf[0].manager.as_deref(), mf[0].operation.as_deref()),
        (Some("alice"), Some("Apply"))
    );
    let owned = serde_json::to_value(&mf[0].fields_v1).unwrap();
    assert!(owned["f:data"]["f:size"].is_object(), "{owned}");
    assert!(
        owned["f:metadata"]["f:labels"]["f:tier"].is_object(),
        "{owned}"
    );

    // Alice drops a label from her manifest: it goes.
    let again = cms
        .patch(
            "c",
            &alice,
            &Patch::Apply(manifest("1", json!({"team": "ml"}))),
        )
        .await
        .unwrap();
    assert!(!again.metadata.labels.unwrap().contains_key("tier"));

    // Bob applies another size: a conflict with alice, as upstream words it.
    let bob = PatchParams::apply("bob");
    let r = refusal(
        cms.patch("c", &bob, &Patch::Apply(manifest("2", json!({}))))
            .await,
    );
    assert_eq!((r.code, r.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        r.message,
        "Apply failed with 1 conflict: conflict with \"alice\" using v1: .data.size"
    );
    // Forced, he takes size over; alice keeps what she still owns.
    let taken = cms
        .patch(
            "c",
            &bob.clone().force(),
            &Patch::Apply(manifest("2", json!({}))),
        )
        .await
        .unwrap();
    assert_eq!(taken.data.unwrap()["size"], "2");
    let managers: Vec<String> = taken
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["alice", "bob"]);

    // An update (a merge patch) takes the fields it changes: then alice's
    // apply of the old value conflicts with that manager.
    let edit = PatchParams {
        field_manager: Some("kubectl-edit".into()),
        ..Default::default()
    };
    cms.patch(
        "c",
        &edit,
        &Patch::Merge(json!({"metadata": {"labels": {"team": "infra"}}})),
    )
    .await
    .unwrap();
    let r = refusal(
        cms.patch(
            "c",
            &alice,
            &Patch::Apply(manifest("2", json!({"team": "ml"}))),
        )
        .await,
    );
    assert!(
        r.message.contains("conflict with \"kubectl-edit\""),
        "{}",
        r.message
    );
    assert!(r.message.contains(".metadata.labels.team"), "{}", r.message);

    // An apply names its manager.
    let none = PatchParams::default();
    let r = refusal(
        cms.patch("c", &none, &Patch::Apply(manifest("2", json!({}))))
            .await,
    );
    assert_eq!((r.code, r.reason.as_str()), (422, "Invalid"));
    assert!(
        r.message.contains("fieldManager: Required value"),
        "{}",
        r.message
    );
}

#[tokio::test]
async fn a_strategic_merge_patch_merges_lists_by_their_merge_key() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    let mut p = pod("p", json!({}));
    let spec = p.spec.as_mut().unwrap();
    spec.containers
        .push(from(json!({"name": "side", "image": "s:1"})));
    spec.scheduling_gates = Some(vec![
        from(json!({"name": "g1"})),
        from(json!({"name": "g2"})),
    ]);
    spec.tolerations = Some(vec![from(json!({"key": "t1", "operator": "Exists"}))]);
    pods.create(&PostParams::default(), &p).await.unwrap();
    let patched = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {
                "containers": [{"name": "c", "image": "i:2"}],
                "schedulingGates": [{"name": "g1", "$patch": "delete"}],
            }})),
        )
        .await
        .unwrap();
    let spec = patched.spec.unwrap();
    // Containers by name: `c` changed, `side` kept.
    let images: Vec<(String, Option<String>)> = spec
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.image.clone()))
        .collect();
    assert_eq!(
        images,
        [
            ("c".into(), Some("i:2".into())),
            ("side".into(), Some("s:1".into()))
        ]
    );
    // A directive deletes one gate, and is not stored as data.
    let gates: Vec<String> = spec
        .scheduling_gates
        .unwrap()
        .into_iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(gates, ["g2"]);
    // Tolerations have no merge key upstream: replaced whole. A list
    // without the pod's toleration removes it, which a pod's update may
    // not do (only additions); one with it and another adds that one.
    let toleration = |keys: &[&str]| {
        let list: Vec<Value> = keys
            .iter()
            .map(|k| json!({"key": k, "operator": "Exists"}))
            .collect();
        Patch::Strategic(json!({"spec": {"tolerations": list}}))
    };
    let e = refusal(
        pods.patch("p", &PatchParams::default(), &toleration(&["t2"]))
            .await,
    );
    common::invalid_saying(&e, "spec.tolerations: Forbidden");
    let patched = pods
        .patch("p", &PatchParams::default(), &toleration(&["t1", "t2"]))
        .await
        .unwrap();
    let keys: Vec<Option<String>> = patched
        .spec
        .unwrap()
        .tolerations
        .unwrap()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(keys, [Some("t1".to_string()), Some("t2".to_string())]);
}

#[tokio::test]
async fn built_in_objects_decode_by_their_types_and_unknown_fields_follow_field_validation() {
    let (s, c) = server().await;
    let post = |query: &str, body: Value| {
        http::Request::post(format!("{}/api/v1/namespaces/a/configmaps{query}", s.url()))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    let cm = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": {"a": "1"}, "colour": "red"})
    };
    // Strict: refused, in upstream's words.
    let e = refusal(
        c.request::<Value>(post("?fieldValidation=Strict", cm("strict")))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"colour\""
    );
    // Warn (the default): stored without it, and a Warning says so.
    let resp = c
        .send(post("", cm("warned")).map(Into::into))
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let warning = resp.headers()["warning"].to_str().unwrap().to_string();
    assert_eq!(warning, "299 - \"unknown field \\\"colour\\\"\"");
    let stored = s.store.get("ConfigMap", "a", "warned").unwrap();
    assert!(stored.get("colour").is_none() && stored["data"]["a"] == "1");
    // A value of the wrong type is a 400 whatever fieldValidation says.
    let deploy = http::Request::post(format!("{}/apis/apps/v1/namespaces/a/deployments", s.url()))
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "d"}, "spec": {"replicas": "two", "selector": {}, "template": {}}}))
            .unwrap(),
        )
        .unwrap();
    let e = refusal(c.request::<Value>(deploy).await);
    assert_eq!(e.code, 400);
    assert!(
        e.message
            .starts_with("Deployment in version \"v1\" cannot be handled as a Deployment: "),
        "{}",
        e.message
    );
    // An unsupported value of the parameter is refused.
    let e = refusal(
        c.request::<Value>(post("?fieldValidation=Loose", cm("x")))
            .await,
    );
    assert_eq!(e.code, 400);
}

/// apimachinery's errors, as every verb answers them: AlreadyExists,
/// NotFound (GET and DELETE alike) and Conflict name the resource
/// (group-qualified outside the core group) and the object, with details
/// {name, group, kind}.
#[tokio::test]
async fn errors_name_the_resource_and_object_as_apimachinery_does() {
    let (_s, c) = server().await;
    let pp = PostParams::default();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    pods.create(&pp, &pod("p", json!({}))).await.unwrap();
    let e = refusal(pods.create(&pp, &pod("p", json!({}))).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "pods \"p\" already exists");
    let d = e.details.as_ref().unwrap();
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        ("p", "", "pods")
    );
    let e = refusal(pods.delete("gone", &DeleteParams::default()).await);
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "pods \"gone\" not found");
    assert_eq!(e.details.as_ref().unwrap().name, "gone");

    let claims: Api<GPUClaim> = Api::namespaced(c, "a");
    let claim: GPUClaim =
        from(json!({"metadata": {"name": "c"}, "spec": {"className": "h200", "count": 1}}));
    let made = claims.create(&pp, &claim).await.unwrap();
    let e = refusal(claims.create(&pp, &claim).await);
    assert_eq!(e.message, "gpuclaims.gpu.cozystack.io \"c\" already exists");
    let d = e.details.as_ref().unwrap();
    assert_eq!(
        (d.name.as_str(), d.group.as_str(), d.kind.as_str()),
        ("c", "gpu.cozystack.io", "gpuclaims")
    );
    let e = refusal(claims.get("nope").await);
    assert_eq!(e.message, "gpuclaims.gpu.cozystack.io \"nope\" not found");
    assert_eq!(e.details.as_ref().unwrap().group, "gpu.cozystack.io");
    // A stale resourceVersion: 409 Conflict in kube-apiserver's words.
    let mut newer = made.clone();
    newer.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    claims.replace("c", &pp, &newer).await.unwrap();
    let mut stale = made;
    stale.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    let e = refusal(claims.replace("c", &pp, &stale).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on gpuclaims.gpu.cozystack.io \"c\": the object has been modified; please apply your changes to the latest version and try again"
    );
}

/// A delete answers the deleted object for the kinds whose storage sets
/// ReturnDeletedObject (pods, services, service accounts) and a Status
/// of Success for the others (a ConfigMap).
#[tokio::test]
async fn a_delete_answers_the_object_where_upstream_storage_returns_it() {
    use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
    let (_s, c) = server().await;
    let pp = PostParams::default();
    let dp = DeleteParams::default();
    let services: Api<Service> = Api::namespaced(c.clone(), "a");
    services
        .create(
            &pp,
            &from(json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}})),
        )
        .await
        .unwrap();
    let deleted = services.delete("s", &dp).await.unwrap();
    assert_eq!(
        deleted.left().and_then(|s| s.metadata.name).as_deref(),
        Some("s")
    );
    let accounts: Api<ServiceAccount> = Api::namespaced(c.clone(), "a");
    accounts
        .create(&pp, &from(json!({"metadata": {"name": "sa"}})))
        .await
        .unwrap();
    assert!(accounts.delete("sa", &dp).await.unwrap().is_left());
    let maps: Api<ConfigMap> = Api::namespaced(c, "a");
    maps.create(&pp, &from(json!({"metadata": {"name": "m"}})))
        .await
        .unwrap();
    let status = maps
        .delete("m", &dp)
        .await
        .unwrap()
        .right()
        .expect("a Status");
    assert_eq!(
        status.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    assert_eq!(status.details.unwrap().name, "m");
}

/// The objects a cluster starts with: the `kubernetes` Service and
/// Endpoints in `default`, naming the server, and a `default`
/// ServiceAccount in every active namespace, made again when deleted and
/// not holding up a namespace's deletion.
#[tokio::test]
async fn a_cluster_starts_with_its_kubernetes_service_and_default_service_accounts() {
    use k8s_openapi::api::core::v1::{Endpoints, Service, ServiceAccount};
    let (s, c) = server().await;
    let svc = Api::<Service>::namespaced(c.clone(), "default")
        .get("kubernetes")
        .await
        .unwrap();
    let port = &svc.spec.unwrap().ports.unwrap()[0];
    assert_eq!((port.name.as_deref(), port.port), (Some("https"), 443));
    let ep = Api::<Endpoints>::namespaced(c.clone(), "default")
        .get("kubernetes")
        .await
        .unwrap();
    let subset = &ep.subsets.unwrap()[0];
    assert_eq!(
        subset.ports.as_ref().unwrap()[0].port,
        i32::from(s.addr().port())
    );
    let namespaces: Api<Namespace> = Api::all(c.clone());
    namespaces
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "fresh"}})),
        )
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(c.clone(), "fresh");
    until("fresh has its default ServiceAccount", || {
        let accounts = accounts.clone();
        async move { accounts.get_opt("default").await.unwrap().is_some() }
    })
    .await;
    let first = accounts.get("default").await.unwrap().metadata.uid;
    accounts
        .delete("default", &DeleteParams::default())
        .await
        .unwrap();
    until("the default ServiceAccount is made again", || {
        let accounts = accounts.clone();
        let first = first.clone();
        async move {
            accounts
                .get_opt("default")
                .await
                .unwrap()
                .is_some_and(|a| a.metadata.uid != first)
        }
    })
    .await;
    namespaces
        .delete("fresh", &DeleteParams::default())
        .await
        .unwrap();
    until("the namespace is gone, its account with it", || {
        let namespaces = namespaces.clone();
        async move { namespaces.get_opt("fresh").await.unwrap().is_none() }
    })
    .await;
    assert!(
        Api::<ServiceAccount>::namespaced(c, "a")
            .get_opt("default")
            .await
            .unwrap()
            .is_some()
    );
}
