//! The benchmark's machinery on a small world, for what it asserts rather
//! than how fast it is (timing belongs to `gpu-claims-bench`): every kind
//! of change is made and answered with exactly the writes it needs, a
//! converged world gets no write from a fresh controller, and the cold
//! start over HTTP converges without writing; the webhook storm gates
//! every launcher pod it reviews; the placement storm places every set once,
//! in G4's order, keeping the invariants.

#[test]
fn every_benchmark_change_gets_exactly_the_writes_it_needs() {
    let scraper: gpu_claims_testbed::bench::scrape::MakeScraper =
        std::sync::Arc::new(gpu_claims::dev::bench::scraper);
    let s = gpu_claims_testbed::bench::measure(400, 250, || 0, Some(scraper));
    assert_eq!(s.converged_restart_writes, 0, "I5 on the converged world");
    assert_eq!(s.writes, s.writes_min, "{s:#?}");
    let kinds: Vec<&str> = s.per_kind.iter().map(|k| k.kind).collect();
    for k in [
        "vmi-final",
        "node-not-ready",
        "node-ready",
        "gated-claim-deleted",
        "class-deleted",
        "foreign-pod-bound",
        "foreign-pod-done",
    ] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    assert!(
        s.per_kind
            .iter()
            .all(|k| k.changes > 0 && k.writes == k.writes_min)
    );
    assert_eq!(s.storm_vmis, 40);
    assert!(s.rack_claims > 0, "the racks hit claims");
    assert!(s.baseline_passes >= 20);
    // Ten pods outside gpu-claims per node are in the world (their bytes
    // are weighed by the benchmark's counting allocator, not here).
    assert!(s.foreign_pods >= 10 * 40, "{}", s.foreign_pods);
    // The scrapes: the operator's whole exposition, the cluster's figures
    // in it, measured at rest and while the changes flowed (every other
    // block of changes: 250 changes make three blocks).
    let m = s.scrape.as_ref().expect("scrapes measured");
    assert!(m.scrapes_during_changes >= 1, "{m:?}");
    assert!(m.scrapes >= 10 + m.scrapes_during_changes, "{m:?}");
    assert!(m.series > 100 && m.bytes > 10_000, "{m:?}");
    assert!(m.p50_ms > 0.0 && m.change_p99_us_scraped > 0.0, "{m:?}");
    assert_eq!(s.change_p99_runs_us, vec![s.change_p99_us]);
}

/// `--size-runs`: a size reports its run of median change p99, every
/// run's p99 beside it in the order they ran, and the first run's memory
/// figures (a later run starts where the largest world has been).
#[test]
fn a_size_run_thrice_reports_its_median_run_and_its_first_runs_memory() {
    let run = |p99: f64, writes: usize, rss: f64| gpu_claims_testbed::bench::SizeFigures {
        change_p99_us: p99,
        writes,
        rss_bytes_per_claim: rss,
        ..Default::default()
    };
    let runs = vec![run(300.0, 1, 900.0), run(100.0, 2, 5.0), run(200.0, 3, 7.0)];
    let median = gpu_claims_testbed::bench::median_run(runs).expect("three runs");
    assert_eq!((median.change_p99_us, median.writes), (200.0, 3));
    assert_eq!(median.change_p99_runs_us, vec![300.0, 100.0, 200.0]);
    assert_eq!(median.rss_bytes_per_claim, 900.0, "the first run's memory");
    let two = vec![run(50.0, 1, 1.0), run(40.0, 2, 2.0)];
    let lower = gpu_claims_testbed::bench::median_run(two).expect("two runs");
    assert_eq!(lower.change_p99_us, 40.0, "the lower of the middle two");
    assert!(gpu_claims_testbed::bench::median_run(Vec::new()).is_none());
}

#[test]
fn the_cold_start_converges_over_http_without_a_write() {
    let c = gpu_claims_testbed::bench::cold::measure(
        300,
        1,
        std::sync::Arc::new(gpu_claims::dev::bench::RunController),
    )
    .unwrap();
    assert_eq!(c.controller_writes, 0);
    assert!(c.controller_s > 0.0 && c.reflector_s > 0.0);
}

/// The webhook storm over kept TLS connections: every review is answered
/// within its deadline and gates its launcher pod, on more reviews than
/// connections (so each connection carries several, kept alive).
#[test]
fn the_webhook_storm_answers_every_review_and_gates_every_launcher_pod() {
    let w = gpu_claims_testbed::runtime()
        .block_on(gpu_claims::dev::webhook_storm::measure(120, 8))
        .unwrap();
    assert_eq!((w.reviews, w.connections), (120, 8));
    assert_eq!(w.gated, 120, "every launcher pod asks for a class's GPUs");
    assert!(w.reviews_per_s > 0.0 && w.in_process_per_s > 0.0);
    assert!(w.p50_ms <= w.p99_ms && w.p99_ms <= w.max_ms, "{w:?}");
}

/// The placement storm on a small world: every set placed with many
/// writes in flight and with one, no invariant broken before any write of
/// the checked storm, each set's writes in G4's order, and exactly three
/// placement writes a set.
#[test]
fn the_placement_storm_places_every_set_once_in_g4_order_keeping_the_invariants() {
    let s = gpu_claims_testbed::bench::storm::measure(300, 40, std::time::Duration::from_millis(2));
    assert_eq!(s.violations, Vec::<String>::new());
    assert!(s.checked_writes >= 3 * 40, "{s:?}");
    assert_eq!(s.out_of_order_sets, 0, "{s:?}");
    assert_eq!(s.placement_writes, s.placement_writes_min, "{s:?}");
    assert!(s.sets_per_s > 0.0 && s.one_in_flight_sets_per_s > 0.0);
}

/// Issue 35's DRA cost on a small world: the controller places every VM
/// on its devices, each slice change (a held GPU failed, well again) and
/// node change (NotReady, Ready: every claim there, and the class) gets
/// exactly its status writes, and
/// the cold start over HTTP converges without a write.
#[test]
fn the_dra_world_places_every_vm_answers_each_change_with_exactly_its_writes_and_cold_starts_quietly()
 {
    let d = gpu_claims_testbed::bench::dra::measure(
        24,
        40,
        6,
        || 0,
        Some((
            1,
            std::sync::Arc::new(gpu_claims::dev::bench::RunController),
        )),
    );
    assert_eq!((d.nodes, d.devices, d.claims), (24, 192, 40));
    assert_eq!(d.changes, 12);
    assert_eq!(d.writes, d.writes_min, "{d:#?}");
    assert!(
        d.slice_change_p99_us > 0.0 && d.node_change_p99_us > 0.0,
        "{d:#?}"
    );
    // D7: a rule per managed pool (a node's), written again from scratch
    // with one write each, and a pool published or gone: its rule's write
    // and the class's count, nothing more.
    let r = &d.rules;
    assert_eq!(
        (r.pools, r.rules, r.write_all_writes),
        (24, 24, 24),
        "{r:#?}"
    );
    assert_eq!(r.pool_changes, 12, "{r:#?}");
    assert_eq!(r.pool_change_writes, r.pool_change_writes_min, "{r:#?}");
    let cold = d.cold.expect("the cold start");
    assert_eq!(cold.controller_writes, 0, "{cold:?}");
}

/// The queue benchmark on a small world (80 sets waiting, every GPU held):
/// with no head holding, each release's GPU goes to the first set in O1's
/// order; in strict order the high-priority small set goes first, then the
/// big set at the head holds the GPUs that free on nodes that could hold it.
#[test]
fn o1_o2_the_queue_benchmark_places_in_order_and_holds_for_the_head_in_strict_order() {
    let q = gpu_claims_testbed::bench::queue::measure(80, 6);
    assert_eq!((q.waiting_sets, q.nodes, q.releases), (80, 10, 6));
    assert_eq!(q.off.placed, 6, "{q:#?}");
    assert_eq!(q.off.out_of_order, 0, "{q:#?}");
    assert_eq!(q.strict.out_of_order, 0, "{q:#?}");
    // The one high-priority set (k = 7) takes the first GPU; then the big
    // set k = 0 leads, and every later GPU is held for it.
    assert_eq!(q.strict.placed, 1, "{q:#?}");
    assert!(q.off.writes > 0 && q.strict.writes > 0);
}

/// Issue 61, item 3: the hostile body the benchmark sends is one the
/// embedded API server refuses for what it is (422: its finalizers are
/// empty), not a body it cannot read.
#[test]
fn the_hostile_body_is_refused_as_invalid() {
    let h = gpu_claims_testbed::bench::hostile::measure(10_000, 0);
    assert_eq!(h.one_status, 422, "{h:?}");
    assert!(h.body_bytes > 20_000, "{h:?}");
}
