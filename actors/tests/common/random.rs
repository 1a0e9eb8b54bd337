//! What the randomized tests share: the seeds they run (`GPU_CLAIMS_SEEDS`,
//! `GPU_CLAIMS_FIRST_SEED`), and KubeVirt and the garbage collector as the
//! world around the controller plays them on the store.

use gpu_claims_testbed::memory::sim::Sim;
use gpu_claims_testbed::memory::store::Subresource;
use std::collections::HashSet;

/// Runs `run` for each seed (1000 by default), stopping past 20
/// failures, and fails with them; the number of seeds run.
pub fn run_seeds(mut run: impl FnMut(u64) -> Vec<String>) -> u64 {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default)
    };
    let (seeds, first) = (
        var("GPU_CLAIMS_SEEDS", 1000),
        var("GPU_CLAIMS_FIRST_SEED", 0),
    );
    let mut failures = Vec::new();
    for seed in first..first + seeds {
        let t = std::time::Instant::now();
        failures.extend(run(seed));
        if std::env::var_os("GPU_CLAIMS_SEED_TIMES").is_some() {
            eprintln!("seed {seed}: {:?}", t.elapsed());
        }
        if failures.len() > 20 {
            break;
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    seeds
}

/// The VMI `t/<name>` ends (Succeeded), and its launcher pods go.
pub fn vmi_ends(sim: &Sim, name: &str) {
    let Some(mut v) = sim.store.get("VirtualMachineInstance", "t", name) else {
        return;
    };
    v["status"]["phase"] = "Succeeded".into();
    let _ = sim
        .store
        .update("VirtualMachineInstance", v, Subresource::Status);
    delete_pods_of(sim, name);
}

/// The garbage collector: the pods of the VMI `t/<vmi>` go.
pub fn delete_pods_of(sim: &Sim, vmi: &str) {
    for p in sim.store.list("Pod").0 {
        if p["metadata"]["ownerReferences"][0]["name"] == vmi {
            let pod = p["metadata"]["name"].as_str().unwrap_or_default();
            let _ = sim.store.delete("Pod", "t", pod);
        }
    }
}

/// The garbage collector: pods in `t` whose owning VMI is gone go too.
/// Whether any went.
pub fn orphan_pods_go(sim: &Sim) -> bool {
    let vmis: HashSet<String> = sim
        .store
        .list("VirtualMachineInstance")
        .0
        .iter()
        .filter_map(|v| v["metadata"]["uid"].as_str().map(str::to_string))
        .collect();
    let mut changed = false;
    for p in sim.store.list("Pod").0 {
        let owner = &p["metadata"]["ownerReferences"][0];
        if p["metadata"]["namespace"] == "t"
            && owner["kind"] == "VirtualMachineInstance"
            && !owner["uid"].as_str().is_some_and(|u| vmis.contains(u))
        {
            let pod = p["metadata"]["name"].as_str().unwrap_or_default();
            changed |= sim.store.delete("Pod", "t", pod).is_ok();
        }
    }
    changed
}

/// KubeVirt's VM controller: each VM `vm<i>` that runs (`running`) and
/// whose VMI is gone starts a new one (`start`, with the next
/// generation). Whether any started.
pub fn vms_start_again(
    sim: &Sim,
    running: &[bool],
    generation: &mut u64,
    mut start: impl FnMut(u64, u64),
) -> bool {
    let mut changed = false;
    for (i, _) in running.iter().enumerate().filter(|(_, r)| **r) {
        let i = i as u64;
        if sim
            .store
            .get("VirtualMachineInstance", "t", &format!("vm{i}"))
            .is_none()
        {
            *generation += 1;
            start(i, *generation);
            changed = true;
        }
    }
    changed
}

/// Whether some GPUClaim waits with this reason.
pub fn waits(sim: &Sim, reason: &str) -> bool {
    sim.store.list("GPUClaim").0.iter().any(|c| {
        c["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["type"] == "Waiting" && x["reason"] == reason)
    })
}
