//! What every actor that writes does alike, owned once: I/O under way
//! up to the actor's limit (one for the claim, class and quota actors,
//! whose next step follows from the last; more for placement's sets), run
//! off the actors' thread, and a decision owed when a change comes while
//! the actor is at its limit; a view
//! of its object no older than its own last write (`fresh`), the write of
//! an object and what came of it, the live re-read after a 409 and "gone"
//! among it (`write`), backoff with one retry pending at a time (a 429's
//! Retry-After honoured), the decision log and the change-to-write
//! latency. The claim, class and placement actors keep only their
//! decisions.

mod finish;
mod fresh;
mod write;

pub use finish::finish_write;
pub use fresh::{Freshness, KeyedFreshness, WithMeta};
pub use write::{ObjectWrite, Writable, track_io, write_object};

use super::Env;
use super::journal::{Decision, DecisionLog, DecisionResult, Intent};
use crate::api::{Kind, ObjRef};
use crate::ports::{ReadError, WriteError};
use crate::rules::RuleId;
use actix::prelude::*;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Why an actor's I/O failed: retried after the backoff. A write the API
/// server refused as invalid is reported too, as bad input it cannot fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum IoError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("read {what}: {source}")]
    Read {
        what: ObjRef,
        #[source]
        source: ReadError,
    },
    #[error("the API server answered a {} write with a {}", asked.name(), got.name())]
    Unexpected { asked: Kind, got: Kind },
    /// A write met a newer object (a 409 read again live): the work is
    /// decided on again, never overwritten.
    #[error("{what} changed since it was read")]
    Newer { what: ObjRef },
}

impl IoError {
    pub fn read(what: ObjRef, source: ReadError) -> Self {
        IoError::Read { what, source }
    }

    /// The API server refused the write as invalid (400, 422).
    pub fn is_invalid(&self) -> bool {
        matches!(self, IoError::Write(WriteError::Invalid(_)))
    }

    /// Not made: this process does not lead (any more). Nothing to retry:
    /// when it leads again, every actor decides afresh.
    pub fn is_fenced(&self) -> bool {
        matches!(self, IoError::Write(WriteError::Fenced))
    }

    /// A label for logs and metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            IoError::Write(e) => e.metric_label(),
            IoError::Read { .. } => "read",
            IoError::Unexpected { .. } => "unexpected",
            IoError::Newer { .. } => "conflict",
        }
    }
}

/// What a write of an actor's own object came to.
#[derive(Debug)]
pub enum Outcome<T> {
    /// It landed: the object as the write left it. The cache is as fresh
    /// as the write once it shows `fresh_from`.
    Written { object: Arc<T>, fresh_from: u64 },
    /// The object is gone (the write removed it, or found it gone) as of
    /// version `after`: a cache that shows a later version is fresher.
    Gone { after: u64 },
    /// 409: a newer object, read live.
    Conflict(Arc<T>),
}

/// The longest Retry-After honoured: a server asking for more gets this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Exponential backoff for failed I/O: 200ms, doubling to 5 minutes.
#[derive(Default, Clone, Copy, Debug)]
pub struct Backoff(u32);

impl Backoff {
    pub fn next_wait(&mut self) -> Duration {
        let d = Duration::from_millis(200) * 2u32.saturating_pow(self.0.min(11));
        self.0 += 1;
        d.min(Duration::from_secs(300))
    }
    pub fn reset(&mut self) {
        self.0 = 0;
    }
}

/// The shared state; each actor holds one.
pub struct Pacer {
    env: Arc<Env>,
    /// I/O under way, and how much may be at once: one for the claim,
    /// class and quota actors (their object's next step follows from the
    /// last), more for placement (sets of different VMIs, written at once).
    in_flight: usize,
    limit: usize,
    /// A change came while busy: decide again when the I/O ends.
    owed: bool,
    retry: Option<SpawnHandle>,
    backoff: Backoff,
    log: DecisionLog,
    /// The oldest change not yet decided on: the next write reports the latency.
    pending_since: Option<Instant>,
}

/// An actor whose I/O a `Pacer` paces: the object actors and placement.
pub trait Decides: Actor<Context = Context<Self>> {
    /// Where the actor keeps its pacer.
    fn pacer(&mut self) -> &mut Pacer;
    /// Decides, and starts the I/O of the step due, if any.
    fn decide(&mut self, ctx: &mut Context<Self>);
}

impl Pacer {
    pub fn new(env: Arc<Env>) -> Self {
        Self {
            env,
            in_flight: 0,
            limit: 1,
            owed: false,
            retry: None,
            backoff: Backoff::default(),
            log: DecisionLog::default(),
            pending_since: None,
        }
    }

    /// Whether no more I/O may start until some ends.
    pub fn busy(&self) -> bool {
        self.in_flight >= self.limit
    }

    /// How much I/O may be under way at once (at least one).
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit.max(1);
    }

    /// A change that entered the supervisor at `since` reached the actor.
    pub fn changed(&mut self, since: Instant) {
        self.pending_since = Some(self.pending_since.map_or(since, |p| p.min(since)));
    }

    /// Nothing to write after all: the changes pending led to no write.
    pub fn idle(&mut self) {
        self.pending_since = None;
    }

    /// A write is about to start for `rule`: reports how long the oldest
    /// change pending took to reach it.
    pub fn writing(&mut self, rule: RuleId) {
        if let Some(since) = self.pending_since.take() {
            let took = self.env.clock.now().saturating_duration_since(since);
            self.env.telemetry.change_to_write(took, rule);
        }
    }

    pub fn log(&mut self, rule: RuleId, intent: Intent, result: DecisionResult) {
        let env = &self.env;
        let at_ms = env.clock.now().duration_since(env.started).as_millis() as u64;
        self.log.push(Decision {
            at_ms,
            rule,
            intent,
            result,
        });
    }

    pub fn decisions(&self) -> Vec<Decision> {
        self.log.to_vec()
    }

    /// I/O that ended well: the next failure starts the backoff afresh.
    pub fn succeeded(&mut self) {
        self.backoff.reset();
    }

    /// The wait before the next retry of failed I/O.
    pub fn next_wait(&mut self) -> Duration {
        self.backoff.next_wait()
    }
}

/// Decides now, or, while I/O is under way, once it ends.
pub fn reconcile<A: Decides>(act: &mut A, ctx: &mut Context<A>) {
    let s = act.pacer();
    s.env.activity.tick();
    if s.busy() {
        s.owed = true;
        return;
    }
    s.owed = false;
    act.decide(ctx);
}

/// Runs an actor's I/O (off the actors' thread: `offloaded`); `done`
/// sees the result on the actor. While as much I/O is under way as the
/// actor may have (`busy`), changes are owed, not decided on.
pub fn run_io<A, O, F, D>(act: &mut A, ctx: &mut Context<A>, fut: F, done: D)
where
    A: Decides,
    O: Send + 'static,
    F: Future<Output = O> + Send + 'static,
    D: FnOnce(&mut A, O, &mut Context<A>) + 'static,
{
    let s = act.pacer();
    s.in_flight += 1;
    s.env.activity.begin_io();
    ctx.spawn(offloaded(fut).into_actor(act).map(move |out, act, ctx| {
        let s = act.pacer();
        s.env.activity.end_io();
        s.in_flight -= 1;
        done(act, out, ctx);
    }));
}

/// Runs `fut` as a task of the runtime's worker threads, where it has
/// any: a write's encoding, its request and (in memory) the store's work
/// then run beside the actors' decisions instead of between them, and
/// writes under way at once (placement's sets, a node's claims) overlap.
/// On a current-thread runtime (the simulation, whose clock and order
/// `plan` and the tests rely on) it runs in place. Its log lines keep the
/// actor's span.
pub(super) fn offloaded<F>(fut: F) -> impl Future<Output = F::Output> + 'static
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    use tracing::Instrument;
    let fut = fut.in_current_span();
    let pool =
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    async move {
        if !pool {
            return fut.await;
        }
        match tokio::spawn(fut).await {
            Ok(out) => out,
            // A panic in the I/O is the actor's, as it would be in place.
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: the runtime is shutting down; nothing follows.
            Err(_) => std::future::pending().await,
        }
    }
}

/// Whether a change came while the I/O was under way.
pub fn owed<A: Decides>(act: &mut A) -> bool {
    act.pacer().owed
}

/// Tries again after the backoff's next wait; a retry already pending is
/// replaced, so failures never pile up timers. A fenced write is not
/// retried (None): the actor decides afresh when this process leads again.
pub fn retry_later<A: Decides>(act: &mut A, ctx: &mut Context<A>, e: &IoError) -> Option<Duration> {
    if e.is_fenced() {
        return None;
    }
    let mut wait = act.pacer().backoff.next_wait();
    // The API server's Retry-After (a 429), when it asks for longer.
    if let IoError::Write(w) = e
        && let Some(after) = w.retry_after()
    {
        wait = wait.max(after.min(MAX_RETRY_AFTER));
    }
    retry_in(act, ctx, wait);
    Some(wait)
}

/// Decides again after `wait` (one such timer at a time).
pub fn retry_in<A: Decides>(act: &mut A, ctx: &mut Context<A>, wait: Duration) {
    if let Some(h) = act.pacer().retry.take() {
        ctx.cancel_future(h);
    }
    let h = ctx.run_later(wait, |act, ctx| {
        act.pacer().retry = None;
        reconcile(act, ctx);
    });
    act.pacer().retry = Some(h);
}
