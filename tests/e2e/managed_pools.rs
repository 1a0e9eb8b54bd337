//! D7 over HTTP, with the real binary and the stand-in's NVIDIA DRA
//! driver, scheduler (whose allocator honours DeviceTaintRules as
//! kube-scheduler's does) and resourceclaim controller: while the demo's
//! story places VMs on DRA devices, jobs outside gpu-claims ask the same
//! DeviceClass through a template of their own, a new one at every step;
//! none is ever given a device of a pool gpu-claims manages. I1-I5 and I9
//! are checked every 50 ms throughout.

use super::{CONFIG, NOW, common};
use gpu_claims_testbed::demo::story;
use gpu_claims_testbed::demo::{self, OPS};
use gpu_claims_testbed::memory::store::Store;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The pools our DeviceTaintRules close: (driver, pool).
fn closed_pools(store: &Store) -> BTreeSet<(String, String)> {
    store
        .list("DeviceTaintRule")
        .0
        .iter()
        .filter(|r| r["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-claims")
        .filter(|r| r["spec"]["taint"]["key"] == "gpu.cozystack.io/managed")
        .map(|r| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let sel = &r["spec"]["deviceSelector"];
            (s(&sel["driver"]), s(&sel["pool"]))
        })
        .collect()
}

/// The pools of the devices `ops`' ResourceClaims were allocated.
fn jobs_pools(store: &Store) -> Vec<(String, String, String)> {
    store
        .list("ResourceClaim")
        .0
        .iter()
        .filter(|c| c["metadata"]["namespace"] == OPS)
        .flat_map(|c| {
            let name = c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            c["status"]["allocation"]["devices"]["results"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |r| {
                    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
                    (name.clone(), s(&r["driver"]), s(&r["pool"]))
                })
        })
        .collect()
}

/// Job `n`: a pod of `ops` asking one device of KubeVirt's passthrough
/// DeviceClass through the template `job`, as a CUDA job would.
fn start_job(store: &Store, n: usize) {
    store
        .create(
            "Pod",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("job-{n}"), "namespace": OPS},
                "spec": {"containers": [{"name": "main", "image": "cuda",
                        "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "job"}]}}),
        )
        .unwrap();
}

#[test]
fn d7_a_job_asking_the_device_class_while_vms_are_placed_is_never_given_a_managed_device() {
    let mut c = common::Cluster::serving(demo::seed, CONFIG, &[]);
    let _ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, NOW);
    c.store
        .create(
            "ResourceClaimTemplate",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "job", "namespace": OPS},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
                    "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": 1}}]}}}}),
        )
        .unwrap();
    let mut jobs = 0;
    let mut placed_dra = false;
    for step in story::steps() {
        // Once a DRA class serves the DRA nodes' devices (before, their
        // pools are no one's and a job may take them, as the story's own
        // capacity count would then show).
        if !closed_pools(&c.store).is_empty() {
            jobs += 1;
            start_job(&c.store, jobs);
        }
        c.act(&step);
        let s = c.settle(step.title, step.until, step.hold);
        placed_dra |= s
            .claims
            .iter()
            .any(|c| c.spec.class_name == "h200-dra" && c.node_name().is_some());
        let closed = closed_pools(&c.store);
        for (claim, driver, pool) in jobs_pools(&c.store) {
            assert!(
                !closed.contains(&(driver.clone(), pool.clone())),
                "D7: job claim {claim} was given a device of {driver}/{pool}, a pool gpu-claims manages (after: {})",
                step.title
            );
        }
    }
    assert!(placed_dra, "the story placed VMs on DRA devices");
    assert!(jobs > 5, "jobs asked at {jobs} steps");
    // Every DRA node's pool is closed by one rule of ours.
    let closed = closed_pools(&c.store);
    for n in demo::DRA_NODES {
        assert!(
            closed.contains(&("gpu.nvidia.com".to_string(), n.to_string())),
            "{n}'s pool: {closed:?}"
        );
    }
    // And the DRA class says so.
    let class = c.store.get("GPUClass", "", "h200-dra").unwrap();
    let exclusive = class["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "ExclusiveDevices")
        .cloned()
        .expect("ExclusiveDevices");
    assert_eq!(exclusive["status"], "True", "{exclusive}");
    // The jobs wait for devices no one manages.
    let job = c.store.get("Pod", OPS, "job-1").unwrap();
    assert!(job["spec"]["nodeName"].is_null(), "{job}");
}
