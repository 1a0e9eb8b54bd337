//! End to end, as the node really is (issue 20): the real `gpu-claims run`
//! against the embedded API server over HTTP, with the stand-in rendering
//! launcher pods as virt-controller does and scheduling them with
//! NodeResourcesFit. Every wait checks I1-I5 and I7 every 50 ms.
mod common;

use common::Cluster;
use gpu_claims_testbed::demo::{A, H200, Snapshot};
use gpu_claims_testbed::fixtures::{class, node};
use gpu_claims_testbed::standin::VmSpec;
use serde_json::Value;
use std::time::Duration;

const CONFIG: &str = "unschedulableGrace: 2s\nlog: {filter: info, format: json}\n";
const NOW: Duration = Duration::ZERO;

/// Two H200 nodes: n1 with little memory, n2 with plenty.
fn nodes(c: &gpu_claims_testbed::memory::MemCluster) {
    gpu_claims_apiserver::namespaces::ensure(&c.store, A);
    for o in [
        node("n1").gpus(H200, 4).kubelet("32", "64Gi").obj(),
        node("n2").gpus(H200, 4).kubelet("64", "512Gi").obj(),
        class("h200", H200).obj(),
    ] {
        c.seed(&o);
    }
}

/// The launcher pods of `vmi` in `ns`, as the store has them.
fn launchers(c: &Cluster, ns: &str, vmi: &str) -> Vec<Value> {
    c.store
        .list("Pod")
        .0
        .into_iter()
        .filter(|p| {
            p["metadata"]["namespace"] == ns && p["metadata"]["ownerReferences"][0]["name"] == vmi
        })
        .collect()
}

fn running_on(c: &Cluster, ns: &str, vmi: &str) -> Option<String> {
    launchers(c, ns, vmi)
        .into_iter()
        .find(|p| p["status"]["phase"] == "Running")
        .and_then(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
}

fn node_of(s: &Snapshot, ns: &str, claim: &str) -> String {
    s.claim(ns, claim)
        .and_then(|c| c.node_name().map(str::to_string))
        .unwrap_or_default()
}

/// Settles (checking the invariants) until `claim` in A is Attached: the
/// node it holds.
fn attached_on(c: &mut Cluster, why: &str, claim: &str) -> String {
    let s = c.settle(why, |s| s.phase(A, claim) == "Attached", NOW);
    node_of(&s, A, claim)
}

/// The node `vm`'s launcher pod runs on once the kubelet has started it
/// (None after a minute: polled every 50 ms, as a loaded machine, CI
/// beside stress-ng with the randomized tests in parallel, may take
/// seconds to bind and run a pod).
fn comes_to_run(c: &Cluster, vm: &str) -> Option<String> {
    (0..1200).find_map(|_| {
        running_on(c, A, vm).or_else(|| {
            std::thread::sleep(Duration::from_millis(50));
            None
        })
    })
}

#[test]
fn e2e_g2_a_vm_asking_for_gpus_only_in_its_spec_is_gated_placed_and_runs() {
    let mut c = Cluster::new(nodes, CONFIG);
    let _ctl = c.start_controller();
    c.standin
        .create_vmi(A, "vm", &VmSpec::sized(2, "8Gi").gpus(H200, 2));
    let s = c.settle(
        "G1 gates it, G2 makes its template claim, G3-G4 place it, L4",
        |s| s.phase(A, "vm-gpu") == "Attached",
        NOW,
    );
    let claim = s.claim(A, "vm-gpu").unwrap();
    assert!(claim.is_template());
    assert_eq!(claim.spec.count, 2, "what its spec requests");
    let node = claim.node_name().unwrap().to_string();
    c.settle(
        "the scheduler binds it and the kubelet runs it",
        |_| true,
        NOW,
    );
    assert_eq!(running_on(&c, A, "vm").as_deref(), Some(node.as_str()));
    let vmi = c.store.get("VirtualMachineInstance", A, "vm").unwrap();
    assert_eq!(vmi["status"]["phase"], "Running");
}

#[test]
fn e2e_g3_a_gpu_pod_outside_gpu_claims_and_a_memory_heavy_vm_are_placed_around() {
    let mut c = Cluster::new(nodes, CONFIG);
    let _ctl = c.start_controller();
    // A CUDA job holds 3 of n1's GPUs: placement must not promise them.
    c.standin
        .run_pod(A, "cuda-job", Some("n1"), &[(H200, "3"), ("cpu", "1")]);
    c.standin
        .create_vmi(A, "vm-gpus", &VmSpec::sized(2, "8Gi").gpus(H200, 2));
    let on = attached_on(&mut c, "G3: n1 has 1 GPU free, not 4", "vm-gpus-gpu");
    assert_eq!(on, "n2");
    // n1's last GPU is the tightest fit for 1, but not its 64Gi for 128Gi.
    c.standin
        .create_vmi(A, "vm-memory", &VmSpec::sized(8, "128Gi").gpus(H200, 1));
    let why = "G3 NodeResourcesFit: where its memory fits";
    assert_eq!(attached_on(&mut c, why, "vm-memory-gpu"), "n2");
    c.settle(
        "the scheduler agrees: both run where they are pinned",
        |_| true,
        NOW,
    );
    for vm in ["vm-gpus", "vm-memory"] {
        assert_eq!(comes_to_run(&c, vm).as_deref(), Some("n2"), "{vm}");
    }
}

#[test]
fn e2e_g7_a_pod_made_unschedulable_after_placement_is_recovered() {
    let mut c = Cluster::new(nodes, CONFIG);
    let _ctl = c.start_controller();
    // The scheduler is slow today: placement pins the pod, and before it
    // is bound a database takes the node's memory.
    c.standin.hold_scheduling(true);
    c.standin
        .run_vm(A, "vm", &VmSpec::sized(2, "32Gi").gpus(H200, 1));
    let pinned = attached_on(&mut c, "G4: placed and pinned", "vm-gpu");
    assert_eq!(pinned, "n1", "the tightest fit by name");
    let first = c.store.get("VirtualMachineInstance", A, "vm").unwrap();
    c.standin
        .run_pod(A, "database", Some(&pinned), &[("memory", "60Gi")]);
    c.standin.hold_scheduling(false);
    // G7: Unschedulable for 2 s, then the VMI is deleted; the VM
    // controller makes a new one, whose pod is placed where it fits.
    let first_uid = first["metadata"]["uid"].as_str().unwrap().to_string();
    c.settle(
        "G7 deletes the VMI; its VM comes back and is placed anew",
        |s| {
            s.phase(A, "vm-gpu") == "Attached"
                && s.claim(A, "vm-gpu").is_some_and(|c| {
                    c.node_name() == Some("n2")
                        && gpu_claims_actors::api::vmi_owner(&c.metadata)
                            .is_some_and(|(_, uid)| uid != first_uid)
                })
        },
        NOW,
    );
    let events = c.store.list("Event").0;
    let told = events
        .iter()
        .find(|e| e["reason"] == "PinnedPodUnschedulable");
    let told = told.expect("a Warning Event on the VMI");
    assert!(
        told["message"]
            .as_str()
            .unwrap()
            .contains("Insufficient memory"),
        "the scheduler's message: {told}"
    );
    assert_eq!(comes_to_run(&c, "vm").as_deref(), Some("n2"));
}
