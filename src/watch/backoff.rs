//! The watches' retry delays: exponential from 500 ms, capped at 5 s, with
//! jitter, reset by any answer. kube-runtime's default grows to 30 s and
//! resets only after two quiet minutes, so after an API server outage a
//! watch whose first answer is a 410 (its resourceVersion expired while the
//! server was away) waited up to half a minute more before it relisted:
//! half a minute of a controller that is not ready and decides on stale
//! caches. Five seconds keeps a retry storm impossible (7 watches, at most
//! 1.4 requests a second a replica) and recovery prompt.

use kube::runtime::utils::Backoff;
use std::time::Duration;

pub const FIRST: Duration = Duration::from_millis(500);
pub const MAX: Duration = Duration::from_secs(5);

#[derive(Debug, Default)]
pub struct WatchBackoff {
    failures: u32,
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = FIRST.saturating_mul(1u32 << self.failures.min(16)).min(MAX);
        self.failures = self.failures.saturating_add(1);
        // Up to a quarter less, so that replicas and kinds spread out.
        let jitter = base.mul_f64(fastrand::f64() * 0.25);
        Some(base - jitter)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_five_seconds_and_an_answer_resets_them() {
        let mut b = WatchBackoff::default();
        let d: Vec<Duration> = (0..8).map(|_| b.next().unwrap()).collect();
        for (got, want) in d
            .iter()
            .zip([500, 1000, 2000, 4000, 5000, 5000, 5000, 5000])
        {
            let want = Duration::from_millis(want);
            assert!(
                *got <= want && *got >= want.mul_f64(0.75),
                "{got:?} for {want:?}"
            );
        }
        b.reset();
        assert!(b.next().unwrap() <= FIRST);
    }
}
