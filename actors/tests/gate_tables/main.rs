//! G3-G5 as a table: one row per Waiting reason and per filter, on the
//! pure decision (no actors, no cluster).

mod node;
mod nodes_that_matter;

use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION, Obj};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::rules::*;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::*;

pub const H200: &str = "nvidia.com/GH100_H200";
const L40S: &str = "nvidia.com/AD102GL_L40S";

pub fn world_of(objs: Vec<Obj>) -> WorldWriter {
    let w = WorldWriter::new(Config::default());
    for o in objs {
        w.load(o);
    }
    w
}

/// VMI `vm` (uid u1) asking for a template claim of `n` h200, its claim,
/// and one gated launcher pod shaped by `pod`.
pub fn vm_asking(n: u32, pod: impl Fn(PodBuilder) -> PodBuilder) -> Vec<Obj> {
    vec![
        vmi("t", "vm")
            .uid("u1")
            .phase("Scheduling")
            .annotate(CLASS_ANNOTATION, "h200")
            .annotate(COUNT_ANNOTATION, &n.to_string())
            .obj(),
        claim("t", "vm-gpu").count(n).template_of("vm", "u1").obj(),
        pod(launcher("t", "virt-launcher-vm", "vm", "u1").gated()).obj(),
    ]
}

/// VMI `vm` (uid u1) naming `claims`, with one gated launcher pod.
pub fn vm_naming(claims: &str) -> Vec<Obj> {
    vm_naming_with(claims, same)
}

/// The same, its launcher pod shaped by `pod`.
pub fn vm_naming_with(claims: &str, pod: impl FnOnce(PodBuilder) -> PodBuilder) -> Vec<Obj> {
    vm_shaped(claims, same, pod)
}

/// The same, the VMI's spec shaped by `spec` (the devices it asks for).
pub fn vm_naming_asking(claims: &str, spec: impl FnOnce(VmiBuilder) -> VmiBuilder) -> Vec<Obj> {
    vm_shaped(claims, spec, same)
}

/// VMI `vm` (uid u1) naming `claims`, shaped by `spec`, and its one gated
/// launcher pod, shaped by `pod`.
fn vm_shaped(
    claims: &str,
    spec: impl FnOnce(VmiBuilder) -> VmiBuilder,
    pod: impl FnOnce(PodBuilder) -> PodBuilder,
) -> Vec<Obj> {
    let vm = vmi("t", "vm").uid("u1").annotate(CLAIMS_ANNOTATION, claims);
    vec![
        spec(vm).obj(),
        pod(launcher("t", "p", "vm", "u1").gated()).obj(),
    ]
}

/// VMI `vm` (u2) asking for its template claim, where the claim of that
/// name belongs to an earlier VMI `vm` (u1); and the new one's gated pod.
fn vm_after_an_earlier_one() -> Vec<Obj> {
    vec![
        vmi("t", "vm")
            .uid("u2")
            .annotate(CLASS_ANNOTATION, "h200")
            .obj(),
        claim("t", "vm-gpu").template_of("vm", "u1").obj(),
        launcher("t", "p", "vm", "u2").gated().obj(),
    ]
}

/// Claim `a` bound on `node`, attached to the running VMI `other`.
pub fn claim_a_of_running_vm_other(node: &str) -> Vec<Obj> {
    vec![
        vmi("t", "other").uid("u9").phase("Running").obj(),
        claim("t", "a").bound(node).attached("other").obj(),
    ]
}

pub fn gpu_node(name: &str, gpus: u64) -> NodeBuilder {
    node(name).gpus(H200, gpus)
}

#[derive(Debug)]
pub enum Want {
    Place(&'static str),
    Wait(WaitReason, &'static str),
}

pub struct Row {
    pub case: &'static str,
    pub objs: Vec<Obj>,
    pub want: Want,
}

pub fn row(case: &'static str, objs: Vec<Vec<Obj>>, want: Want) -> Row {
    Row {
        case,
        objs: objs.into_iter().flatten().collect(),
        want,
    }
}

pub fn h200() -> Vec<Obj> {
    vec![class("h200", H200).obj()]
}

/// Class h200 and nodes of `(name, GPUs)`.
pub fn h200_nodes(ns: &[(&str, u64)]) -> Vec<Obj> {
    let nodes = ns.iter().map(|(name, gpus)| gpu_node(name, *gpus).obj());
    h200().into_iter().chain(nodes).collect()
}

pub fn nodes(ns: Vec<NodeBuilder>) -> Vec<Obj> {
    ns.into_iter().map(NodeBuilder::obj).collect()
}

pub fn same<T>(x: T) -> T {
    x
}

#[test]
fn g3_g5_gate_decisions_table() {
    use WaitReason::*;
    use Want::*;
    let rows = vec![
        row(
            "best fit: the node left with the fewest free GPUs",
            vec![h200_nodes(&[("n1", 8), ("n2", 2)]), vm_asking(2, same)],
            Place("n2"),
        ),
        row(
            "ties by node name",
            vec![h200_nodes(&[("b", 4), ("a", 4)]), vm_asking(1, same)],
            Place("a"),
        ),
        row(
            "G5 ClaimMissing: a named claim does not exist",
            vec![h200_nodes(&[("n1", 8)]), vm_naming("a")],
            Wait(ClaimMissing, "claim a does not exist"),
        ),
        row(
            "L2 at the gate: the template claim of an earlier VMI of the same name is not this VMI's",
            vec![h200_nodes(&[("n1", 8)]), vm_after_an_earlier_one()],
            Wait(EarlierVmisClaim, "belongs to an earlier VMI named vm"),
        ),
        row(
            "G5 ClaimInUse: a claim owned by another VMI",
            vec![
                h200_nodes(&[("n1", 8)]),
                vm_naming("other-gpu"),
                vec![claim("t", "other-gpu").template_of("other", "u9").obj()],
            ],
            Wait(ClaimInUse, "belongs to VMI other"),
        ),
        row(
            "G5 ClaimInUse: a claim attached to another live VMI",
            vec![
                h200_nodes(&[("n1", 8)]),
                vm_naming("a"),
                claim_a_of_running_vm_other("n1"),
            ],
            Wait(ClaimInUse, "attached to VMI other"),
        ),
        row(
            "G5 ClaimDeleting",
            vec![
                h200_nodes(&[("n1", 8)]),
                vm_naming("a"),
                vec![claim("t", "a").deleting().obj()],
            ],
            Wait(ClaimDeleting, "claim a is being deleted"),
        ),
        row(
            "G5 ClassMissing",
            vec![nodes(vec![gpu_node("n1", 8)]), vm_asking(1, same)],
            Wait(ClassMissing, "GPUClass h200 does not exist"),
        ),
        row(
            "G5 SplitNodes",
            vec![
                h200_nodes(&[("n1", 8), ("n2", 8)]),
                claim("t", "a").bound("n1").with_allocation(H200),
                claim("t", "b").bound("n2").with_allocation(H200),
                vm_naming("a,b"),
            ],
            Wait(SplitNodes, "on 2 nodes"),
        ),
        row(
            "E1 held on n1, the pod pinned to n2: the claim moves to n2",
            vec![
                h200_nodes(&[("n1", 8), ("n2", 8)]),
                claim("t", "a").bound("n1").with_allocation(H200),
                vm_naming_with("a", |p| p.pinned("n2")),
            ],
            Place("n2"),
        ),
        row(
            "E1 the held node has a taint the pod does not tolerate: the claim moves",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("n1", 8).taint("maintenance", "", "NoSchedule"),
                    gpu_node("n2", 8),
                ]),
                claim("t", "a").bound("n1").with_allocation(H200),
                vm_naming("a"),
            ],
            Place("n2"),
        ),
        row(
            "E1 the held node has a taint the pod does not tolerate, and no other node",
            vec![
                h200(),
                nodes(vec![gpu_node("n1", 8).taint(
                    "maintenance",
                    "",
                    "NoSchedule",
                )]),
                claim("t", "a").bound("n1").with_allocation(H200),
                vm_naming("a"),
            ],
            Wait(
                NoCapacity,
                "node with a taint not tolerated; no other node can take it",
            ),
        ),
        row(
            "G3 the held node is used when it passes",
            vec![
                h200_nodes(&[("n1", 8), ("n2", 1)]),
                claim("t", "a").bound("n1").with_allocation(H200),
                vm_naming("a"),
            ],
            Place("n1"),
        ),
        row(
            "G5 OverBudget: more than the budget itself can never be placed, and says so",
            vec![
                vec![class("h200", H200).budget(2).obj()],
                nodes(vec![gpu_node("n1", 8)]),
                vm_asking(3, same),
            ],
            Wait(
                OverBudget,
                "the set asks for 3 GPUs of class h200, more than its budget of 2: it can never be placed",
            ),
        ),
        row(
            "G5 OverBudget: within the budget but not now, while others hold it",
            vec![
                vec![class("h200", H200).budget(3).obj()],
                nodes(vec![gpu_node("n1", 8)]),
                claim("t", "b").count(2).bound("n1").with_allocation(H200),
                vm_asking(2, same),
            ],
            Wait(OverBudget, "no room in its budget of 3 GPUs for 2 more"),
        ),
        row(
            "G5 NoCapacity: a node with none of the set's GPU is said apart from one without room",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 8).cordoned(),
                    node("b").gpus(L40S, 4),
                    node("c").gpus(L40S, 4),
                ]),
                vm_asking(2, same),
            ],
            Wait(
                NoCapacity,
                "no node fits the set: 2 nodes with no nvidia.com/GH100_H200, 1 node cordoned",
            ),
        ),
        row(
            "G5 NoCapacity: a set larger than any node can never be placed, and says so with the largest",
            vec![h200_nodes(&[("n1", 2), ("n2", 1)]), vm_asking(4, same)],
            Wait(
                NoCapacity,
                "no node can ever hold the set as the nodes are: it needs 4 nvidia.com/GH100_H200 on one node, and the largest node has 2",
            ),
        ),
        row(
            "G5 NoCapacity: no nodes at all",
            vec![h200(), vm_asking(1, same)],
            Wait(NoCapacity, "there are no nodes"),
        ),
        row(
            "filter Ready: a NotReady node is skipped",
            vec![
                h200(),
                nodes(vec![gpu_node("a", 8).ready(false), gpu_node("b", 8)]),
                vm_asking(1, same),
            ],
            Place("b"),
        ),
        row(
            "filter NodeUnschedulable: a cordoned node is skipped",
            vec![
                h200(),
                nodes(vec![gpu_node("a", 1).cordoned(), gpu_node("b", 8)]),
                vm_asking(1, same),
            ],
            Place("b"),
        ),
        row(
            "filter NodeUnschedulable: a pod that tolerates the cordon may go there",
            vec![
                h200(),
                nodes(vec![gpu_node("a", 1).cordoned(), gpu_node("b", 8)]),
                vm_asking(1, |p| {
                    p.tolerates(
                        "node.kubernetes.io/unschedulable",
                        "Exists",
                        "",
                        "NoSchedule",
                    )
                }),
            ],
            Place("a"),
        ),
        row(
            "filter TaintToleration: a NoSchedule taint the pod does not tolerate",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 1).taint("gpu", "h200", "NoSchedule"),
                    gpu_node("b", 8),
                ]),
                vm_asking(1, same),
            ],
            Place("b"),
        ),
        row(
            "filter TaintToleration: a NoExecute taint too",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 1).taint("gpu", "", "NoExecute"),
                    gpu_node("b", 8),
                ]),
                vm_asking(1, same),
            ],
            Place("b"),
        ),
        row(
            "filter TaintToleration: a tolerated taint (GPU nodes, tolerated by VM pods)",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 1).taint("nvidia.com/gpu", "", "NoSchedule"),
                    gpu_node("b", 8),
                ]),
                vm_asking(1, |p| {
                    p.tolerates("nvidia.com/gpu", "Exists", "", "NoSchedule")
                }),
            ],
            Place("a"),
        ),
        row(
            "filter TaintToleration: PreferNoSchedule only scores",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 1).taint("gpu", "", "PreferNoSchedule"),
                    gpu_node("b", 8),
                ]),
                vm_asking(1, same),
            ],
            Place("a"),
        ),
        row(
            "filter NodeAffinity: the pod's nodeSelector",
            vec![
                h200(),
                nodes(vec![gpu_node("a", 1), gpu_node("b", 8).label("zone", "z1")]),
                vm_asking(1, |p| p.node_selector("zone", "z1")),
            ],
            Place("b"),
        ),
        row(
            "filter NodeAffinity: required affinity, terms ORed",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 1).label("zone", "z3"),
                    gpu_node("b", 8).label("zone", "z2"),
                ]),
                vm_asking(1, |p| {
                    p.required_affinity(vec![
                        vec![req("zone", "In", &["z1"])],
                        vec![req("zone", "In", &["z2"])],
                    ])
                }),
            ],
            Place("b"),
        ),
        row(
            "filter NodeAffinity: a pod pinned to a node is placed there when it fits",
            vec![
                h200_nodes(&[("a", 1), ("b", 8)]),
                vm_asking(1, |p| p.pinned("b")),
            ],
            Place("b"),
        ),
        row(
            "filter NodeAffinity: a pod pinned to a node without room waits, saying so",
            vec![
                h200_nodes(&[("a", 8), ("b", 1)]),
                vm_asking(2, |p| p.pinned("b")),
            ],
            Wait(
                NoCapacity,
                "1 node not matching the pods' node selector or affinity, 1 node without room",
            ),
        ),
        row(
            "G3 candidates: required affinity on the hostname, of a node named otherwise, is judged there alone",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 8),
                    gpu_node("b", 8).label("kubernetes.io/hostname", "host-b"),
                    gpu_node("c", 2),
                ]),
                vm_asking(1, |p| {
                    p.required_affinity(vec![vec![req(
                        "kubernetes.io/hostname",
                        "In",
                        &["host-b", "no-such-host"],
                    )]])
                }),
            ],
            Place("b"),
        ),
        row(
            "G3 candidates: a set pinned to a host no node has counts every node as not matching",
            vec![
                h200_nodes(&[("a", 8), ("b", 8)]),
                vm_asking(1, |p| p.pinned("gone")),
            ],
            Wait(
                NoCapacity,
                "no node fits the set: 2 nodes not matching the pods' node selector or affinity",
            ),
        ),
        row(
            "G3 candidates: a pinned host's node fails its other filters as a pass would say",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 8),
                    gpu_node("b", 8).cordoned(),
                    gpu_node("c", 8),
                ]),
                vm_asking(1, |p| p.pinned("b")),
            ],
            Wait(
                NoCapacity,
                "no node fits the set: 2 nodes not matching the pods' node selector or affinity, 1 node cordoned",
            ),
        ),
        row(
            "filter: the class's nodeSelector",
            vec![
                vec![class("h200", H200).selector("pool", "gpu").obj()],
                nodes(vec![
                    gpu_node("a", 1),
                    gpu_node("b", 8).label("pool", "gpu"),
                ]),
                vm_asking(1, same),
            ],
            Place("b"),
        ),
        row(
            "G3 devices lost: a node whose devices-lost taint covers the resource is never chosen",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 1)
                        .lost_taint(H200)
                        .taint("tolerated", "", "NoSchedule"),
                    gpu_node("b", 8),
                ]),
                vm_asking(1, |p| p.tolerates("", "Exists", "", "")),
            ],
            Place("b"),
        ),
        row(
            "G3 devices lost: not even for the Lost claim whose allocation is there (the tightest fit)",
            vec![
                h200(),
                nodes(vec![gpu_node("a", 8).lost_taint(H200), gpu_node("b", 8)]),
                claim("t", "a").lost("a").with_allocation(H200),
                vm_naming_with("a", |p| p.tolerates("", "Exists", "", "")),
            ],
            Place("b"),
        ),
        row(
            "G3 a migration pair must both fit: one pod's selector excludes a",
            vec![
                h200(),
                nodes(vec![gpu_node("a", 1), gpu_node("b", 8).label("zone", "z1")]),
                vm_asking(1, same),
                vec![
                    launcher("t", "virt-launcher-vm-target", "vm", "u1")
                        .gated()
                        .node_selector("zone", "z1")
                        .obj(),
                ],
            ],
            Place("b"),
        ),
        row(
            "G5 NoCapacity says which filter removed how many nodes",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 8).cordoned(),
                    gpu_node("b", 8).cordoned(),
                    gpu_node("c", 8).taint("x", "", "NoSchedule"),
                    gpu_node("d", 1),
                    gpu_node("e", 8).lost_taint(""),
                ]),
                vm_asking(2, same),
            ],
            Wait(
                NoCapacity,
                "no node fits the set: 2 nodes cordoned, 2 nodes with a taint not tolerated, 1 node without room",
            ),
        ),
    ];
    check_rows(rows);
}

/// Runs each row's decision and compares it with what the row wants.
pub fn check_rows(rows: Vec<Row>) {
    use Want::*;
    let written = WrittenAllocations::default();
    for r in rows {
        let w = world_of(r.objs);
        let v = w.vmi("t/vm").expect("the row's VMI");
        match (decide_gate(&v, &w, &written), &r.want) {
            (GateStep::Place(plan), Place(node)) => assert_eq!(plan.node, *node, "{}", r.case),
            (
                GateStep::Wait {
                    reason, message, ..
                },
                Wait(want, text),
            ) => {
                assert_eq!(reason, *want, "{}: {message}", r.case);
                assert!(
                    message.contains(text),
                    "{}: {message:?} lacks {text:?}",
                    r.case
                );
            }
            (got, want) => panic!("{}: got {got:?}, want {want:?}", r.case),
        }
    }
}

/// L2 at the gate: the earlier VMI's claim is not marked Waiting either;
/// it is L3's to delete.
#[test]
fn l2_an_earlier_vmis_claim_is_not_marked_waiting() {
    let w = world_of([h200_nodes(&[("n1", 8)]), vm_after_an_earlier_one()].concat());
    let v = w.vmi("t/vm").unwrap();
    match decide_gate(&v, &w, &WrittenAllocations::default()) {
        GateStep::Wait { claims, .. } => assert!(claims.is_empty(), "{claims:?}"),
        other => panic!("{other:?}"),
    }
}

/// G5: how a VMI is told of each wait. A Warning Event for what someone
/// must act on, a Normal one for a turn to come, none for what the
/// cluster makes in a moment; each says what would help.
#[test]
fn g5_a_vmi_is_told_a_warning_to_act_on_a_normal_turn_or_nothing_for_a_moments_wait() {
    use WaitReason::*;
    for (reason, told) in [
        (ClassMissing, Some(true)),
        (OverBudget, Some(true)),
        (OverQuota, Some(true)),
        (NoCapacity, Some(true)),
        (Queued, Some(false)),
        (PinnedElsewhere, Some(false)),
        (DeviceClaimPending, None),
        (EarlierVmisClaim, None),
    ] {
        assert_eq!(reason.told_on_the_vmi(), told, "{reason:?}");
        assert!(!reason.what_helps().is_empty(), "{reason:?}");
    }
    // Its condition keeps the reason tenants already read.
    assert_eq!(EarlierVmisClaim.as_str(), "ClaimMissing");
    assert_eq!(RequestMismatch.event_reason(), "GPURequestMismatch");
}
