//! E2 and E3 end to end: `gpu-claims drain` and `uncordon` (the real
//! binary) against the embedded API server over HTTP, the controller
//! (`gpu-claims run`) restarting the node's GPU VMs elsewhere, and the
//! KubeVirt stand-in's VM controller bringing each deleted VMI back, whose
//! launcher pod comes to the gate and is placed on another node (E1).
//! Every wait checks I1-I5 and I10 every 50 ms.
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
    assert!(said.contains("2/2 GPU VMs moved off n1"), "{said}");
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
