//! The election, as client-go's leaderelection runs it: the holder renews
//! `renewTime` every retry period; a candidate takes the Lease when it is
//! free or when it has seen no renewal for the lease duration (timed by its
//! own clock, from when it observed the last change, so clock skew between
//! nodes does not matter); every write carries the resourceVersion it read,
//! so two candidates never both win; `leaseTransitions` counts each change
//! of holder. A leader whose renewals fail (or hang: each attempt is bounded
//! by what is left of the renew deadline) steps down at the renew deadline,
//! and campaigns again as a standby.
//!
//! Server-side apply is not used: it would rely on managedFields conflicts,
//! and an optimistic update is what client-go does too.

use super::{Fence, LeaderView, LeaseApi, LeaseArgs, LeaseError};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::ObjectMeta;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// What one round of the election found.
enum Round {
    Held,
    HeldByAnother,
    /// A write met a newer Lease: read again next round.
    Raced,
}

/// Why a round could not tell.
enum Failed {
    Lease(LeaseError),
    /// No answer within the round's budget.
    Timeout(Duration),
}

pub struct Elector {
    leases: Arc<dyn LeaseApi>,
    args: LeaseArgs,
    id: String,
    request_timeout: Duration,
    fence: Arc<Fence>,
    view: Arc<Mutex<LeaderView>>,
    /// The holder and renewTime last seen, and when (by our clock).
    observed: Option<(Option<String>, Option<MicroTime>, Instant)>,
    /// When the last successful renewal was sent.
    renewed: Option<Instant>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl Elector {
    pub fn new(
        leases: Arc<dyn LeaseApi>,
        args: LeaseArgs,
        id: String,
        request_timeout: Duration,
        fence: Arc<Fence>,
    ) -> Self {
        let view = Arc::new(Mutex::new(LeaderView {
            identity: id.clone(),
            ..Default::default()
        }));
        Self {
            leases,
            args,
            id,
            request_timeout,
            fence,
            view,
            observed: None,
            renewed: None,
        }
    }

    /// Who leads, as this process sees it; kept up to date while it runs.
    pub fn view(&self) -> Arc<Mutex<LeaderView>> {
        self.view.clone()
    }

    fn see(&self, f: impl FnOnce(&mut LeaderView)) {
        f(&mut self.view.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn spec(&self, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.id.clone()),
            lease_duration_seconds: Some(self.args.lease_duration.as_secs().max(1) as i32),
            acquire_time: Some(now()),
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// One round: whether this process holds the Lease after it.
    async fn try_once(&mut self) -> Result<Round, LeaseError> {
        let Some(mut lease) = self.leases.get().await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.args.lease_name.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(0)),
            };
            return match self.leases.create(&lease).await {
                Ok(_) => Ok(Round::Held),
                Err(LeaseError::Conflict) => Ok(Round::Raced),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let seen = (spec.holder_identity.clone(), spec.renew_time.clone());
        if self
            .observed
            .as_ref()
            .is_none_or(|(h, r, _)| (h, r) != (&seen.0, &seen.1))
        {
            self.observed = Some((seen.0.clone(), seen.1.clone(), Instant::now()));
        }
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        self.see(|v| v.holder = holder.clone());
        let mine = holder.as_deref() == Some(self.id.as_str());
        let duration = spec
            .lease_duration_seconds
            .map_or(self.args.lease_duration, |s| {
                Duration::from_secs(s.max(1) as u64)
            });
        let expired = self
            .observed
            .as_ref()
            .is_some_and(|(_, _, at)| at.elapsed() >= duration);
        let new_spec = if mine {
            LeaseSpec {
                renew_time: Some(now()),
                ..spec
            }
        } else if holder.is_none() || expired {
            // A change of holder, as client-go counts it.
            self.spec(spec.lease_transitions.unwrap_or(0).saturating_add(1))
        } else {
            return Ok(Round::HeldByAnother);
        };
        lease.spec = Some(new_spec);
        match self.leases.replace(&lease).await {
            Ok(_) => Ok(Round::Held),
            // Someone wrote between our read and write: the next round reads again.
            Err(LeaseError::Conflict) => Ok(Round::Raced),
            Err(e) => Err(e),
        }
    }

    /// How long the next round may take: a request's deadline, and for a
    /// leader no more than what is left of its renew deadline.
    fn budget(&self) -> Duration {
        match self.renewed {
            Some(sent) => (sent + self.args.renew_deadline)
                .saturating_duration_since(Instant::now())
                .min(self.request_timeout),
            None => self.request_timeout,
        }
    }

    async fn round(&mut self) -> Result<Round, Failed> {
        let budget = self.budget();
        match tokio::time::timeout(budget, self.try_once()).await {
            Ok(r) => r.map_err(Failed::Lease),
            Err(_) => Err(Failed::Timeout(budget)),
        }
    }

    /// Campaigns and leads, for as long as the process runs: `on_change`
    /// hears each change of leadership.
    pub async fn run(mut self, mut on_change: impl FnMut(bool)) {
        let mut streak = crate::telemetry::FailureStreak::default();
        loop {
            let sent = Instant::now();
            let r = self.round().await;
            if r.is_ok()
                && let Some(failures) = streak.succeeded()
            {
                tracing::info!(
                    failures,
                    "leader election: the Lease can be read and written again"
                );
            }
            let leading = self.renewed.is_some();
            match r {
                Ok(Round::Held) => {
                    self.renewed = Some(sent);
                    self.fence.renewed(sent);
                    if !leading {
                        tracing::info!(identity = %self.id, lease = %self.args.lease_name, "became the leader");
                        self.see(|v| {
                            v.leading = true;
                            v.holder = Some(v.identity.clone());
                        });
                        on_change(true);
                    }
                }
                Ok(Round::HeldByAnother) if leading => {
                    self.step_down("another process holds the Lease", &mut on_change);
                }
                Ok(Round::HeldByAnother | Round::Raced) => {}
                Err(e) => {
                    let error = match e {
                        Failed::Lease(e) => e.to_string(),
                        Failed::Timeout(d) => format!("no answer within {d:?}"),
                    };
                    if let Some(failures) = streak.failed() {
                        tracing::warn!(%error, failures, "leader election: the Lease could not be read or written");
                    }
                }
            }
            if self
                .renewed
                .is_some_and(|t| t.elapsed() >= self.args.renew_deadline)
            {
                self.step_down("no renewal within the renew deadline", &mut on_change);
            }
            // A write that met the lapsed term wakes the check at once.
            let fence = self.fence.clone();
            tokio::select! {
                _ = tokio::time::sleep(self.args.retry_period) => {}
                _ = fence.lapsed(), if self.renewed.is_some() => {}
            }
        }
    }

    /// Stops leading: the fence closes first, so nothing more is written.
    fn step_down(&mut self, why: &str, on_change: &mut impl FnMut(bool)) {
        self.fence.close();
        self.renewed = None;
        self.see(|v| v.leading = false);
        tracing::error!(reason = why, lease = %self.args.lease_name, "stopped leading; this process is a standby now and writes nothing");
        on_change(false);
    }

    /// Gives the Lease up on a clean shutdown, so a standby takes over at
    /// once: the fence closes, the writes in flight are answered (or their
    /// deadline passes), and only then is the Lease written, so that no
    /// write of ours lands in the next leader's term.
    pub async fn release(leases: &dyn LeaseApi, id: &str, fence: &Fence, within: Duration) {
        fence.close();
        if !fence.drain(Instant::now() + within).await {
            tracing::warn!(
                in_flight = fence.in_flight(),
                "writes still in flight; the Lease is left to expire"
            );
            return;
        }
        let Ok(Ok(Some(mut lease))) = tokio::time::timeout(within, leases.get()).await else {
            tracing::warn!(
                "could not read the Lease to release it; a standby takes over when it expires"
            );
            return;
        };
        let spec = lease.spec.get_or_insert_default();
        if spec.holder_identity.as_deref() != Some(id) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        match tokio::time::timeout(within, leases.replace(&lease)).await {
            Ok(Ok(_)) => tracing::info!(identity = %id, "released the Lease"),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not release the Lease; a standby takes over when it expires")
            }
            Err(_) => tracing::warn!(
                within = %humantime::format_duration(within),
                "no answer to the Lease's release; a standby takes over when it expires"
            ),
        }
    }
}
