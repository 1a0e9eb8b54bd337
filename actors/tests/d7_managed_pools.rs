//! D7: one allocator per device. Every pool in which a DRA class serves a
//! device, or a record names one, has one DeviceTaintRule of ours
//! (`gpu.cozystack.io/managed:NoSchedule` on that driver and pool),
//! written before the first allocation there, kept as written, and
//! deleted once the pool is no longer managed. Where D7 is off (turned
//! off, not served, refused), the DRA classes say why and everything else
//! works. NVIDIA's driver is the stand-in's; I1-I5 and I9 after each step.
mod common;
use common::*;
use gpu_claims_actors::api::{CONDITION_EXCLUSIVE_DEVICES, ClaimPhase, Kind};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::WriteError;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::standin::nvidia;
use serde_json::{Value, json};

const RULE: &str = "gpu-claims-gpu.nvidia.com-n1";

/// Four H200s on n1 (pool `n1` of gpu.nvidia.com), a DRA class of them,
/// and claim t/c1 of two that vm1 names (D5).
fn world() -> Vec<gpu_claims_actors::api::Obj> {
    named_world()
}

fn rules(t: &TestCluster) -> Vec<Value> {
    t.sim.store.list("DeviceTaintRule").0
}

fn rule(t: &TestCluster, name: &str) -> Option<Value> {
    t.sim.store.get("DeviceTaintRule", "", name)
}

/// The managed taint with `effect`.
fn managed(effect: &str) -> Value {
    json!({"key": "gpu.cozystack.io/managed", "effect": effect})
}

/// A DeviceTaintRule as a user writes one: ours by its label or not.
fn user_rule(name: &str, ours: bool, selector: Value, taint: Value) -> gpu_claims_actors::api::Obj {
    let mut r = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": taint}});
    if ours {
        r["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "gpu-claims"});
    }
    typed(Kind::DeviceTaintRule, r)
}

/// The class's ExclusiveDevices condition: (status, reason, message).
fn exclusive(t: &TestCluster) -> (String, String, String) {
    let c = t.class("h200").expect("the class");
    let cond = c
        .status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .find(|c| c.type_ == CONDITION_EXCLUSIVE_DEVICES)
        .expect("ExclusiveDevices")
        .clone();
    (cond.status, cond.reason, cond.message)
}

#[test]
fn d7_a_managed_pool_is_closed_by_one_rule_of_ours_written_before_its_first_allocation() {
    with_world(Config::default(), world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        let r = rule(&t, RULE).expect("the pool's rule");
        assert_eq!(
            r["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "gpu-claims"
        );
        assert_eq!(
            r["spec"]["deviceSelector"],
            json!({"driver": "gpu.nvidia.com", "pool": "n1"})
        );
        assert_eq!(r["spec"]["taint"]["key"], "gpu.cozystack.io/managed");
        assert_eq!(r["spec"]["taint"]["effect"], "NoSchedule");
        assert_eq!(rules(&t).len(), 1, "one rule a pool");
        // Written before the first allocation in the pool.
        let writes = t.writes();
        let ruled = position_of(&writes, &format!("create DeviceTaintRule {RULE} D7"));
        let placed = position_of(&writes, "create GPUAllocation c1 G4");
        assert!(ruled < placed, "{writes:#?}");
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
        // The backing claim tolerates the managed taint in its request,
        // and its allocation carries the tolerations as the scheduler's do.
        let rc = backing(&t).unwrap();
        let tolerations = &rc["spec"]["devices"]["requests"][0]["exactly"]["tolerations"];
        assert_eq!(
            tolerations,
            &json!([
                {"key": "gpu.cozystack.io/managed", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "gpu.cozystack.io/managed", "operator": "Exists", "effect": "NoExecute"}
            ])
        );
        assert_eq!(
            &rc["status"]["allocation"]["devices"]["results"][0]["tolerations"],
            tolerations
        );
        let (status, reason, _) = exclusive(&t);
        assert_eq!((status.as_str(), reason.as_str()), ("True", "PoolsClosed"));
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d7_a_user_s_edit_of_our_rule_is_undone_and_a_deleted_one_is_made_again() {
    with_world(Config::default(), world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        t.writes();
        let mut r = rule(&t, RULE).unwrap();
        r["spec"]["taint"]["effect"] = "None".into();
        r["spec"]["deviceSelector"]["pool"] = "n1".into();
        t.user_update(typed(Kind::DeviceTaintRule, r));
        t.settle().await;
        assert_eq!(
            t.writes(),
            [format!("update DeviceTaintRule {RULE} D7")],
            "the edit undone"
        );
        assert_eq!(
            rule(&t, RULE).unwrap()["spec"]["taint"]["effect"],
            "NoSchedule"
        );
        t.user_delete(Kind::DeviceTaintRule, None, RULE);
        t.settle().await;
        assert_eq!(t.writes(), [format!("create DeviceTaintRule {RULE} D7")]);
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d7_rules_of_ours_too_many_or_naming_no_pool_go_and_a_platform_s_own_stay() {
    with_world(Config::default(), world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        t.writes();
        let n1 = json!({"driver": "gpu.nvidia.com", "pool": "n1"});
        t.user_create(user_rule("copy", true, n1.clone(), managed("NoSchedule")));
        t.user_create(user_rule(
            "driver-wide",
            true,
            json!({"driver": "gpu.nvidia.com"}),
            managed("NoSchedule"),
        ));
        // A platform's own rule with our taint (not ours: no label): left
        // alone; D2 ignores its taint as it ignores ours.
        t.user_create(user_rule("platform", false, n1, managed("NoExecute")));
        t.settle().await;
        let mut writes = t.writes();
        writes.sort();
        assert_eq!(
            writes,
            [
                "delete DeviceTaintRule copy D7",
                "delete DeviceTaintRule driver-wide D7"
            ]
        );
        let mut left: Vec<String> = rules(&t)
            .iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        left.sort();
        assert_eq!(left, ["gpu-claims-gpu.nvidia.com-n1", "platform"]);
    });
}

#[test]
fn d7_a_pool_no_class_serves_and_no_record_names_loses_its_rule() {
    with_world(Config::default(), world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        // The claim goes (L8 releases its record): the pool is still
        // served by the class.
        t.user_delete(Kind::Claim, Some("t"), "c1");
        t.user_delete(Kind::Vmi, Some("t"), "vm1");
        t.settle().await;
        assert!(rule(&t, RULE).is_some(), "a class still serves the pool");
        t.writes();
        // The class takes no device of it any more.
        t.user_update(
            dra_class("h200", VFIO)
                .cel("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'")
                .obj(),
        );
        t.settle().await;
        assert_eq!(
            t.writes()
                .into_iter()
                .filter(|w| w.contains("DeviceTaintRule"))
                .collect::<Vec<_>>(),
            [format!("delete DeviceTaintRule {RULE} D7")]
        );
        t.restart_writes_nothing().await;
    });
}

#[test]
fn d7_turned_off_our_rules_go_the_classes_say_so_and_placement_goes_on() {
    with_world(Config::default(), world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        assert!(rule(&t, RULE).is_some());
        t.reload(|c| c.dra.exclusive_devices = false).await;
        assert!(rule(&t, RULE).is_none(), "ours deleted");
        let (status, reason, message) = exclusive(&t);
        assert_eq!((status.as_str(), reason.as_str()), ("False", "Disabled"));
        assert!(
            message.contains("dra.exclusiveDevices is false"),
            "{message}"
        );
        // Placement works as before.
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
        t.reload(|c| c.dra.exclusive_devices = true).await;
        assert!(rule(&t, RULE).is_some(), "written again");
        assert_eq!(exclusive(&t).0, "True");
    });
}

#[test]
fn d7_a_refused_rule_turns_it_off_with_the_api_server_s_words_and_placement_goes_on() {
    let mut config = Config::default();
    config.dra.exclusive_devices = false;
    with_world(config, world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        // RBAC without devicetaintrules: every create is forbidden.
        let forbidden = || {
            WriteError::Refused(gpu_claims_actors::ports::status(
                403,
                "Forbidden",
                "devicetaintrules.resource.k8s.io is forbidden: User \"system:serviceaccount:cozy-gpu:gpu-claims\" cannot create resource \"devicetaintrules\"",
            ))
        };
        t.fail_writes_of(Kind::DeviceTaintRule, [forbidden()]);
        t.reload(|c| c.dra.exclusive_devices = true).await;
        let (status, reason, message) = exclusive(&t);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "DeviceTaintRuleRefused")
        );
        assert!(message.contains("cannot create resource"), "{message}");
        assert!(rule(&t, RULE).is_none());
        // The VM's claim was placed all the same (before the reload).
        assert_eq!(t.phase("t/c1"), ClaimPhase::Attached);
        // A minute on, one pool is tried again; it lands, and D7 is on.
        t.advance(secs(61)).await;
        assert!(rule(&t, RULE).is_some());
        assert_eq!(exclusive(&t).0, "True");
    });
}

#[test]
fn d7_where_no_device_taint_rule_is_served_the_classes_say_so_and_nothing_is_written() {
    let w = WorldWriter::new(Config::default());
    w.load(dra_class("h200", VFIO).obj());
    w.set_exclusive(None);
    assert_eq!(
        w.exclusive(),
        gpu_claims_actors::world::devices::Exclusive::On
    );
    let change = w.set_served(Kind::DeviceTaintRule, false);
    assert!(change.all_pools && change.classes.contains("h200"));
    let pool = ("gpu.nvidia.com".into(), "n1".into());
    assert_eq!(gpu_claims_actors::rules::decide_pool(&pool, &w), None);
    // DRA itself stays: the class has no DRAUnavailable for it (only for
    // the DeviceClass this bare world lacks).
    assert!(!matches!(
        w.dra_problem("h200"),
        Some(gpu_claims_actors::world::devices::DraProblem::NotServed(_))
    ));
    let gpu_claims_actors::world::devices::Exclusive::Off(off) = w.exclusive() else {
        panic!("off")
    };
    assert_eq!(off.reason(), "DeviceTaintRulesNotServed");
}

#[test]
fn d2_ignores_the_managed_taint_and_keeps_counting_a_platform_s() {
    with_world(Config::default(), world(), |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        // Our rule is on n1's pool, and the class still counts every GPU.
        assert_eq!(t.class("h200").unwrap().status.unwrap().capacity, Some(4));
        // A platform's own NoSchedule taint on gpu-vfio-3 keeps it off.
        t.user_create(user_rule(
            "maintenance",
            false,
            json!({"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-vfio-3"}),
            json!({"key": "example.com/maintenance", "effect": "NoSchedule"}),
        ));
        t.settle().await;
        assert_eq!(t.class("h200").unwrap().status.unwrap().capacity, Some(3));
    });
}
