//! The benchmark's world for N claims: about one VMI per claim, 8 GPUs per
//! node, claims in every phase, and the objects each kind of change needs.
//!
//! - 80% Attached (live VMI, launcher bound to its node),
//! - 10% Bound (no VMI),
//! - 4% Lost (on NotReady nodes, still attached to live VMIs),
//! - 3% deleting, held by their live VMI (L9),
//! - 3% Pending, their VMI's launcher at the gate, waiting OverBudget on
//!   the `tight` class (G5).
//!
//! Plus classes with no claims, to be deleted one by one (L11); ten pods
//! outside gpu-claims on every node (cpu and memory, as a cluster's
//! DaemonSets and jobs hold them); and a few VMs pinned to a node of their
//! own whose GPUs a CUDA job outside gpu-claims holds, waiting NoCapacity
//! until it finishes (G3).

use crate::fixtures::{MetaBuilder, PodBuilder, claim, class, launcher, node, pod, vmi};
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_FINALIZER};
use gpu_claims_actors::ports::Obj;

pub const GPU: &str = "nvidia.com/gpu";
pub const GPUS_PER_NODE: usize = 8;
/// Pods outside gpu-claims on every node.
pub const FOREIGN_PODS_PER_NODE: usize = 10;
/// Their namespace.
pub const FOREIGN_NS: &str = "jobs";
/// Classes the claims spread over; `tight` has a budget it has spent.
pub const CLASSES: &[&str] = &["a100", "h100", "h200", "l40s", "tight"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Attached,
    Bound,
    Lost,
    Deleting,
    Pending,
}

/// Where each claim stands, so changes can pick their targets.
pub struct Layout {
    pub claims: usize,
    pub nodes: usize,
    pub roles: Vec<Role>,
    /// Nodes by rack: a rack holds about 1% of the claims.
    pub racks: Vec<Vec<usize>>,
    pub spare_classes: usize,
    /// VMs waiting NoCapacity behind a CUDA job each.
    pub blocked: usize,
}

pub fn ns(i: usize) -> String {
    format!("ns-{}", i % 100)
}
pub fn claim_name(i: usize) -> String {
    format!("c-{i}")
}
pub fn vmi_name(i: usize) -> String {
    format!("vm-{i}")
}
pub fn vmi_uid(i: usize) -> String {
    format!("vmi-uid-{i}")
}
pub fn node_name(n: usize) -> String {
    format!("node-{n:06}")
}
pub fn spare_class(k: usize) -> String {
    format!("spare-{k}")
}
/// The j-th pod outside gpu-claims on node n.
pub fn foreign_pod(n: usize, j: usize) -> String {
    format!("job-{n:06}-{j}")
}
/// The k-th blocked VM: its node, claim, VMI and the CUDA job in its way.
pub fn blocked_node(k: usize) -> String {
    format!("blocked-node-{k:04}")
}
pub fn blocked_claim(k: usize) -> String {
    format!("blocked-{k}")
}
pub fn blocked_vmi(k: usize) -> String {
    format!("blocked-vm-{k}")
}
pub fn cuda_job(k: usize) -> String {
    format!("cuda-{k}")
}

fn role(i: usize) -> Role {
    match i % 100 {
        0..80 => Role::Attached,
        80..90 => Role::Bound,
        90..94 => Role::Lost,
        94..97 => Role::Deleting,
        _ => Role::Pending,
    }
}

impl Layout {
    pub fn new(claims: usize, spare_classes: usize) -> Self {
        let roles: Vec<Role> = (0..claims).map(role).collect();
        let placed = roles.iter().filter(|r| **r != Role::Pending).count();
        // Placed claims fill nodes 8 at a time; a quarter more nodes are spare.
        let nodes = placed.div_ceil(GPUS_PER_NODE) * 5 / 4 + 2;
        let per_rack = (claims / 100 / GPUS_PER_NODE).max(1);
        let racks = (0..nodes)
            .collect::<Vec<_>>()
            .chunks(per_rack)
            .map(<[usize]>::to_vec)
            .collect();
        Self {
            claims,
            nodes,
            roles,
            racks,
            spare_classes,
            blocked: (claims / 200).max(5),
        }
    }

    /// The node of the i-th claim (placed claims only): lost claims on the
    /// first nodes, which are NotReady.
    fn node_of(&self, placed_index: usize) -> usize {
        placed_index / GPUS_PER_NODE
    }

    fn lost_nodes(&self) -> usize {
        let lost = self.roles.iter().filter(|r| **r == Role::Lost).count();
        lost.div_ceil(GPUS_PER_NODE)
    }

    /// The objects, in an order a watch could deliver them.
    pub fn objects(&self) -> Vec<Obj> {
        let mut out = Vec::new();
        let lost_nodes = self.lost_nodes();
        for n in 0..self.nodes {
            // Lost claims come first in placement order, on the first nodes.
            out.push(
                node(&node_name(n))
                    .gpus(GPU, GPUS_PER_NODE as u64)
                    .kubelet("128", "1Ti")
                    .ready(n >= lost_nodes)
                    .obj(),
            );
            for j in 0..FOREIGN_PODS_PER_NODE {
                out.push(
                    pod(FOREIGN_NS, &foreign_pod(n, j))
                        .scheduled(&node_name(n))
                        .requests(&[("cpu", "500m"), ("memory", "2Gi")])
                        .phase("Running")
                        .obj(),
                );
            }
        }
        out.extend(self.blocked_objects());
        let mut order: Vec<usize> = (0..self.claims)
            .filter(|i| self.roles[*i] == Role::Lost)
            .collect();
        order.extend(
            (0..self.claims).filter(|i| !matches!(self.roles[*i], Role::Lost | Role::Pending)),
        );
        let mut tight_used = 0u32;
        for (placed, i) in order.iter().enumerate() {
            let i = *i;
            let n = node_name(self.node_of(placed));
            let cls = CLASSES[i % CLASSES.len()];
            if cls == "tight" {
                tight_used += 1;
            }
            let (ns, name) = (ns(i), claim_name(i));
            let c = claim(&ns, &name).class(cls).count(1);
            let c = match self.roles[i] {
                Role::Attached => c.attached_phase(&n).attached(&vmi_name(i)),
                Role::Bound => c.bound(&n),
                Role::Lost => c.lost(&n).attached(&vmi_name(i)),
                Role::Deleting => c.attached_phase(&n).attached(&vmi_name(i)).deleting(),
                Role::Pending => unreachable!(),
            };
            out.extend(c.with_allocation(GPU));
            if self.roles[i] != Role::Bound {
                out.extend(vm_of(i, |p| p.pinned(&n).scheduled(&n)));
            }
        }
        for i in (0..self.claims).filter(|i| self.roles[*i] == Role::Pending) {
            let (ns, name) = (ns(i), claim_name(i));
            out.push(claim(&ns, &name).class("tight").count(1).obj());
            out.extend(vm_of(i, |p| p.gated()));
        }
        for cls in CLASSES {
            let k = class(cls, GPU);
            out.push(
                if *cls == "tight" {
                    k.budget(tight_used)
                } else {
                    k
                }
                .obj(),
            );
        }
        for k in 0..self.spare_classes {
            // No node serves them: they hold nothing, and their deletion
            // is released at once (L11).
            let mut c = class(&spare_class(k), GPU).selector("pool", "spare").0;
            c.metadata.finalizers = Some(vec![CLASS_FINALIZER.into()]);
            out.push(Obj::Class(c));
        }
        out
    }
}

impl Layout {
    /// The blocked VMs: each pinned to a node of its own whose 8 GPUs a
    /// CUDA job outside gpu-claims holds.
    fn blocked_objects(&self) -> Vec<Obj> {
        let mut out = Vec::new();
        for k in 0..self.blocked {
            let (n, ns) = (blocked_node(k), FOREIGN_NS);
            out.push(
                node(&n)
                    .gpus(GPU, GPUS_PER_NODE as u64)
                    .kubelet("128", "1Ti")
                    .obj(),
            );
            out.push(
                pod(ns, &cuda_job(k))
                    .scheduled(&n)
                    .requests(&[(GPU, "8"), ("cpu", "1")])
                    .phase("Running")
                    .obj(),
            );
            out.push(claim(ns, &blocked_claim(k)).class("h100").count(1).obj());
            let uid = format!("blocked-uid-{k}");
            out.push(
                vmi(ns, &blocked_vmi(k))
                    .uid(&uid)
                    .annotate(CLAIMS_ANNOTATION, &blocked_claim(k))
                    .obj(),
            );
            out.push(
                launcher(
                    ns,
                    &format!("virt-launcher-{}", blocked_vmi(k)),
                    &blocked_vmi(k),
                    &uid,
                )
                .gated()
                .pinned(&n)
                .obj(),
            );
        }
        out
    }
}

/// The i-th claim's VMI, naming it, and its launcher pod as `pod` makes it.
fn vm_of(i: usize, pod: impl FnOnce(PodBuilder) -> PodBuilder) -> [Obj; 2] {
    let ns = ns(i);
    [
        vmi(&ns, &vmi_name(i))
            .uid(&vmi_uid(i))
            .annotate(CLAIMS_ANNOTATION, &claim_name(i))
            .obj(),
        pod(launcher(
            &ns,
            &format!("virt-launcher-{}", vmi_name(i)),
            &vmi_name(i),
            &vmi_uid(i),
        ))
        .obj(),
    ]
}
