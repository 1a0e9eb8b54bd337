//! Leader election on a `coordination.k8s.io` Lease, with kube's own API
//! and the algorithm of client-go's leaderelection: the holder renews
//! `renewTime` every `retry`; a candidate takes the Lease when it is free
//! or when it has seen no renewal for `duration` (timed by its own clock,
//! from when it observed the last change, so clock skew between nodes does
//! not matter); every write carries the resourceVersion it read, so two
//! candidates never both win. A leader that cannot renew within
//! `renew_deadline` has lost, and says so.
//!
//! Server-side apply is not used: it would rely on managedFields conflicts,
//! and an optimistic update is what client-go does too.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone, Debug, clap::Args)]
pub struct LeaseArgs {
    /// Elect a leader on a Lease; only the leader writes. Off: this process always writes.
    #[arg(long, env = "GPU_CLAIMS_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// The Lease's name.
    #[arg(long, env = "GPU_CLAIMS_LEASE_NAME", default_value = "gpu-claims")]
    pub lease_name: String,
    /// The Lease's namespace (in a pod: its own, from POD_NAMESPACE).
    #[arg(long, env = "POD_NAMESPACE", default_value = "gpu-claims")]
    pub lease_namespace: String,
    /// How long a Lease not renewed stays held.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before it gives up leading.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub renew_deadline: Duration,
    /// How often candidates try and leaders renew.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub retry_period: Duration,
}

/// This process's name in the Lease: the pod's, else host and pid.
pub fn identity() -> String {
    std::env::var("POD_NAME").unwrap_or_else(|_| {
        let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "gpu-claims".into());
        format!("{host}-{}", std::process::id())
    })
}

/// What one round of the election found.
enum Round {
    Held,
    HeldByAnother,
    /// A write met a newer Lease: read again next round.
    Raced,
}

pub struct Elector {
    api: Api<Lease>,
    args: LeaseArgs,
    id: String,
    /// The holder and renewTime last seen, and when (by our clock).
    observed: Option<(Option<String>, Option<MicroTime>, Instant)>,
    last_renew: Option<Instant>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl Elector {
    pub fn new(client: kube::Client, args: LeaseArgs, id: String) -> Self {
        Self {
            api: Api::namespaced(client, &args.lease_namespace),
            args,
            id,
            observed: None,
            last_renew: None,
        }
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
    async fn try_once(&mut self) -> Result<Round, kube::Error> {
        let pp = PostParams::default();
        let Some(mut lease) = self.api.get_opt(&self.args.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.args.lease_name.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(0)),
            };
            return match self.api.create(&pp, &lease).await {
                Ok(_) => Ok(Round::Held),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Round::Raced),
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
        let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
        let mine = holder == Some(self.id.as_str());
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
            let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(holder.is_some());
            self.spec(transitions)
        } else {
            return Ok(Round::HeldByAnother);
        };
        lease.spec = Some(new_spec);
        match self.api.replace(&self.args.lease_name, &pp, &lease).await {
            Ok(_) => Ok(Round::Held),
            // Someone wrote between our read and write: the next round reads again.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Round::Raced),
            Err(e) => Err(e),
        }
    }

    /// Campaigns, then leads: `on_change(true)` when this process becomes
    /// the leader. Returns when leadership is lost (the caller exits, as a
    /// client-go controller does, so that two leaders never overlap).
    pub async fn run(mut self, mut on_change: impl FnMut(bool)) -> String {
        let mut leading = false;
        let mut streak = crate::telemetry::FailureStreak::default();
        loop {
            let r = self.try_once().await;
            if r.is_ok()
                && let Some(failures) = streak.succeeded()
            {
                tracing::info!(
                    failures,
                    "leader election: the Lease can be read and written again"
                );
            }
            match r {
                Ok(Round::Held) => {
                    self.last_renew = Some(Instant::now());
                    if !leading {
                        leading = true;
                        tracing::info!(identity = %self.id, lease = %self.args.lease_name, "became the leader");
                        on_change(true);
                    }
                }
                Ok(Round::HeldByAnother) if leading => {
                    return format!("another process holds the Lease {}", self.args.lease_name);
                }
                Ok(Round::HeldByAnother | Round::Raced) => {}
                Err(e) => {
                    if let Some(failures) = streak.failed() {
                        tracing::warn!(error = %e, failures, "leader election: the Lease could not be read or written")
                    }
                }
            }
            if leading
                && self
                    .last_renew
                    .is_some_and(|t| t.elapsed() > self.args.renew_deadline)
            {
                return format!("no renewal within {:?}", self.args.renew_deadline);
            }
            tokio::time::sleep(self.args.retry_period).await;
        }
    }

    /// Gives the Lease up on a clean shutdown, so a standby takes over at once.
    pub async fn release(client: kube::Client, args: &LeaseArgs, id: &str) {
        let api: Api<Lease> = Api::namespaced(client, &args.lease_namespace);
        let Ok(Some(mut lease)) = api.get_opt(&args.lease_name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_default();
        if spec.holder_identity.as_deref() != Some(id) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        if let Err(e) = api
            .replace(&args.lease_name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %e, "could not release the Lease; a standby takes over when it expires");
        }
    }
}
