//! Leader election on a `coordination.k8s.io` Lease, as client-go's
//! leaderelection does it, and the fence that keeps a process that does
//! not hold the Lease from writing.
//!
//! The guarantee is single-writer: the leader renews every `retry_period`;
//! each renewal attempt is bounded by what is left of `renew_deadline`
//! since the last renewal was sent; a leader that has not renewed within
//! `renew_deadline` steps down, and its fence refuses every write from that
//! instant, measured on its own monotonic clock (so a process paused past
//! it, SIGSTOP or a frozen VM, writes nothing when it wakes). A standby
//! takes over only `lease_duration` after it saw the last renewal, later
//! than any write the old leader could still make.

mod elector;
mod fence;
mod lease;
pub mod wire;

pub use elector::Elector;
pub use fence::Fence;
pub use lease::{KubeLeases, LeaseApi, LeaseError};

use std::time::Duration;

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
    /// How long a leader keeps trying to renew before it steps down (and
    /// stops writing); less than the lease duration.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub renew_deadline: Duration,
    /// How often candidates try and leaders renew; less than the renew deadline.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub retry_period: Duration,
}

impl Default for LeaseArgs {
    /// The command line's defaults (client-go's too).
    fn default() -> Self {
        use clap::{Args, Command, FromArgMatches};
        let matches = LeaseArgs::augment_args(Command::new("lease"))
            .try_get_matches_from(["lease"])
            .expect("the defaults parse");
        LeaseArgs::from_arg_matches(&matches).expect("the defaults parse")
    }
}

/// Lease parameters that cannot keep one writer.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidLease {
    #[error(
        "--lease-duration ({lease:?}) must be more than --renew-deadline ({renew:?}), which must be more than --retry-period ({retry:?}), which must be more than 0"
    )]
    Order {
        lease: Duration,
        renew: Duration,
        retry: Duration,
    },
}

impl LeaseArgs {
    /// leaseDuration > renewDeadline > retryPeriod > 0, as client-go requires.
    pub fn validate(&self) -> Result<(), InvalidLease> {
        let (lease, renew, retry) = (self.lease_duration, self.renew_deadline, self.retry_period);
        if lease > renew && renew > retry && !retry.is_zero() {
            return Ok(());
        }
        Err(InvalidLease::Order {
            lease,
            renew,
            retry,
        })
    }
}

/// This process's name in the Lease: its pod's (else its host's) name and
/// a suffix of its own, as controller-runtime names its candidates. A
/// process restarted in the same pod is a new candidate: it never takes
/// its predecessor's Lease as its own, but waits for it to expire like
/// any standby, so no two incarnations ever share a term.
pub fn identity() -> String {
    let pod = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "gpu-claims".into());
    format!("{pod}_{:08x}", fastrand::u32(..))
}

/// The pod an identity names (what precedes its suffix).
pub fn pod_of(identity: &str) -> &str {
    identity.rsplit_once('_').map_or(identity, |(pod, _)| pod)
}

/// Who leads, as this process last saw the Lease: for `/debug` on a
/// standby and the leader metric.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LeaderView {
    pub identity: String,
    pub leading: bool,
    /// The Lease's holder when last read.
    pub holder: Option<String>,
}

#[cfg(test)]
mod tests;
