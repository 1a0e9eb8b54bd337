//! The actor system: a supervisor that keeps the world and fans changes
//! out, one actor per GPUClaim, GPUClass and GPUQuota (one type,
//! `object::ObjectActor`, whose `Role` is the kind's decisions), and the
//! placement actor for the VMI-level work (the gate, templates,
//! evacuation). Every writing actor's I/O is paced by a `pacer::Pacer`:
//! up to its limit at once, a decision owed while busy, retries with
//! backoff, the decision log.

mod backing_claims;
mod claim;
mod class;
mod events;
mod journal;
mod messages;
mod object;
mod pacer;
mod placement;
mod pool_rules;
mod quota;
mod supervisor;

pub use claim::{ClaimActor, ClaimRole, ClaimTrace};
pub use class::{ClassActor, ClassRole};
pub use journal::{Decision, DecisionLog, DecisionResult, Intent};
pub use object::{ObjectActor, Role};
pub use pacer::{Backoff, IoError};
pub use placement::{LookAt, Placement, PlacementWork, Relisted};
pub use pool_rules::{PoolLook, PoolRules, TaintRulesRefused};
pub use quota::{QuotaActor, QuotaRole};
pub use supervisor::{
    ConfigChanged, GetClaimTrace, Leading, Settled, Stats, StatsQuery, Supervisor, Wake,
    WorldEvent, whom,
};

use crate::ports::{Clock, Reader, Recorder, Telemetry, Writer};
use crate::world::World;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// What every actor shares: the world, the ports and the activity counters.
pub struct Env {
    pub world: Arc<World>,
    pub writer: Arc<dyn Writer>,
    pub reader: Arc<dyn Reader>,
    pub clock: Arc<dyn Clock>,
    pub events: Arc<dyn Recorder>,
    pub telemetry: Arc<dyn Telemetry>,
    pub activity: Activity,
    /// When the actor system started: decisions are stamped relative to it.
    pub started: tokio::time::Instant,
}

/// The ports an actor system runs with.
pub struct Ports {
    pub writer: Arc<dyn Writer>,
    pub reader: Arc<dyn Reader>,
    pub clock: Arc<dyn Clock>,
    pub events: Arc<dyn Recorder>,
    pub telemetry: Arc<dyn Telemetry>,
}

impl Env {
    pub fn new(world: Arc<World>, ports: Ports) -> Arc<Self> {
        let Ports {
            writer,
            reader,
            clock,
            events,
            telemetry,
        } = ports;
        let started = clock.now();
        Arc::new(Self {
            world,
            writer,
            reader,
            clock,
            events,
            telemetry,
            activity: Activity::default(),
            started,
        })
    }
}

/// Counters that tell when the system has settled: every handled message
/// and finished I/O bumps `ticks`; `in_flight` counts I/O under way.
#[derive(Default)]
pub struct Activity {
    ticks: AtomicU64,
    in_flight: AtomicI64,
    writes: AtomicU64,
}

impl Activity {
    pub fn tick(&self) {
        self.ticks.fetch_add(1, Ordering::Relaxed);
    }
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }
    pub fn begin_io(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }
    pub fn end_io(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.tick();
    }
    pub fn in_flight(&self) -> i64 {
        self.in_flight.load(Ordering::Relaxed)
    }
    pub fn wrote(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }
}

/// An actix System over a multi-thread tokio runtime: the actors on the
/// system arbiter, the watchers and the HTTP servers as tokio tasks on the
/// same runtime. What `run`, `demo` and the benchmarks run in.
pub fn system() -> actix::SystemRunner {
    actix::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}
