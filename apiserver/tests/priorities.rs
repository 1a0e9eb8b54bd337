//! PriorityClasses (`scheduling.k8s.io/v1`) as kube-apiserver serves them,
//! and the Priority admission plugin, through kube-rs: the two system
//! classes from the start and never deleted, validation
//! (`pkg/apis/scheduling/validation`), one global default, and a pod's
//! priority from its class, the default or 0 (`plugin/pkg/admission/priority`).

mod common;

use common::{from, invalid_saying, refusal, server};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

fn class(name: &str, value: i64, default: bool) -> PriorityClass {
    from(json!({"metadata": {"name": name}, "value": value, "globalDefault": default}))
}

fn pod(name: &str, class: Option<&str>, priority: Option<i64>) -> Pod {
    let mut spec = json!({"containers": [{"name": "c", "image": "x"}]});
    if let Some(c) = class {
        spec["priorityClassName"] = c.into();
    }
    if let Some(p) = priority {
        spec["priority"] = p.into();
    }
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

/// A 403 Forbidden that says exactly `message`.
fn forbidden(e: &kube::core::Status, message: &str) {
    assert_eq!(
        (e.code, e.reason.as_str()),
        (403, "Forbidden"),
        "{}",
        e.message
    );
    assert_eq!(e.message, message);
}

#[tokio::test]
async fn the_system_classes_exist_from_the_start_and_are_never_deleted() {
    let (_s, c) = server().await;
    let classes: Api<PriorityClass> = Api::all(c.clone());
    let node = classes.get("system-node-critical").await.unwrap();
    assert_eq!(node.value, Some(2_000_001_000));
    assert_eq!(
        node.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
    let cluster = classes.get("system-cluster-critical").await.unwrap();
    assert_eq!(cluster.value, Some(2_000_000_000));
    let e = refusal(
        classes
            .delete("system-node-critical", &DeleteParams::default())
            .await,
    );
    forbidden(
        &e,
        "priorityclasses.scheduling.k8s.io \"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted",
    );
    // A class of a user goes as any object.
    classes
        .create(&PostParams::default(), &class("batch", 10, false))
        .await
        .unwrap();
    classes
        .delete("batch", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_class_is_validated_as_upstream_validates_it() {
    let (_s, c) = server().await;
    let classes: Api<PriorityClass> = Api::all(c.clone());
    let pp = PostParams::default();
    let e = refusal(
        classes
            .create(&pp, &class("huge", 1_000_000_001, false))
            .await,
    );
    invalid_saying(
        &e,
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
    );
    let e = refusal(classes.create(&pp, &class("system-mine", 5, false)).await);
    invalid_saying(
        &e,
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class",
    );
    let made = classes
        .create(&pp, &class("gold", 1000, false))
        .await
        .unwrap();
    assert_eq!(
        made.preemption_policy.as_deref(),
        Some("PreemptLowerPriority"),
        "defaulted"
    );
    let mut changed = made.clone();
    changed.value = Some(2000);
    let e = refusal(classes.replace("gold", &pp, &changed).await);
    invalid_saying(&e, "value: Forbidden: may not be changed in an update.");
    // Its description may change.
    let mut described = made;
    described.description = Some("for the VMs that matter".into());
    classes.replace("gold", &pp, &described).await.unwrap();
}

#[tokio::test]
async fn only_one_class_is_the_global_default() {
    let (_s, c) = server().await;
    let classes: Api<PriorityClass> = Api::all(c.clone());
    let pp = PostParams::default();
    classes
        .create(&pp, &class("normal", 100, true))
        .await
        .unwrap();
    let e = refusal(classes.create(&pp, &class("other", 50, true)).await);
    forbidden(
        &e,
        "priorityclasses.scheduling.k8s.io \"other\" is forbidden: PriorityClass normal is already marked as default. Only one default can exist",
    );
    // The default itself may be written again.
    let mut again = classes.get("normal").await.unwrap();
    again.description = Some("the default".into());
    classes.replace("normal", &pp, &again).await.unwrap();
}

#[tokio::test]
async fn a_pod_takes_its_priority_from_its_class_the_default_or_zero() {
    let (_s, c) = server().await;
    let classes: Api<PriorityClass> = Api::all(c.clone());
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pp = PostParams::default();
    // No class at all: 0, and no name.
    let p = pods.create(&pp, &pod("plain", None, None)).await.unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(spec.priority, Some(0));
    assert_eq!(spec.priority_class_name, None);
    assert_eq!(
        spec.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
    classes
        .create(&pp, &class("gold", 1000, false))
        .await
        .unwrap();
    let p = pods
        .create(&pp, &pod("golden", Some("gold"), None))
        .await
        .unwrap();
    assert_eq!(p.spec.unwrap().priority, Some(1000));
    // The global default: its value, and its name on the pod.
    classes
        .create(&pp, &class("normal", 100, true))
        .await
        .unwrap();
    let p = pods
        .create(&pp, &pod("defaulted", None, None))
        .await
        .unwrap();
    let spec = p.spec.unwrap();
    assert_eq!(spec.priority, Some(100));
    assert_eq!(spec.priority_class_name.as_deref(), Some("normal"));
    // A pod that sets its own priority: only the one its class gives.
    pods.create(&pp, &pod("agrees", Some("gold"), Some(1000)))
        .await
        .unwrap();
    let e = refusal(
        pods.create(&pp, &pod("disagrees", Some("gold"), Some(5)))
            .await,
    );
    forbidden(
        &e,
        "pods \"disagrees\" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name",
    );
    let e = refusal(pods.create(&pp, &pod("lost", Some("platinum"), None)).await);
    forbidden(
        &e,
        "pods \"lost\" is forbidden: no PriorityClass with name platinum was found",
    );
}
