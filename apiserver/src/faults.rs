//! Faults the server injects, set per run: a fraction of writes answered
//! 409, 429 or 500, latency added to every request, and watch streams cut
//! every so often. (A restart that keeps the data is `ApiServer::restart`.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Faults {
    /// Fraction of writes answered 409 Conflict before touching the store.
    pub conflict: f64,
    /// Fraction of writes answered 429 Too Many Requests.
    pub throttle: f64,
    /// Fraction of writes answered 500 Internal Server Error.
    pub server_error: f64,
    /// Added before every request is answered.
    pub latency: Duration,
    /// Every watch stream ends after this long (clients must rewatch).
    pub cut_watches_every: Option<Duration>,
}

/// A fault a write meets instead of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injected {
    Conflict,
    Throttle,
    ServerError,
}

impl Faults {
    /// Reads `conflict=0.1,throttle=0.05,error=0.05,latency=5ms,cut=3s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut f = Faults::default();
        for term in s.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (k, v) = term
                .split_once('=')
                .ok_or_else(|| format!("fault {term:?} is not key=value"))?;
            let frac = || -> Result<f64, String> {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| (0.0..=1.0).contains(x))
                    .ok_or_else(|| format!("fault {k}={v}: a fraction between 0 and 1"))
            };
            let dur = || humantime::parse_duration(v).map_err(|e| format!("fault {k}={v}: {e}"));
            match k {
                "conflict" => f.conflict = frac()?,
                "throttle" => f.throttle = frac()?,
                "error" => f.server_error = frac()?,
                "latency" => f.latency = dur()?,
                "cut" => f.cut_watches_every = Some(dur()?),
                _ => {
                    return Err(format!(
                        "unknown fault {k:?} (conflict, throttle, error, latency, cut)"
                    ));
                }
            }
        }
        if f.conflict + f.throttle + f.server_error > 1.0 {
            return Err("the write fault fractions add up to more than 1".into());
        }
        Ok(f)
    }

    /// Whether this write meets a fault; `dice` is uniform in [0, 1).
    pub fn roll(&self, dice: f64) -> Option<Injected> {
        let mut edge = self.conflict;
        if dice < edge {
            return Some(Injected::Conflict);
        }
        edge += self.throttle;
        if dice < edge {
            return Some(Injected::Throttle);
        }
        edge += self.server_error;
        (dice < edge).then_some(Injected::ServerError)
    }
}

/// A small deterministic generator (splitmix64): fault runs repeat per seed.
pub struct Dice(AtomicU64);

impl Dice {
    pub fn new(seed: u64) -> Self {
        Self(AtomicU64::new(seed))
    }

    pub fn next(&self) -> f64 {
        let mut z = self
            .0
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_and_refuse_what_they_cannot_mean() {
        let f = Faults::parse("conflict=0.1, error=0.2,latency=5ms,cut=3s").unwrap();
        assert_eq!(f.conflict, 0.1);
        assert_eq!(f.server_error, 0.2);
        assert_eq!(f.latency, Duration::from_millis(5));
        assert_eq!(f.cut_watches_every, Some(Duration::from_secs(3)));
        assert!(Faults::parse("conflict=2").is_err());
        assert!(Faults::parse("conflict=0.6,error=0.6").is_err());
        assert!(Faults::parse("nonsense=1").is_err());
    }

    #[test]
    fn the_dice_hit_each_fault_about_as_often_as_asked() {
        let f = Faults::parse("conflict=0.1,throttle=0.1,error=0.1").unwrap();
        let dice = Dice::new(7);
        let n = 100_000;
        let hits = (0..n).filter(|_| f.roll(dice.next()).is_some()).count();
        let frac = hits as f64 / n as f64;
        assert!((0.28..0.32).contains(&frac), "{frac}");
    }
}
