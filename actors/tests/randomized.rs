//! Many VMIs start and stop at once on a few nodes while the controller is
//! killed at random points between writes: no GPU is booked twice, no
//! record leaks or goes missing (I1-I5 after every step), no set waits
//! that a fresh controller would place (I6, whenever the controller has
//! settled), and the cluster converges (a restart then writes nothing).
//! Nodes are cordoned and tainted and pods tolerate and select them, as in
//! a real cluster; in half the seeds the allocations watch trails the
//! others, so an allocation can be created and deleted between two looks.
//! As the node really is: nodes have cpu, memory and a pod limit, launcher
//! pods request them and their GPUs (some VMs ask only in their spec),
//! pods outside gpu-claims come and go on the nodes with GPUs and memory,
//! and the scheduler binds a pinned pod only where it fits, else marks it
//! Unschedulable (G7 then recovers its VM). In two seeds of three the
//! tenant has GPUQuotas, which the platform raises, lowers, deletes and
//! makes again as VMs come and go (Q1, Q2). Hostile tenants bind pods
//! asking for the largest amounts Kubernetes stores, and a node now and
//! then advertises the most cpu it can (issue 33). Nodes are tainted for
//! evacuation and untainted: two VMs in three are owned by a
//! VirtualMachine, which (as KubeVirt's VM controller) starts a new VMI
//! when E2 deletes one, and the garbage collector takes the deleted VMI's
//! pods; the others E2 keeps and names. VMs run at three priorities
//! (two PriorityClasses and none), one in three asks for a whole node,
//! and each seed has its own `queueing.headOfLineAfter` (0s, 30s, the 5m
//! default, off): GPUs that free go to the head of the class first (O1,
//! O2). I1-I8, I10 and I11 hold throughout. 1000 seeds.
mod common;
use common::*;
use gpu_claims_actors::api::resources::pod_requests;
use gpu_claims_actors::api::{
    CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION, EVACUATE_TAINT, LauncherPod, NodeFacts,
    PodUse, RESTART_MARK_PREFIX,
};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::Kind;
use gpu_claims_actors::ports::Obj;
use gpu_claims_actors::rules::scheduling::fit::{NodeRoom, fits_request};
use gpu_claims_testbed::memory::Lag;
use gpu_claims_testbed::memory::invariants::{Checker, progress};
use gpu_claims_testbed::memory::sim::{Sim, run_sim};
use gpu_claims_testbed::memory::store::Subresource;
use k8s_openapi::api::core::v1::Pod;

const VMS: u64 = 6;

/// The largest quantity Kubernetes stores for a count (an int64).
const HUGE: &str = "9223372036854775807";

/// GPUs of claim `c{i}` (the odd VMs name it).
fn claim_count(i: u64) -> u64 {
    1 + (i % 3)
}

/// Whether VM `i`'s VMI is owned by a VirtualMachine (two in three): E2
/// restarts those elsewhere, and keeps the others.
fn has_vm(i: u64) -> bool {
    !i.is_multiple_of(3)
}

fn start_vm(sim: &Sim, rng: &mut Rng, i: u64, generation: u64) {
    let name = format!("vm{i}");
    let uid = format!("u{i}-{generation}");
    let mut v = vmi("t", &name).uid(&uid).phase("Scheduling");
    if has_vm(i) {
        v = v.of_vm(&name);
    }
    // Three priorities (O1): none (0), low and high.
    match rng.below(3) {
        0 => {}
        1 => v = v.priority("low"),
        _ => v = v.priority("high"),
    }
    let gpus = if i.is_multiple_of(2) {
        // One in three asks for a whole node (O2: a big set among small ones).
        let n = if rng.below(3) == 0 {
            4
        } else {
            1 + rng.below(2)
        };
        // Half of them ask in their spec alone, as vm-instance writes it.
        if rng.below(2) == 0 {
            v = v
                .annotate(CLASS_ANNOTATION, "h200")
                .annotate(COUNT_ANNOTATION, &n.to_string());
        }
        n
    } else {
        v = v.annotate(CLAIMS_ANNOTATION, &format!("c{i}"));
        claim_count(i)
    };
    v = v.gpus(H200, gpus as u32);
    let memory = ["8Gi", "48Gi", "96Gi"][rng.below(3) as usize];
    sim.store.seed(
        "VirtualMachineInstance",
        gpu_claims_actors::api::to_json(&v.obj()),
    );
    let mut pod = launcher(
        "t",
        &format!("virt-launcher-{name}-{generation}"),
        &name,
        &uid,
    )
    .gated()
    .requests(&[(H200, &gpus.to_string()), ("cpu", "2"), ("memory", memory)]);
    // GPU VM pods commonly tolerate the GPU nodes' taint; some are kept to a zone.
    if rng.below(2) == 0 {
        pod = pod.tolerates("gpu", "Exists", "", "NoSchedule");
    }
    if rng.below(3) == 0 {
        pod = pod.node_selector("zone", ["a", "b"][rng.below(2) as usize]);
    }
    let pod = pod.obj();
    sim.store.seed("Pod", gpu_claims_actors::api::to_json(&pod));
}

fn stop_vm(sim: &Sim, i: u64) {
    random::vmi_ends(sim, &format!("vm{i}"));
}

fn remove_vm(sim: &Sim, i: u64) {
    let name = format!("vm{i}");
    let _ = sim.store.delete("VirtualMachineInstance", "t", &name);
    // The garbage collector: the VMI's pods go with it, before the
    // controller looks (the checker judges I1 and I7 at the end of a step,
    // so an orphaned pod whose claim a later write releases would be
    // counted against a placement made before).
    random::delete_pods_of(sim, &name);
}

/// KubeVirt and the garbage collector, after the controller's writes: the
/// pods of a VMI that is gone go with it, and a VM that runs (started by
/// the test, not stopped) whose VMI is gone starts a new one, with a new
/// uid, its launcher pod at the gate (runStrategy Always). Whether
/// anything changed.
fn kubevirt(sim: &Sim, rng: &mut Rng, running: &[bool], generation: &mut u64) -> bool {
    let changed = random::orphan_pods_go(sim);
    let vms: Vec<bool> = (0..VMS).map(|i| has_vm(i) && running[i as usize]).collect();
    changed | random::vms_start_again(sim, &vms, generation, |i, g| start_vm(sim, rng, i, g))
}

/// The controller settles, and KubeVirt answers its writes (a few rounds).
async fn settle(sim: &Sim, rng: &mut Rng, running: &[bool], generation: &mut u64) {
    for _ in 0..3 {
        sim.settle().await;
        if !kubevirt(sim, rng, running, generation) {
            return;
        }
    }
    sim.settle().await;
}

/// A pod as the store has it, typed.
fn typed(p: &serde_json::Value) -> Pod {
    serde_json::from_value(p.clone()).unwrap()
}

/// NodeResourcesFit for `pod` on `node` next to the pods bound there (the
/// scheduler counts every resource, GPUs too).
fn fits(sim: &Sim, pod: &Pod, node: &str) -> Option<String> {
    let mut requested = std::collections::BTreeMap::<String, u64>::new();
    let mut pods = 0;
    for p in sim.store.list("Pod").0 {
        let p = typed(&p);
        if p.metadata.uid == pod.metadata.uid {
            continue;
        }
        if let Some(u) = PodUse::from_pod(&p).filter(|u| &*u.node == node) {
            pods += 1;
            for (r, a) in u.requests.iter() {
                let sum = requested.entry(r.to_string()).or_default();
                *sum = sum.saturating_add(a);
            }
        }
    }
    // kube-scheduler binds to no node that is gone or being deleted.
    let Some(n) = sim
        .store
        .get("Node", "", node)
        .and_then(|n| serde_json::from_value::<k8s_openapi::api::core::v1::Node>(n).ok())
        .and_then(|n| NodeFacts::from_node(&n))
        .filter(|n| !n.deleting)
    else {
        return Some(format!("0/3 nodes are available: node {node} not found"));
    };
    let facts = n;
    let used = |r: &str| requested.get(r).copied().unwrap_or(0);
    let room = NodeRoom {
        allocatable: &facts.allocatable,
        requested: &used,
        pods,
    };
    let short = fits_request(&pod_requests(pod.spec.as_ref()?), room, &|_| false);
    short.first().map(|i| {
        format!(
            "0/3 nodes are available: 1 {}, 2 node(s) didn't match Pod's node affinity/selector.",
            i.reason()
        )
    })
}

/// The scheduler, the kubelet and KubeVirt: a pod that left the gate is
/// bound where it is pinned when it fits there, else marked Unschedulable.
fn schedule(sim: &Sim) {
    for p in sim.store.list("Pod").0 {
        let pod = typed(&p);
        let Some(lp) = LauncherPod::from_pod(&pod) else {
            continue;
        };
        if lp.gated || lp.node_name.is_some() || lp.terminal {
            continue;
        }
        let Some(node) = lp.pinned else { continue };
        if let Some(why) = fits(sim, &pod, &node) {
            let mut p = p;
            p["status"] = serde_json::json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable", "message": why}]});
            let _ = sim.store.update("Pod", p, Subresource::Status);
            continue;
        }
        let mut p = p;
        p["spec"]["nodeName"] = node.into();
        let _ = sim.store.update("Pod", p, Subresource::Main);
        if let Some(mut v) = sim.store.get("VirtualMachineInstance", "t", &lp.vmi)
            && v["status"]["phase"] == "Scheduling"
        {
            v["status"]["phase"] = "Running".into();
            let _ = sim
                .store
                .update("VirtualMachineInstance", v, Subresource::Status);
        }
    }
}

/// A pod outside gpu-claims starts on a node (where the scheduler would
/// bind it), or one finishes or goes.
fn foreign_pod(sim: &Sim, rng: &mut Rng) {
    let name = format!("job{}", rng.below(4));
    match rng.below(3) {
        0 | 1 if sim.store.get("Pod", "ml", &name).is_none() => {
            let node = ["n1", "n2", "n3"][rng.below(3) as usize];
            let gpus = rng.below(3).to_string();
            let p = pod("ml", &name)
                .requests(&[(H200, &gpus), ("cpu", "1"), ("memory", "32Gi")])
                .scheduled(node)
                .phase("Running");
            // One in four is a hostile tenant's, bound by `nodeName` past
            // the scheduler, asking for the largest amounts Kubernetes
            // stores (issue 33): it must count as more than the node has.
            let (p, hostile) = match rng.below(8) {
                0 => (
                    p.container("second", &[(H200, HUGE)])
                        .requests(&[(H200, HUGE)]),
                    true,
                ),
                1 => (p.sidecar("side", &[(H200, HUGE), ("memory", HUGE)]), true),
                _ => (p, false),
            };
            let p = p.build();
            if hostile || fits(sim, &p, node).is_none() {
                sim.store
                    .seed("Pod", gpu_claims_actors::api::to_json(&Obj::Pod(p)));
            }
        }
        0 => {
            if let Some(mut p) = sim.store.get("Pod", "ml", &name) {
                p["status"]["phase"] = "Succeeded".into();
                let _ = sim.store.update("Pod", p, Subresource::Status);
            }
        }
        _ => {
            let _ = sim.store.delete("Pod", "ml", &name);
        }
    }
}

/// A node's state: Ready or not, cordoned or not, tainted for GPU pods or not.
#[derive(Clone, Copy)]
struct NodeState {
    ready: bool,
    cordoned: bool,
    tainted: bool,
    /// Advertises the largest cpu and memory Kubernetes stores.
    huge: bool,
    /// Tainted `gpu.cozystack.io/evacuate` (E2).
    evacuating: bool,
    /// Deleted (issue 61, item 6): E2's finalizer may hold it while its
    /// restarts are under way; a later state makes it again.
    deleted: bool,
}

const UP: NodeState = NodeState {
    ready: true,
    cordoned: false,
    tainted: false,
    huge: false,
    evacuating: false,
    deleted: false,
};

fn set_node(sim: &Sim, name: &str, s: NodeState) {
    if s.deleted {
        let _ = sim.store.delete("Node", "", name);
        return;
    }
    let zone = if name == "n1" { "a" } else { "b" };
    let memory = if name == "n1" { "64Gi" } else { "128Gi" };
    let mut n = node(name)
        .gpus(H200, 4)
        .sized("16", memory, 110)
        .ready(s.ready)
        .label("zone", zone);
    if s.cordoned {
        n = n.cordoned();
    }
    if s.tainted {
        n = n.taint("gpu", "", "NoSchedule");
    }
    if s.huge {
        n = n.allocatable("cpu", HUGE).allocatable("memory", HUGE);
    }
    if s.evacuating {
        n = n.taint(EVACUATE_TAINT, "", "NoSchedule");
    }
    let n = n.obj();
    let mut v = gpu_claims_actors::api::to_json(&n);
    // What the controller keeps on the node (E2's restart marks and
    // finalizer) stays.
    let Some(old) = sim.store.get("Node", "", name) else {
        // Deleted before: the kubelet registers it again.
        let _ = sim.store.create("Node", v);
        return;
    };
    v["metadata"]["annotations"] = old["metadata"]["annotations"].clone();
    v["metadata"]["finalizers"] = old["metadata"]["finalizers"].clone();
    v["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let _ = sim.store.update("Node", v.clone(), Subresource::Main);
    let _ = sim.store.update("Node", v, Subresource::Status);
}

/// A node that keeps an E2 restart mark, if any.
fn marked_node(sim: &Sim) -> Option<String> {
    sim.store.list("Node").0.iter().find_map(|n| {
        let marked = n["metadata"]["annotations"]
            .as_object()
            .is_some_and(|a| a.keys().any(|k| k.starts_with(RESTART_MARK_PREFIX)));
        marked.then(|| {
            n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    })
}

/// With GPU_CLAIMS_DEBUG set, a failing seed prints its writes and objects.
fn dump(sim: &Sim) {
    for e in &sim.cluster.journal().entries {
        eprintln!(
            "{} {} {} {}/{} {} {:?} {:?}",
            e.at,
            e.op,
            e.kind,
            e.namespace.as_deref().unwrap_or_default(),
            e.name,
            e.rule,
            e.status,
            e.error
        );
    }
    for kind in ["GPUAllocation", "GPUClaim", "Pod", "Node"] {
        for o in sim.store.list(kind).0 {
            eprintln!("{kind} {o}");
        }
    }
}

/// What the seeds exercised, so the test cannot pass by doing nothing.
#[derive(Default, Debug)]
struct Seen {
    placed: usize,
    waited: usize,
    lost: usize,
    released: usize,
    recovered: usize,
    progress_checks: usize,
    /// Steps that ended with a set waiting OverQuota.
    over_quota: usize,
    /// Steps that ended with a set waiting on a quota it cannot read.
    quota_unreadable: usize,
    /// Steps that ended with a hostile pod bound to a node.
    hostile_pods: usize,
    /// Claims moved off a held node that could not take their VM (E1).
    moved: usize,
    /// VMs restarted off an evacuating node (E2).
    evacuated: usize,
    /// Steps that ended with a VMI without a VM kept on an evacuating node.
    kept_bare: usize,
    /// Steps that ended with a set held back for its class's head (O2).
    queued: usize,
    /// Nodes deleted that E2's finalizer held, a restart under way off
    /// them (issue 61, item 6).
    deleted_restarting: usize,
}

/// The platform sets the tenant's quota (per class, sometimes a total
/// too), or deletes it.
fn set_quota(sim: &Sim, rng: &mut Rng) {
    if rng.below(4) == 0 {
        let _ = sim.store.delete("GPUQuota", "t", "q");
        return;
    }
    let mut q = quota("t", "q").hard("h200", 2 + rng.below(6) as u32);
    if rng.below(2) == 0 {
        q = q.total(3 + rng.below(6) as u32);
    }
    let mut v = gpu_claims_actors::api::to_json(&q.obj());
    // Now and then one stored under an older CRD with no maximum, which
    // the controller cannot read: placement in `t` stops until it is fixed.
    if rng.below(6) == 0 {
        v["spec"]["hard"]["h200"] = 4_294_967_296u64.into();
    }
    if sim.store.get("GPUQuota", "t", "q").is_some() {
        let mut v = v;
        v["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        let _ = sim.store.update("GPUQuota", v, Subresource::Main);
    } else {
        sim.store.seed("GPUQuota", v);
    }
}

/// The seed's `queueing.headOfLineAfter`: 0s, 30s, the default, or off.
fn queueing(seed: u64) -> Config {
    let mut c = Config::default();
    c.queueing.head_of_line_after = match (seed / 2) % 4 {
        0 => Some(std::time::Duration::ZERO),
        1 => Some(secs(30)),
        2 => c.queueing.head_of_line_after,
        _ => None,
    };
    c
}

fn run_seed(seed: u64, seen: &mut Seen) -> Vec<String> {
    let mut objs = vec![
        class("h200", H200).budget(10).obj(),
        priority_class("low", 10, false),
        priority_class("high", 1000, false),
    ];
    objs.extend(["n1", "n2", "n3"].iter().map(|n| {
        let zone = if *n == "n1" { "a" } else { "b" };
        let memory = if *n == "n1" { "64Gi" } else { "128Gi" };
        node(n)
            .gpus(H200, 4)
            .sized("16", memory, 110)
            .label("zone", zone)
            .obj()
    }));
    // The VMs of VM-owned VMIs; one of them Manual, which E2 keeps (a
    // deleted VMI of it would not come back).
    objs.extend((0..VMS).filter(|&i| has_vm(i)).map(|i| {
        let strategy = if i == 5 { "Manual" } else { "Always" };
        virtual_machine("t", &format!("vm{i}"), strategy)
    }));
    objs.extend((0..VMS).filter(|i| i % 2 == 1).map(|i| {
        claim("t", &format!("c{i}"))
            .count(claim_count(i) as u32)
            .obj()
    }));
    // Two seeds of three start with a quota for the tenant.
    if !seed.is_multiple_of(3) {
        objs.push(quota("t", "q").hard("h200", 4).total(6).obj());
    }
    let quotas = !seed.is_multiple_of(3);
    run_sim(|| async move {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        // The allocations watch trails by 300ms in half the seeds.
        let lag = if seed.is_multiple_of(2) {
            Lag::of(Kind::Allocation, std::time::Duration::from_millis(300))
        } else {
            Lag::default()
        };
        let config = queueing(seed);
        let mut sim = Sim::start(config.clone(), &objs, lag);
        let mut checker = Checker::for_config(&config);
        let mut v = Vec::new();
        let mut generation = 0;
        let mut running = [false; VMS as usize];
        for _ in 0..12 {
            // Several changes land at once, before the controller settles.
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(VMS);
                match rng.below(7) {
                    0 | 1 => {
                        generation += 1;
                        if sim
                            .store
                            .get("VirtualMachineInstance", "t", &format!("vm{i}"))
                            .is_none()
                        {
                            start_vm(&sim, &mut rng, i, generation);
                            running[i as usize] = true;
                        }
                    }
                    2 => {
                        stop_vm(&sim, i);
                        running[i as usize] = false;
                    }
                    3 => {
                        remove_vm(&sim, i);
                        running[i as usize] = false;
                    }
                    // Half the time a node keeping a restart under way
                    // is deleted (issue 61, item 6).
                    4 if rng.below(2) == 0 && marked_node(&sim).is_some() => {
                        let name = marked_node(&sim).unwrap();
                        set_node(
                            &sim,
                            &name,
                            NodeState {
                                deleted: true,
                                ..UP
                            },
                        );
                        seen.deleted_restarting +=
                            usize::from(sim.store.get("Node", "", &name).is_some());
                    }
                    4 => {
                        let name = ["n1", "n2", "n3"][rng.below(3) as usize];
                        let state = NodeState {
                            ready: rng.below(3) > 0,
                            cordoned: rng.below(4) == 0,
                            tainted: rng.below(3) == 0,
                            huge: rng.below(6) == 0,
                            evacuating: rng.below(4) == 0,
                            deleted: rng.below(8) == 0,
                        };
                        set_node(&sim, name, state);
                        seen.deleted_restarting +=
                            usize::from(state.deleted && sim.store.get("Node", "", name).is_some());
                    }
                    5 if quotas && rng.below(3) == 0 => set_quota(&sim, &mut rng),
                    5 => foreign_pod(&sim, &mut rng),
                    _ => sim.die_after(rng.below(4) as i64),
                }
            }
            settle(&sim, &mut rng, &running, &mut generation).await;
            v.extend(checker.check(&sim.cluster));
            seen.kept_bare += usize::from(sim.cluster.events().iter().any(|e| {
                e.reason == "EvacuationBlocked" && e.message.contains("no VirtualMachine owner")
            }));
            seen.over_quota += usize::from(random::waits(&sim, "OverQuota"));
            seen.queued += usize::from(random::waits(&sim, "Queued"));
            seen.quota_unreadable += usize::from(random::waits(&sim, "QuotaUnreadable"));
            seen.hostile_pods += usize::from(
                sim.store
                    .list("Pod")
                    .0
                    .iter()
                    .any(|p| p.to_string().contains(HUGE)),
            );
            // Now and then the watches catch up and retries fire: the
            // controller has settled, and nothing it remembers may keep a
            // set waiting that a fresh controller would place (I6).
            // Otherwise the next changes land before the lagging watch
            // shows the last ones (churn between two looks).
            if rng.below(2) == 0 && sim.alive() {
                sim.advance(secs(2)).await;
                v.extend(checker.check(&sim.cluster));
                // A process set to die may have died on the way: it places nothing.
                let stuck = if sim.alive() {
                    progress(&sim.cluster, &config)
                } else {
                    Vec::new()
                };
                if !stuck.is_empty() && std::env::var_os("GPU_CLAIMS_DEBUG").is_some() {
                    dump(&sim);
                }
                v.extend(stuck);
                seen.progress_checks += 1;
            }
            if rng.below(3) == 0 {
                sim.restart();
                settle(&sim, &mut rng, &running, &mut generation).await;
                v.extend(checker.check(&sim.cluster));
            }
            // Now and then a pod outside gpu-claims is bound between our
            // pin and the scheduler's look, and takes the room (G7).
            if rng.below(3) == 0 {
                foreign_pod(&sim, &mut rng);
            }
            schedule(&sim);
            settle(&sim, &mut rng, &running, &mut generation).await;
            v.extend(checker.check(&sim.cluster));
        }
        // Converge: every node back, a live process, time past every grace.
        for n in ["n1", "n2", "n3"] {
            set_node(&sim, n, UP);
        }
        sim.restart();
        settle(&sim, &mut rng, &running, &mut generation).await;
        sim.advance(secs(150)).await;
        // A node E2's finalizer held while deleted is gone now that its
        // restarts are over: its kubelet registers it again.
        for n in ["n1", "n2", "n3"] {
            if sim.store.get("Node", "", n).is_none() {
                set_node(&sim, n, UP);
            }
        }
        settle(&sim, &mut rng, &running, &mut generation).await;
        kubevirt(&sim, &mut rng, &running, &mut generation);
        schedule(&sim);
        sim.advance(secs(2)).await;
        schedule(&sim);
        sim.advance(secs(2)).await;
        v.extend(checker.check(&sim.cluster));
        v.extend(progress(&sim.cluster, &config));
        let before = sim.cluster.journal().entries.len();
        let debug = std::env::var_os("GPU_CLAIMS_DEBUG").is_some();
        if debug {
            dump(&sim);
        }
        let writes = sim.writes_on_restart().await;
        if writes != 0 && debug {
            eprintln!("--- after the restart");
            dump(&sim);
        }
        v.extend(checker.check(&sim.cluster));
        if writes != 0 {
            let which: Vec<String> = sim.cluster.journal().entries[before..]
                .iter()
                .map(|e| {
                    format!(
                        "{} {} {:?}/{} ({}) {:?}",
                        e.op, e.kind, e.namespace, e.name, e.rule, e.status
                    )
                })
                .collect();
            v.push(format!(
                "not converged: {writes} writes after a restart: {which:?}"
            ));
        }
        // No double booking at the end either.
        let mut used = std::collections::HashMap::<String, u64>::new();
        for r in sim.store.list("GPUAllocation").0 {
            *used
                .entry(r["spec"]["nodeName"].as_str().unwrap().to_string())
                .or_default() += r["spec"]["count"].as_u64().unwrap();
        }
        for (n, u) in used {
            if u > 4 {
                v.push(format!("node {n} has {u} GPUs booked of 4"));
            }
        }
        for e in sim.cluster.journal().effective() {
            match (e.op, e.rule) {
                (_, "G7") => seen.recovered += 1,
                ("update_pod", _) => seen.placed += 1,
                (_, "G5") => seen.waited += 1,
                (_, "G6") => seen.lost += 1,
                ("update", "E1") => seen.moved += 1,
                ("delete", "E2") => seen.evacuated += 1,
                ("delete", "L8") => seen.released += 1,
                _ => {}
            }
        }
        v.into_iter().map(|e| format!("seed {seed}: {e}")).collect()
    })
}

#[test]
fn vms_starting_and_stopping_under_random_kills_never_double_book_and_converge() {
    let mut seen = Seen::default();
    let seeds = random::run_seeds(|seed| run_seed(seed, &mut seen));
    eprintln!("{seeds} seeds exercised {seen:?}");
    assert!(
        seen.placed > 0
            && seen.waited > 0
            && seen.lost > 0
            && seen.released > 0
            && seen.recovered > 0
            && seen.progress_checks > 0
            && seen.over_quota > 0
            && seen.quota_unreadable > 0
            && seen.hostile_pods > 0
            && seen.moved > 0
            && seen.evacuated > 0
            && seen.kept_bare > 0
            && seen.queued > 0
            && seen.deleted_restarting > 0,
        "{seen:?}"
    );
}
