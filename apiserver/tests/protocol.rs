//! The embedded API server through kube-rs, a client written against real
//! API servers: what each verb answers, and the semantics kube-runtime
//! relies on (resourceVersions, 409, 410, bookmarks, finalizers, GC).
use futures::{StreamExt, TryStreamExt};
mod common;

use gpu_claims_apiserver::Handle;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy, WatchEvent,
    WatchParams,
};
use kube::core::DynamicObject;
use serde_json::json;
use std::time::Duration;

/// A server with the namespaces the tests write to.
async fn server() -> (Handle, kube::Client) {
    let s = common::builder(&["a", "gpu-claims"]).start().await.unwrap();
    let client = s.client();
    (s, client)
}

/// Every event of a watch of `pods` from `rv`, until the server ends it.
async fn watched(pods: &Api<Pod>, wp: &WatchParams, rv: &str) -> Vec<WatchEvent<Pod>> {
    pods.watch(wp, rv)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

fn pod(name: &str, labels: serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn create_assigns_identity_and_a_stale_update_is_409() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    let mut p = pod("", json!({}));
    p.metadata.generate_name = Some("gen-".into());
    let made = pods.create(&PostParams::default(), &p).await.unwrap();
    let name = made.metadata.name.clone().unwrap();
    assert!(name.starts_with("gen-") && name.len() > 4);
    assert!(made.metadata.uid.is_some() && made.metadata.creation_timestamp.is_some());
    let mut stale = made.clone();
    let mut newer = made.clone();
    newer.metadata.labels = Some([("x".to_string(), "1".to_string())].into());
    pods.replace(&name, &PostParams::default(), &newer)
        .await
        .unwrap();
    stale.metadata.labels = Some([("x".to_string(), "2".to_string())].into());
    let err = pods
        .replace(&name, &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
    let again = pods
        .create(&PostParams::default(), &made)
        .await
        .unwrap_err();
    assert!(matches!(again, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"));
}

#[tokio::test]
async fn lists_select_by_label_and_field_and_page_with_continue() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    for i in 0..5 {
        let tier = if i % 2 == 0 { "gpu" } else { "cpu" };
        pods.create(
            &PostParams::default(),
            &pod(&format!("p{i}"), json!({"tier": tier})),
        )
        .await
        .unwrap();
    }
    let selections = [
        (
            "label tier=gpu",
            ListParams::default().labels("tier=gpu"),
            3,
        ),
        (
            "label tier notin (gpu)",
            ListParams::default().labels("tier notin (gpu)"),
            2,
        ),
        (
            "field metadata.name=p3",
            ListParams::default().fields("metadata.name=p3"),
            1,
        ),
    ];
    for (selector, lp, want) in selections {
        let got = pods.list(&lp).await.unwrap().items.len();
        assert_eq!(got, want, "{selector}");
    }
    let mut names = Vec::new();
    let mut lp = ListParams::default().limit(2);
    loop {
        let page = pods.list(&lp).await.unwrap();
        names.extend(page.items.iter().map(|p| p.metadata.name.clone().unwrap()));
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => lp = lp.continue_token(&t),
            _ => break,
        }
    }
    assert_eq!(names, ["p0", "p1", "p2", "p3", "p4"]);
    let all: Api<Pod> = Api::all(c);
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        5
    );
}

#[tokio::test]
async fn watch_replays_from_a_version_bookmarks_and_says_410_when_too_old() {
    let (s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    let first = pods
        .create(&PostParams::default(), &pod("w0", json!({})))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    pods.create(&PostParams::default(), &pod("w1", json!({})))
        .await
        .unwrap();
    let wp = WatchParams::default().timeout(2).disable_bookmarks();
    let events = watched(&pods, &wp, &rv).await;
    let added: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(p) => p.metadata.name.clone(),
            _ => None,
        })
        .collect();
    assert_eq!(added, ["w1"], "only what followed the version");
    // Bookmarks carry a version a rewatch can start from.
    let wp = WatchParams::default().timeout(7);
    let mut st = pods.watch(&wp, &rv).await.unwrap().boxed();
    let bookmark = loop {
        match st.next().await {
            Some(Ok(WatchEvent::Bookmark(b))) => break b,
            Some(Ok(_)) => continue,
            other => panic!("no bookmark: {other:?}"),
        }
    };
    assert!(bookmark.metadata.resource_version.parse::<u64>().unwrap() >= 2);
    // After a restart the watch cache is empty: an old version is 410 Gone.
    s.restart(Duration::from_millis(50)).await.unwrap();
    pods.create(&PostParams::default(), &pod("w2", json!({})))
        .await
        .unwrap();
    let events = watched(&pods, &WatchParams::default().timeout(1), &rv).await;
    assert!(
        matches!(events.first(), Some(WatchEvent::Error(e)) if e.code == 410),
        "{events:?}"
    );
}

#[tokio::test]
async fn finalizers_hold_a_delete_and_preconditions_guard_it() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c, "a");
    let mut p = pod("f", json!({}));
    p.metadata.finalizers = Some(vec!["x/y".into()]);
    let made = pods.create(&PostParams::default(), &p).await.unwrap();
    let wrong = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("not-it".into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let err = pods.delete("f", &wrong).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
    let held = pods.delete("f", &DeleteParams::default()).await.unwrap();
    let held = held.left().expect("the object, still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    let no_new = pods
        .patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["x/y", "z/w"]}})),
        )
        .await
        .unwrap_err();
    assert!(matches!(no_new, kube::Error::Api(s) if s.code == 422));
    common::clear_finalizers(&pods, "f").await;
    assert!(pods.get_opt("f").await.unwrap().is_none());
    drop(made);
}

#[tokio::test]
async fn merge_json_and_apply_patches_and_the_status_subresource() {
    let (_s, c) = server().await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    pods.create(&PostParams::default(), &pod("p", json!({"a": "1"})))
        .await
        .unwrap();
    let pp = PatchParams::default();
    pods.patch(
        "p",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"b": "2"}}})),
    )
    .await
    .unwrap();
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "remove", "path": "/metadata/labels/a"}
    ]))
    .unwrap();
    pods.patch("p", &pp, &Patch::<()>::Json(ops)).await.unwrap();
    // A main update keeps status; the status subresource changes only status.
    let st = pods
        .patch_status(
            "p",
            &pp,
            &Patch::Merge(
                json!({"status": {"phase": "Running"}, "metadata": {"labels": {"ignored": "x"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().phase.as_deref(), Some("Running"));
    let got = pods.get("p").await.unwrap();
    assert_eq!(
        got.metadata.labels.unwrap(),
        [("b".to_string(), "2".to_string())].into()
    );
    // Server-side apply creates, then applies again: a field the same
    // manager no longer applies is removed (tests/apiserver_kubernetes.rs
    // has the conflicts between managers).
    let leases: Api<Lease> = Api::namespaced(c, "a");
    let apply = PatchParams::apply("gpu-claims").force();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l"}, "spec": {"holderIdentity": "one"}});
    leases
        .patch("l", &apply, &Patch::Apply(&lease))
        .await
        .unwrap();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 15}});
    let l = leases
        .patch("l", &apply, &Patch::Apply(&lease))
        .await
        .unwrap();
    let spec = l.spec.unwrap();
    assert_eq!(
        (spec.holder_identity.as_deref(), spec.lease_duration_seconds),
        (None, Some(15))
    );
}

#[tokio::test]
async fn deleting_an_owner_collects_its_dependents_unless_orphaned() {
    let (_s, c) = server().await;
    let nss: Api<Namespace> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    // Namespace `o` made (again), and pod `name` of namespace a that it owns.
    let owned = async |name: &str| {
        let owner = nss
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "o"}})).unwrap(),
            )
            .await
            .unwrap();
        let mut p = pod(name, json!({}));
        p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace", "name": "o", "uid": owner.metadata.uid.clone().unwrap(),
        })).unwrap()]);
        pods.create(&PostParams::default(), &p).await.unwrap();
    };
    owned("dep").await;
    nss.delete("o", &DeleteParams::default()).await.unwrap();
    common::until("background GC", || async {
        pods.get_opt("dep").await.unwrap().is_none()
    })
    .await;
    // Orphan: the dependent stays, without the reference.
    owned("kept").await;
    let orphan = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    nss.delete("o", &orphan).await.unwrap();
    // The owner goes once its dependents are orphaned.
    common::until("the owner is gone", || async {
        nss.get_opt("o").await.unwrap().is_none()
    })
    .await;
    let kept = pods.get("kept").await.unwrap();
    assert!(
        kept.metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
}

#[tokio::test]
async fn discovery_serves_every_kind_and_unknown_paths_are_404() {
    let (_s, c) = server().await;
    let discovery = kube::Discovery::new(c.clone()).run().await.unwrap();
    let kinds: Vec<String> = discovery
        .groups()
        .flat_map(|g| g.recommended_resources().into_iter().map(|(r, _)| r.kind))
        .collect();
    for k in [
        "GPUClaim",
        "GPUClass",
        "GPUAllocation",
        "VirtualMachineInstance",
        "Pod",
        "Node",
        "Namespace",
        "Lease",
        "Event",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} in {kinds:?}");
    }
    let ar = kube::discovery::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("nope.io", "v1", "Nope"),
        "nopes",
    );
    let api: Api<DynamicObject> = Api::all_with(c, &ar);
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 404));
}

#[tokio::test]
async fn injected_faults_answer_writes_and_cut_watches() {
    let (s, c) = server().await;
    s.set_faults(gpu_claims_apiserver::Faults::parse("error=1").unwrap());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "a");
    let err = pods
        .create(&PostParams::default(), &pod("x", json!({})))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 500));
    s.set_faults(gpu_claims_apiserver::Faults::parse("cut=300ms").unwrap());
    pods.create(&PostParams::default(), &pod("x", json!({})))
        .await
        .unwrap();
    let start = std::time::Instant::now();
    let wp = WatchParams::default().timeout(60).disable_bookmarks();
    let events = watched(&pods, &wp, "0").await;
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "cut, not timed out"
    );
    assert_eq!(events.len(), 1);
}

async fn client_as(s: &Handle, user: &str) -> kube::Client {
    s.client_as(user).await.unwrap()
}

#[tokio::test]
async fn a_bearer_token_names_the_writer_and_a_token_nobody_was_given_is_401() {
    let (s, anonymous) = server().await;
    let leases: Api<Lease> = Api::namespaced(client_as(&s, "replica-1").await, "gpu-claims");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "l"}, "spec": {"holderIdentity": "replica-1"},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(anonymous, "a");
    pods.create(&PostParams::default(), &pod("p", json!({})))
        .await
        .unwrap();
    let w = s.writes();
    assert_eq!(w.len(), 2);
    assert_eq!(
        (w[0].user.as_str(), w[0].kind, w[0].seq),
        ("replica-1", "Lease", 0)
    );
    assert_eq!(
        w[0].holder.as_deref(),
        Some("replica-1"),
        "the Lease's holder after the write"
    );
    assert_eq!(
        (w[1].user.as_str(), w[1].kind, w[1].seq),
        (gpu_claims_apiserver::ANONYMOUS, "Pod", 1)
    );
    assert!(w.iter().all(|r| r.applied()));

    let forged = s
        .kubeconfig()
        .replace("  user: {}\n", "  user:\n    token: forged\n");
    let client = client_from(&forged).await;
    let e = Api::<Pod>::namespaced(client, "a")
        .list(&Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 401),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_cut_off_gets_no_answer_its_writes_are_never_applied_and_its_watches_end() {
    let (s, _) = server().await;
    let client = client_as(&s, "replica-2").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "a");
    let mut events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    pods.create(&PostParams::default(), &pod("before", json!({})))
        .await
        .unwrap();
    assert!(matches!(
        events.try_next().await,
        Ok(Some(WatchEvent::Added(_)))
    ));

    s.partition("replica-2", true);
    // The watch ends (the connection is gone), and a write is not answered.
    let ended = tokio::time::timeout(Duration::from_secs(5), events.try_next()).await;
    assert!(matches!(ended, Ok(Ok(None)) | Ok(Err(_))), "{ended:?}");
    let lost = tokio::time::timeout(
        Duration::from_millis(500),
        pods.create(&PostParams::default(), &pod("lost", json!({}))),
    )
    .await;
    assert!(lost.is_err(), "answered through a partition: {lost:?}");
    // Healed: the lost write was never applied; new ones are.
    s.partition("replica-2", false);
    pods.create(&PostParams::default(), &pod("after", json!({})))
        .await
        .unwrap();
    assert!(pods.get_opt("lost").await.unwrap().is_none());
    let names: Vec<String> = s.writes().into_iter().map(|w| w.name).collect();
    assert_eq!(names, ["before", "after"]);
}

/// A client from a kubeconfig, as kube-rs reads one.
async fn client_from(kubeconfig: &str) -> kube::Client {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}
