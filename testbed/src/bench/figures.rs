//! The benchmark's figures, as JSON (`--json`) and as the table on stdout.

use super::cold;
use serde::Serialize;

#[derive(Serialize, Debug, Clone, Default)]
pub struct SizeFigures {
    pub claims: usize,
    pub change_p50_us: f64,
    pub change_p99_us: f64,
    /// Every run's change p99, in the order they ran (`--size-runs`):
    /// the figures here are those of the median run.
    pub change_p99_runs_us: Vec<f64>,
    /// From the change written to the store, through the watch feed and
    /// the supervisor, to the first write it caused.
    pub end_to_end_p50_us: f64,
    pub end_to_end_p99_us: f64,
    pub baseline_p50_us: f64,
    pub baseline_p99_us: f64,
    pub baseline_passes: usize,
    pub speedup_p99: f64,
    pub actor_bytes_per_claim: f64,
    pub rss_bytes_per_claim: f64,
    pub process_rss_bytes_per_claim: f64,
    /// Claims a rack's nodes hold, and the median time from a rack going
    /// NotReady (or Ready) to the last write it caused.
    pub rack_claims: usize,
    pub rack_p50_ms: f64,
    pub storm_vmis: usize,
    pub storm_ms: f64,
    pub writes: usize,
    pub writes_min: usize,
    pub changes: usize,
    pub converged_restart_writes: usize,
    /// The controller's bytes per pod outside gpu-claims (what its cache
    /// keeps of one: its node and request), beyond the API's object.
    pub foreign_pod_bytes: f64,
    pub foreign_pods: usize,
    /// A node's NotReady: the p99 over every write it caused (its claims
    /// Lost, the classes' capacity), not only the first.
    pub node_change_all_writes_p99_us: f64,
    /// `gpu-claims status`'s report over the converged world (median of
    /// several), its nodes, and its ratio to one whole-world pass of the
    /// rules (the baseline) on the same world in the same process.
    pub status_report_ms: f64,
    pub nodes: usize,
    pub status_vs_whole_world_pass: f64,
    pub per_kind: Vec<KindFigures>,
    /// `/metrics` scraped as a Prometheus scrapes it, if measured.
    pub scrape: Option<super::scrape::ScrapeFigures>,
}

#[derive(Serialize, Debug, Clone)]
pub struct KindFigures {
    pub kind: &'static str,
    pub changes: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Over every write the changes of this kind caused, not only the first.
    pub all_writes_p99_us: f64,
    /// From the store write, through the watch feed, to the first write.
    pub end_to_end_p50_us: f64,
    pub end_to_end_p99_us: f64,
    pub writes: usize,
    pub writes_min: usize,
}

/// The gate webhook under a pod storm: launcher pod creations reviewed
/// over TLS connections kept alive, all at once.
#[derive(Serialize, Debug, Clone)]
pub struct WebhookFigures {
    pub reviews: usize,
    pub connections: usize,
    /// From the first review sent to the last answered, connections made.
    pub reviews_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Each connection's TCP and TLS handshake, apart from the reviews:
    /// median and slowest.
    pub handshake_ms: f64,
    pub handshake_max_ms: f64,
    /// Answers that gate their pod (every pod here asks for a class's GPUs).
    pub gated: usize,
    /// The baseline: the same reviews read, admitted and answered in
    /// process on one thread, without HTTP or TLS.
    pub in_process_per_s: f64,
    /// reviews_per_s over in_process_per_s.
    pub ratio: f64,
}

#[derive(Serialize, Debug, Default)]
pub struct Figures {
    pub sizes: Vec<SizeFigures>,
    pub cold_start: Option<cold::ColdFigures>,
    pub placement_storm: Option<super::storm::StormFigures>,
    pub webhook: Option<WebhookFigures>,
    pub dra: Option<super::dra::DraFigures>,
    pub queue: Option<super::queue::QueueFigures>,
    pub hostile: Option<super::hostile::HostileFigures>,
}

/// The table on stdout.
pub fn print(f: &Figures) {
    println!(
        "{:>8} {:>9} {:>9} {:>10} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>13} {:>14}",
        "claims",
        "p50 us",
        "p99 us",
        "e2e p99",
        "base p99",
        "speedup",
        "actor B",
        "ctl RSS B",
        "storm ms",
        "rack ms",
        "writes",
        "restart writes"
    );
    for s in &f.sizes {
        println!(
            "{:>8} {:>9.1} {:>9.1} {:>10.1} {:>10.0} {:>10.0}x {:>9.0} {:>9.0} {:>9.1} {:>9.1} {:>6}/{:<6} {:>14}",
            s.claims,
            s.change_p50_us,
            s.change_p99_us,
            s.end_to_end_p99_us,
            s.baseline_p99_us,
            s.speedup_p99,
            s.actor_bytes_per_claim,
            s.rss_bytes_per_claim,
            s.storm_ms,
            s.rack_p50_ms,
            s.writes,
            s.writes_min,
            s.converged_restart_writes
        );
        for k in &s.per_kind {
            println!(
                "{:>8}   {:<20} {:>5} changes  first write p50 {:>8.1} us  p99 {:>8.1} us  every write p99 {:>9.1} us  e2e p50 {:>8.1} us  writes {}/{}",
                "",
                k.kind,
                k.changes,
                k.p50_us,
                k.p99_us,
                k.all_writes_p99_us,
                k.end_to_end_p50_us,
                k.writes,
                k.writes_min
            );
        }
    }
    for s in &f.sizes {
        if s.change_p99_runs_us.len() > 1 {
            let runs: Vec<String> = s
                .change_p99_runs_us
                .iter()
                .map(|p| format!("{p:.1}"))
                .collect();
            println!(
                "{:>8} claims: change p99 of each run {} us, the median run's {:.1} us",
                s.claims,
                runs.join(", "),
                s.change_p99_us
            );
        }
        println!(
            "{:>8} claims: {} pods outside gpu-claims, {:.0} B each in the controller's cache",
            s.claims, s.foreign_pods, s.foreign_pod_bytes
        );
        println!(
            "{:>8} claims, {} nodes: gpu-claims status's report {:.1} ms (median), {:.2}x one whole-world pass of the rules",
            s.claims, s.nodes, s.status_report_ms, s.status_vs_whole_world_pass
        );
        if let Some(m) = &s.scrape {
            println!(
                "{:>8} claims: /metrics {} scrapes p50 {:.1} ms, p99 {:.1} ms, {} bytes, {} series; change p99 with a scrape every second {:.1} us, without {:.1} us ({:.2}x, {} scrapes during the changes)",
                s.claims,
                m.scrapes,
                m.p50_ms,
                m.p99_ms,
                m.bytes,
                m.series,
                m.change_p99_us_scraped,
                m.change_p99_us_unscraped,
                m.change_p99_ratio,
                m.scrapes_during_changes
            );
        }
    }
    if let Some(s) = &f.placement_storm {
        println!(
            "placement storm: {} sets on {} claims, {} ms a write: {:.2} s with {} in flight ({:.0} sets/s), {:.2} s with one ({:.0} sets/s), {:.1}x; checked before {} writes ({} sets on {} claims): {} violations; {} sets out of G4's order; placement writes {}/{}",
            s.sets,
            s.claims,
            s.write_latency_ms,
            s.seconds,
            s.writes_in_flight,
            s.sets_per_s,
            s.one_in_flight_seconds,
            s.one_in_flight_sets_per_s,
            s.ratio,
            s.checked_writes,
            s.checked_sets,
            s.checked_claims,
            s.violations.len(),
            s.out_of_order_sets,
            s.placement_writes,
            s.placement_writes_min
        );
    }
    if let Some(q) = &f.queue {
        for (mode, m) in [("off", &q.off), ("0s", &q.strict)] {
            println!(
                "queue: {} sets waiting on {} full nodes, headOfLineAfter {mode}: a release to its last write p50 {:.1} ms, p99 {:.1} ms; writes a release p50 {} ({} in {} releases); {} placed, {} out of O1's order",
                q.waiting_sets,
                q.nodes,
                m.p50_ms,
                m.p99_ms,
                m.writes_p50,
                m.writes,
                q.releases,
                m.placed,
                m.out_of_order
            );
        }
        println!(
            "queue: strict order's median release is {:.2}x the baseline's",
            q.ratio_p50
        );
    }
    if let Some(h) = &f.hostile {
        if h.finalizers > 0 {
            println!(
                "hostile: a protobuf body of {} empty finalizers ({} bytes): {} in {:.1} ms, peak +{:.1} MB ({:.0}x the body); eight at once {:.1} ms, peak +{:.1} MB; +{:.1} MB left",
                h.finalizers,
                h.body_bytes,
                h.one_status,
                h.one_ms,
                h.one_peak_mb,
                h.one_peak_mb * f64::from(1u32 << 20) / h.body_bytes.max(1) as f64,
                h.eight_ms,
                h.eight_peak_mb,
                h.left_mb
            );
        }
        if h.plan_pods > 0 {
            println!(
                "hostile: plan on one List of {} pods ({} bytes): {:.1} ms, peak {:.0} B a pod",
                h.plan_pods, h.plan_list_bytes, h.plan_ms, h.plan_peak_bytes_per_pod
            );
        }
    }
    if let Some(w) = &f.webhook {
        println!(
            "webhook: {} reviews over {} kept TLS connections: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms, slowest {:.2} ms; handshakes p50 {:.2} ms, slowest {:.2} ms (apart); in process {:.0}/s ({:.3}x); gated {}/{}",
            w.reviews,
            w.connections,
            w.reviews_per_s,
            w.p50_ms,
            w.p99_ms,
            w.max_ms,
            w.handshake_ms,
            w.handshake_max_ms,
            w.in_process_per_s,
            w.ratio,
            w.gated,
            w.reviews
        );
    }
    if let Some(c) = &f.cold_start {
        println!(
            "cold start over HTTP, {} claims: controller {:.2} s, bare reflector {:.2} s, ratio {:.2} (medians of {}; controller writes on the converged world: {})",
            c.claims, c.controller_s, c.reflector_s, c.ratio, c.runs, c.controller_writes
        );
    }
    if let Some(d) = &f.dra {
        println!(
            "DRA, {} nodes, {} devices, {} VMs placed in {:.2} s: the cache keeps {} B per device beyond the slices' own {} B; \
             first write after a slice change p50/p99 {:.1}/{:.1} us, after a node change {:.1}/{:.1} us: slice/node p99 {:.2} ({} changes, {} writes / {} minimum)",
            d.nodes,
            d.devices,
            d.claims,
            d.converge_s,
            d.beyond_object_bytes_per_device,
            d.object_bytes_per_device,
            d.slice_change_p50_us,
            d.slice_change_p99_us,
            d.node_change_p50_us,
            d.node_change_p99_us,
            d.slice_over_node_p99,
            d.changes,
            d.writes,
            d.writes_min
        );
        let r = &d.rules;
        println!(
            "D7, {} managed pools, {} rules: all written in {:.2} s ({} writes), {} B a rule in the world; \
             a pool published or gone to its rule's write p50/p99 {:.1}/{:.1} us ({} changes, {} writes / {} minimum)",
            r.pools,
            r.rules,
            r.write_all_s,
            r.write_all_writes,
            r.bytes_per_rule,
            r.pool_change_p50_us,
            r.pool_change_p99_us,
            r.pool_changes,
            r.pool_change_writes,
            r.pool_change_writes_min
        );
        if let Some(c) = &d.cold {
            println!(
                "DRA cold start over HTTP: controller {:.2} s, bare reflector {:.2} s, ratio {:.2} (medians of {}; controller writes on the converged world: {})",
                c.controller_s, c.reflector_s, c.ratio, c.runs, c.controller_writes
            );
        }
    }
}
