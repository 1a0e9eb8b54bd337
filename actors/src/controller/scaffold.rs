//! What every actor that writes does alike, owned once: one write at a
//! time (busy, and a decision owed when a change comes meanwhile), a view
//! of its object no older than its own last write, the live re-read after
//! a 409, backoff with one retry pending at a time, the decision log and
//! the change-to-write latency. The claim, class and placement actors keep
//! only their decisions.

use super::Env;
use super::journal::{Decision, DecisionLog, DecisionResult, Intent};
use crate::api::{Kind, ObjRef, rv_number};
use crate::ports::{ReadError, WriteError};
use crate::rules::RuleId;
use actix::prelude::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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
        }
    }
}

/// What a write of an actor's own object came to.
#[derive(Debug)]
pub enum Outcome<T> {
    /// It landed: the object as the write left it (None: gone). The cache
    /// is as fresh as the write once it shows `fresh_from`.
    Written {
        object: Option<Arc<T>>,
        fresh_from: u64,
    },
    /// 409: a newer object, read live (None: gone).
    Conflict(Option<Arc<T>>),
}

/// An object that carries metadata (claims, classes).
pub trait Meta {
    fn meta(&self) -> &ObjectMeta;
}

impl Meta for crate::api::GPUClaim {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

impl Meta for crate::api::GPUClass {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
}

/// An actor's view of its own object: the cache, unless the cache still
/// shows a version older than the actor's last write (a watch lags behind
/// the writes it makes), in which case what that write returned.
#[derive(Debug)]
pub struct Freshness<T> {
    last: Option<(Option<Arc<T>>, u64)>,
}

impl<T> Default for Freshness<T> {
    fn default() -> Self {
        Self { last: None }
    }
}

impl<T: Meta> Freshness<T> {
    pub fn current(&mut self, cached: Option<Arc<T>>) -> Option<Arc<T>> {
        let Some((own, fresh_from)) = &self.last else {
            return cached;
        };
        match &cached {
            Some(c) if rv_number(c.meta()) < *fresh_from => own.clone(),
            _ => {
                self.last = None;
                cached
            }
        }
    }

    /// The outcome of a write: what it left, or what a live read after a
    /// 409 showed, is the view until the cache catches up.
    pub fn settle(&mut self, outcome: &Outcome<T>) {
        self.last = Some(match outcome {
            Outcome::Written { object, fresh_from } => (object.clone(), *fresh_from),
            Outcome::Conflict(live) => {
                let fresh_from = live.as_ref().map_or(u64::MAX, |c| rv_number(c.meta()));
                (live.clone(), fresh_from)
            }
        });
    }
}

/// Freshness for many objects by key: placement writes the claims and
/// pods of many sets, and decides on a set only once the cache shows its
/// own last write of each.
#[derive(Debug, Default)]
pub struct KeyedFreshness(std::collections::HashMap<String, u64>);

impl KeyedFreshness {
    pub fn wrote(&mut self, key: String, resource_version: u64) {
        self.0.insert(key, resource_version);
    }

    /// True while the cache shows `key` older than our own write of it.
    pub fn behind(&mut self, key: &str, cached_rv: Option<u64>) -> bool {
        match (self.0.get(key), cached_rv) {
            (Some(ours), Some(rv)) if rv < *ours => true,
            (Some(_), _) => {
                self.0.remove(key);
                false
            }
            _ => false,
        }
    }

    /// Forgets writes at or below `observed`: the watch has passed them.
    pub fn prune(&mut self, observed: u64) {
        self.0.retain(|_, rv| *rv > observed);
    }
}

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
pub struct Scaffold {
    env: Arc<Env>,
    busy: bool,
    /// A change came while busy: decide again when the I/O ends.
    owed: bool,
    retry: Option<SpawnHandle>,
    backoff: Backoff,
    log: DecisionLog,
    /// The oldest change not yet decided on: the next write reports the latency.
    pending_since: Option<Instant>,
}

/// An actor built on the scaffold.
pub trait Scaffolded: Actor<Context = Context<Self>> {
    fn scaffold(&mut self) -> &mut Scaffold;
    /// Decides, and starts the I/O of the step due, if any.
    fn decide(&mut self, ctx: &mut Context<Self>);
}

impl Scaffold {
    pub fn new(env: Arc<Env>) -> Self {
        Self {
            env,
            busy: false,
            owed: false,
            retry: None,
            backoff: Backoff::default(),
            log: DecisionLog::default(),
            pending_since: None,
        }
    }

    pub fn busy(&self) -> bool {
        self.busy
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
pub fn reconcile<A: Scaffolded>(act: &mut A, ctx: &mut Context<A>) {
    let s = act.scaffold();
    s.env.activity.tick();
    if s.busy {
        s.owed = true;
        return;
    }
    s.owed = false;
    act.decide(ctx);
}

/// Runs an actor's I/O; it takes no decision until the I/O ends and
/// `done` has seen the result.
pub fn run_io<A, O, F, D>(act: &mut A, ctx: &mut Context<A>, fut: F, done: D)
where
    A: Scaffolded,
    O: 'static,
    F: Future<Output = O> + 'static,
    D: FnOnce(&mut A, O, &mut Context<A>) + 'static,
{
    let s = act.scaffold();
    s.busy = true;
    s.env.activity.begin_io();
    ctx.spawn(fut.into_actor(act).map(move |out, act, ctx| {
        let s = act.scaffold();
        s.env.activity.end_io();
        s.busy = false;
        done(act, out, ctx);
    }));
}

/// Whether a change came while the I/O was under way.
pub fn owed<A: Scaffolded>(act: &mut A) -> bool {
    act.scaffold().owed
}

/// Tries again after the backoff's next wait; a retry already pending is
/// replaced, so failures never pile up timers. A fenced write is not
/// retried (None): the actor decides afresh when this process leads again.
pub fn retry_later<A: Scaffolded>(
    act: &mut A,
    ctx: &mut Context<A>,
    e: &IoError,
) -> Option<Duration> {
    if e.is_fenced() {
        return None;
    }
    let wait = act.scaffold().backoff.next_wait();
    retry_in(act, ctx, wait);
    Some(wait)
}

/// Decides again after `wait` (one such timer at a time).
pub fn retry_in<A: Scaffolded>(act: &mut A, ctx: &mut Context<A>, wait: Duration) {
    if let Some(h) = act.scaffold().retry.take() {
        ctx.cancel_future(h);
    }
    let h = ctx.run_later(wait, |act, ctx| {
        act.scaffold().retry = None;
        reconcile(act, ctx);
    });
    act.scaffold().retry = Some(h);
}
