//! The fence: a write is made only while this process holds the Lease
//! with a margin left, measured on its own monotonic clock from when its
//! last successful renewal was sent. From that renewal, a standby waits
//! the full lease duration (on its clock) before it takes over; this
//! process writes only until the renew deadline, and each write must be
//! answered before the lease duration is up. A process that wakes from a
//! pause past its deadline finds the fence closed before it sends anything.
//!
//! What no client-side fence can close: a write admitted in the
//! microseconds before a pause, sent when the process wakes. The window is
//! the time between the check and the socket write, not the pause.

use async_trait::async_trait;
use gpu_claims_actors::ports::{ObjRef, WriteError, WriteGuard, WriteOp};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

pub struct Fence {
    renew_deadline: Duration,
    lease_duration: Duration,
    /// When the last successful renewal was sent (None: not leading).
    renewed: Mutex<Option<Instant>>,
    /// Writes admitted and not yet answered.
    in_flight: AtomicUsize,
    /// Told when the last write in flight is answered.
    drained: Notify,
    /// Told when a write met a lapsed term: the elector steps down at once.
    lapsed: Notify,
}

impl Fence {
    pub fn new(renew_deadline: Duration, lease_duration: Duration) -> Self {
        Self {
            renew_deadline,
            lease_duration,
            renewed: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            drained: Notify::new(),
            lapsed: Notify::new(),
        }
    }

    fn renewed_at(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.renewed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A renewal sent at `sent` succeeded.
    pub fn renewed(&self, sent: Instant) {
        let mut r = self.renewed_at();
        *r = Some(r.map_or(sent, |prev| prev.max(sent)));
    }

    /// This process stopped leading: nothing more is written.
    pub fn close(&self) {
        *self.renewed_at() = None;
    }

    /// Until when writes may start, and by when each must be answered.
    fn window(&self) -> Option<(Instant, Instant)> {
        let sent = (*self.renewed_at())?;
        Some((sent + self.renew_deadline, sent + self.lease_duration))
    }

    /// Whether a write may start now.
    pub fn open(&self) -> bool {
        self.window()
            .is_some_and(|(until, _)| Instant::now() < until)
    }

    /// Resolves when a write found the term lapsed while this process
    /// still counted itself the leader.
    pub async fn lapsed(&self) {
        self.lapsed.notified().await
    }

    /// Writes admitted and not yet answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Waits until every admitted write is answered, or until `deadline`.
    /// Whether they all were.
    pub async fn drain(&self, deadline: Instant) -> bool {
        loop {
            let drained = self.drained.notified();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return self.in_flight() == 0;
            }
        }
    }
}

#[async_trait]
impl WriteGuard for Fence {
    async fn admit(&self, _: WriteOp, _: &ObjRef) -> Result<Option<Instant>, WriteError> {
        match self.window() {
            Some((until, answered_by)) if Instant::now() < until => {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                Ok(Some(answered_by))
            }
            Some(_) => {
                self.lapsed.notify_one();
                Err(WriteError::Fenced)
            }
            None => Err(WriteError::Fenced),
        }
    }

    fn finished(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.drained.notify_waiters();
        }
    }
}
