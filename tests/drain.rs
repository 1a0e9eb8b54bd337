//! E1, E2 and E3 end to end: `gpu-claims drain` and `uncordon` (the real
//! binary) against the embedded API server over HTTP, the controller
//! (`gpu-claims run`) restarting the node's GPU VMs elsewhere, and the
//! KubeVirt stand-in's VM controller bringing each deleted VMI back, whose
//! launcher pod comes to the gate and is placed on another node (E1); and
//! a stopped VM's named claim, held on a node cordoned meanwhile, moving
//! when the VM starts again (E1). Every wait checks I1-I5 and I10 every
//! 50 ms.
mod common;

use common::Cluster;
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, EVACUATE_TAINT};
use gpu_claims_testbed::demo::{A, H200, Snapshot};
use gpu_claims_testbed::fixtures::{MetaBuilder, claim, class, node};
use gpu_claims_testbed::standin::VmSpec;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const CONFIG: &str = "log: {filter: info, format: json}\n";

fn two_nodes(c: &gpu_claims_testbed::memory::MemCluster) {
    for o in [
        node("n1").gpus(H200, 4).kubelet("32", "256Gi").obj(),
        node("n2").gpus(H200, 4).kubelet("32", "256Gi").obj(),
        class("h200", H200).no_finalizer().obj(),
        claim(A, "c1").no_finalizer().obj(),
        claim(A, "c2").no_finalizer().obj(),
    ] {
        c.seed(&o);
    }
}

fn gpu_vm(claim: &str) -> VmSpec {
    VmSpec::sized(1, "1Gi")
        .annotate(CLAIMS_ANNOTATION, claim)
        .gpus(H200, 1)
}

/// Both VMs run, their claims Attached on n1 (best fit: the tighter node).
fn two_vms_on_n1(c: &mut Cluster) {
    c.standin.run_vm(A, "vm1", &gpu_vm("c1"));
    c.standin.run_vm(A, "vm2", &gpu_vm("c2"));
    c.settle(
        "G3-G4 and L4: both VMs placed and Attached on n1",
        |s| on(s, "c1", "n1") && on(s, "c2", "n1"),
        Duration::ZERO,
    );
}

fn on(s: &Snapshot, claim: &str, node: &str) -> bool {
    s.phase(A, claim) == "Attached" && s.claim(A, claim).and_then(|c| c.node_name()) == Some(node)
}

fn cli(c: &Cluster, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-claims"));
    let kubeconfig = c.dir.path().join("kubeconfig");
    cmd.args(args)
        .args(["--kubeconfig", kubeconfig.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The node's unschedulable flag and whether it has the evacuate taint.
fn evacuation_marks(c: &Cluster, name: &str) -> (bool, bool) {
    let n = c.store.get("Node", "", name).unwrap();
    let cordoned = n["spec"]["unschedulable"] == true;
    let tainted = n["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == EVACUATE_TAINT);
    (cordoned, tainted)
}

#[test]
fn e3_drain_moves_a_nodes_gpu_vms_elsewhere_one_at_a_time_and_uncordon_undoes_it() {
    let mut c = Cluster::new(two_nodes, CONFIG);
    let _ctl = c.start_controller();
    two_vms_on_n1(&mut c);
    let drain = cli(
        &c,
        &[
            "drain",
            "n1",
            "--max-concurrent",
            "1",
            "--timeout",
            "120s",
            "--interval",
            "200ms",
        ],
    )
    .spawn()
    .unwrap();
    c.settle(
        "E2: both VMs restarted, E1: their claims moved to n2",
        |s| on(s, "c1", "n2") && on(s, "c2", "n2"),
        Duration::ZERO,
    );
    let out = drain.wait_with_output().unwrap();
    let said = text(&out);
    eprintln!("{said}");
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("cordoned and tainted gpu.cozystack.io/evacuate=1:NoSchedule"),
        "{said}"
    );
    // Done once none is live there; the last restart may still be under
    // way (counted as moved only once the VM runs elsewhere).
    assert!(said.contains("0 live there"), "{said}");
    assert!(said.contains("no GPU VM is live on n1"), "{said}");
    // One restart at a time: the journal's E2 deletes of VMIs, and I10
    // checked throughout by the settle above.
    let restarts = c
        .journal
        .journal()
        .entries
        .iter()
        .filter(|e| e.kind == "VirtualMachineInstance" && e.op == "delete")
        .count();
    assert_eq!(restarts, 2, "each VM restarted once");
    // E3: a node Event at each step, one per VM (about its VMI, so that
    // the recorder folds none into another's series), with the node's uid
    // (what `kubectl describe node` looks them up by).
    let uid = c.store.get("Node", "", "n1").unwrap()["metadata"]["uid"].clone();
    let settled = |want: usize| {
        let (events, _) = c.store.list("Event");
        let steps: Vec<String> = events
            .iter()
            .filter(|e| e["involvedObject"]["name"] == "n1" && e["reason"] == "EvacuationStep")
            .inspect(|e| assert_eq!(e["involvedObject"]["uid"], uid, "{e}"))
            .filter_map(|e| e["message"].as_str().map(str::to_string))
            .collect();
        (steps.len() >= want).then_some(steps)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let steps = loop {
        if let Some(s) = settled(4) {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{:?}", settled(0));
        std::thread::sleep(Duration::from_millis(50));
    };
    for vm in ["vm1", "vm2"] {
        for what in [
            format!("restarting VM {A}/{vm}"),
            format!("VM {A}/{vm} runs again"),
        ] {
            assert!(
                steps.iter().any(|m| m.contains(&what)),
                "{what} in {steps:?}"
            );
        }
    }
    assert_eq!(evacuation_marks(&c, "n1"), (true, true));
    // A limit of no restarts is refused before anything is written.
    let out = cli(&c, &["drain", "n2", "--max-concurrent", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(evacuation_marks(&c, "n2"), (false, false));
    let out = cli(&c, &["uncordon", "n1"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(evacuation_marks(&c, "n1"), (false, false));
}

#[test]
fn e3_drain_keeps_a_vmi_without_a_vm_names_it_and_exits_1() {
    let mut c = Cluster::new(two_nodes, CONFIG);
    let ctl = c.start_controller();
    // A bare VMI (no VirtualMachine): deleted, it would not come back.
    c.standin.start_vm_with_claims(A, "bare", &["c1"]);
    c.settle(
        "the bare VMI placed and Attached",
        |s| s.phase(A, "c1") == "Attached",
        Duration::ZERO,
    );
    let node = c
        .snapshot()
        .claim(A, "c1")
        .and_then(|k| k.node_name().map(str::to_string))
        .unwrap();
    let out = cli(
        &c,
        &["drain", &node, "--timeout", "3s", "--interval", "200ms"],
    )
    .output()
    .unwrap();
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("VMI {A}/bare has no VirtualMachine owner")),
        "{said}"
    );
    // Issue 64, item 7: how to abort.
    assert!(
        said.contains(&format!("abort: `kubectl gpu-claims uncordon {node}`")),
        "{said}"
    );
    assert!(
        c.store.get("VirtualMachineInstance", A, "bare").is_some(),
        "kept"
    );
    // E3: the metric says it, per node and state.
    let (code, metrics) = ctl.get("/metrics").expect("the metrics");
    assert_eq!(code, 200);
    for (state, n) in [("live", 1), ("under_way", 0), ("blocked", 1)] {
        let line = format!("gpu_claims_evacuation_vms{{node=\"{node}\",state=\"{state}\"}} {n}");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

/// E1 over HTTP: a VM's named claim, Bound on a node that was cordoned
/// while the VM was stopped, moves to a node that can take the VM when it
/// starts again, with a `Moved` Event naming the old node and why.
#[test]
fn e1_a_named_claim_held_on_a_cordoned_node_moves_when_its_vm_starts_again() {
    let mut c = Cluster::new(two_nodes, CONFIG);
    let _ctl = c.start_controller();
    c.standin.run_vm(A, "vm1", &gpu_vm("c1"));
    let s = c.settle(
        "G3-G4: the VM placed",
        |s| s.phase(A, "c1") == "Attached",
        Duration::ZERO,
    );
    let held = s
        .claim(A, "c1")
        .and_then(|k| k.node_name())
        .unwrap()
        .to_string();
    let other = if held == "n1" { "n2" } else { "n1" };
    c.standin.halt_vm(A, "vm1");
    c.settle(
        "L5, L7: the VM stopped, its claim Bound and kept",
        |s| {
            s.phase(A, "c1") == "Bound"
                && s.claim(A, "c1")
                    .is_some_and(|k| k.attached_vmi_name().is_none())
        },
        Duration::ZERO,
    );
    // The node is cordoned while the VM is stopped.
    let mut n = c.store.get("Node", "", &held).unwrap();
    n["spec"]["unschedulable"] = true.into();
    c.store
        .update(
            "Node",
            n,
            gpu_claims_testbed::memory::store::Subresource::Main,
        )
        .unwrap();
    gpu_claims_testbed::standin::vms::set_run_strategy(&c.store, A, "vm1", "Always");
    c.standin.reconcile();
    c.settle(
        "E1: the claim moved to the node that can take the VM, which runs",
        |s| on(s, "c1", other),
        Duration::ZERO,
    );
    // Events are published after the write: waited for, within a deadline.
    let moved = || -> Vec<String> {
        let (events, _) = c.store.list("Event");
        events
            .iter()
            .filter(|e| e["involvedObject"]["name"] == "c1" && e["reason"] == "Moved")
            .filter_map(|e| e["message"].as_str().map(str::to_string))
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !moved()
        .iter()
        .any(|m| m.contains(&held) && m.contains(other))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "a Moved Event naming {held} and {other}: {:?}",
            moved()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 64, item 6: a node that does not exist is said as Kubernetes
/// words it, not as a Rust structure.
#[test]
fn e3_drain_of_a_node_that_does_not_exist_says_so_in_kubernetes_words() {
    let c = Cluster::new(two_nodes, CONFIG);
    let out = cli(&c, &["drain", "nosuch", "--timeout", "5s"])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("nodes \"nosuch\" not found"), "{said}");
    assert!(!said.contains("Status {"), "no Rust Debug form: {said}");
}
