//! `gpu-claims-bench`: what a world change costs at 1k to 100k claims,
//! side by side with the original controller's whole-world pass, and a
//! cold start over HTTP against the bare reflector floor. Figures, not
//! timed tests; BENCHMARKS.md says what each means.

pub mod changes;
pub mod cold;
pub mod dra;
mod figures;
pub mod harness;
pub mod hostile;
pub mod queue;
pub mod scrape;
mod sizes;
pub mod storm;
pub mod world;

use harness::Harness;
use std::path::PathBuf;
use std::time::Duration;
use world::Layout;

pub use figures::{Figures, KindFigures, SizeFigures, WebhookFigures, print};
pub use sizes::measure;

#[derive(clap::Parser, Debug)]
#[command(
    name = "gpu-claims-bench",
    about = "Benchmarks of gpu-claims (see BENCHMARKS.md)"
)]
pub struct BenchArgs {
    /// Where to write the figures as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Claims per world, comma-separated (`--sizes` alone: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "1000,10000,100000")]
    pub sizes: Vec<usize>,
    /// Runs of every size, in turn (1k, 10k, 100k, 1k, ...), so that a
    /// noisy minute hits every size alike: each size reports its run of
    /// median change p99, with every run's p99 beside it.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..))]
    pub size_runs: u16,
    /// Claims of the cold start over HTTP (0 skips it).
    #[arg(long, default_value_t = 50_000)]
    pub cold_claims: usize,
    /// Cold starts of each side, alternating; medians are reported.
    #[arg(long, default_value_t = 3)]
    pub cold_runs: usize,
    /// Single changes per size (spread over the kinds).
    #[arg(long, default_value_t = 1000)]
    pub changes: usize,
    /// VMIs of the placement storm, reaching the gate at once (0 skips it).
    #[arg(long, default_value_t = 1000)]
    pub storm_sets: usize,
    /// Claims of the world the storm comes to.
    #[arg(long, default_value_t = 10_000)]
    pub storm_claims: usize,
    /// Milliseconds every write of the storm waits before it is applied.
    #[arg(long, default_value_t = 10)]
    pub storm_write_latency_ms: u64,
    /// Launcher pod reviews of the webhook storm (0 skips it).
    #[arg(long, default_value_t = 2000)]
    pub webhook_reviews: usize,
    /// Connections kept alive the storm's reviews share.
    #[arg(long, default_value_t = 64)]
    pub webhook_connections: usize,
    /// Nodes of the DRA world, 8 GPUs each in slices, a VM of 2 on each
    /// (0 skips it).
    #[arg(long, default_value_t = 15_000)]
    pub dra_nodes: usize,
    /// VMs of the DRA world, 2 GPUs each.
    #[arg(long, default_value_t = 50_000)]
    pub dra_vms: usize,
    /// Slice changes and node changes, each, in the DRA world.
    #[arg(long, default_value_t = 200)]
    pub dra_changes: usize,
    /// Sets waiting at the gate while reservations are released one by
    /// one (issue 60; 0 skips it).
    #[arg(long, default_value_t = 10_000)]
    pub queue_sets: usize,
    /// Releases, with no head holding and in strict order, each.
    #[arg(long, default_value_t = 40)]
    pub queue_releases: usize,
    /// Empty finalizers in the protobuf body the embedded API server
    /// refuses, alone and eight at once (issue 61; 0 skips it).
    #[arg(long, default_value_t = 1_040_000)]
    pub hostile_finalizers: usize,
    /// Pods in the List `plan` reads (issue 61; 0 skips it).
    #[arg(long, default_value_t = 50_000)]
    pub plan_pods: usize,
    /// Runs `plan` on this snapshot and exits: the process whose peak the
    /// `--plan-pods` measurement reads.
    #[arg(long, hide = true)]
    pub plan_child: Option<PathBuf>,
}

/// Of one size's runs, the one whose change p99 is the median (the lower
/// of the two middle ones for an even count), with every run's p99 in
/// the order they ran. Its memory figures are the first run's: a later
/// run starts in a process that has held the largest world, whose pages
/// the allocator keeps (resident growth reads near zero, the process'
/// resident set per claim far too high).
pub fn median_run(runs: Vec<SizeFigures>) -> Option<SizeFigures> {
    let first = runs.first()?.clone();
    let each: Vec<f64> = runs.iter().map(|r| r.change_p99_us).collect();
    let mut sorted = runs;
    sorted.sort_by(|a, b| a.change_p99_us.total_cmp(&b.change_p99_us));
    let middle = (sorted.len() - 1) / 2;
    let mut median = sorted.swap_remove(middle);
    median.change_p99_runs_us = each;
    median.actor_bytes_per_claim = first.actor_bytes_per_claim;
    median.rss_bytes_per_claim = first.rss_bytes_per_claim;
    median.process_rss_bytes_per_claim = first.process_rss_bytes_per_claim;
    median.foreign_pod_bytes = first.foreign_pod_bytes;
    Some(median)
}

/// The p-th percentile (0..=100) of `v`, nearest rank.
pub fn percentile(v: &mut [Duration], p: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

fn us(d: Duration) -> f64 {
    (d.as_nanos() as f64 / 1000.0 * 10.0).round() / 10.0
}

/// The process's resident set, in bytes.
pub fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Runs `f` in its own actix System on its own thread, and drops it all.
pub fn in_system<T: Send + 'static>(
    f: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
) -> T {
    std::thread::spawn(move || gpu_claims_actors::controller::system().block_on(f()))
        .join()
        .expect("the benchmark thread")
}

/// A store holding the layout's world, converged by the controller itself
/// (class statuses and Waiting conditions written), so that what follows
/// measures changes, not the first reconciliation.
pub fn converged_store(layout: &Layout) -> std::sync::Arc<crate::memory::store::Store> {
    converged_store_of(layout.objects(), layout.claims)
}

/// A store holding `objects` (`claims` of them claims), converged by the
/// controller itself.
pub fn converged_store_of(
    objects: Vec<gpu_claims_actors::ports::Obj>,
    claims: usize,
) -> std::sync::Arc<crate::memory::store::Store> {
    let store = crate::crds::cluster_store();
    let cluster = crate::memory::MemCluster::new(store.clone());
    for o in &objects {
        cluster.seed(o);
    }
    let s = store.clone();
    in_system(move || {
        Box::pin(async move {
            let h = Harness::start(s);
            h.synced(claims).await;
            h.lead();
            h.settle(Duration::from_millis(200)).await;
        })
    });
    store
}

/// Runs every benchmark `args` asks for; the cold start runs `operator`.
pub fn run(
    args: BenchArgs,
    live_bytes: fn() -> usize,
    operator: std::sync::Arc<dyn cold::Operator>,
) -> anyhow::Result<()> {
    if let Some(path) = &args.plan_child {
        return hostile::plan_child(path);
    }
    let mut figures = Figures::default();
    let rounds = args.size_runs;
    let mut runs: Vec<Vec<SizeFigures>> = args.sizes.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds {
        for (i, &n) in args.sizes.iter().enumerate() {
            eprintln!("[{n} claims] run {round} of {rounds}");
            let s = measure(n, args.changes, live_bytes, Some(operator.scraper()));
            eprintln!("{s:?}");
            runs[i].push(s);
        }
    }
    figures.sizes = runs.into_iter().filter_map(median_run).collect();
    if args.storm_sets > 0 {
        let s = storm::measure(
            args.storm_claims,
            args.storm_sets,
            Duration::from_millis(args.storm_write_latency_ms),
        );
        eprintln!("{s:?}");
        figures.placement_storm = Some(s);
    }
    if args.webhook_reviews > 0 {
        eprintln!(
            "[webhook] {} reviews over {} connections",
            args.webhook_reviews, args.webhook_connections
        );
        let w = crate::runtime()
            .block_on(operator.webhook(args.webhook_reviews, args.webhook_connections))?;
        eprintln!("{w:?}");
        figures.webhook = Some(w);
    }
    if args.cold_claims > 0 {
        figures.cold_start = Some(cold::measure(
            args.cold_claims,
            args.cold_runs,
            operator.clone(),
        )?);
    }
    if args.dra_nodes > 0 {
        let cold = (args.cold_runs > 0).then_some((args.cold_runs, operator));
        let d = dra::measure(
            args.dra_nodes,
            args.dra_vms,
            args.dra_changes,
            live_bytes,
            cold,
        );
        eprintln!("{d:?}");
        figures.dra = Some(d);
    }
    if args.queue_sets > 0 {
        let q = queue::measure(args.queue_sets, args.queue_releases);
        eprintln!("{q:?}");
        figures.queue = Some(q);
    }
    if args.hostile_finalizers > 0 || args.plan_pods > 0 {
        let h = hostile::measure(args.hostile_finalizers, args.plan_pods);
        eprintln!("{h:?}");
        figures.hostile = Some(h);
    }
    print(&figures);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&figures)?)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
