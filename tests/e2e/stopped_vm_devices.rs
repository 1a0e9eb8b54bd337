//! D4 over HTTP, with the stand-in's scheduler, kubelet and resourceclaim
//! controller: what a stopped VM keeps. The story runs until vm-rag has
//! stopped, its claim Bound and its backing ResourceClaim allocated; then
//! pods outside gpu-claims ask the scheduler for the same DeviceClass, and
//! the VM starts again.

use super::{CONFIG, NOW, common};
use gpu_claims_testbed::demo::story::{self, RAG_CLAIM};
use gpu_claims_testbed::demo::{self, A, OPS};
use gpu_claims_testbed::memory::store::Store;
use gpu_claims_testbed::standin::VmSpec;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The devices (driver, pool, name) an allocation's results name.
fn allocated(rc: &Value) -> BTreeSet<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    rc["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (s(&r["driver"]), s(&r["pool"]), s(&r["device"])))
        .collect()
}

fn recorded(store: &Store) -> BTreeSet<(String, String, String)> {
    let r = store
        .get("GPUAllocation", A, RAG_CLAIM)
        .expect("the record");
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    r["spec"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| (s(&d["driver"]), s(&d["pool"]), s(&d["device"])))
        .collect()
}

/// A pod outside gpu-claims asking `count` devices of KubeVirt's
/// passthrough DeviceClass through a template of its own, as a training
/// job would.
fn foreign_pod(store: &Store, name: &str, count: u32) {
    foreign_pod_tolerating(store, name, count, None);
}

/// The same, its request tolerating the taint `toleration` names (D7's
/// `gpu.cozystack.io/managed`: a job an administrator lets into the pools
/// gpu-claims manages).
fn foreign_pod_tolerating(store: &Store, name: &str, count: u32, toleration: Option<&str>) {
    let mut request = json!({"name": "gpu",
        "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": count}});
    if let Some(key) = toleration {
        request["exactly"]["tolerations"] = json!([{"key": key, "operator": "Exists"}]);
    }
    store
        .create(
            "ResourceClaimTemplate",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": OPS},
                "spec": {"spec": {"devices": {"requests": [request]}}}}),
        )
        .unwrap();
    store
        .create(
            "Pod",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": OPS},
                "spec": {"containers": [{"name": "main", "image": "cuda",
                        "resources": {"claims": [{"name": "gpus"}]}}],
                    "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": name}]}}),
        )
        .unwrap();
}

/// The ResourceClaim the resourceclaim controller made for a pod's
/// `gpus` entry.
fn pod_claim(store: &Store, pod: &str) -> Option<Value> {
    let p = store.get("Pod", OPS, pod)?;
    let name = p["status"]["resourceClaimStatuses"][0]["resourceClaimName"].as_str()?;
    store.get("ResourceClaim", OPS, name)
}

fn condition(store: &Store, pod: &str, type_: &str) -> Option<(String, String)> {
    let p = store.get("Pod", OPS, pod)?;
    p["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (s(&c["status"]), s(&c["message"]))
        })
}

/// The demo's cluster and controller, its story run until vm-rag's claim
/// (`rag-h200-pair`) is in `phase`: "Attached" once vm-rag runs, "Bound"
/// once it has stopped (its backing claim allocated, reserved by no pod).
pub(super) fn story_until(phase: &str) -> (common::Cluster, common::Controller) {
    let mut c = common::Cluster::new(demo::seed, CONFIG);
    let ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, NOW);
    for step in story::steps() {
        c.act(&step);
        let s = c.settle(step.title, step.until, step.hold);
        if s.phase(A, RAG_CLAIM) == phase {
            break;
        }
    }
    (c, ctl)
}

fn running(store: &Store, ns: &str, pod: &str) -> bool {
    store
        .get("Pod", ns, pod)
        .is_some_and(|p| p["status"]["phase"] == "Running")
}

#[test]
fn d4_d7_a_stopped_vm_s_devices_go_to_no_other_pod_and_the_vm_started_again_runs_on_them() {
    let (mut c, _ctl) = story_until("Bound");
    let held = recorded(&c.store);
    assert_eq!(held.len(), 2);
    let backing = c.store.get("ResourceClaim", A, RAG_CLAIM).unwrap();
    assert_eq!(allocated(&backing), held);
    // The stopped pod's reservation dropped, the allocation kept.
    let reserved = &backing["status"]["reservedFor"];
    assert!(reserved.as_array().is_none_or(Vec::is_empty), "{reserved}");

    // dra-node-1 has 4 H200s, 2 of them held by the stopped VM's claim;
    // dra-node-2's 2 run vm-llm. A pod asking for 4 finds no node.
    foreign_pod(&c.store, "train-4", 4);
    let store = c.store.clone();
    c.settle(
        "D4: a pod asking 4 devices waits: the stopped VM's 2 are held",
        move |_| {
            condition(&store, "train-4", "PodScheduled").is_some_and(|(status, message)| {
                status == "False" && message.contains("cannot allocate all claims")
            })
        },
        NOW,
    );
    assert!(pod_claim(&c.store, "train-4").is_some_and(|rc| allocated(&rc).is_empty()));

    // D7: a pod asking for 2 gets none of the node's two free ones
    // either: the pool gpu-claims manages is closed to the scheduler.
    foreign_pod(&c.store, "train-2", 2);
    let store = c.store.clone();
    c.settle(
        "D7: a pod asking 2 devices of a managed pool waits",
        move |_| {
            condition(&store, "train-2", "PodScheduled").is_some_and(|(status, message)| {
                status == "False" && message.contains("cannot allocate all claims")
            })
        },
        NOW,
    );
    // One whose request tolerates the managed taint gets the two no claim
    // holds, never the stopped VM's.
    foreign_pod_tolerating(&c.store, "train-2-ok", 2, Some("gpu.cozystack.io/managed"));
    let store = c.store.clone();
    c.settle(
        "D4, D7: a pod tolerating the managed taint runs on the 2 no claim holds",
        move |_| running(&store, OPS, "train-2-ok"),
        NOW,
    );
    let theirs = allocated(&pod_claim(&c.store, "train-2-ok").unwrap());
    assert_eq!(theirs.len(), 2);
    assert!(theirs.is_disjoint(&held), "I9: {theirs:?} and {held:?}");

    // The VM starts again: the same devices, its backing claim reserved
    // for its new launcher pod, which runs.
    c.standin.delete_vm(A, "vm-rag");
    c.settle(
        "the stopped VMI deleted",
        |s| s.phase(A, RAG_CLAIM) == "Bound",
        NOW,
    );
    let rag = VmSpec::sized(8, "64Gi").gpus_through_claim(RAG_CLAIM);
    c.standin.create_vmi(A, "vm-rag", &rag);
    let store = c.store.clone();
    c.settle(
        "D4, D5: vm-rag runs again on the devices its claim kept",
        move |s| {
            s.phase(A, RAG_CLAIM) == "Attached"
                && store.list("Pod").0.iter().any(|p| {
                    p["metadata"]["namespace"] == A
                        && p["metadata"]["name"]
                            .as_str()
                            .is_some_and(|n| n.starts_with("virt-launcher-vm-rag-"))
                        && p["status"]["phase"] == "Running"
                })
        },
        NOW,
    );
    assert_eq!(recorded(&c.store), held);
    let backing = c.store.get("ResourceClaim", A, RAG_CLAIM).unwrap();
    assert_eq!(allocated(&backing), held);
    let reserved = &backing["status"]["reservedFor"];
    assert_eq!(reserved.as_array().map(Vec::len), Some(1), "{reserved}");
    assert!(
        reserved[0]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("virt-launcher-vm-rag-"))
    );
    // The 4-device pod still waits: nothing it could take was freed.
    assert!(!running(&c.store, OPS, "train-4"));
}

/// `kubectl delete gpuclaim --cascade=foreground` while the VM runs: the
/// API server's garbage collector deletes the backing claim at once, and
/// our finalizer keeps it, allocated and reserved for the running launcher
/// pod, until the VM stops; then L8 lets it go, then the record, then the
/// GPUClaim's finalizer.
#[test]
fn d4_l8_a_foreground_delete_of_a_running_vm_s_claim_keeps_its_devices_held_until_the_vm_stops() {
    use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};
    let (mut c, _ctl) = story_until("Attached");
    let held = recorded(&c.store);
    let kubeconfig = c.server.kubeconfig();
    c.rt.block_on(async {
        let client = demo::client_for(&kubeconfig).await.unwrap();
        let gpuclaims = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("gpu.cozystack.io", "v1alpha1", "GPUClaim"),
            "gpuclaims",
        );
        let api: Api<DynamicObject> = Api::namespaced_with(client, A, &gpuclaims);
        api.delete(RAG_CLAIM, &DeleteParams::foreground())
            .await
            .unwrap();
    });
    let store = c.store.clone();
    c.settle(
        "D4: the garbage collector deleted the backing claim; our finalizer keeps it",
        move |_| {
            store
                .get("ResourceClaim", A, RAG_CLAIM)
                .is_some_and(|rc| rc["metadata"]["deletionTimestamp"].is_string())
        },
        NOW,
    );
    let backing = c.store.get("ResourceClaim", A, RAG_CLAIM).unwrap();
    assert_eq!(allocated(&backing), held);
    let reserved = &backing["status"]["reservedFor"];
    assert_eq!(reserved.as_array().map(Vec::len), Some(1), "{reserved}");
    assert!(c.store.get("GPUAllocation", A, RAG_CLAIM).is_some());
    assert!(c.store.get("GPUClaim", A, RAG_CLAIM).is_some());

    c.standin.stop_vm(A, "vm-rag");
    let store = c.store.clone();
    c.settle(
        "L8: the VM stopped, the backing claim, the record and the GPUClaim go",
        move |s| {
            s.phase(A, RAG_CLAIM) == "gone"
                && store.get("ResourceClaim", A, RAG_CLAIM).is_none()
                && store.get("GPUAllocation", A, RAG_CLAIM).is_none()
        },
        NOW,
    );
}
