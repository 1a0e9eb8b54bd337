//! The controller's actors over the in-memory cluster, on the real clock,
//! with a writer that stamps every write and telemetry that keeps every
//! change-to-write latency: what the benchmark measures with.

use crate::memory::invariants::Checker;
use crate::memory::store::Store;
use crate::memory::{MemCluster, feed};
use async_trait::async_trait;
use gpu_claims_actors::controller::{Env, Leading, Ports, Supervisor};
use gpu_claims_actors::ports::{
    Guarded, ObjRef, Telemetry, TokioClock, WriteError, WriteGuard, WriteOp,
};
use gpu_claims_actors::rules::RuleId;
use gpu_claims_actors::world::WorldWriter;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Every write, stamped when the actor issued it.
#[derive(Default)]
pub struct Stamps {
    pub writes: Mutex<Vec<(Instant, &'static str, String)>>,
    /// Change-to-write latencies as the actors report them.
    pub latencies: Mutex<Vec<Duration>>,
}

/// Stamps every write when the actor issues it; makes it wait as a real
/// API server's answer would; then, when asked, checks the invariants
/// over the cluster as the write finds it (the state after the write
/// before). Writes run on the runtime's worker threads, several at once:
/// while checks are on, a write is applied alone (`one_at_a_time`, from
/// its check to its end), so that no check reads a store another write is
/// changing; they still wait their latency together.
struct Stamping {
    stamps: Arc<Stamps>,
    cluster: Arc<MemCluster>,
    /// Nanoseconds every write waits before it is applied.
    latency: AtomicU64,
    checks: Mutex<Option<Checks>>,
    one_at_a_time: tokio::sync::Semaphore,
}

/// The invariants checked before every write.
#[derive(Default)]
struct Checks {
    checker: Checker,
    writes: usize,
    violations: Vec<String>,
}

#[async_trait]
impl WriteGuard for Stamping {
    async fn admit(&self, op: WriteOp, what: &ObjRef) -> Result<Option<Instant>, WriteError> {
        self.stamps
            .writes
            .lock()
            .unwrap()
            .push((Instant::now(), op.as_str(), what.to_string()));
        let latency = Duration::from_nanos(self.latency.load(Ordering::Relaxed));
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        if self.checking() {
            // Given back when the write is over (`finished`).
            self.one_at_a_time
                .acquire()
                .await
                .expect("the semaphore is never closed")
                .forget();
            if let Some(c) = self.checks.lock().unwrap().as_mut() {
                let found = c.checker.check(&self.cluster);
                c.writes += 1;
                c.violations.extend(found);
            }
        }
        Ok(None)
    }

    fn finished(&self) {
        if self.checking() {
            self.one_at_a_time.add_permits(1);
        }
    }
}

impl Stamping {
    fn checking(&self) -> bool {
        self.checks.lock().unwrap().is_some()
    }
}

struct Latencies(Arc<Stamps>);

impl Telemetry for Latencies {
    fn change_to_write(&self, took: Duration, _rule: RuleId) {
        self.0.latencies.lock().unwrap().push(took);
    }
}

/// The actor system under test.
pub struct Harness {
    pub store: Arc<Store>,
    pub cluster: Arc<MemCluster>,
    pub env: Arc<Env>,
    pub stamps: Arc<Stamps>,
    pub supervisor: actix::Addr<Supervisor>,
    guard: Arc<Stamping>,
}

impl Harness {
    /// Starts the supervisor as a standby over `store` (caches fill, no
    /// decisions); `lead` then lets it decide. Must run inside an actix System.
    pub fn start(store: Arc<Store>) -> Self {
        use actix::Actor;
        let cluster = MemCluster::new(store.clone());
        let stamps = Arc::new(Stamps::default());
        let config = gpu_claims_actors::config::Config::default();
        let world = WorldWriter::new(config.clone());
        let guard = Arc::new(Stamping {
            stamps: stamps.clone(),
            cluster: cluster.clone(),
            latency: AtomicU64::new(0),
            checks: Mutex::new(None),
            one_at_a_time: tokio::sync::Semaphore::new(1),
        });
        let ports = Ports {
            writer: Arc::new(Guarded {
                inner: cluster.clone(),
                guard: guard.clone(),
            }),
            reader: cluster.clone(),
            clock: Arc::new(TokioClock::real()),
            events: cluster.clone(),
            telemetry: Arc::new(Latencies(stamps.clone())),
        };
        let env = Env::new(world.reader(), ports);
        let supervisor = Supervisor::new(env.clone(), world).standby().start();
        feed(
            store.clone(),
            Supervisor::watched_kinds(&config),
            supervisor.clone(),
            crate::memory::Lag::default(),
        );
        Self {
            store,
            cluster,
            env,
            stamps,
            supervisor,
            guard,
        }
    }

    /// Every write from now on waits `latency` before it is applied.
    pub fn slow_writes(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.guard.latency.store(nanos, Ordering::Relaxed);
    }

    /// From now on the invariants are checked before every write. Call it
    /// while no write is under way (after `settle`): a write admitted
    /// before would give back a turn it never took.
    pub fn check_every_write(&self) {
        *self.guard.checks.lock().unwrap() = Some(Checks::default());
    }

    /// Writes checked before, and what the checks found.
    pub fn checks(&self) -> (usize, Vec<String>) {
        let c = self.guard.checks.lock().unwrap();
        c.as_ref()
            .map_or((0, Vec::new()), |c| (c.writes, c.violations.clone()))
    }

    /// Checks the invariants now (after the last write), where checks are on.
    pub fn check_now(&self) -> Vec<String> {
        let mut c = self.guard.checks.lock().unwrap();
        c.as_mut()
            .map(|c| c.checker.check(&self.cluster))
            .unwrap_or_default()
    }

    pub fn lead(&self) {
        self.supervisor.do_send(Leading(true));
    }

    /// Waits until the actors have been idle for `quiet` (no I/O under way,
    /// no message handled) with every change of the store delivered to the
    /// cache: on a loaded machine the watch can trail by more than `quiet`,
    /// and a change's writes must not be counted as the next one's.
    pub async fn settle(&self, quiet: Duration) {
        let mut last = (self.env.activity.ticks(), Instant::now());
        loop {
            tokio::time::sleep(Duration::from_micros(500)).await;
            let t = self.env.activity.ticks();
            if t != last.0 || self.env.activity.in_flight() != 0 || !self.delivered() {
                last = (t, Instant::now());
            } else if last.1.elapsed() >= quiet {
                return;
            }
        }
    }

    /// Whether the cache has every change the store made.
    fn delivered(&self) -> bool {
        let w = &self.env.world;
        let seen = gpu_claims_actors::api::Kind::ALL
            .iter()
            .map(|k| w.observed_rv(*k))
            .max()
            .unwrap_or(0);
        seen >= self.store.resource_version()
    }

    /// Waits until the caches hold `claims` claims.
    pub async fn synced(&self, claims: usize) {
        while self.env.world.claim_count() < claims {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.settle(Duration::from_millis(50)).await;
    }

    pub fn writes(&self) -> usize {
        self.stamps.writes.lock().unwrap().len()
    }

    pub fn latencies(&self) -> usize {
        self.stamps.latencies.lock().unwrap().len()
    }
}
