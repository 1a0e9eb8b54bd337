//! Many VMIs start and stop at once on a few nodes while the controller is
//! killed at random points between writes: no GPU is booked twice, no
//! record leaks or goes missing (I1-I5 after every step), no set waits
//! that a fresh controller would place (I6, whenever the controller has
//! settled), and the cluster converges (a restart then writes nothing).
//! Nodes are cordoned and tainted and pods tolerate and select them, as in
//! a real cluster; in half the seeds the allocations watch trails the
//! others, so an allocation can be created and deleted between two looks.
//! 1000 seeds.
mod common;
use common::*;
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION, LauncherPod};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::memory::Lag;
use gpu_claims_actors::memory::invariants::{Checker, progress};
use gpu_claims_actors::memory::sim::{Sim, run_sim};
use gpu_claims_actors::memory::store::Subresource;
use gpu_claims_actors::ports::Kind;

/// A small deterministic generator (xorshift): the seed is the test case.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const VMS: u64 = 6;

fn start_vm(sim: &Sim, rng: &mut Rng, i: u64, generation: u64) {
    let name = format!("vm{i}");
    let uid = format!("u{i}-{generation}");
    let mut v = vmi("t", &name).uid(&uid).phase("Scheduling");
    v = if i.is_multiple_of(2) {
        v.annotate(CLASS_ANNOTATION, "h200")
            .annotate(COUNT_ANNOTATION, &(1 + rng.below(3)).to_string())
    } else {
        v.annotate(CLAIMS_ANNOTATION, &format!("c{i}"))
    };
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
    .gated();
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
    let name = format!("vm{i}");
    let Some(mut v) = sim.store.get("VirtualMachineInstance", "t", &name) else {
        return;
    };
    v["status"]["phase"] = "Succeeded".into();
    let _ = sim
        .store
        .update("VirtualMachineInstance", v, Subresource::Status);
    for p in sim.store.list("Pod").0 {
        if p["metadata"]["ownerReferences"][0]["name"] == name.as_str() {
            let _ = sim.store.delete(
                "Pod",
                "t",
                p["metadata"]["name"].as_str().unwrap(),
                None,
                None,
            );
        }
    }
}

fn remove_vm(sim: &Sim, i: u64) {
    let _ = sim
        .store
        .delete("VirtualMachineInstance", "t", &format!("vm{i}"), None, None);
}

/// The kubelet and KubeVirt: pods that left the gate run where they are pinned.
fn schedule(sim: &Sim) {
    for p in sim.store.list("Pod").0 {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(p.clone()).unwrap();
        let Some(lp) = LauncherPod::from_pod(&pod) else {
            continue;
        };
        if lp.gated || lp.node_name.is_some() {
            continue;
        }
        let Some(node) = lp.pinned else { continue };
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

/// A node's state: Ready or not, cordoned or not, tainted for GPU pods or not.
#[derive(Clone, Copy)]
struct NodeState {
    ready: bool,
    cordoned: bool,
    tainted: bool,
}

const UP: NodeState = NodeState {
    ready: true,
    cordoned: false,
    tainted: false,
};

fn set_node(sim: &Sim, name: &str, s: NodeState) {
    let zone = if name == "n1" { "a" } else { "b" };
    let mut n = node(name).gpus(H200, 4).ready(s.ready).label("zone", zone);
    if s.cordoned {
        n = n.cordoned();
    }
    if s.tainted {
        n = n.taint("gpu", "", "NoSchedule");
    }
    let n = n.obj();
    let mut v = gpu_claims_actors::api::to_json(&n);
    v["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let _ = sim.store.update("Node", v.clone(), Subresource::Main);
    let _ = sim.store.update("Node", v, Subresource::Status);
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
    progress_checks: usize,
}

fn run_seed(seed: u64, seen: &mut Seen) -> Vec<String> {
    let mut objs = vec![class("h200", H200).budget(10).obj()];
    objs.extend(["n1", "n2", "n3"].iter().map(|n| {
        let zone = if *n == "n1" { "a" } else { "b" };
        node(n).gpus(H200, 4).label("zone", zone).obj()
    }));
    objs.extend(
        (0..VMS)
            .filter(|i| i % 2 == 1)
            .map(|i| claim("t", &format!("c{i}")).count(1 + (i % 3) as u32).obj()),
    );
    run_sim(|| async move {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        // The allocations watch trails by 300ms in half the seeds.
        let lag = if seed.is_multiple_of(2) {
            Lag::of(Kind::Allocation, std::time::Duration::from_millis(300))
        } else {
            Lag::default()
        };
        let mut sim = Sim::start(Config::default(), &objs, lag);
        let mut checker = Checker::default();
        let mut v = Vec::new();
        let mut generation = 0;
        for _ in 0..12 {
            // Several changes land at once, before the controller settles.
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(VMS);
                match rng.below(6) {
                    0 | 1 => {
                        generation += 1;
                        if sim
                            .store
                            .get("VirtualMachineInstance", "t", &format!("vm{i}"))
                            .is_none()
                        {
                            start_vm(&sim, &mut rng, i, generation);
                        }
                    }
                    2 => stop_vm(&sim, i),
                    3 => remove_vm(&sim, i),
                    4 => set_node(
                        &sim,
                        ["n1", "n2", "n3"][rng.below(3) as usize],
                        NodeState {
                            ready: rng.below(3) > 0,
                            cordoned: rng.below(4) == 0,
                            tainted: rng.below(3) == 0,
                        },
                    ),
                    _ => sim.die_after(rng.below(4) as i64),
                }
            }
            sim.settle().await;
            v.extend(checker.check(&sim.cluster));
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
                    progress(&sim.cluster)
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
                sim.settle().await;
                v.extend(checker.check(&sim.cluster));
            }
            schedule(&sim);
            sim.settle().await;
            v.extend(checker.check(&sim.cluster));
        }
        // Converge: every node back, a live process, time past every grace.
        for n in ["n1", "n2", "n3"] {
            set_node(&sim, n, UP);
        }
        sim.restart();
        sim.settle().await;
        sim.advance(secs(150)).await;
        schedule(&sim);
        sim.advance(secs(2)).await;
        v.extend(checker.check(&sim.cluster));
        v.extend(progress(&sim.cluster));
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
                ("update_pod", _) => seen.placed += 1,
                (_, "G5") => seen.waited += 1,
                (_, "G6") => seen.lost += 1,
                ("delete", "L8") => seen.released += 1,
                _ => {}
            }
        }
        v.into_iter().map(|e| format!("seed {seed}: {e}")).collect()
    })
}

#[test]
fn vms_starting_and_stopping_under_random_kills_never_double_book_and_converge() {
    let seeds: u64 = std::env::var("GPU_CLAIMS_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let mut failures = Vec::new();
    let mut seen = Seen::default();
    let first: u64 = std::env::var("GPU_CLAIMS_FIRST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        let t = std::time::Instant::now();
        failures.extend(run_seed(seed, &mut seen));
        if std::env::var_os("GPU_CLAIMS_SEED_TIMES").is_some() {
            eprintln!("seed {seed}: {:?}", t.elapsed());
        }
        if failures.len() > 20 {
            break;
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    eprintln!("{seeds} seeds exercised {seen:?}");
    assert!(
        seen.placed > 0
            && seen.waited > 0
            && seen.lost > 0
            && seen.released > 0
            && seen.progress_checks > 0,
        "{seen:?}"
    );
}
