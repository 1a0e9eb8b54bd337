//! A whole controller against the in-memory cluster, on a simulated clock:
//! what `plan`, the tests and the benchmarks run. The actors are the same
//! as `run`'s; only the adapters differ.

use super::cluster::MemCluster;
use super::feed::{Lag, feed};
use super::store::Store;
use actix::{Actor, Addr};
use async_trait::async_trait;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::controller::{ConfigChanged, Env, Ports, Supervisor};
use gpu_claims_actors::ports::{Guarded, Obj, ObjRef, TokioClock, WriteError, WriteGuard, WriteOp};
use gpu_claims_actors::world::{World, WorldWriter};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// Rounds after which `settle` gives up: a controller still busy then is
/// in a livelock, and a test should say so rather than hang.
const SETTLE_LIMIT: u64 = 2_000_000;

/// The kinds whose status is a subresource.
pub const STATUS_KINDS: &[&str] = &[
    "GPUClass",
    "GPUClaim",
    "VirtualMachineInstance",
    "Pod",
    "Node",
];

pub use gpu_claims_actors::ports::sim_epoch;

/// A store whose wall clock follows tokio's (paused) clock from `sim_epoch`.
pub fn sim_store() -> Arc<Store> {
    let t0 = tokio::time::Instant::now();
    let wall = Arc::new(move || {
        let d = tokio::time::Instant::now().duration_since(t0);
        sim_epoch()
            .checked_add(k8s_openapi::jiff::SignedDuration::try_from(d).unwrap_or_default())
            .unwrap_or_default()
    });
    Arc::new(Store::new(wall, STATUS_KINDS))
}

/// Puts `o` in `store` as part of the cluster at time 0.
pub fn seed(store: &Store, o: &Obj) {
    store.seed(o.kind().name(), gpu_claims_actors::api::to_json(o));
}

/// A process that can die: after `left` more writes, every write hangs
/// forever (the process is gone; nothing it does lands).
pub struct Mortality {
    left: AtomicI64,
    /// Nanoseconds (simulated) each write that lands waits before it is
    /// applied, as a real API server's answer takes: placement's writes
    /// of different sets are then under way at once.
    latency: AtomicU64,
}

#[async_trait]
impl WriteGuard for Mortality {
    async fn admit(
        &self,
        _: WriteOp,
        _: &ObjRef,
    ) -> Result<Option<tokio::time::Instant>, WriteError> {
        if self.left.fetch_sub(1, Ordering::SeqCst) > 0 {
            let latency = self.latency.load(Ordering::SeqCst);
            if latency > 0 {
                tokio::time::sleep(std::time::Duration::from_nanos(latency)).await;
            }
            return Ok(None);
        }
        std::future::pending().await
    }
}

type DyingWriter = Guarded<Mortality>;

/// One controller process against the cluster.
struct Process {
    env: Arc<Env>,
    supervisor: Addr<Supervisor>,
    writer: Arc<DyingWriter>,
    feed: tokio::task::JoinHandle<()>,
}

pub struct Sim {
    pub cluster: Arc<MemCluster>,
    pub store: Arc<Store>,
    config: Config,
    lag: Lag,
    /// Each write's latency, for this process and those restarted after it.
    latency: std::time::Duration,
    process: Process,
}

impl Sim {
    /// Starts a controller on a cluster holding `objects`. Call inside an
    /// actix System (see [`run_sim`]).
    pub fn start(config: Config, objects: &[Obj], lag: impl Into<Lag>) -> Sim {
        let store = sim_store();
        for o in objects {
            seed(&store, o);
        }
        Self::start_on(config, store, lag)
    }

    /// Starts a controller on a store already holding the cluster at time 0
    /// (`seed`), so that a large snapshot is stored as it is read, never
    /// held twice.
    pub fn start_on(config: Config, store: Arc<Store>, lag: impl Into<Lag>) -> Sim {
        let lag = lag.into();
        // The objects are the cluster at time 0, not changes a watch could
        // start behind: kept as history they would be held twice (a dump
        // of 50,000 pods, hundreds of megabytes).
        store.forget_history();
        let cluster = MemCluster::new(store.clone());
        cluster.set_watch_allowance(lag.most());
        let process = Self::spawn(&cluster, &config, lag.clone());
        Sim {
            cluster,
            store,
            config,
            lag,
            latency: std::time::Duration::ZERO,
            process,
        }
    }

    /// Every write from now on (this process's and later ones') waits
    /// `latency` of simulated time before it is applied.
    pub fn slow_writes(&mut self, latency: std::time::Duration) {
        self.latency = latency;
        self.cluster.set_watch_allowance(self.lag.most() + latency);
        self.apply_latency();
    }

    fn apply_latency(&self) {
        let nanos = u64::try_from(self.latency.as_nanos()).unwrap_or(u64::MAX);
        self.process
            .writer
            .guard
            .latency
            .store(nanos, Ordering::SeqCst);
    }

    fn spawn(cluster: &Arc<MemCluster>, config: &Config, lag: Lag) -> Process {
        let world = WorldWriter::new(config.clone());
        let writer = Arc::new(DyingWriter {
            inner: cluster.clone(),
            guard: Mortality {
                left: AtomicI64::new(i64::MAX),
                latency: AtomicU64::new(0),
            },
        });
        let ports = Ports {
            writer: writer.clone(),
            reader: cluster.clone(),
            // A process started later reads a later wall time, as one on
            // a real cluster would (E2's restart marks carry wall time).
            clock: Arc::new(TokioClock::from(
                k8s_openapi::jiff::SignedDuration::try_from(cluster.elapsed())
                    .ok()
                    .and_then(|d| sim_epoch().checked_add(d).ok())
                    .unwrap_or_else(sim_epoch),
            )),
            events: cluster.clone(),
            telemetry: Arc::new(gpu_claims_actors::ports::NoTelemetry),
        };
        let env = Env::new(world.reader(), ports);
        let supervisor = Supervisor::new(env.clone(), world).start();
        let feed = feed(
            cluster.store.clone(),
            Supervisor::watched_kinds(config),
            supervisor.clone(),
            lag,
        );
        Process {
            env,
            supervisor,
            writer,
            feed,
        }
    }

    pub fn env(&self) -> &Arc<Env> {
        &self.process.env
    }

    pub fn world(&self) -> &Arc<World> {
        &self.process.env.world
    }

    pub fn supervisor(&self) -> &Addr<Supervisor> {
        &self.process.supervisor
    }

    /// Runs until nothing moves: no message handled, no write landed and
    /// no I/O under way for a while. Time does not advance.
    pub async fn settle(&self) {
        // A dead process's writes hang forever: they are not work under way.
        let dead = || self.process.writer.guard.left.load(Ordering::SeqCst) < 0;
        let probe = || {
            let a = &self.env().activity;
            (
                a.ticks(),
                self.store.resource_version(),
                if dead() { 0 } else { a.in_flight() },
            )
        };
        let mut last = probe();
        let mut quiet = 0;
        let mut rounds = 0u64;
        while quiet < 32 {
            tokio::task::yield_now().await;
            rounds += 1;
            if rounds == SETTLE_LIMIT {
                let j = self.cluster.journal();
                let tail: Vec<String> = j
                    .entries
                    .iter()
                    .rev()
                    .take(12)
                    .map(|e| format!("{} {} {} {} {:?}", e.op, e.kind, e.name, e.rule, e.error))
                    .collect();
                panic!(
                    "the controller did not settle (a livelock): probe {:?} dead {}; last writes, newest first: {tail:#?}",
                    probe(),
                    dead()
                );
            }
            let now = probe();
            if now == last && now.2 == 0 {
                quiet += 1;
            } else if now == last && !self.latency.is_zero() {
                // Writes under way wait out their latency: let the paused
                // clock move (by a millisecond at most) so they land.
                tokio::time::sleep(Duration::from_millis(1)).await;
            } else {
                quiet = 0;
                last = now;
            }
        }
    }

    /// Advances the simulated clock by `d`, firing the timers that fall
    /// due, each at its own time, and settles.
    pub async fn advance(&self, d: Duration) {
        // The paused clock jumps to the next timer whenever every task is
        // idle: a timer due inside `d` fires at its own time, what it
        // triggers runs (and may set later timers) before the clock moves
        // on, and a year costs what its timers cost, not its length.
        tokio::time::sleep(d).await;
        self.settle().await;
    }

    /// Whether the process can still write: not dead, and not set to die
    /// at its next write.
    pub fn alive(&self) -> bool {
        self.process.writer.guard.left.load(Ordering::SeqCst) > 0
    }

    /// The process dies after `writes` more writes: those land, later ones never do.
    pub fn die_after(&self, writes: i64) {
        // Never revives: a process already dead stays so.
        self.process
            .writer
            .guard
            .left
            .fetch_min(writes, Ordering::SeqCst);
    }

    /// Kills the process (if still alive) and starts a new one with empty
    /// caches against the same cluster.
    pub fn restart(&mut self) {
        self.process.writer.guard.left.store(0, Ordering::SeqCst);
        self.process.feed.abort();
        self.process = Self::spawn(&self.cluster, &self.config, self.lag.clone());
        self.apply_latency();
    }

    /// I5 on a settled cluster: restarts and settles, and says how many
    /// writes the new process made (none, when the cluster had converged).
    pub async fn writes_on_restart(&mut self) -> usize {
        let before = self.cluster.journal().effective().count();
        self.restart();
        self.settle().await;
        self.cluster.journal().effective().count() - before
    }

    pub fn reload(&mut self, config: Config) {
        self.config = config.clone();
        self.process.supervisor.do_send(ConfigChanged(config));
    }
}

/// Runs `f` in an actix System over a current-thread tokio runtime whose
/// clock is paused: the simulated clock.
pub fn run_sim<F, Fut, T>(f: F) -> T
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = T>,
{
    let sys = actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a tokio runtime")
    });
    sys.block_on(f())
}
