//! One world size: the single changes of every kind, each on a quiet
//! system, timed from the supervisor to the first write they cause; the
//! whole-world pass beside them (the baseline); racks of nodes failing
//! and coming back; a storm of VMIs going final; what the controller
//! keeps per pod outside gpu-claims; `gpu-claims status` on the world.

use super::changes::{self, Kind};
use super::harness::Harness;
use super::scrape;
use super::world::{self, Layout, Role};
use super::{KindFigures, SizeFigures, converged_store, in_system, percentile, rss_bytes, us};
use std::time::Duration;

/// The schedule of single changes: every kind, interleaved.
fn schedule(layout: &Layout, total: usize) -> Vec<(Kind, usize)> {
    let attached = changes::count(layout, Role::Attached);
    let pending = changes::count(layout, Role::Pending);
    let mut quota = [
        (Kind::VmiFinal, (total * 45 / 100).min(attached / 2)),
        (Kind::GateClaimDeleted, (total * 20 / 100).min(pending)),
        (
            Kind::ClassDeleted,
            (total * 25 / 100).min(layout.spare_classes),
        ),
        (Kind::NodeDown, total * 5 / 100),
        (Kind::ForeignPodBound, total * 5 / 100),
        (Kind::ForeignPodDone, (total * 5 / 100).min(layout.blocked)),
    ];
    // GPU_CLAIMS_BENCH_KINDS=node-not-ready,vmi-final narrows a run (profiling).
    if let Ok(only) = std::env::var("GPU_CLAIMS_BENCH_KINDS") {
        for q in quota.iter_mut() {
            if !only.split(',').any(|k| k == q.0.name()) {
                q.1 = 0;
            }
        }
    }
    let mut out = Vec::new();
    let mut k = [0usize; 6];
    loop {
        let mut any = false;
        for (j, (kind, n)) in quota.iter_mut().enumerate() {
            if k[j] < *n {
                out.push((*kind, k[j]));
                if *kind == Kind::NodeDown {
                    out.push((Kind::NodeUp, k[j]));
                }
                k[j] += 1;
                any = true;
            }
        }
        if !any {
            return out;
        }
    }
}

/// What the controller's cache keeps per pod outside gpu-claims: live heap
/// bytes after loading the layout's foreign pods into a world whose nodes
/// are loaded, with the API's objects themselves still held (so their
/// bytes are not in it), per pod.
fn foreign_pod_bytes(layout: &Layout, live_bytes: fn() -> usize) -> (f64, usize) {
    use gpu_claims_actors::ports::Obj;
    let world = gpu_claims_actors::world::WorldWriter::new(Default::default());
    let objects = layout.objects();
    let foreign: Vec<&Obj> = objects
        .iter()
        .filter(|o| match o {
            Obj::Node(_) => {
                world.load((*o).clone());
                false
            }
            Obj::Pod(p) => gpu_claims_actors::api::LauncherPod::from_pod(p).is_none(),
            _ => false,
        })
        .collect();
    let before = live_bytes();
    for o in &foreign {
        world.load((*o).clone());
    }
    let bytes = live_bytes().saturating_sub(before) as f64 / foreign.len().max(1) as f64;
    (bytes.round(), foreign.len())
}

/// With GPU_CLAIMS_BENCH_DEBUG set, a change's writes against the
/// minimum it needs, each with when it came and what it wrote.
fn debug_writes(
    change: &str,
    w: &[(tokio::time::Instant, &'static str, String)],
    min: usize,
    t0: tokio::time::Instant,
) {
    if std::env::var_os("GPU_CLAIMS_BENCH_DEBUG").is_none() {
        return;
    }
    let each: Vec<String> = w
        .iter()
        .map(|(at, op, what)| format!("{} us {op} {what}", at.duration_since(t0).as_micros()))
        .collect();
    eprintln!("{change}: {} writes, {min} needed: {each:?}", w.len());
}

/// Measures one world size.
///
/// With `scraper`, a Prometheus scrapes the operator's `/metrics` every
/// second in alternate blocks of changes (`scrape::BLOCK`): the headline
/// and per-kind figures are those of the changes made without scrapes (as
/// before scrapes were measured), and `scrape` has the others beside them.
pub fn measure(
    claims: usize,
    total_changes: usize,
    live_bytes: fn() -> usize,
    scraper: Option<scrape::MakeScraper>,
) -> SizeFigures {
    let layout = std::sync::Arc::new(Layout::new(claims, total_changes / 4 + 1));
    let (foreign_bytes, foreign_pods) = foreign_pod_bytes(&layout, live_bytes);
    eprintln!(
        "[{claims} claims] building and converging the world ({} nodes)",
        layout.nodes
    );
    let store = converged_store(&layout);
    let sched = schedule(&layout, total_changes);
    let l = layout.clone();
    in_system(move || {
        Box::pin(async move {
            let rss0 = rss_bytes();
            let h = Harness::start(store.clone());
            h.synced(claims).await;
            let before_actors = live_bytes();
            h.lead();
            h.settle(Duration::from_millis(200)).await;
            // A restart on the converged world writes nothing (I5).
            let converged_restart_writes = h.writes();
            let actor_bytes = live_bytes().saturating_sub(before_actors) as f64 / claims as f64;
            let rss_controller = rss_bytes().saturating_sub(rss0) as f64 / claims as f64;
            eprintln!("[{claims} claims] {} single changes", sched.len());
            let mut latencies = Vec::new();
            let mut e2e = Vec::new();
            #[allow(clippy::type_complexity)]
            let mut by_kind: std::collections::BTreeMap<
                Kind,
                (
                    usize,
                    Vec<Duration>,
                    usize,
                    usize,
                    Vec<Duration>,
                    Vec<Duration>,
                ),
            > = Default::default();
            let (mut writes, mut writes_min) = (0, 0);
            let mut baseline = Vec::new();
            let mut baseline_time = Duration::ZERO;
            let scraping = scraper
                .as_ref()
                .map(|make| scrape::Scraping::start(make(h.env.world.clone())));
            let mut scraped_latencies = Vec::new();
            for (i, (kind, k)) in sched.iter().enumerate() {
                let scraped = scraping.is_some() && scrape::scraped(i);
                if let Some(s) = &scraping {
                    s.set(scraped);
                }
                let min = changes::needed(&h.env.world, &l, *kind, *k);
                let (w0, l0) = (h.writes(), h.latencies());
                let t0 = tokio::time::Instant::now();
                changes::apply(&store, &l, *kind, *k);
                h.settle(Duration::from_millis(5)).await;
                let w = h.stamps.writes.lock().unwrap()[w0..].to_vec();
                debug_writes(&format!("{kind:?} {k}"), &w, min, t0);
                let lat = h.stamps.latencies.lock().unwrap()[l0..].to_vec();
                let first_write = w.first().map(|(first, _, _)| first.duration_since(t0));
                // A change's latency is to its first write: when it is
                // acted on. Its later writes (a rack's thousand claims)
                // queue behind that one; `all_p99_us` and the storm show them.
                writes += w.len();
                writes_min += min;
                if scraped {
                    scraped_latencies.extend(lat.iter().min().copied());
                    continue;
                }
                let e = by_kind.entry(*kind).or_default();
                e.0 += 1;
                if let Some(first) = lat.iter().min() {
                    e.1.push(*first);
                    latencies.push(*first);
                }
                e.4.extend(&lat);
                if let Some(d) = first_write {
                    e.5.push(d);
                    e2e.push(d);
                }
                e.2 += w.len();
                e.3 += min;
            }
            let scrape = scraping.map(|s| {
                s.set(false);
                let (during, scraper) = s.stop();
                // At rest, as a dashboard's Prometheus mostly finds it.
                let quiet: Vec<_> = (0..10).map(|_| scrape::scrape_once(&scraper)).collect();
                let unscraped = percentile(&mut latencies.clone(), 99.0);
                let scraped = percentile(&mut scraped_latencies, 99.0);
                let f = scrape::figures(&quiet, &during, scraped, unscraped);
                eprintln!("[{claims} claims] scrapes: {f:?}");
                f
            });
            // The baseline, on the same world in the same process: one
            // whole-world pass per change, as the original controller made,
            // until 20 s of passes (at least 20). After the changes, so that
            // its garbage is not freed into their timings.
            while std::env::var_os("GPU_CLAIMS_BENCH_NO_BASELINE").is_none()
                && baseline.len() < sched.len()
                && (baseline.len() < 20 || baseline_time < Duration::from_secs(20))
            {
                let d = changes::whole_world_pass(&h.env.world);
                baseline_time += d;
                baseline.push(d);
            }
            // `gpu-claims status`: its report over this world, beside the
            // baseline's pass (both one pass over every claim).
            let base50 = percentile(&mut baseline, 50.0);
            let report_median = changes::status_report(&h.env.world, l.nodes, base50);
            // Racks: about 1% of the claims lose their nodes at once, and
            // get them back; timed to the last write of each burst.
            let mut rack_ms = Vec::new();
            let mut rack_claims = 0;
            for r in 0..10 {
                for kind in [Kind::RackDown, Kind::RackUp] {
                    let min = changes::needed(&h.env.world, &l, kind, 1000 + r);
                    let w0 = h.writes();
                    let t0 = tokio::time::Instant::now();
                    changes::apply(&store, &l, kind, 1000 + r);
                    h.settle(Duration::from_millis(20)).await;
                    let w = h.stamps.writes.lock().unwrap()[w0..].to_vec();
                    debug_writes(&format!("{kind:?} {r}"), &w, min, t0);
                    if let Some((last, _, _)) = w.last() {
                        rack_ms.push(last.duration_since(t0));
                    }
                    rack_claims = rack_claims.max(min.saturating_sub(world::CLASSES.len()));
                    writes += w.len();
                    writes_min += min;
                }
            }
            // The storm: 10% of the VMIs go final at once.
            let storm: Vec<usize> = (0..changes::count(&l, Role::Attached))
                .rev()
                .take(claims / 10)
                .map(|k| changes::nth(&l, Role::Attached, k))
                .collect();
            let w0 = h.writes();
            let t0 = tokio::time::Instant::now();
            for i in &storm {
                let v = store
                    .get(
                        "VirtualMachineInstance",
                        &world::ns(*i),
                        &world::vmi_name(*i),
                    )
                    .expect("the VMI");
                let mut v = v;
                v["status"]["phase"] = "Succeeded".into();
                store
                    .update(
                        "VirtualMachineInstance",
                        v,
                        crate::memory::store::Subresource::Status,
                    )
                    .expect("the storm applies");
            }
            h.settle(Duration::from_millis(50)).await;
            let storm_writes = h.stamps.writes.lock().unwrap()[w0..].to_vec();
            let storm_ms = storm_writes
                .last()
                .map_or(0.0, |(t, _, _)| t.duration_since(t0).as_secs_f64() * 1000.0);
            debug_writes("Storm", &storm_writes, storm.len(), t0);
            writes += storm_writes.len();
            writes_min += storm.len();
            let process_rss = rss_bytes() as f64 / claims as f64;
            let per_kind: Vec<KindFigures> = by_kind
                .into_iter()
                .map(|(kind, (n, mut lat, w, m, mut all, mut e2e))| KindFigures {
                    end_to_end_p50_us: us(percentile(&mut e2e, 50.0)),
                    end_to_end_p99_us: us(percentile(&mut e2e, 99.0)),
                    kind: kind.name(),
                    changes: n,
                    p50_us: us(percentile(&mut lat, 50.0)),
                    p99_us: us(percentile(&mut lat, 99.0)),
                    all_writes_p99_us: us(percentile(&mut all, 99.0)),
                    writes: w,
                    writes_min: m,
                })
                .collect();
            let node_all = per_kind
                .iter()
                .find(|k| k.kind == Kind::NodeDown.name())
                .map_or(0.0, |k| k.all_writes_p99_us);
            let p99 = percentile(&mut latencies, 99.0);
            let b99 = percentile(&mut baseline, 99.0);
            SizeFigures {
                claims,
                change_p50_us: us(percentile(&mut latencies, 50.0)),
                change_p99_us: us(p99),
                change_p99_runs_us: vec![us(p99)],
                end_to_end_p50_us: us(percentile(&mut e2e, 50.0)),
                end_to_end_p99_us: us(percentile(&mut e2e, 99.0)),
                baseline_p50_us: us(percentile(&mut baseline, 50.0)),
                baseline_p99_us: us(b99),
                baseline_passes: baseline.len(),
                speedup_p99: (b99.as_secs_f64() / p99.as_secs_f64().max(1e-9) * 10.0).round()
                    / 10.0,
                actor_bytes_per_claim: actor_bytes.round(),
                rss_bytes_per_claim: rss_controller.round(),
                process_rss_bytes_per_claim: process_rss.round(),
                rack_claims,
                rack_p50_ms: (percentile(&mut rack_ms, 50.0).as_secs_f64() * 10_000.0).round()
                    / 10.0,
                storm_vmis: storm.len(),
                storm_ms: (storm_ms * 10.0).round() / 10.0,
                writes,
                writes_min,
                changes: sched.len(),
                converged_restart_writes,
                foreign_pod_bytes: foreign_bytes,
                foreign_pods,
                node_change_all_writes_p99_us: node_all,
                status_report_ms: (report_median.as_secs_f64() * 10_000.0).round() / 10.0,
                nodes: l.nodes,
                status_vs_whole_world_pass: (report_median.as_secs_f64()
                    / base50.as_secs_f64().max(1e-9)
                    * 100.0)
                    .round()
                    / 100.0,
                per_kind,
                scrape,
            }
        })
    })
}
