//! D1, D2 through the controller: a DRA class counts the devices NVIDIA's
//! driver publishes (the stand-in's, as upstream's kubelet plugin writes
//! them), and a class that cannot serve says why on its status.
mod common;
use common::*;
use gpu_claims_actors::api::{
    CONDITION_DRA_UNAVAILABLE, CONDITION_SELECTOR_INVALID, GPUClass, Kind, Obj, condition_is_true,
};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::rules::{ClassIntent, RuleId, Step, decide_class};
use gpu_claims_actors::world::{World, WorldWriter};
use gpu_claims_testbed::standin::nvidia;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const H200_ONLY: &str = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'";

/// Two passthrough nodes: four H200s and two L40Ss.
fn nodes() -> Vec<Obj> {
    vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .obj(),
        node("n2")
            .passthrough_gpus("NVIDIA L40S", 2, "48Gi", "0x26b9")
            .obj(),
    ]
}

fn capacity(t: &TestCluster, class: &str) -> Option<u64> {
    t.class(class)?.status?.capacity
}

fn said(c: &GPUClass, type_: &str) -> Option<(String, String)> {
    let s = c.status.as_ref()?;
    let c = s.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.reason.clone(), c.message.clone()))
}

#[test]
fn d1_a_dra_class_shows_the_devices_nvidias_driver_publishes_as_its_capacity() {
    let mut objs = nodes();
    objs.push(dra_class("h200", VFIO).cel(H200_ONLY).obj());
    objs.push(dra_class("any-gpu", VFIO).obj());
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        // No slice yet: the driver has not published.
        assert_eq!(capacity(&t, "h200"), Some(0));
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(4));
        assert_eq!(capacity(&t, "any-gpu"), Some(6));
        let c = t.class("h200").unwrap();
        assert!(said(&c, CONDITION_SELECTOR_INVALID).is_none());
        assert!(said(&c, CONDITION_DRA_UNAVAILABLE).is_none());
    });
}

/// An allocation written by someone else (the scheduler, for a pod outside
/// gpu-claims), as upstream writes it.
/// It tolerates D7's taint: a job an administrator lets into the pools
/// gpu-claims manages (kube-scheduler gives one that does not nothing of
/// them).
fn foreign_allocation(name: &str, pool: &str, device: &str) -> Obj {
    let v = serde_json::json!({
        "metadata": {"name": name, "namespace": "other"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": VFIO,
            "tolerations": [{"key": "gpu.cozystack.io/managed", "operator": "Exists"}]}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}
        ]}}}
    });
    Obj::ResourceClaim(serde_json::from_value(v).unwrap())
}

/// A platform's DeviceTaintRule (`resource.k8s.io/v1`): upstream's
/// selector (driver, pool, device; every field set must match) and taint.
fn taint_rule(name: &str, selector: serde_json::Value, effect: &str) -> Obj {
    let v = serde_json::json!({"metadata": {"name": name},
        "spec": {"deviceSelector": selector,
            "taint": {"key": "example.com/maintenance", "value": "cable", "effect": effect}}});
    Obj::DeviceTaintRule(serde_json::from_value(v).unwrap())
}

#[test]
fn d2_a_device_taint_rule_keeps_the_devices_it_selects_off_until_it_is_removed() {
    let mut objs = nodes();
    objs.push(dra_class("h200", VFIO).cel(H200_ONLY).obj());
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(4));
        // One device of n1's pool, NoSchedule: not free.
        t.user_create(taint_rule(
            "one",
            serde_json::json!({"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-vfio-1"}),
            "NoSchedule",
        ));
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(3));
        // A rule with effect None only says so: every device stays free.
        t.user_create(taint_rule(
            "note",
            serde_json::json!({"pool": "n1"}),
            "None",
        ));
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(3));
        // A whole pool, NoExecute.
        t.user_create(taint_rule(
            "pool",
            serde_json::json!({"pool": "n1"}),
            "NoExecute",
        ));
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(0));
        // The rules go: every device is free again.
        for r in ["one", "note", "pool"] {
            t.user_delete(Kind::DeviceTaintRule, None, r);
        }
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(4));
    });
}

#[test]
fn d2_a_tainted_or_foreign_held_device_is_not_counted_until_it_is_free_again() {
    let mut objs = nodes();
    objs.push(dra_class("h200", VFIO).cel(H200_ONLY).obj());
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(4));
        // A GPU that fails is tainted NoExecute by the driver.
        let failed = node("n1")
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .failed_gpus("gpu-vfio-3")
            .obj();
        t.user_update(failed);
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(3));
        // A pod outside gpu-claims holds another one through its claim.
        t.user_create(foreign_allocation("foreign", "n1", "gpu-vfio-0"));
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(2));
        // Its claim goes: the device is free again.
        t.user_delete(Kind::ResourceClaim, Some("other"), "foreign");
        t.settle().await;
        assert_eq!(capacity(&t, "h200"), Some(3));
    });
}

#[test]
fn d1_a_selector_that_does_not_compile_is_said_on_the_class_until_it_is_fixed() {
    let mut objs = nodes();
    objs.push(dra_class("bad", VFIO).cel("device.attributes[").obj());
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let c = t.class("bad").unwrap();
        let (reason, message) = said(&c, CONDITION_SELECTOR_INVALID).expect("SelectorInvalid");
        assert_eq!(reason, "CompileError");
        assert!(
            message.starts_with("gpuclass bad: selector #0: CEL compile error")
                && message.contains("(expression: device.attributes[)"),
            "{message}"
        );
        assert_eq!(capacity(&t, "bad"), Some(0));
        assert!(
            t.writes()
                .contains(&"update_status GPUClass bad D1".to_string())
        );
        // Fixed: the condition goes, the devices count.
        t.user_update(dra_class("bad", VFIO).cel(H200_ONLY).obj());
        t.settle().await;
        let c = t.class("bad").unwrap();
        assert!(said(&c, CONDITION_SELECTOR_INVALID).is_none());
        assert_eq!(capacity(&t, "bad"), Some(4));
        assert!(
            t.writes()
                .contains(&"update_status GPUClass bad D1".to_string())
        );
    });
}

#[test]
fn d1_a_selector_over_upstream_s_cost_limit_is_said_on_the_class_and_never_evaluated() {
    // Three nested loops of sixty: an estimated 1,995,251, where upstream
    // stops at 1,000,000 (kube-apiserver refuses it in a DeviceClass; a
    // GPUClass is ours to refuse).
    let r: Vec<String> = (0..60).map(|i| i.to_string()).collect();
    let r = format!("[{}]", r.join(","));
    let costly = format!("{r}.all(a, {r}.all(b, {r}.all(c, a+b+c >= 0)))");
    let mut objs = nodes();
    objs.push(dra_class("costly", VFIO).cel(&costly).obj());
    with_world(Config::default(), objs, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let c = t.class("costly").unwrap();
        let (reason, message) = said(&c, CONDITION_SELECTOR_INVALID).expect("SelectorInvalid");
        assert_eq!(reason, "TooComplex");
        assert!(
            message.starts_with(
                "gpuclass costly: selector #0: too complex, exceeds cost limit (estimated cost 1995251, the limit is 1000000)"
            ),
            "{message}"
        );
        assert_eq!(capacity(&t, "costly"), Some(0));
    });
}

#[test]
fn d1_a_class_whose_device_class_is_missing_says_dra_unavailable_until_it_comes() {
    let objs = vec![dra_class("h200", "vfio.example.com").obj()];
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let c = t.class("h200").unwrap();
        let (reason, message) = said(&c, CONDITION_DRA_UNAVAILABLE).expect("DRAUnavailable");
        assert_eq!(reason, "DeviceClassMissing");
        assert!(message.contains("DeviceClass vfio.example.com does not exist"));
        let dc = serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "vfio.example.com"}, "spec": {}});
        t.sim.store.create("DeviceClass", dc).unwrap();
        t.settle().await;
        let c = t.class("h200").unwrap();
        assert!(!condition_is_true(
            &c.status.unwrap().conditions,
            CONDITION_DRA_UNAVAILABLE
        ));
    });
}

/// What the class actor decides for `class` in `w`.
fn decided(w: &World, class: &GPUClass) -> Step<ClassIntent> {
    let capacity = w.class_capacity(class.metadata.name.as_deref().unwrap());
    decide_class(class, w, capacity, 0, Time(Default::default()))
}

#[test]
fn d1_a_cluster_that_serves_no_dra_has_its_dra_classes_say_dra_unavailable() {
    let w = WorldWriter::new(Config::default());
    let c = dra_class("h200", VFIO).obj();
    w.load(c.clone());
    let Obj::Class(c) = c else { unreachable!() };
    w.set_served(Kind::ResourceSlice, false);
    let Step::Do(RuleId::D1, ClassIntent::WriteStatus(s)) = decided(&w, &c) else {
        panic!("{:?}", decided(&w, &c));
    };
    let cond = s
        .conditions
        .iter()
        .find(|c| c.type_ == CONDITION_DRA_UNAVAILABLE)
        .unwrap();
    assert_eq!(cond.reason, "NotServed");
    assert!(
        cond.message
            .contains("does not serve resource.k8s.io/v1 ResourceSlice"),
        "{}",
        cond.message
    );
    assert_eq!(s.capacity, Some(0));
    // A device-plugin class has no DRA condition, whatever the cluster serves.
    let plugin = class("plugin", "nvidia.com/GH100_H200").obj();
    w.load(plugin.clone());
    let Obj::Class(plugin) = plugin else {
        unreachable!()
    };
    let Step::Do(RuleId::ClassStatus, ClassIntent::WriteStatus(s)) = decided(&w, &plugin) else {
        panic!("{:?}", decided(&w, &plugin));
    };
    assert!(s.conditions.is_empty());
}
