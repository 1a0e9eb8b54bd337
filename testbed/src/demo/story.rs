//! The demo's story: VMs start, one over budget waits, a node fails and
//! returns, VMs stop, a claim and a class are deleted while still held,
//! a node is drained for maintenance and comes back, and a VM takes GPUs
//! that a DRA driver publishes through a ResourceClaimTemplate, one of
//! which fails and comes back; another VM names a claim of the DRA class,
//! whose backing ResourceClaim holds its GPUs while the VM is stopped.
//! Last, an 8-GPU VM that comes after 1-GPU jobs gets its node as they
//! end one GPU at a time (`queue`). Then a tenant keeps a claim of a
//! stopped VM: an idle reservation (`idle`).
//! Each step acts on the cluster as a tenant, KubeVirt or the kubelet
//! would, then names what the controller must have done for it to end.

use super::view::Snapshot;
use crate::memory::store::Store;
use crate::standin::{StandIn, VmSpec};
use gpu_claims_actors::api::{
    CLASS_ANNOTATION, CONDITION_WAITING, COUNT_ANNOTATION, EVACUATE_TAINT, is_deleting,
};
use std::time::Duration;

pub const A: &str = "tenant-a";
pub const B: &str = "tenant-b";
pub const H200: &str = "nvidia.com/GH100_H200";
pub const L40S: &str = "nvidia.com/AD102GL_L40S";
/// Nodes with GPUs that placement must skip (G3): the scheduler would not
/// run the launcher pods there.
pub const CORDONED: &str = "gpu-node-0";
pub const TAINTED: &str = "gpu-node-4";
/// The platform team's namespace, and its CUDA job outside gpu-claims.
pub const OPS: &str = "ml-ops";
pub const CUDA_JOB: &str = "cuda-smoke-test";
/// Nodes whose GPUs NVIDIA's DRA driver publishes (4 and 2 H200s).
pub const DRA_NODES: [&str; 2] = ["dra-node-1", "dra-node-2"];
/// The named claim of the DRA class that vm-rag names.
pub const RAG_CLAIM: &str = "rag-h200-pair";

mod dra;
mod idle;
mod queue;
use dra::{backing_allocated, dra_class_and_template, dra_pair_claim, fail_llm_gpu};
pub use idle::SPARE_CLAIM;
pub use queue::{A100, A100_NODE, HEAD_OF_LINE_AFTER};

pub struct Ctx<'a> {
    pub standin: &'a StandIn,
    pub store: &'a Store,
    pub now: &'a Snapshot,
}

pub struct Step {
    pub title: &'static str,
    /// The rules this step shows at work.
    pub rules: &'static str,
    pub act: fn(&Ctx),
    /// The step is over when this holds (and the cluster is quiet).
    pub until: fn(&Snapshot) -> bool,
    /// How long `until` must keep holding: for a step whose point is that
    /// the controller waits.
    pub hold: Duration,
}

fn waiting(s: &Snapshot, ns: &str, name: &str) -> bool {
    s.claim(ns, name).is_some_and(|c| {
        c.conditions()
            .iter()
            .any(|x| x.type_ == CONDITION_WAITING && x.status == "True")
    })
}

/// The node a claim is placed on.
/// Whether claim `ns/name` waits with `reason`.
fn waiting_for(s: &Snapshot, ns: &str, name: &str, reason: &str) -> bool {
    s.claim(ns, name).is_some_and(|c| {
        c.conditions()
            .iter()
            .any(|x| x.type_ == CONDITION_WAITING && x.status == "True" && x.reason == reason)
    })
}

fn node_of(s: &Snapshot, ns: &str, name: &str) -> String {
    s.claim(ns, name)
        .and_then(|c| c.node_name())
        .unwrap_or_default()
        .to_string()
}

/// A VirtualMachine (runStrategy Always) asking for one h200 in its spec.
fn db_or_web() -> VmSpec {
    VmSpec::sized(4, "16Gi")
        .annotate(CLASS_ANNOTATION, "h200")
        .annotate(COUNT_ANNOTATION, "1")
        .gpus(H200, 1)
}

/// What `gpu-claims drain` (evacuate) or `uncordon` writes on a node.
fn set_evacuating(store: &Store, node: &str, evacuate: bool) {
    let Some(mut n) = store.get("Node", "", node) else {
        return;
    };
    let mut taints: Vec<serde_json::Value> = n["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t["key"] != EVACUATE_TAINT)
        .collect();
    if evacuate {
        taints.push(serde_json::json!({"key": EVACUATE_TAINT, "effect": "NoSchedule"}));
        n["spec"]["unschedulable"] = true.into();
    } else if let Some(spec) = n["spec"].as_object_mut() {
        spec.remove("unschedulable");
    }
    n["spec"]["taints"] = taints.into();
    let _ = store.update("Node", n, crate::memory::store::Subresource::Main);
}

fn lost_reason(s: &Snapshot, ns: &str, name: &str) -> Option<String> {
    let c = s.claim(ns, name)?;
    let l = c.conditions().iter().find(|x| x.type_ == "Lost")?;
    Some(l.reason.clone())
}

/// The maintenance's VMs run again, off the node being drained.
fn moved_off(s: &Snapshot, vm_claim: &str) -> bool {
    let node = node_of(s, A, vm_claim);
    s.phase(A, vm_claim) == "Attached" && !s.evacuating().contains(&node)
}

pub fn steps() -> Vec<Step> {
    let mut steps = main_steps();
    steps.extend(queue::steps());
    steps.extend(idle::steps());
    steps
}

fn main_steps() -> Vec<Step> {
    let now = Duration::ZERO;
    vec![
        Step {
            title: "Tenants start three VMs: vm-train (3 x h200) goes to gpu-node-1, where the CUDA job left exactly 3; \
                    vm-infer (2 x h200, 384Gi) to gpu-node-2, the only node with the memory; vm-render (claim shared-l40s)",
            rules: "G1 G2 G3 G4 L1 L4",
            act: |c| {
                c.standin.start_vm(A, "vm-train", "h200", 3);
                let infer = VmSpec::sized(16, "384Gi")
                    .annotate(CLASS_ANNOTATION, "h200")
                    .annotate(COUNT_ANNOTATION, "2")
                    .gpus(H200, 2);
                c.standin.create_vmi(A, "vm-infer", &infer);
                c.standin
                    .start_vm_with_claims(B, "vm-render", &["shared-l40s"]);
            },
            until: |s| {
                s.phase(A, "vm-train-gpu") == "Attached"
                    && s.phase(A, "vm-infer-gpu") == "Attached"
                    && s.phase(B, "shared-l40s") == "Attached"
                    && node_of(s, A, "vm-train-gpu") == "gpu-node-1"
                    && node_of(s, A, "vm-infer-gpu") == "gpu-node-2"
            },
            hold: now,
        },
        Step {
            title: "vm-notebook asks for an L40S in its spec alone, as Cozystack's vm-instance writes it: \
                    its pod is gated, and it gets a template claim of the class that serves it",
            rules: "G1 G2 G3 G4",
            act: |c| {
                let notebook = VmSpec::sized(4, "16Gi").gpus(L40S, 1);
                c.standin.create_vmi(B, "vm-notebook", &notebook);
            },
            until: |s| s.phase(B, "vm-notebook-gpu") == "Attached",
            hold: now,
        },
        Step {
            title: "vm-burst asks for 2 more h200: the class budget of 6 is spent, so its pod waits at the gate",
            rules: "G5 OverBudget",
            act: |c| c.standin.start_vm(B, "vm-burst", "h200", 2),
            until: |s| s.phase(B, "vm-burst-gpu") == "Pending" && waiting(s, B, "vm-burst-gpu"),
            hold: now,
        },
        Step {
            title: "The node under vm-train goes NotReady: its claim is Lost, and still counts against the budget",
            rules: "G6 L11",
            act: |c| {
                let n = node_of(c.now, A, "vm-train-gpu");
                c.standin.set_node_ready(&n, false);
            },
            until: |s| {
                s.phase(A, "vm-train-gpu") == "Lost" && s.phase(B, "vm-burst-gpu") == "Pending"
            },
            hold: now,
        },
        Step {
            title: "The node is Ready again: the Lost claim of the live VM is Attached again, and loses its Lost condition",
            rules: "L4",
            act: |c| {
                let n = node_of(c.now, A, "vm-train-gpu");
                c.standin.set_node_ready(&n, true);
            },
            until: |s| {
                s.phase(A, "vm-train-gpu") == "Attached"
                    && s.claim(A, "vm-train-gpu")
                        .is_some_and(|c| c.conditions().iter().all(|x| x.type_ != "Lost"))
            },
            hold: now,
        },
        Step {
            title: "vm-render stops: its claim is detached and stays Bound, its GPUs kept for the next VM",
            rules: "L5 L7",
            act: |c| c.standin.stop_vm(B, "vm-render"),
            until: |s| {
                s.phase(B, "shared-l40s") == "Bound"
                    && s.claim(B, "shared-l40s")
                        .is_some_and(|c| c.attached_vmi_name().is_none())
            },
            hold: now,
        },
        Step {
            title: "vm-notebook stops: the template claim made from its spec goes with it",
            rules: "L5 L7 L8",
            act: |c| c.standin.stop_vm(B, "vm-notebook"),
            until: |s| s.phase(B, "vm-notebook-gpu") == "gone",
            hold: now,
        },
        Step {
            // Stopped, not deleted: the controller deletes the template
            // claim (L5, L7) rather than the garbage collector, so the
            // story (and the RBAC test that plays it) takes one path.
            title: "vm-infer stops: its template claim is deleted with the VM's end, freeing budget for vm-burst",
            rules: "L5 L7 L8 G3 G4",
            act: |c| c.standin.stop_vm(A, "vm-infer"),
            until: |s| {
                s.phase(A, "vm-infer-gpu") == "gone" && s.phase(B, "vm-burst-gpu") == "Attached"
            },
            hold: now,
        },
        Step {
            title: "The tenant deletes vm-train's claim while the VM runs: the claim waits, still Attached",
            rules: "L9",
            act: |c| {
                let _ = c.store.delete("GPUClaim", A, "vm-train-gpu");
            },
            until: |s| {
                s.claim(A, "vm-train-gpu")
                    .is_some_and(|c| is_deleting(&c.metadata) && c.phase().as_str() == "Attached")
            },
            hold: Duration::from_millis(1500),
        },
        Step {
            title: "vm-train stops: nothing holds its claim any more, so it is released",
            rules: "L5 L8",
            act: |c| c.standin.stop_vm(A, "vm-train"),
            until: |s| s.phase(A, "vm-train-gpu") == "gone",
            hold: now,
        },
        Step {
            title: "The platform deletes class l40s while claim shared-l40s holds GPUs of it: the class waits",
            rules: "L11",
            act: |c| {
                let _ = c.store.delete("GPUClass", "", "l40s");
            },
            until: |s| s.class("l40s").is_some_and(|k| is_deleting(&k.metadata)),
            hold: Duration::from_millis(1500),
        },
        Step {
            title: "The tenant deletes shared-l40s: the claim is released, then the class",
            rules: "L8 L11",
            act: |c| {
                let _ = c.store.delete("GPUClaim", B, "shared-l40s");
            },
            until: |s| s.phase(B, "shared-l40s") == "gone" && s.class("l40s").is_none(),
            hold: now,
        },
        Step {
            title: "Tenant A runs vm-db and vm-web as VirtualMachines (runStrategy Always), one h200 each: \
                    both fit best beside vm-burst",
            rules: "G2 G3 G4",
            act: |c| {
                c.standin.run_vm(A, "vm-db", &db_or_web());
                c.standin.run_vm(A, "vm-web", &db_or_web());
            },
            until: |s| {
                s.phase(A, "vm-db-gpu") == "Attached" && s.phase(A, "vm-web-gpu") == "Attached"
            },
            hold: now,
        },
        Step {
            title: "Maintenance: the platform drains the node under vm-db (`gpu-claims drain`: cordoned, tainted \
                    gpu.cozystack.io/evacuate): vm-db and vm-web restart elsewhere one at a time, each restart \
                    kept on the node until the VM runs again; vm-burst, a VMI with no VirtualMachine, is kept and named",
            rules: "E1 E2 E3",
            act: |c| set_evacuating(c.store, &node_of(c.now, A, "vm-db-gpu"), true),
            until: |s| moved_off(s, "vm-db-gpu") && moved_off(s, "vm-web-gpu") && !s.restarting(),
            hold: now,
        },
        Step {
            title: "The node is back (`gpu-claims uncordon`): schedulable again, placements may use it",
            rules: "E3",
            act: |c| {
                for n in c.now.evacuating() {
                    set_evacuating(c.store, &n, false);
                }
            },
            until: |s| s.evacuating().is_empty(),
            hold: now,
        },
        Step {
            title: "The platform adds class h200-dra over the DRA nodes, where NVIDIA's DRA driver publishes 4 and 2 \
                    H200s in ResourceSlices, and tenant A a ResourceClaimTemplate asking for 2: the class counts 6",
            rules: "D1 D2",
            act: |c| dra_class_and_template(c.store),
            until: |s| {
                s.class("h200-dra")
                    .and_then(|k| k.status.as_ref()?.capacity)
                    == Some(6)
            },
            hold: now,
        },
        Step {
            title: "vm-llm asks for 2 through the template, as KubeVirt's DRA guide writes it: its pod is gated, its \
                    template claim made, 2 devices of dra-node-2 chosen and recorded, the pod's ResourceClaim \
                    allocated to them; the scheduler reserves it and the VM runs",
            rules: "D3 D4 D5 G1 G2 G4",
            act: |c| {
                let llm = VmSpec::sized(8, "64Gi").gpus_through_template("two-h200", "gpu");
                c.standin.create_vmi(A, "vm-llm", &llm);
            },
            until: |s| {
                s.phase(A, "vm-llm-gpu") == "Attached"
                    && node_of(s, A, "vm-llm-gpu") == DRA_NODES[1]
            },
            hold: now,
        },
        Step {
            title: "A GPU under vm-llm fails: NVIDIA's driver taints it NoExecute in its slice, and the claim is Lost \
                    (DevicesLost, naming the device)",
            rules: "D6",
            act: |c| fail_llm_gpu(c.store, true),
            until: |s| {
                s.phase(A, "vm-llm-gpu") == "Lost"
                    && lost_reason(s, A, "vm-llm-gpu").as_deref() == Some("DevicesLost")
            },
            hold: now,
        },
        Step {
            title: "The GPU is well again: the claim of the running VM is Attached again",
            rules: "D6 L4",
            act: |c| fail_llm_gpu(c.store, false),
            until: |s| s.phase(A, "vm-llm-gpu") == "Attached",
            hold: now,
        },
        Step {
            title: "Tenant A makes claim rag-h200-pair (2 x h200-dra) and starts vm-rag naming it by \
                    resourceClaimName: its backing ResourceClaim is made, owned by the claim and allocated to \
                    the 2 devices recorded on dra-node-1; the scheduler reserves it and the VM runs",
            rules: "D4 D5 G1 G4",
            act: |c| {
                dra_pair_claim(c.store);
                let rag = VmSpec::sized(8, "64Gi").gpus_through_claim(RAG_CLAIM);
                c.standin.create_vmi(A, "vm-rag", &rag);
            },
            until: |s| {
                s.phase(A, RAG_CLAIM) == "Attached"
                    && node_of(s, A, RAG_CLAIM) == DRA_NODES[0]
                    && backing_allocated(s, A, RAG_CLAIM)
            },
            hold: now,
        },
        Step {
            title: "vm-rag stops: its claim is detached and stays Bound, and its backing ResourceClaim stays \
                    allocated: no scheduler can give those GPUs to another pod until the tenant lets them go",
            rules: "D4 L5 L7",
            act: |c| c.standin.stop_vm(A, "vm-rag"),
            until: |s| s.phase(A, RAG_CLAIM) == "Bound" && backing_allocated(s, A, RAG_CLAIM),
            hold: now,
        },
        Step {
            title: "The tenant deletes rag-h200-pair: its backing ResourceClaim is deleted, then its record, \
                    then its finalizer",
            rules: "L8 D4",
            act: |c| {
                let _ = c.store.delete("GPUClaim", A, RAG_CLAIM);
            },
            until: |s| {
                s.phase(A, RAG_CLAIM) == "gone"
                    && s.resource_claims
                        .iter()
                        .all(|rc| rc.metadata.name.as_deref() != Some(RAG_CLAIM))
            },
            hold: now,
        },
    ]
}
