//! D6 on Kubernetes 1.36, which serves DeviceTaintRule at
//! `resource.k8s.io/v1beta2` only (v1 from 1.37): the controller watches
//! the version the cluster serves, and a rule tainting a held device
//! NoExecute makes its claim Lost, until the rule goes.

use super::{CONFIG, NOW, common};
use gpu_claims_testbed::demo::story;
use gpu_claims_testbed::demo::{self, A};
use serde_json::json;

#[test]
fn d6_a_device_taint_rule_served_at_v1beta2_makes_the_held_device_lost_until_it_goes() {
    let mut c = common::Cluster::serving(demo::seed, CONFIG, &[("DeviceTaintRule", "v1beta2")]);
    let _ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, NOW);
    // The story up to vm-llm placed on its DRA devices.
    for step in story::steps() {
        c.act(&step);
        let s = c.settle(step.title, step.until, step.hold);
        if s.phase(A, "vm-llm-gpu") == "Attached" {
            break;
        }
    }
    let r = c
        .store
        .get("GPUAllocation", A, "vm-llm-gpu")
        .expect("vm-llm's record");
    let d = &r["spec"]["devices"][0];
    // What an administrator writes on 1.36: the v1beta2 API.
    c.store
        .create(
            "DeviceTaintRule",
            json!({"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
                "metadata": {"name": "drain-gpu"},
                "spec": {"deviceSelector": {"driver": d["driver"], "pool": d["pool"], "device": d["device"]},
                    "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}}),
        )
        .unwrap();
    c.settle(
        "D6: the rule's NoExecute taint takes the held device",
        |s| s.phase(A, "vm-llm-gpu") == "Lost",
        NOW,
    );
    c.store.delete("DeviceTaintRule", "", "drain-gpu").unwrap();
    c.settle(
        "D6, L4: the rule gone, the running VM's claim is Attached again",
        |s| s.phase(A, "vm-llm-gpu") == "Attached",
        NOW,
    );
}
