//! Q1 and Q2 (docs/design.md, "Tenant quotas"): a set is placed only where it leaves room in every
//! GPUQuota of its namespace, and each quota's status shows what the
//! namespace's claims hold. I8 is checked after every step, with I1-I5.
mod common;
use common::*;
use gpu_claims_actors::api::{CONDITION_CLASS_MISSING, ClaimPhase, GPUQuota};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};

const A100: &str = "nvidia.com/A100";

/// The Waiting condition's (reason, message) of claim `key`, if True.
fn quota_of(t: &TestCluster, ns: &str, name: &str) -> GPUQuota {
    match t.sim.cluster.get(&ObjRef::new(Kind::Quota, Some(ns), name)) {
        Some(Obj::Quota(q)) => q,
        other => panic!("GPUQuota {ns}/{name}: {other:?}"),
    }
}

/// Class h200 and a100, n1 with 8 of each, claim `t/held` of `held` h200
/// GPUs bound there, claim `t/a` of `count` of `class` named by vm1 at the
/// gate, and `more`.
fn tenant(held: u32, class_: &str, count: u32, more: Vec<Obj>) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        class("a100", A100).obj(),
        node("n1").gpus(H200, 8).gpus(A100, 8).obj(),
    ];
    if held > 0 {
        objs.extend(
            claim("t", "held")
                .count(held)
                .bound("n1")
                .with_allocation(H200),
        );
    }
    objs.push(claim("t", "a").class(class_).count(count).obj());
    objs.extend(vm1_naming("a"));
    objs.extend(more);
    objs
}

/// One placement decision under quotas, and whether it places.
struct Row {
    case: &'static str,
    objs: Vec<Obj>,
    placed: bool,
}

fn row(case: &'static str, objs: Vec<Obj>, placed: bool) -> Row {
    Row { case, objs, placed }
}

#[test]
fn q1_a_set_is_placed_only_where_every_quota_of_its_namespace_has_room() {
    let rows = [
        row(
            "Q1 within the class's limit",
            tenant(2, "h200", 2, vec![quota("t", "q").hard("h200", 4).obj()]),
            true,
        ),
        row(
            "Q1 over the class's limit",
            tenant(2, "h200", 3, vec![quota("t", "q").hard("h200", 4).obj()]),
            false,
        ),
        row(
            "Q1 over the total, across classes",
            tenant(2, "a100", 2, vec![quota("t", "q").total(3).obj()]),
            false,
        ),
        row(
            "Q1 within the total",
            tenant(2, "a100", 1, vec![quota("t", "q").total(3).obj()]),
            true,
        ),
        row(
            "Q1 a limit for another class does not apply",
            tenant(2, "a100", 4, vec![quota("t", "q").hard("h200", 2).obj()]),
            true,
        ),
        row(
            "Q1 several quotas all apply: the stricter one holds the set",
            tenant(
                0,
                "h200",
                3,
                vec![
                    quota("t", "loose").hard("h200", 8).obj(),
                    quota("t", "strict").hard("h200", 2).obj(),
                ],
            ),
            false,
        ),
        row(
            "Q1 another namespace's quota does not apply",
            tenant(
                0,
                "h200",
                3,
                vec![quota("other", "q").hard("h200", 0).obj()],
            ),
            true,
        ),
        row(
            "Q1 a limit of zero allows nothing",
            tenant(0, "h200", 1, vec![quota("t", "q").hard("h200", 0).obj()]),
            false,
        ),
        row(
            "Q1 a quota naming a class that does not exist still applies to none of these",
            tenant(0, "h200", 1, vec![quota("t", "q").hard("l40s", 0).obj()]),
            true,
        ),
    ];
    for r in rows {
        settled(Config::default(), r.objs, |t| {
            let phase = t.phase("t/a");
            let why = t.waiting("t/a");
            if r.placed {
                assert_eq!((phase, why), (ClaimPhase::Attached, None), "{}", r.case);
            } else {
                assert_eq!(phase, ClaimPhase::Pending, "{}", r.case);
                let (reason, _) = why.unwrap_or_else(|| panic!("{}: not waiting", r.case));
                assert_eq!(reason, "OverQuota", "{}", r.case);
                assert!(!t.exists(Kind::Allocation, Some("t"), "a"), "{}", r.case);
            }
        });
    }
}

#[test]
fn q1_the_message_names_the_quota_the_class_and_the_numbers_and_tells_never_from_not_now() {
    let objs = tenant(2, "h200", 3, vec![quota("t", "gold").hard("h200", 4).obj()]);
    settled(Config::default(), objs, |t| {
        let (_, message) = t.waiting("t/a").unwrap();
        assert_eq!(
            message,
            "GPUQuota gold has no room for 3 more GPUs of class h200: its limit for h200 is 4"
        );
    });
    let objs = tenant(2, "a100", 2, vec![quota("t", "all").total(3).obj()]);
    settled(Config::default(), objs, |t| {
        let (_, message) = t.waiting("t/a").unwrap();
        assert_eq!(
            message,
            "GPUQuota all has no room for 2 more GPUs: its total is 3"
        );
    });
    // More than the limit or the total itself: never, and said so.
    let objs = tenant(0, "h200", 5, vec![quota("t", "gold").hard("h200", 4).obj()]);
    settled(Config::default(), objs, |t| {
        let (_, message) = t.waiting("t/a").unwrap();
        assert_eq!(
            message,
            "the set asks for 5 GPUs of class h200, more than GPUQuota gold allows at all (4): it can never be placed; ask for fewer, or for a larger quota"
        );
    });
    let objs = tenant(0, "a100", 4, vec![quota("t", "all").total(3).obj()]);
    settled(Config::default(), objs, |t| {
        let (_, message) = t.waiting("t/a").unwrap();
        assert_eq!(
            message,
            "the set asks for 4 GPUs, more than GPUQuota all's total (3): it can never be placed; ask for fewer, or for a larger quota"
        );
    });
}

#[test]
fn g5_over_budget_is_said_before_over_quota_and_over_quota_before_the_nodes() {
    // Over its class's budget and its quota: OverBudget.
    let mut objs = tenant(0, "h200", 3, vec![quota("t", "q").hard("h200", 2).obj()]);
    objs[0] = class("h200", H200).budget(2).obj();
    settled(Config::default(), objs, |t| {
        assert_eq!(t.waiting("t/a").unwrap().0, "OverBudget");
    });
    // Over its quota and no node with room: OverQuota.
    let objs = tenant(0, "h200", 9, vec![quota("t", "q").hard("h200", 2).obj()]);
    settled(Config::default(), objs, |t| {
        assert_eq!(t.waiting("t/a").unwrap().0, "OverQuota");
    });
}

#[test]
fn q1_a_quota_raised_lets_the_waiting_set_be_placed() {
    let objs = tenant(2, "h200", 3, vec![quota("t", "q").hard("h200", 4).obj()]);
    waits_until(objs, "OverQuota", |t| {
        t.user_update(quota("t", "q").hard("h200", 5).obj())
    });
}

#[test]
fn q1_a_quota_deleted_lets_the_waiting_set_be_placed() {
    let objs = tenant(0, "h200", 1, vec![quota("t", "q").total(0).obj()]);
    waits_until(objs, "OverQuota", |t| {
        t.user_delete(Kind::Quota, Some("t"), "q")
    });
}

#[test]
fn q1_gpus_freed_in_the_namespace_let_the_waiting_set_be_placed() {
    let objs = tenant(2, "h200", 3, vec![quota("t", "q").hard("h200", 4).obj()]);
    waits_until(objs, "OverQuota", |t| {
        t.user_delete(Kind::Claim, Some("t"), "held")
    });
}

#[test]
fn q1_a_quota_lowered_below_what_is_used_releases_nothing_and_stops_new_placements() {
    let objs = tenant(4, "h200", 1, vec![quota("t", "q").hard("h200", 8).obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(t.phase("t/a"), ClaimPhase::Attached);
        t.user_update(quota("t", "q").hard("h200", 2).obj());
        t.settle().await;
        for k in ["t/held", "t/a"] {
            assert!(t.phase(k).counts_against_budget(), "{k} keeps its GPUs");
        }
        // A second VM of the tenant now waits.
        t.user_create(claim("t", "b").obj());
        for o in gated_vmi(
            "vm2",
            "u2",
            &[(gpu_claims_actors::api::CLAIMS_ANNOTATION, "b")],
        ) {
            t.user_create(o);
        }
        t.settle().await;
        assert_eq!(t.waiting("t/b").unwrap().0, "OverQuota");
    });
}

#[test]
fn q1_a_lost_claim_that_moves_counts_once() {
    // The tenant is at its limit with a Lost claim whose node failed: it
    // moves to n2 (its record moves with it) without asking the quota again.
    let mut objs = failed_n1_and_vm1_at_the_gate(claim("t", "a").count(2).lost("n1"));
    objs.push(quota("t", "q").hard("h200", 2).obj());
    settled(Config::default(), objs, |t| {
        attached_on_n2(t);
    });
}

#[test]
fn q1_two_sets_decided_in_one_window_cannot_both_take_the_last_gpus() {
    // Both VMs reach the gate together; the watch trails the writes, so
    // the second decision sees the first set's record only as a write.
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).obj(),
        quota("t", "q").hard("h200", 2).obj(),
        claim("t", "a").count(2).obj(),
        claim("t", "b").count(2).obj(),
    ];
    objs.extend(vm1_naming("a"));
    objs.extend(gated_vmi(
        "vm2",
        "u2",
        &[(gpu_claims_actors::api::CLAIMS_ANNOTATION, "b")],
    ));
    with_lagging_world(secs(2), objs, |mut t| async move {
        t.advance(secs(10)).await;
        let placed: Vec<&str> = ["t/a", "t/b"]
            .into_iter()
            .filter(|k| t.phase(k).counts_against_budget())
            .collect();
        assert_eq!(placed.len(), 1, "{placed:?}");
    });
}

#[test]
fn q2_the_status_shows_what_the_namespaces_claims_hold() {
    let objs = tenant(
        2,
        "a100",
        3,
        vec![
            quota("t", "q")
                .hard("h200", 4)
                .hard("a100", 4)
                .total(8)
                .obj(),
        ],
    );
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let st = quota_of(&t, "t", "q").status.unwrap();
        let used: Vec<(&str, u64)> = st.used.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(used, [("a100", 3), ("h200", 2)]);
        assert_eq!(st.used_total, Some(5));
        assert!(st.conditions.is_empty());
        // The held claim goes: the status follows, in one write.
        t.writes();
        t.user_delete(Kind::Claim, Some("t"), "held");
        t.settle().await;
        let st = quota_of(&t, "t", "q").status.unwrap();
        assert_eq!((st.used["h200"], st.used_total), (0, Some(3)));
        assert_eq!(
            writes_about(&mut t, "GPUQuota"),
            ["update_status GPUQuota q Q2"]
        );
    });
}

#[test]
fn q2_no_write_when_nothing_changed_and_none_on_restart() {
    let objs = tenant(2, "h200", 1, vec![quota("t", "q").hard("h200", 4).obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.writes();
        // Another namespace's claims and a node heartbeat change nothing it shows.
        t.user_create(claim("o", "x").obj());
        t.user_update(
            node("n1")
                .gpus(H200, 8)
                .gpus(A100, 8)
                .label("beat", "1")
                .obj(),
        );
        t.settle().await;
        assert_eq!(writes_about(&mut t, "GPUQuota"), Vec::<String>::new());
        t.restart_writes_nothing().await;
    });
}

#[test]
fn q2_a_quota_naming_a_missing_class_says_so_until_the_class_is_made() {
    let objs = tenant(0, "h200", 1, vec![quota("t", "q").hard("l40s", 1).obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let st = quota_of(&t, "t", "q").status.unwrap();
        let c = &st.conditions[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            (CONDITION_CLASS_MISSING, "True", "ClassMissing")
        );
        assert!(c.message.contains("GPUClass l40s"), "{}", c.message);
        assert_eq!(st.used["l40s"], 0);
        // The class is made: the condition goes, and the limit applies.
        t.user_create(class("l40s", "nvidia.com/L40S").obj());
        t.settle().await;
        assert!(quota_of(&t, "t", "q").status.unwrap().conditions.is_empty());
    });
}

#[test]
fn q1_a_limit_for_a_class_made_later_applies_from_its_start() {
    let mut objs = vec![
        node("n1").gpus(A100, 8).obj(),
        quota("t", "q").hard("a100", 1).obj(),
        claim("t", "a").class("a100").count(2).obj(),
    ];
    objs.extend(vm1_naming("a"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(t.waiting("t/a").unwrap().0, "ClassMissing");
        t.user_create(class("a100", A100).obj());
        t.settle().await;
        assert_eq!(t.waiting("t/a").unwrap().0, "OverQuota");
    });
}

/// A Lost claim's set moves (its record with it) and, in the same window,
/// before the watch shows the move, another set of the namespace is
/// decided: the moved record counts once, for quotas and budgets alike.
fn moved_and_another(budget: Option<u32>, limit: Option<u32>) -> Vec<Obj> {
    let mut h200 = class("h200", H200);
    if let Some(b) = budget {
        h200 = h200.budget(b);
    }
    let mut objs = vec![
        h200.obj(),
        node("n1").gpus(H200, 8).ready(false).obj(),
        node("n2").gpus(H200, 8).obj(),
        claim("t", "b").count(2).obj(),
    ];
    objs.extend(limit.map(|q| quota("t", "q").hard("h200", q).obj()));
    objs.extend(claim("t", "a").count(2).lost("n1").with_allocation(H200));
    objs.extend(vm1_naming("a"));
    objs.extend(gated_vmi(
        "vm2",
        "u2",
        &[(gpu_claims_actors::api::CLAIMS_ANNOTATION, "b")],
    ));
    objs
}

#[test]
fn q1_g3_a_record_moved_with_its_lost_claim_counts_once_before_the_watch_shows_the_move() {
    for (case, budget, quota) in [("quota", None, Some(4)), ("budget", Some(4), None)] {
        with_lagging_world(
            secs(2),
            moved_and_another(budget, quota),
            |mut t| async move {
                t.advance(secs(10)).await;
                let waited: Vec<String> = t
                    .all_entries()
                    .iter()
                    .filter(|e| e.name == "b" && e.rule == "G5")
                    .map(|e| format!("{} {:?}", e.op, e.status))
                    .collect();
                assert!(waited.is_empty(), "{case}: b was told to wait: {waited:?}");
                assert_eq!(t.phase("t/b"), ClaimPhase::Attached, "{case}");
                assert_eq!(t.claim("t/a").unwrap().node_name(), Some("n2"), "{case}");
            },
        );
    }
}

/// A GPUQuota `t/q` as a real API server stored it under an older CRD
/// (no maximum): a limit past u32, which the controller cannot read.
fn unreadable_quota() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "gpu.cozystack.io/v1alpha1",
        "kind": "GPUQuota",
        "metadata": {"namespace": "t", "name": "q"},
        "spec": {"hard": {"probe": 1, "h200": 4_294_967_296u64}},
    })
}

/// Settles `objs`, stores the unreadable quota, settles, then starts vm1
/// (naming claim t/a) and `more`: the quota is there before the sets are.
async fn then_the_vms(t: &mut TestCluster, more: Vec<Obj>) {
    t.settle().await;
    t.sim.store.seed("GPUQuota", unreadable_quota());
    t.settle().await;
    for o in vm1_naming("a").into_iter().chain(more) {
        t.user_create(o);
    }
    t.settle().await;
}

fn claims_only() -> Vec<Obj> {
    let mut objs = tenant(0, "h200", 2, vec![]);
    objs.retain(|o| !matches!(o.kind(), Kind::Vmi | Kind::Pod));
    objs.push(claim("u", "b").count(2).obj());
    objs
}

#[test]
fn q1_a_quota_that_cannot_be_read_stops_placement_in_its_namespace_until_fixed() {
    with_world(Config::default(), claims_only(), |mut t| async move {
        // Another tenant's set is not held up.
        then_the_vms(&mut t, naming("u", "vm", "b")).await;
        let (reason, message) = t.waiting("t/a").expect("t's set waits");
        assert_eq!(reason, "QuotaUnreadable");
        assert!(message.contains("GPUQuota q cannot be read"), "{message}");
        assert!(message.contains("4294967296"), "says why: {message}");
        assert_eq!(t.phase("u/b"), ClaimPhase::Attached, "u has no such quota");
        // A restart lists it: still unreadable, still closed.
        assert_eq!(t.writes_on_restart().await, Vec::<String>::new());
        assert_eq!(
            t.waiting("t/a").map(|w| w.0).as_deref(),
            Some("QuotaUnreadable")
        );
        // Fixed to a limit it can read, which has room: placed.
        let mut fixed = t.sim.store.get("GPUQuota", "t", "q").unwrap();
        fixed["spec"]["hard"] = serde_json::json!({"h200": 4});
        t.sim
            .store
            .update(
                "GPUQuota",
                fixed,
                gpu_claims_testbed::memory::store::Subresource::Main,
            )
            .unwrap();
        t.settle().await;
        assert_eq!(t.phase("t/a"), ClaimPhase::Attached);
    });
}

#[test]
fn q1_a_quota_that_cannot_be_read_and_is_deleted_no_longer_stops_placement() {
    with_world(Config::default(), claims_only(), |mut t| async move {
        then_the_vms(&mut t, vec![]).await;
        assert_eq!(
            t.waiting("t/a").map(|w| w.0).as_deref(),
            Some("QuotaUnreadable")
        );
        t.user_delete(Kind::Quota, Some("t"), "q");
        t.settle().await;
        assert_eq!(t.phase("t/a"), ClaimPhase::Attached);
    });
}

#[test]
fn q1_a_quota_read_once_then_unreadable_then_deleted_leaves_nothing_behind() {
    // The cached version from before it became unreadable (a limit of 1)
    // must go with its deletion, which the watch cannot read either.
    let mut objs = claims_only();
    objs.push(quota("t", "q").hard("h200", 1).obj());
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        for o in vm1_naming("a") {
            t.user_create(o);
        }
        t.settle().await;
        assert_eq!(t.waiting("t/a").map(|w| w.0).as_deref(), Some("OverQuota"));
        let mut bad = t.sim.store.get("GPUQuota", "t", "q").unwrap();
        bad["spec"]["hard"]["h200"] = 4_294_967_296u64.into();
        let main = gpu_claims_testbed::memory::store::Subresource::Main;
        t.sim.store.update("GPUQuota", bad, main).unwrap();
        t.settle().await;
        assert_eq!(
            t.waiting("t/a").map(|w| w.0).as_deref(),
            Some("QuotaUnreadable")
        );
        t.user_delete(Kind::Quota, Some("t"), "q");
        t.settle().await;
        assert_eq!(
            t.phase("t/a"),
            ClaimPhase::Attached,
            "no limit of 1 is left"
        );
    });
}
