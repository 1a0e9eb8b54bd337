//! D2, D3 and D6 over HTTP, with the stand-in's NVIDIA DRA driver,
//! scheduler, kubelet and resourceclaim controller: a 4-GPU claim of a
//! class asking for one NVLink partition gets four devices of one
//! partition on an HGX board; a stopped VM's claim held on a node that
//! fails moves, when the VM starts again, with new devices, its backing
//! claim following. I1-I5 and I9 are checked every 50 ms throughout.

use super::{CONFIG, NOW, common};
use gpu_claims_testbed::demo::story::RAG_CLAIM;
use gpu_claims_testbed::demo::{self, A, DRA_NODES, OPS};
use gpu_claims_testbed::fixtures::{claim, dra_class, node};
use gpu_claims_testbed::memory::store::Store;
use gpu_claims_testbed::standin::VmSpec;
use serde_json::{Value, json};

const VFIO: &str = "vfio.gpu.nvidia.com";
const PARTITION4: &str = "gpu.nvidia.com/partition4";

/// The record's devices, as `pool/device`.
fn recorded(store: &Store, ns: &str, name: &str) -> Vec<String> {
    let r = store.get("GPUAllocation", ns, name).expect("the record");
    r["spec"]["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            format!(
                "{}/{}",
                d["pool"].as_str().unwrap(),
                d["device"].as_str().unwrap()
            )
        })
        .collect()
}

/// The devices a ResourceClaim's allocation names, as `pool/device`.
fn allocated(rc: &Value) -> Vec<String> {
    rc["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{}/{}",
                r["pool"].as_str().unwrap(),
                r["device"].as_str().unwrap()
            )
        })
        .collect()
}

/// Whether the VMI's launcher pod runs.
fn launcher_runs(store: &Store, ns: &str, vmi: &str) -> bool {
    store.list("Pod").0.iter().any(|p| {
        p["metadata"]["namespace"] == ns
            && p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("virt-launcher-{vmi}-")))
            && p["status"]["phase"] == "Running"
    })
}

#[test]
fn d2_d3_a_partition4_claim_on_an_hgx_board_runs_on_four_devices_of_one_nvlink_partition() {
    let mut c = common::Cluster::new(demo::seed, CONFIG);
    let _ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, NOW);
    // An HGX H200 board with Fabric Manager, its first GPU failed:
    // partition 1 (modules 1-4) keeps three healthy GPUs.
    c.journal.seed(
        &node("hgx-1")
            .passthrough_gpus("NVIDIA H200", 8, "141Gi", "0x2335")
            .fabric_manager()
            .failed_gpus("gpu-vfio-0")
            .kubelet("128", "1Ti")
            .obj(),
    );
    c.journal.seed(
        &dra_class("h200-nvl4", VFIO)
            .match_attribute(PARTITION4)
            .obj(),
    );
    c.journal
        .seed(&claim(OPS, "train4").class("h200-nvl4").count(4).obj());
    let spec = VmSpec::sized(16, "128Gi").gpus_through_claim("train4");
    c.standin.create_vmi(OPS, "vm-train4", &spec);
    let store = c.store.clone();
    c.settle(
        "D3: vm-train4 runs on four GPUs of one NVLink partition",
        move |s| s.phase(OPS, "train4") == "Attached" && launcher_runs(&store, OPS, "vm-train4"),
        NOW,
    );
    let held = recorded(&c.store, OPS, "train4");
    assert_eq!(
        held,
        ["gpu-vfio-4", "gpu-vfio-5", "gpu-vfio-6", "gpu-vfio-7"].map(|d| format!("hgx-1/{d}"))
    );
    let backing = c.store.get("ResourceClaim", OPS, "train4").unwrap();
    assert_eq!(
        backing["spec"]["devices"]["constraints"],
        json!([{"requests": ["gpu"], "matchAttribute": PARTITION4}])
    );
    assert_eq!(allocated(&backing), held);
    // The driver published them as one partition of four.
    let slice = c
        .store
        .list("ResourceSlice")
        .0
        .into_iter()
        .find(|s| s["spec"]["nodeName"] == "hgx-1")
        .unwrap();
    let partitions: std::collections::BTreeSet<i64> = slice["spec"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| held.contains(&format!("hgx-1/{}", d["name"].as_str().unwrap())))
        .map(|d| d["attributes"]["partition4"]["int"].as_i64().unwrap())
        .collect();
    assert_eq!(partitions.len(), 1, "{partitions:?}");
}

#[test]
fn d6_e1_a_stopped_vm_s_claim_on_a_failed_node_moves_with_new_devices_and_its_backing_claim_follows()
 {
    // The story until vm-rag has stopped: its claim Bound on dra-node-1,
    // its backing claim allocated.
    let (mut c, _ctl) = super::stopped_vm_devices::story_until("Bound");
    let before = recorded(&c.store, A, RAG_CLAIM);
    assert!(
        before.iter().all(|d| d.starts_with(DRA_NODES[0])),
        "{before:?}"
    );
    let uid = c.store.get("ResourceClaim", A, RAG_CLAIM).unwrap()["metadata"]["uid"].clone();
    // A third DRA node, and dra-node-1 stops answering.
    c.journal.seed(
        &node("dra-node-3")
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .kubelet("64", "512Gi")
            .obj(),
    );
    c.standin.set_node_ready(DRA_NODES[0], false);
    // vm-rag starts again: its set cannot go back to dra-node-1.
    c.standin.delete_vm(A, "vm-rag");
    let store = c.store.clone();
    c.settle(
        "the stopped VMI deleted",
        move |_| store.get("VirtualMachineInstance", A, "vm-rag").is_none(),
        NOW,
    );
    let rag = VmSpec::sized(8, "64Gi").gpus_through_claim(RAG_CLAIM);
    c.standin.create_vmi(A, "vm-rag", &rag);
    let store = c.store.clone();
    c.settle(
        "D6, E1: vm-rag runs on dra-node-3, its backing claim moved with it",
        move |s| {
            s.phase(A, RAG_CLAIM) == "Attached"
                && s.claim(A, RAG_CLAIM)
                    .is_some_and(|c| c.node_name() == Some("dra-node-3"))
                && launcher_runs(&store, A, "vm-rag")
        },
        NOW,
    );
    let after = recorded(&c.store, A, RAG_CLAIM);
    assert_eq!(after.len(), 2);
    assert!(
        after.iter().all(|d| d.starts_with("dra-node-3/")),
        "{after:?}"
    );
    let backing = c.store.get("ResourceClaim", A, RAG_CLAIM).unwrap();
    assert_eq!(backing["metadata"]["uid"], uid, "the same backing claim");
    assert_eq!(allocated(&backing), after);
    assert_eq!(
        backing["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
        json!(["dra-node-3"])
    );
}
