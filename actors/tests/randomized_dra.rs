//! DRA worlds under random kills (D1-D8): VMs that ask for GPUs
//! through ResourceClaimTemplates, as KubeVirt's DRA guide writes them,
//! or name a GPUClaim of the DRA class by `resourceClaimName` (D5, whose
//! backing ResourceClaim holds its GPUs while the VM is stopped, D4),
//! start, stop and go; tenants delete named claims and make them again;
//! someone deletes a backing claim, or kube-scheduler's PostFilter
//! deallocates one no pod holds (D4 brings it back); jobs outside
//! gpu-claims ask kube-scheduler for devices of the same DeviceClass at
//! every step, while the controller is dead and while its watch trails
//! (allocated by the stand-in's scheduler, which sees ResourceClaims
//! and DeviceTaintRules, never records: D7 closes the managed pools to
//! it), one in three tolerating the managed taint (D8 gives a record's
//! device such a job took up, or says it), on two nodes whose GPUs NVIDIA's DRA driver
//! publishes (three each, fewer than the VMs ask for together); GPUs fail (the driver taints them NoExecute) and recover;
//! nodes go NotReady and come back; the controller is killed between
//! writes and restarted; in half the seeds the ResourceClaims watch trails
//! the others. The stand-ins play the rest as upstream does:
//! kube-controller-manager's resourceclaim controller makes each launcher
//! pod's ResourceClaim and deletes it with the pod, the scheduler binds a
//! pinned pod only once every claim of it is allocated and reserves them
//! for it, KubeVirt's VM controller starts a new VMI when one is deleted.
//! After every step I1-I5, I9 (no device named by two records, or by a
//! record and a ResourceClaim gpu-claims allocates other than the one
//! holding its devices) and D7 (no job that does not tolerate the managed
//! taint gets a device of a pool closed by our rule);
//! whenever the controller has settled, I6; at the end the cluster
//! converges (a restart writes nothing) and every placed claim whose pod
//! runs has that pod's ResourceClaim allocated to exactly its record's
//! devices. 1000 seeds.
mod common;
use common::*;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::Kind;
use gpu_claims_testbed::memory::Lag;
use gpu_claims_testbed::memory::invariants::{Checker, progress};
use gpu_claims_testbed::memory::sim::{Sim, run_sim};
use gpu_claims_testbed::memory::store::Subresource;
use gpu_claims_testbed::standin::{claims, nvidia};
use serde_json::{Value, json};

const VMS: u64 = 5;
const NODES: [&str; 2] = ["n1", "n2"];

/// The template VM `i` asks through: one GPU or two.
fn template_of(i: u64) -> &'static str {
    if i.is_multiple_of(2) { "two" } else { "one" }
}

/// VMs from this one on name a GPUClaim (`c<i>`) instead of a template.
const FIRST_NAMED: u64 = 3;

/// The GPUClaim VM `i` names, if it names one.
fn named_claim(i: u64) -> Option<String> {
    (i >= FIRST_NAMED).then(|| format!("c{i}"))
}

/// The tenant's claim of VM `i`, made where it is missing (not while
/// one of its name is still being deleted).
fn make_claim(sim: &Sim, i: u64) {
    let Some(name) = named_claim(i) else { return };
    if sim.store.get("GPUClaim", "t", &name).is_none() {
        let count = if i.is_multiple_of(2) { 2 } else { 1 };
        sim.store.seed(
            "GPUClaim",
            json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
                "metadata": {"name": name, "namespace": "t", "uid": format!("c{i}-{}", sim.cluster.journal().entries.len())},
                "spec": {"className": "h200", "count": count}}),
        );
    }
}

/// The record of VM `vmi`'s GPUs: its named claim's, or its template
/// claim's.
fn record_name(vmi: &str) -> String {
    let i: u64 = vmi.trim_start_matches("vm").parse().unwrap_or(0);
    named_claim(i).unwrap_or_else(|| format!("{vmi}-gpu"))
}

fn template(name: &str, count: u64) -> Value {
    template_in("t", name, count)
}

fn template_in(ns: &str, name: &str, count: u64) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": VFIO, "count": count}}]}}}})
}

/// VM `i`'s VMI and its launcher pod at the gate, as virt-controller
/// renders a VMI with `spec.resourceClaims`.
fn start_vm(sim: &Sim, i: u64, generation: u64) {
    let name = format!("vm{i}");
    let uid = format!("u{i}-{generation}");
    let entry = match named_claim(i) {
        Some(c) => {
            make_claim(sim, i);
            json!({"name": "gpu", "resourceClaimName": c})
        }
        None => json!({"name": "gpu", "resourceClaimTemplateName": template_of(i)}),
    };
    sim.store.seed(
        "VirtualMachineInstance",
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": "t", "uid": uid,
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                    "name": name, "uid": format!("vm-uid-{name}"), "controller": true}]},
            "spec": {"domain": {"devices": {"gpus": [{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}]}},
                "resourceClaims": [entry.clone()]},
            "status": {"phase": "Scheduling"}}),
    );
    sim.store.seed(
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("virt-launcher-{name}-{generation}"), "namespace": "t",
                "uid": format!("p{i}-{generation}"),
                "labels": {"kubevirt.io": "virt-launcher"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "name": name, "uid": uid, "controller": true}]},
            "spec": {"containers": [{"name": "compute", "resources": {"claims": [{"name": "gpu"}],
                    "requests": {"cpu": "2", "memory": "8Gi"}}}],
                "resourceClaims": [entry],
                "schedulingGates": [{"name": "gpu.cozystack.io/claims"}]}}),
    );
}

/// The VM stops: its VMI Succeeded, its pods gone (with their claims,
/// once the resourceclaim controller sees them go).
fn stop_vm(sim: &Sim, i: u64) {
    random::vmi_ends(sim, &format!("vm{i}"));
}

/// NVIDIA's driver finds these GPUs of `node` failed (or, empty, none).
fn set_failed(sim: &Sim, node: &str, failed: &str) {
    let Some(mut n) = sim.store.get("Node", "", node) else {
        return;
    };
    n["metadata"]["annotations"][nvidia::FAILED_GPUS] = failed.into();
    let _ = sim.store.update("Node", n, Subresource::Main);
}

fn set_ready(sim: &Sim, node: &str, ready: bool) {
    let Some(mut n) = sim.store.get("Node", "", node) else {
        return;
    };
    let status = if ready { "True" } else { "False" };
    n["status"]["conditions"] = json!([{"type": "Ready", "status": status}]);
    let _ = sim.store.update("Node", n, Subresource::Status);
}

/// The world around the controller, after its writes: the driver
/// publishes, the resourceclaim controller makes and deletes claims, the
/// garbage collector takes the pods of VMIs that are gone, and a running
/// VM whose VMI is gone starts a new one. Whether anything changed.
fn around(sim: &Sim, running: &[bool], generation: &mut u64) -> bool {
    let mut changed = nvidia::publish(&sim.store);
    changed |= random::orphan_pods_go(sim);
    changed |= claims::reconcile(&sim.store);
    changed | random::vms_start_again(sim, running, generation, |i, g| start_vm(sim, i, g))
}

async fn settle(sim: &Sim, running: &[bool], generation: &mut u64) {
    for _ in 0..4 {
        sim.settle().await;
        if !around(sim, running, generation) {
            return;
        }
    }
    sim.settle().await;
}

/// The scheduler and the kubelet: a pinned pod out of the gate is bound
/// where it is pinned once every claim of it is allocated there; its
/// claims are reserved for it first (PreBind), and its VMI runs.
fn schedule(sim: &Sim) {
    for p in sim.store.list("Pod").0 {
        let gated = p["spec"]["schedulingGates"].is_array();
        let pinned = p["spec"]["nodeSelector"]["kubernetes.io/hostname"]
            .as_str()
            .map(str::to_string);
        let (Some(node), false, true) = (pinned, gated, p["spec"]["nodeName"].is_null()) else {
            continue;
        };
        let Ok(cs) = claims::of_pod(&sim.store, &p) else {
            continue;
        };
        let on_node = |c: &Value| {
            c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"]
                [0]
                == node.as_str()
        };
        if !cs
            .iter()
            .all(|c| c["status"]["allocation"].is_object() && on_node(c))
        {
            continue;
        }
        if !cs.iter().all(|c| claims::reserve(&sim.store, c, &p)) {
            continue;
        }
        let mut bound = p.clone();
        bound["spec"]["nodeName"] = node.into();
        let _ = sim.store.update("Pod", bound, Subresource::Main);
        let vmi = p["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some(mut v) = sim.store.get("VirtualMachineInstance", "t", &vmi)
            && v["status"]["phase"] == "Scheduling"
        {
            v["status"]["phase"] = "Running".into();
            let _ = sim
                .store
                .update("VirtualMachineInstance", v, Subresource::Status);
        }
    }
}

/// A job outside gpu-claims: a pod of namespace `ops` asking one device
/// of the DeviceClass through a template of its own, which kube-scheduler
/// places (and allocates) as it would any pod. One in three tolerates D7's
/// taint (an administrator's job let into the managed pools): D8's case.
fn start_job(sim: &Sim, n: usize, tolerating: bool) {
    let template = if tolerating { "job-tolerating" } else { "job" };
    let _ = sim.store.create(
        "Pod",
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("job{n}"), "namespace": "ops", "uid": format!("job{n}")},
            "spec": {"containers": [{"name": "main", "image": "cuda",
                    "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}}),
    );
}

/// The template of the jobs that tolerate `gpu.cozystack.io/managed`.
fn tolerating_template() -> Value {
    let mut t = template_in("ops", "job-tolerating", 1);
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] =
        json!([{"key": "gpu.cozystack.io/managed", "operator": "Exists", "effect": "NoSchedule"}]);
    t
}

/// A job ends: its pod goes (the resourceclaim controller deallocates and
/// deletes its claim, which the scheduler allocated).
fn end_job(sim: &Sim, pick: u64) {
    let jobs: Vec<Value> = sim
        .store
        .list("Pod")
        .0
        .into_iter()
        .filter(|p| p["metadata"]["namespace"] == "ops")
        .collect();
    if let Some(p) = jobs.get(pick as usize % jobs.len().max(1)) {
        let name = p["metadata"]["name"].as_str().unwrap_or_default();
        let _ = sim.store.delete("Pod", "ops", name);
    }
}

/// kube-scheduler for the jobs: its filters and DynamicResources plugin
/// over every ResourceClaim's allocation (it knows nothing of records),
/// the allocation and reservation written as its PreBind writes them,
/// then the binding. Whether one was bound.
fn schedule_jobs(sim: &Sim) -> usize {
    use gpu_claims_testbed::standin::scheduler::{DraWorld, schedule};
    let mut bound = 0;
    let (nodes, _) = sim.store.list("Node");
    for p in sim.store.list("Pod").0 {
        if p["metadata"]["namespace"] != "ops" || !p["spec"]["nodeName"].is_null() {
            continue;
        }
        let pods = sim.store.list("Pod").0;
        let dra = DraWorld {
            slices: sim
                .store
                .list("ResourceSlice")
                .0
                .into_iter()
                .filter_map(|s| serde_json::from_value(s).ok())
                .collect(),
            classes: sim.store.list("DeviceClass").0,
            claims: sim.store.list("ResourceClaim").0,
            taint_rules: sim.store.list("DeviceTaintRule").0,
        };
        let cs = claims::of_pod(&sim.store, &p);
        let Ok(b) = schedule(
            &p,
            &pods,
            &nodes,
            cs.as_deref().map_err(String::as_str),
            &dra,
        ) else {
            continue;
        };
        if !b
            .allocations
            .into_iter()
            .all(|(c, a)| claims::allocate(&sim.store, &c, a, &p))
        {
            continue;
        }
        let mut p = p;
        p["spec"]["nodeName"] = b.node.into();
        if let Ok(w) = sim.store.update("Pod", p, Subresource::Main) {
            let mut p = w.object;
            p["status"]["phase"] = "Running".into();
            let _ = sim.store.update("Pod", p, Subresource::Status);
            bound += 1;
        }
    }
    bound
}

/// Someone deletes a named claim's backing claim (D4: our finalizer keeps
/// it while a pod holds it; once none does it goes and is made again).
fn delete_backing_claim(sim: &Sim, i: u64) -> bool {
    named_claim(i).is_some_and(|c| sim.store.delete("ResourceClaim", "t", &c).is_ok())
}

/// kube-scheduler's PostFilter for a pod that named the claim and found
/// no node: an allocated claim no pod holds is deallocated, whoever
/// allocated it (D4 allocates it again).
fn deallocate_backing_claim(sim: &Sim, i: u64) -> bool {
    let Some(mut rc) = named_claim(i).and_then(|c| sim.store.get("ResourceClaim", "t", &c)) else {
        return false;
    };
    let held = rc["status"]["reservedFor"]
        .as_array()
        .is_some_and(|r| !r.is_empty());
    if held || !rc["status"]["allocation"].is_object() {
        return false;
    }
    rc["status"] = json!({});
    sim.store
        .update("ResourceClaim", rc, Subresource::Status)
        .is_ok()
}

/// D4, I9 settled: every placed claim whose VMI's pod is bound has that
/// pod's ResourceClaim allocated to exactly its record's devices.
fn allocations_follow_records(sim: &Sim) -> Vec<String> {
    let mut v = Vec::new();
    for p in sim.store.list("Pod").0 {
        if p["spec"]["nodeName"].is_null() {
            continue;
        }
        let vmi = p["metadata"]["ownerReferences"][0]["name"]
            .as_str()
            .unwrap_or_default();
        let Some(record) = sim.store.get("GPUAllocation", "t", &record_name(vmi)) else {
            continue;
        };
        let Ok(cs) = claims::of_pod(&sim.store, &p) else {
            continue;
        };
        let recorded = gpu_claims_testbed::memory::devices_of(&record);
        for c in cs {
            let allocated = gpu_claims_testbed::memory::devices_of(&c);
            if allocated != recorded {
                v.push(format!(
                    "{vmi}: record {recorded:?}, its pod's ResourceClaim {allocated:?}"
                ));
            }
        }
    }
    v
}

#[derive(Default, Debug)]
struct Seen {
    allocated: usize,
    lost: usize,
    pending: usize,
    no_room: usize,
    released: usize,
    backing_made: usize,
    backing_deleted: usize,
    /// Backing claims someone deleted, or the scheduler deallocated.
    backing_lost: usize,
    /// Backing claims let go by our finalizer's removal.
    backing_let_go: usize,
    /// Jobs outside gpu-claims the scheduler placed on DRA devices.
    jobs_ran: usize,
    /// D8: devices a record and another allocator's ResourceClaim named
    /// at once (a tolerating job's), the records moved off them, the
    /// claims Lost for them, and the Warnings while a VM ran on one.
    named_twice: usize,
    d8_moved: usize,
    d8_lost: usize,
    d8_said: usize,
}

fn run_seed(seed: u64, seen: &mut Seen) -> Vec<String> {
    let mut objs = vec![dra_class("h200", VFIO).obj()];
    objs.extend(NODES.iter().map(|n| {
        node(n)
            .passthrough_gpus("NVIDIA H200", 3, "141Gi", "0x2335")
            .sized("32", "256Gi", 110)
            .obj()
    }));
    objs.extend((0..VMS).map(|i| virtual_machine("t", &format!("vm{i}"), "Always")));
    run_sim(|| async move {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let lags = seed.is_multiple_of(2);
        let lag = if lags {
            Lag::of(Kind::ResourceClaim, std::time::Duration::from_millis(300))
        } else {
            Lag::default()
        };
        let mut sim = Sim::start(Config::default(), &objs, lag);
        sim.store.seed("ResourceClaimTemplate", template("one", 1));
        sim.store.seed("ResourceClaimTemplate", template("two", 2));
        sim.store
            .seed("ResourceClaimTemplate", template_in("ops", "job", 1));
        sim.store
            .seed("ResourceClaimTemplate", tolerating_template());
        let mut jobs = 0;
        nvidia::publish(&sim.store);
        let mut checker = Checker::default();
        let mut v = Vec::new();
        let mut generation = 0;
        let mut running = [false; VMS as usize];
        for _ in 0..10 {
            for _ in 0..1 + rng.below(3) {
                let i = rng.below(VMS);
                match rng.below(9) {
                    0..=2 => {
                        generation += 1;
                        if sim
                            .store
                            .get("VirtualMachineInstance", "t", &format!("vm{i}"))
                            .is_none()
                        {
                            start_vm(&sim, i, generation);
                        }
                        running[i as usize] = true;
                    }
                    3 => {
                        running[i as usize] = false;
                        stop_vm(&sim, i);
                    }
                    4 => {
                        running[i as usize] = false;
                        let _ = sim
                            .store
                            .delete("VirtualMachineInstance", "t", &format!("vm{i}"));
                        random::delete_pods_of(&sim, &format!("vm{i}"));
                    }
                    5 => {
                        let node = NODES[rng.below(2) as usize];
                        let failed =
                            ["", "gpu-vfio-0", "gpu-vfio-1,gpu-vfio-2"][rng.below(3) as usize];
                        set_failed(&sim, node, failed);
                    }
                    6 => set_ready(&sim, NODES[rng.below(2) as usize], rng.below(3) > 0),
                    7 if rng.below(3) == 0 => match rng.below(3) {
                        // The tenant lets a named claim go (L8: its backing
                        // claim first), or makes it again.
                        0 => match named_claim(i) {
                            Some(c) if sim.store.get("GPUClaim", "t", &c).is_some() => {
                                let _ = sim.store.delete("GPUClaim", "t", &c);
                            }
                            _ => make_claim(&sim, i),
                        },
                        1 => seen.backing_lost += usize::from(delete_backing_claim(&sim, i)),
                        _ => seen.backing_lost += usize::from(deallocate_backing_claim(&sim, i)),
                    },
                    8 => {
                        if rng.below(2) == 0 {
                            jobs += 1;
                            start_job(&sim, jobs, rng.below(3) == 0);
                        } else {
                            end_job(&sim, rng.below(4));
                        }
                    }
                    _ => sim.die_after(rng.below(4) as i64),
                }
            }
            settle(&sim, &running, &mut generation).await;
            v.extend(checker.check(&sim.cluster));
            seen.pending += usize::from(random::waits(&sim, "DeviceClaimPending"));
            seen.no_room += usize::from(random::waits(&sim, "NoCapacity"));
            if rng.below(2) == 0 && sim.alive() {
                sim.advance(secs(2)).await;
                v.extend(checker.check(&sim.cluster));
                if sim.alive() {
                    v.extend(progress(&sim.cluster, &Config::default()));
                }
            }
            if rng.below(3) == 0 {
                sim.restart();
                settle(&sim, &running, &mut generation).await;
                v.extend(checker.check(&sim.cluster));
            }
            schedule(&sim);
            // At every step: while the controller is dead (a crash between
            // a record and its ResourceClaim's allocation), while its
            // ResourceClaims watch trails the scheduler's allocations, and
            // with jobs that tolerate the managed taint. D7 keeps the
            // scheduler off the managed pools; D8 resolves what tolerates.
            seen.jobs_ran += schedule_jobs(&sim);
            settle(&sim, &running, &mut generation).await;
            v.extend(checker.check(&sim.cluster));
        }
        // Converge: every node Ready and every GPU well, a live process,
        // time past every grace, the scheduler done.
        for n in NODES {
            set_ready(&sim, n, true);
            set_failed(&sim, n, "");
        }
        sim.restart();
        settle(&sim, &running, &mut generation).await;
        for _ in 0..3 {
            sim.advance(secs(60)).await;
            settle(&sim, &running, &mut generation).await;
            schedule(&sim);
            settle(&sim, &running, &mut generation).await;
        }
        v.extend(checker.check(&sim.cluster));
        v.extend(progress(&sim.cluster, &Config::default()));
        v.extend(allocations_follow_records(&sim));
        let before = sim.cluster.journal().entries.len();
        let writes = sim.writes_on_restart().await;
        v.extend(checker.check(&sim.cluster));
        if writes != 0 {
            let which: Vec<String> = sim.cluster.journal().entries[before..]
                .iter()
                .map(|e| {
                    format!(
                        "{} {} {:?}/{} ({})",
                        e.op, e.kind, e.namespace, e.name, e.rule
                    )
                })
                .collect();
            v.push(format!(
                "not converged: {writes} writes after a restart: {which:?}"
            ));
        }
        seen.named_twice += checker.named_twice.len();
        seen.d8_said += sim
            .cluster
            .events()
            .iter()
            .filter(|e| e.reason == "DeviceNamedTwice")
            .count();
        for e in sim.cluster.journal().effective() {
            match (e.kind, e.rule) {
                ("GPUAllocation", "D8") => seen.d8_moved += 1,
                ("GPUClaim", "D8") => seen.d8_lost += 1,
                ("ResourceClaim", _) if e.op == "create" => seen.backing_made += 1,
                ("ResourceClaim", _) if e.op == "delete" => seen.backing_deleted += 1,
                ("ResourceClaim", _) if e.op == "remove_finalizer" => seen.backing_let_go += 1,
                ("ResourceClaim", "D4") => seen.allocated += 1,
                (_, "D6") => seen.lost += 1,
                ("GPUClaim", "L8") => seen.released += 1,
                _ => {}
            }
        }
        v.into_iter().map(|e| format!("seed {seed}: {e}")).collect()
    })
}

#[test]
fn d8_template_and_named_claim_vms_beside_jobs_outside_gpu_claims_under_random_kills_and_failing_gpus_never_share_a_device_and_converge()
 {
    let mut seen = Seen::default();
    let seeds = random::run_seeds(|seed| run_seed(seed, &mut seen));
    eprintln!("{seeds} seeds exercised {seen:?}");
    assert!(
        seen.allocated > 0
            && seen.lost > 0
            && seen.released > 0
            && seen.no_room > 0
            && seen.backing_made > 0
            && seen.backing_deleted > 0
            && seen.backing_lost > 0
            && seen.backing_let_go > 0
            && seen.jobs_ran > 0
            && seen.named_twice > 0
            && seen.d8_moved + seen.d8_lost > 0,
        "{seen:?}"
    );
}
