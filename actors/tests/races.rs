//! Races and restarts: a watch that lags our writes, a write that meets a
//! newer object, a process that dies between two writes, and I5 (a
//! converged cluster gets no writes on resync or restart).
mod common;
use common::*;
use gpu_claims_actors::api::ClaimPhase;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::controller::WorldEvent;
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_testbed::memory::invariants::Checker;
use gpu_claims_testbed::memory::sim::{Sim, run_sim};

/// A world with work of every rule: finalizers to add, VMIs final and
/// live, a template claim to delete, a claim and a class to release.
fn busy_world() -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).no_finalizer().obj(),
        class("old", H200).deleting().obj(),
        node("n1").gpus(H200, 8).obj(),
    ];
    objs.push(claim("t", "new").no_finalizer().obj());
    objs.extend(
        claim("t", "fin")
            .attached_phase("n1")
            .attached("vm-fin")
            .with_allocation(H200),
    );
    objs.push(vmi("t", "vm-fin").uid("u-fin").phase("Succeeded").obj());
    objs.extend(
        claim("t", "live")
            .bound("n1")
            .attached("vm-live")
            .with_allocation(H200),
    );
    objs.push(vmi("t", "vm-live").uid("u-live").obj());
    objs.push(
        launcher("t", "virt-launcher-live", "vm-live", "u-live")
            .pinned("n1")
            .scheduled("n1")
            .obj(),
    );
    objs.push(
        claim("t", "vm-gone-gpu")
            .template_of("vm-gone", "u-gone")
            .obj(),
    );
    objs.extend(
        claim("t", "del")
            .class("old")
            .bound("n1")
            .deleting()
            .with_allocation(H200),
    );
    objs
}

/// The final state of a busy world, as a comparable list.
fn outcome(sim: &Sim) -> Vec<String> {
    let mut v: Vec<String> = ["GPUClaim", "GPUClass", "GPUAllocation"]
        .iter()
        .flat_map(|k| sim.store.list(k).0)
        .map(|o| {
            let kind = Kind::from_name(o["kind"].as_str().unwrap()).unwrap();
            let o = gpu_claims_actors::api::from_json(kind, o).unwrap();
            let m = o.meta();
            let phase = match &o {
                Obj::Claim(c) => format!("{:?}/{:?}", c.phase(), c.attached_vmi_name()),
                _ => String::new(),
            };
            format!("{} {:?} {:?} {phase}", kind.name(), m.name, m.finalizers)
        })
        .collect();
    v.sort();
    v
}

fn effective_writes(sim: &Sim) -> usize {
    sim.cluster.journal().effective().count()
}

#[test]
fn i5_converged_world_gets_no_writes_on_restart() {
    with_world(Config::default(), busy_world(), |mut t| async move {
        t.settle().await;
        t.restart_writes_nothing().await;
    });
}

#[test]
fn i5_converged_world_gets_no_writes_on_resync() {
    with_world(Config::default(), busy_world(), |mut t| async move {
        t.settle().await;
        t.writes();
        for kind in Kind::ALL {
            let objs = t
                .sim
                .store
                .list(kind.name())
                .0
                .into_iter()
                .map(|v| gpu_claims_actors::api::from_json(kind, v).unwrap())
                .collect();
            t.sim.supervisor().do_send(WorldEvent::Relisted {
                kind,
                objects: objs,
                list_rv: None,
                unreadable: Vec::new(),
            });
        }
        t.settle().await;
        assert_eq!(t.writes(), Vec::<String>::new());
    });
}

#[test]
fn a_lagging_watch_causes_no_duplicate_write() {
    let (plain, plain_writes) = run_sim(|| async {
        let sim = Sim::start(Config::default(), &busy_world(), None);
        sim.settle().await;
        (outcome(&sim), effective_writes(&sim))
    });
    with_lagging_world(secs(3), busy_world(), |mut t| async move {
        t.advance(secs(10)).await;
        assert_eq!(outcome(&t.sim), plain);
        assert_eq!(
            effective_writes(&t.sim),
            plain_writes,
            "the same writes as with a prompt watch"
        );
        let refused: Vec<_> = t
            .all_entries()
            .into_iter()
            .filter(|e| e.error.is_some())
            .collect();
        assert!(
            refused.is_empty(),
            "no write met a newer object: {refused:?}"
        );
    });
}

#[test]
fn a_write_that_meets_a_newer_object_is_decided_again_never_overwrites() {
    let objs = holding(attached_to("vm1"), [live_vmi("vm1", "u1")]);
    with_lagging_world(secs(2), objs, |mut t| async move {
        t.advance(secs(5)).await;
        t.writes();
        // The VM stops, and at the same moment a user labels the claim; the
        // controller's cache shows neither for 2s.
        t.user_update(vm1_in("Succeeded"));
        let mut labelled = t.claim("t/a").unwrap();
        labelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("team".into(), "ml".into());
        t.user_update(Obj::Claim(labelled));
        t.advance(secs(5)).await;
        let c = t.claim("t/a").unwrap();
        assert_eq!(
            (c.phase(), c.attached_vmi_name()),
            (ClaimPhase::Bound, None)
        );
        assert_eq!(
            c.metadata.labels.unwrap()["team"],
            "ml",
            "the user's write survives"
        );
    });
}

#[test]
fn a_write_answered_409_rereads_and_writes_once_more() {
    let objs = holding(attached_to("vm1"), [vm1_in("Failed")]);
    with_world(Config::default(), objs, |mut t| async move {
        t.fail_writes([Some(gpu_claims_actors::ports::WriteError::conflict(
            "stale",
        ))]);
        t.settle().await;
        assert_eq!(t.phase("t/a"), ClaimPhase::Bound);
    });
}

/// Kills the process after each write `start`'s world makes when left
/// alone (as `count_writes` counts them), restarts it and brings it on by
/// `after_restart`: every run ends where the undisturbed one does, breaks
/// no invariant and makes no write twice. Returns how many writes the
/// undisturbed run made.
fn resumes_to_the_same_end(
    start: impl Fn() -> Sim,
    after_restart: impl AsyncFn(&Sim),
    count_writes: impl Fn(&Sim) -> usize,
) -> usize {
    let (end, total) = run_sim(|| async {
        let sim = start();
        sim.settle().await;
        (outcome(&sim), count_writes(&sim))
    });
    for cut in 0..total as i64 {
        let (got, writes, violations) = run_sim(|| async {
            let (sim, v) = killed_after(cut, &start, &after_restart).await;
            (outcome(&sim), count_writes(&sim), v)
        });
        assert!(
            violations.is_empty(),
            "cut after {cut} writes: {violations:?}"
        );
        assert_eq!(got, end, "cut after {cut} writes");
        assert_eq!(
            writes, total,
            "cut after {cut} writes: no write is made twice"
        );
    }
    total
}

#[test]
fn a_process_killed_between_any_two_writes_resumes_to_the_same_end() {
    let total = resumes_to_the_same_end(
        || Sim::start(Config::default(), &busy_world(), None),
        async |sim| sim.settle().await,
        effective_writes,
    );
    assert!(
        total >= 8,
        "the busy world needs several writes, got {total}"
    );
}

#[test]
fn the_grace_of_l6_starts_afresh_after_a_restart() {
    attached_to_an_absent_vmi(Config::default(), "vm-x", |mut t| async move {
        t.advance(secs(100)).await;
        t.sim.restart();
        t.settle().await;
        t.advance(secs(100)).await;
        assert_eq!(
            t.claim("t/a").unwrap().attached_vmi_name(),
            Some("vm-x"),
            "the memory of L6 is the process's"
        );
        t.advance(secs(20)).await;
        assert_eq!(t.claim("t/a").unwrap().attached_vmi_name(), None);
    });
}

#[test]
fn an_unreadable_object_is_reported_and_the_rest_goes_on() {
    let objs = world([claim("t", "a").no_finalizer().obj()]);
    with_world(Config::default(), objs, |mut t| async move {
        let mut bad = serde_json::json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
            "metadata": {"namespace": "t", "name": "bad"}, "spec": {"className": "h200", "count": "two"}});
        bad["metadata"]["uid"] = "u-bad".into();
        t.sim.store.seed("GPUClaim", bad);
        t.settle().await;
        assert!(
            t.writes()
                .contains(&"add_finalizer GPUClaim a L1".to_string())
        );
        assert!(t.sim.world().claim("t/bad").is_none());
    });
}

#[test]
fn actors_stop_when_their_claims_are_gone() {
    let objs = world(claim("t", "a").bound("n1").deleting().with_allocation(H200));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let stats = t
            .sim
            .supervisor()
            .send(gpu_claims_actors::controller::StatsQuery)
            .await
            .unwrap();
        assert_eq!((stats.claims, stats.claim_actors), (0, 0));
    });
}

/// Twelve VMIs at the gate, each naming a claim of two GPUs, on three
/// nodes of eight: every GPU is taken once all are placed, so a GPU
/// counted twice by sets placed at once leaves one unplaced or double
/// books (I1, I2).
fn storm_world() -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).obj(),
        node("n2").gpus(H200, 8).obj(),
        node("n3").gpus(H200, 8).obj(),
    ];
    for i in 0..12 {
        let c = format!("c{i}");
        objs.push(claim("t", &c).count(2).obj());
        objs.extend(naming("t", &format!("vm{i}"), &c));
    }
    objs
}

/// Each write takes 10 ms of simulated time, so placement's writes of
/// different sets are under way at once.
const WRITE_LATENCY: std::time::Duration = std::time::Duration::from_millis(10);

#[test]
fn g4_sets_placed_with_many_writes_in_flight_take_every_gpu_once_in_g4_order() {
    let (bound, journal) = run_sim(|| async {
        let mut sim = Sim::start(Config::default(), &storm_world(), None);
        sim.slow_writes(WRITE_LATENCY);
        let mut checker = Checker::default();
        sim.settle().await;
        assert_eq!(checker.check(&sim.cluster), Vec::<String>::new());
        let bound = (0..12)
            .filter(|i| {
                sim.world()
                    .claim(&format!("t/c{i}"))
                    .is_some_and(|c| matches!(c.phase(), ClaimPhase::Bound | ClaimPhase::Attached))
            })
            .count();
        let journal: Vec<(String, String, std::time::Duration)> = sim
            .cluster
            .journal()
            .effective()
            .filter(|e| e.rule == "G4")
            .map(|e| (e.kind.to_string(), e.name.clone(), e.elapsed))
            .collect();
        (bound, journal)
    });
    assert_eq!(bound, 12, "every set placed: every GPU taken once");
    assert_eq!(journal.len(), 36, "three writes a set, none twice");
    for i in 0..12 {
        let at = |kind: &str, name: String| {
            journal
                .iter()
                .position(|(k, n, _)| k == kind && *n == name)
                .unwrap_or_else(|| panic!("{kind} {name} written"))
        };
        let (a, c, p) = (
            at("GPUAllocation", format!("c{i}")),
            at("GPUClaim", format!("c{i}")),
            at("Pod", format!("virt-launcher-vm{i}")),
        );
        assert!(
            a < c && c < p,
            "set {i}: allocation, claim, pod (G4's order)"
        );
    }
    // One at a time, 36 writes would take 360 ms; under way at once, the
    // last lands within a few writes' time of the first.
    let last = journal.iter().map(|(_, _, t)| *t).max().unwrap();
    let first = journal.iter().map(|(_, _, t)| *t).min().unwrap();
    assert!(
        last - first < WRITE_LATENCY * 12,
        "the sets' writes overlapped: {:?} from the first to the last",
        last - first
    );
}

/// Effective writes but the classes' status: a class's counts are written
/// as they stand when its actor looks, and a restart among writes in flight
/// can have it look once more, in between (a true count, not a repeat).
fn writes_but_class_status(sim: &Sim) -> usize {
    sim.cluster
        .journal()
        .effective()
        .filter(|e| e.rule != "class-status")
        .count()
}

#[test]
fn a_process_killed_with_many_placement_writes_in_flight_resumes_to_the_same_end() {
    let start = || {
        let mut sim = Sim::start(Config::default(), &storm_world(), None);
        sim.slow_writes(WRITE_LATENCY);
        sim
    };
    // Writes the killed process sent before it died land during the new
    // one's first decisions, as a real API server applies a request whose
    // sender is gone: the new process's write meets the object (409,
    // AlreadyExists) and looks again after its conflict retry.
    let total = resumes_to_the_same_end(
        start,
        async |sim| sim.advance(secs(2)).await,
        writes_but_class_status,
    );
    assert!(total >= 36, "twelve sets of three writes, got {total}");
}

#[test]
fn g4_room_two_sets_wanting_the_same_gpus_while_the_first_write_fails_place_one_at_once() {
    // Two sets want the same node's two GPUs, decided while the first's
    // writes are under way, and the first's allocation create fails (the
    // API server is briefly down): what it assumed is let go, and one set
    // (the retried one or the one held back) is placed within the first
    // backoff, never both (I1).
    let mut objs = vec![class("h200", H200).obj(), node("n1").gpus(H200, 2).obj()];
    for (ns, c, v) in [("ta", "a", "vm-a"), ("tb", "b", "vm-b")] {
        objs.push(claim(ns, c).count(2).obj());
        objs.extend(naming(ns, v, c));
    }
    with_world(Config::default(), objs, |mut t| async move {
        t.sim.slow_writes(WRITE_LATENCY);
        let down = Some(gpu_claims_actors::ports::WriteError::Refused(
            gpu_claims_actors::ports::status(500, "InternalError", "etcd timeout"),
        ));
        t.fail_writes([down]);
        t.settle().await;
        let placed: Vec<(String, std::time::Duration)> = t
            .sim
            .cluster
            .journal()
            .effective()
            .filter(|e| e.kind == "GPUAllocation" && e.op == "create")
            .map(|e| (e.name.clone(), e.elapsed))
            .collect();
        assert_eq!(placed.len(), 1, "one set fits: {placed:?}");
        assert!(
            placed[0].1 < std::time::Duration::from_millis(100),
            "placed at {:?}: the room let go is taken at once",
            placed[0].1
        );
        let bound = ["ta/a", "tb/b"]
            .iter()
            .filter(|k| matches!(t.phase(k), ClaimPhase::Bound | ClaimPhase::Attached))
            .count();
        assert_eq!(bound, 1);
    });
}
