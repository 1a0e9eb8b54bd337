//! L8-L11: a deleting claim is released once no VMI uses it; a deleting
//! class once no claim of it holds or owes GPUs.
mod common;
use common::*;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::controller::WorldEvent;
use gpu_claims_actors::ports::{Kind, Obj, WriteError};

// ---- L8: release order, and a failed finalizer removal

#[test]
fn l8_release_deletes_the_record_then_removes_the_finalizer() {
    let objs = holding(claim("t", "a").bound("n1").deleting(), []);
    settled(Config::default(), objs, |t| {
        let w = t.writes();
        assert_eq!(
            &w[..2],
            [
                "delete GPUAllocation a L8",
                "remove_finalizer GPUClaim a L8"
            ]
        );
        assert!(released(t));
        assert!(!t.exists(Kind::Allocation, Some("t"), "a"));
    });
}

#[test]
fn l8_claim_without_record_just_loses_its_finalizer() {
    assert_eq!(
        settled_writes(world([claim("t", "a").deleting().obj()])),
        [
            "remove_finalizer GPUClaim a L8",
            "update_status GPUClass h200 class-status"
        ]
    );
}

/// Class h200 and its claim `t/a` on n1, both deleting: the record's
/// delete passes and the writes after it (the finalizer removals) meet
/// `errors`; settled, then handed to `f`.
fn finalizer_removal_meets<F, Fut>(errors: Vec<WriteError>, f: F)
where
    F: FnOnce(TestCluster) -> Fut,
    Fut: Future<Output = ()>,
{
    let objs = deleting_class_and(claim("t", "a").bound("n1").deleting());
    with_world(Config::default(), objs, |mut t| async move {
        t.fail_writes(std::iter::once(None).chain(errors.into_iter().map(Some)));
        t.settle().await;
        f(t).await
    });
}

#[test]
fn l8_failed_finalizer_removal_keeps_the_claim_holding_for_its_class() {
    // The API server fails for a while.
    let down = WriteError::Refused(gpu_claims_actors::ports::status(
        500,
        "InternalError",
        "etcd timeout",
    ));
    finalizer_removal_meets(vec![down.clone(), down.clone(), down], |mut t| async move {
        assert_eq!(t.writes(), ["delete GPUAllocation a L8"]);
        assert!(
            t.class("h200").is_some(),
            "the class waits while the claim holds"
        );
        // Retries (backoff) release the claim, and only then the class.
        t.advance(secs(5)).await;
        assert_eq!(
            t.writes(),
            [
                "remove_finalizer GPUClaim a L8",
                "remove_finalizer GPUClass h200 L11"
            ]
        );
    });
}

#[test]
fn l8_not_found_on_finalizer_removal_counts_as_released() {
    finalizer_removal_meets(vec![WriteError::NotFound], |mut t| async move {
        let w = t.writes();
        assert!(
            w.contains(&"remove_finalizer GPUClass h200 L11".to_string()),
            "{w:?}"
        );
    });
}

#[test]
fn l8_conflict_on_finalizer_removal_rereads_and_releases() {
    let objs = holding(claim("t", "a").bound("n1").deleting(), []);
    with_world(Config::default(), objs, |mut t| async move {
        t.fail_writes([None, Some(WriteError::conflict("newer"))]);
        t.settle().await;
        assert!(released(&t));
        assert!(
            t.sim.world().claim("t/a").is_none(),
            "the watch showed the deletion"
        );
        let deletes = t
            .all_entries()
            .iter()
            .filter(|e| e.op == "delete" && e.kind == "GPUAllocation")
            .count();
        assert_eq!(deletes, 1, "the record is deleted once");
    });
}

// ---- L9 and L10: who holds a deleting claim

/// A deleting claim, a world around it, and whether it settles released.
struct Held {
    case: &'static str,
    config: Config,
    objs: Vec<Obj>,
    released: bool,
}

fn l9(case: &'static str, c: ClaimBuilder, more: Vec<Obj>, released: bool) -> Held {
    let objs = holding(c.deleting(), more);
    let config = Config::default();
    Held {
        case,
        config,
        objs,
        released,
    }
}

fn l10(case: &'static str, v: Option<Obj>, released: bool) -> Held {
    let objs = l10_world(v);
    Held {
        case,
        config: off(),
        objs,
        released,
    }
}

#[test]
fn l9_l10_a_deleting_claim_is_held_only_by_a_vmi_that_may_have_its_gpus() {
    let pinned = vm1_launcher().pinned("n1");
    let gated = vm1_launcher().gated();
    let rows = [
        l9(
            "L9 an unattached claim is not used",
            claim("t", "a").bound("n1"),
            vec![],
            true,
        ),
        l9(
            "L9 the absent VMI of an Attached claim",
            attached_to("vm1"),
            vec![],
            true,
        ),
        l9(
            "L9 a final VMI",
            attached_to("vm1"),
            vec![vm1_in("Succeeded")],
            true,
        ),
        l9(
            "L9 a live VMI with an ungated launcher holds",
            attached_to("vm1"),
            vec![live_vmi("vm1", "u1"), pinned.scheduled("n1").obj()],
            false,
        ),
        l9(
            "L9 a VMI whose launchers are all gated, live too, does not hold",
            bound_to("vm1"),
            vec![vm1_in("Scheduling"), gated.obj()],
            true,
        ),
        l10("L10 the VMI is not found", None, true),
        l10(
            "L10 a VMI of another uid",
            Some(live_vmi("vm1", "u2")),
            true,
        ),
        l10("L10 a final VMI", Some(vm1_in("Failed")), true),
    ];
    for row in rows {
        settled(row.config, row.objs, |t| {
            assert_eq!(released(t), row.released, "{}", row.case);
        });
    }
}

#[test]
fn l9_fresh_attachment_holds_the_claim_within_grace() {
    let objs = holding(bound_to("vm-x").deleting(), []);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.advance(secs(119)).await;
        assert!(!released(&t), "the VMI may be starting with the GPU");
        t.advance(secs(1)).await;
        assert!(released(&t));
    });
}

#[test]
fn l9_live_vmi_without_launcher_pods_holds() {
    let objs = holding(attached_to("vm1").deleting(), [live_vmi("vm1", "u1")]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert!(!released(&t));
        // The VM stops: now it goes.
        t.user_update(vm1_in("Succeeded"));
        t.settle().await;
        assert!(released(&t));
    });
}

#[test]
fn l9_a_launcher_that_left_the_gate_live_holds_though_the_cache_shows_it_gated() {
    let gated = vm1_launcher().gated();
    let pinned = vm1_launcher().pinned("n1");
    let objs = holding(bound_to("vm1"), [vm1_in("Scheduling"), pinned.obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        // A stale cache: it shows the pod still gated.
        t.sim.supervisor().do_send(WorldEvent::Apply(gated.obj()));
        t.settle().await;
        t.user_delete(Kind::Claim, Some("t"), "a");
        t.settle().await;
        assert!(
            !released(&t),
            "the live pod left the gate: it may hold the GPU"
        );
    });
}

#[test]
fn l9_a_cached_launcher_not_found_live_is_skipped() {
    let objs = holding(bound_to("vm1").deleting(), [vm1_in("Scheduling")]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        // The claim is held only by grace-free logic: give the cache a gated pod the server lacks.
        t.sim.supervisor().do_send(WorldEvent::Apply(
            launcher("t", "ghost", "vm1", "u1").gated().obj(),
        ));
        t.user_update(vm1_in("Pending"));
        t.settle().await;
        assert!(released(&t));
    });
}

/// Claim `t/a` is held while live reads fail; they come back, and the
/// retry (within a second) releases it.
async fn released_once_reads_come_back(t: &mut TestCluster) {
    assert!(!released(t));
    t.sim.cluster.faults().fail_reads = None;
    t.advance(secs(1)).await;
    assert!(released(t));
}

#[test]
fn l9_a_failed_live_read_retries_later() {
    let gated = vm1_launcher().gated();
    let objs = holding(bound_to("vm1"), [vm1_in("Scheduling"), gated.obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        t.sim.cluster.faults().fail_reads = Some("connection reset".into());
        t.user_delete(Kind::Claim, Some("t"), "a");
        t.settle().await;
        released_once_reads_come_back(&mut t).await;
    });
}

// ---- L10: used by a VMI, integration off (the VMI read live)

fn l10_world(v: Option<Obj>) -> Vec<Obj> {
    holding(bound_to("vm1").owned_by("vm1", "u1").deleting(), v)
}

#[test]
fn l10_vmi_kind_not_served_does_not_hold() {
    let objs = l10_world(Some(live_vmi("vm1", "u1")));
    with_world(off(), objs, |mut t| async move {
        t.sim.cluster.faults().vmis_not_served = true;
        t.settle().await;
        assert!(released(&t));
    });
}

#[test]
fn l10_read_error_retries_later() {
    with_world(off(), l10_world(None), |mut t| async move {
        t.sim.cluster.faults().fail_reads = Some("timeout".into());
        t.settle().await;
        released_once_reads_come_back(&mut t).await;
    });
}

#[test]
fn l10_live_vmi_holds_until_a_poll_sees_it_final() {
    let objs = l10_world(Some(live_vmi("vm1", "u1")));
    with_world(off(), objs, |mut t| async move {
        t.settle().await;
        assert!(!released(&t));
        t.user_update(vm1_in("Succeeded"));
        t.advance(secs(30)).await;
        assert!(released(&t));
    });
}

// ---- L11: class release

#[test]
fn l11_class_is_released_once_no_claim_holds() {
    let objs = vec![class("h200", H200).deleting().obj(), claim("t", "p").obj()];
    assert_eq!(
        settled_writes(objs),
        ["remove_finalizer GPUClass h200 L11"],
        "a Pending claim does not hold"
    );
}

#[test]
fn l11_class_waits_for_a_bound_claim() {
    let objs = deleting_class_and(claim("t", "a").bound("n1"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert!(t.class("h200").is_some());
        t.user_delete(Kind::Claim, Some("t"), "a");
        t.settle().await;
        assert!(t.class("h200").is_none());
    });
}

#[test]
fn l11_a_lost_claim_holds_its_class() {
    let mut objs = vec![class("h200", H200).deleting().obj()];
    objs.extend(claim("t", "a").lost("n1").with_allocation(H200));
    settled(Config::default(), objs, |t| {
        assert!(t.class("h200").is_some());
    });
}

#[test]
fn l11_claims_released_in_the_same_round_count_as_gone_before_the_watch_shows_it() {
    let objs = deleting_class_and(claim("t", "a").bound("n1").deleting());
    with_lagging_world(secs(5), objs, |mut t| async move {
        t.sim.settle().await;
        // The watch has not shown the release yet, and the class goes all the same.
        assert!(t.claim("t/a").is_none());
        assert!(t.class("h200").is_none());
        t.advance(secs(10)).await;
    });
}

#[test]
fn l11_claims_of_another_class_do_not_hold() {
    let mut objs = vec![
        class("h200", H200).deleting().obj(),
        class("a100", "nvidia.com/A100").obj(),
    ];
    objs.extend(
        claim("t", "a")
            .class("a100")
            .bound("n1")
            .with_allocation("nvidia.com/A100"),
    );
    settled(Config::default(), objs, |t| {
        assert!(t.class("h200").is_none());
    });
}

#[test]
fn class_status_shows_capacity_on_ready_matching_nodes_and_allocated() {
    let mut objs = vec![
        class("h200", H200).selector("pool", "gpu").obj(),
        node("n1").gpus(H200, 8).label("pool", "gpu").obj(),
        node("n2")
            .gpus(H200, 8)
            .label("pool", "gpu")
            .ready(false)
            .obj(),
        node("n3").gpus(H200, 8).obj(),
    ];
    objs.extend(claim("t", "a").count(2).bound("n1").with_allocation(H200));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let st = t.class("h200").unwrap().status.unwrap();
        assert_eq!((st.capacity, st.allocated), (Some(8), Some(2)));
        t.writes();
        // A heartbeat changes nothing a rule reads: no write.
        t.user_update(node("n3").gpus(H200, 8).label("beat", "1").obj());
        t.settle().await;
        assert_eq!(t.writes(), Vec::<String>::new());
        t.user_update(node("n2").gpus(H200, 8).label("pool", "gpu").obj());
        t.settle().await;
        assert_eq!(t.writes(), ["update_status GPUClass h200 class-status"]);
        assert_eq!(t.class("h200").unwrap().status.unwrap().capacity, Some(16));
    });
}

#[test]
fn l11_a_released_class_is_released_once_while_the_watch_lags() {
    // The class actor ends after its release; until the watch shows the
    // class gone, no new actor decides on the cached copy and releases it
    // again (every attempt counts, refused ones too).
    let objs = vec![class("h200", H200).deleting().obj()];
    with_lagging_world(secs(5), objs, |mut t| async move {
        t.sim.settle().await;
        t.advance(secs(10)).await;
        let tries: Vec<String> = t
            .all_entries()
            .iter()
            .filter(|e| e.kind == "GPUClass")
            .map(|e| format!("{} {} {:?}", e.op, e.rule, e.error))
            .collect();
        assert_eq!(tries, ["remove_finalizer L11 None"]);
        assert!(t.class("h200").is_none());
    });
}
