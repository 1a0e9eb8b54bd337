//! G2, G3 and G5 as the node really is (issue 20): what the VMI's spec
//! requests, GPUs other pods use, and the launcher pods' own requests as
//! NodeResourcesFit counts them. One row per branch, on the pure decision.

use super::Want::*;
use super::*;
use gpu_claims_actors::rules::WaitReason::*;

const L40S: &str = "nvidia.com/AD102GL_L40S";

/// VMI `vm` (uid u1) whose spec lists `gpus` H200 and whose annotations
/// name nothing, its template claim of `count`, and its gated pod.
fn spec_vm(gpus: u32, count: u32, pod: impl Fn(PodBuilder) -> PodBuilder) -> Vec<Obj> {
    vec![
        vmi("t", "vm")
            .uid("u1")
            .phase("Scheduling")
            .gpus(H200, gpus)
            .obj(),
        claim("t", "vm-gpu")
            .count(count)
            .template_of("vm", "u1")
            .obj(),
        pod(launcher("t", "virt-launcher-vm", "vm", "u1").gated()).obj(),
    ]
}

/// A pod outside gpu-claims running on `node` with these requests.
fn foreign(name: &str, node: &str, requests: &[(&str, &str)]) -> Vec<Obj> {
    vec![foreign_pod(name, node, requests).obj()]
}

fn foreign_pod(name: &str, node: &str, requests: &[(&str, &str)]) -> PodBuilder {
    pod("other", name).scheduled(node).requests(requests)
}

/// Another VM, running on `node` with claim `c` (count `n`) placed there,
/// its launcher pod requesting `asks` of H200.
fn running_vm(node: &str, n: u32, asks: u32) -> Vec<Obj> {
    let mut v = vec![
        vmi("t", "vm2").uid("u2").phase("Running").obj(),
        launcher("t", "virt-launcher-vm2", "vm2", "u2")
            .scheduled(node)
            .pinned(node)
            .requests(&[(H200, &asks.to_string())])
            .obj(),
    ];
    v.extend(
        claim("t", "c")
            .count(n)
            .attached_phase(node)
            .attached("vm2")
            .with_allocation(H200),
    );
    v
}

fn sized(name: &str, gpus: u64, memory: &str) -> NodeBuilder {
    gpu_node(name, gpus).sized("64", memory, 110)
}

#[test]
fn g2_g3_g5_as_the_node_really_is_table() {
    let rows = vec![
        row(
            "G2/G3: a VMI that asks only in its spec is placed by its template claim",
            vec![h200_nodes(&[("a", 8), ("b", 2)]), spec_vm(2, 2, same)],
            Place("b"),
        ),
        row(
            "G3 RequestMismatch: the spec requests 4, the template claim holds 2",
            vec![
                h200_nodes(&[("a", 8)]),
                vec![
                    vmi("t", "vm")
                        .uid("u1")
                        .phase("Scheduling")
                        .annotate(gpu_claims_actors::api::CLASS_ANNOTATION, "h200")
                        .annotate(gpu_claims_actors::api::COUNT_ANNOTATION, "2")
                        .gpus(H200, 4)
                        .obj(),
                    claim("t", "vm-gpu").count(2).template_of("vm", "u1").obj(),
                    launcher("t", "p", "vm", "u1").gated().obj(),
                ],
            ],
            Wait(
                RequestMismatch,
                "its spec requests 4 nvidia.com/GH100_H200, its claims hold 2",
            ),
        ),
        row(
            "G3 RequestMismatch: claims of a class serving another resource than the spec asks for",
            vec![
                h200(),
                vec![class("l40s", L40S).obj()],
                nodes(vec![gpu_node("a", 8)]),
                vm_naming_asking("a", |v| v.gpus(H200, 1)),
                vec![claim("t", "a").class("l40s").obj()],
            ],
            Wait(
                RequestMismatch,
                "its spec requests 0 nvidia.com/AD102GL_L40S, its claims hold 1; its spec requests 1 nvidia.com/GH100_H200, its claims hold 0",
            ),
        ),
        row(
            "G3: devices no class serves (a NIC passed through) are not gpu-claims' to count",
            vec![
                h200_nodes(&[("a", 8)]),
                vm_naming_asking("a", |v| v.host_devices("mellanox.com/cx7", 2)),
                vec![claim("t", "a").count(3).obj()],
            ],
            Place("a"),
        ),
        row(
            "G5 order: ClassMissing comes before RequestMismatch",
            vec![
                nodes(vec![gpu_node("a", 8)]),
                vm_naming_asking("a", |v| v.gpus(H200, 2)),
                vec![claim("t", "a").obj()],
                vec![class("other", H200).obj()],
            ],
            Wait(ClassMissing, "GPUClass h200 does not exist"),
        ),
        row(
            "G5 order: RequestMismatch comes before ClaimInUse",
            vec![
                h200_nodes(&[("a", 8)]),
                vm_naming_asking("a", |v| v.gpus(H200, 2)),
                claim_a_of_running_vm_other("a"),
            ],
            Wait(RequestMismatch, "its spec requests 2"),
        ),
        row(
            "G3 capacity: GPUs a pod outside gpu-claims uses are not promised again",
            vec![
                h200_nodes(&[("a", 2), ("b", 8)]),
                foreign("cuda-test", "a", &[(H200, "1")]),
                vm_asking(2, same),
            ],
            Place("b"),
        ),
        row(
            "G3 capacity: a finished pod uses nothing",
            vec![
                h200_nodes(&[("a", 2), ("b", 8)]),
                vec![
                    foreign_pod("done", "a", &[(H200, "2")])
                        .phase("Succeeded")
                        .obj(),
                ],
                vm_asking(2, same),
            ],
            Place("a"),
        ),
        row(
            "G3 capacity: a running VM's launcher is covered by its allocations, not counted twice",
            vec![
                h200_nodes(&[("a", 4), ("b", 8)]),
                running_vm("a", 2, 2),
                vm_asking(2, same),
            ],
            Place("a"),
        ),
        row(
            "G3 capacity: what a launcher requests beyond its claims counts in full",
            vec![
                h200_nodes(&[("a", 4), ("b", 8)]),
                running_vm("a", 2, 4),
                vm_asking(1, same),
            ],
            Place("b"),
        ),
        row(
            "G5 NoCapacity: other pods' GPUs leave no room now, where a node could hold the set, and the message names the resource",
            vec![
                h200_nodes(&[("a", 2)]),
                foreign("cuda-test", "a", &[(H200, "2")]),
                vm_asking(1, same),
            ],
            Wait(NoCapacity, "no node has 1 nvidia.com/GH100_H200 free"),
        ),
        row(
            "G3 NodeResourcesFit: a memory-heavy VM goes where the memory is, not to the tightest GPU fit",
            vec![
                h200(),
                nodes(vec![sized("a", 2, "64Gi"), sized("b", 8, "1Ti")]),
                vm_asking(2, |p| p.requests(&[("memory", "512Gi"), ("cpu", "8")])),
            ],
            Place("b"),
        ),
        row(
            "G3 NodeResourcesFit: the pods bound to a node take its room",
            vec![
                h200(),
                nodes(vec![sized("a", 2, "64Gi"), sized("b", 8, "64Gi")]),
                foreign("db", "a", &[("memory", "60Gi")]),
                vm_asking(1, |p| p.requests(&[("memory", "8Gi")])),
            ],
            Place("b"),
        ),
        row(
            "G3 NodeResourcesFit: a node at its pod limit takes no more pods",
            vec![
                h200(),
                nodes(vec![
                    gpu_node("a", 2).sized("64", "64Gi", 1),
                    gpu_node("b", 8).sized("64", "64Gi", 110),
                ]),
                foreign("web", "a", &[("cpu", "100m")]),
                vm_asking(1, same),
            ],
            Place("b"),
        ),
        row(
            "G3 NodeResourcesFit: the set's own GPU request is counted against allocations, not twice",
            vec![
                h200(),
                nodes(vec![gpu_node("a", 2).sized("64", "64Gi", 110)]),
                vm_asking(2, |p| p.requests(&[(H200, "2"), ("memory", "1Gi")])),
            ],
            Place("a"),
        ),
        row(
            "G5 NoCapacity names the resource that left no node",
            vec![
                h200(),
                nodes(vec![sized("a", 8, "64Gi"), sized("b", 8, "32Gi")]),
                vm_asking(1, |p| p.requests(&[("memory", "128Gi")])),
            ],
            Wait(
                NoCapacity,
                "no node fits the set: 2 nodes without room for memory",
            ),
        ),
        row(
            "E1 the held node has no room left for the pod's memory: the claim moves",
            vec![
                h200(),
                nodes(vec![sized("a", 8, "64Gi"), sized("b", 8, "1Ti")]),
                claim("t", "a").bound("a").with_allocation(H200),
                foreign("db", "a", &[("memory", "60Gi")]),
                vm_naming_with("a", |p| p.requests(&[("memory", "8Gi")])),
            ],
            Place("b"),
        ),
    ];
    check_rows(rows);
}
