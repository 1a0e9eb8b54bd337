//! GPU-seconds per namespace and class: how long a tenant's claims held
//! their GPUs, and how long a VM used them, integrated exactly as claims
//! change (the sum of GPUs held is a step function that moves only when a
//! claim's phase, count or class does; between moves it is constant). A
//! platform charges for these: what a tenant holds, running or not.
//!
//! The integral starts at zero when the process starts (a Prometheus
//! counter: `rate()` reads it across restarts). Every replica keeps its
//! own from the same watches, so they agree to within a watch's lag.

use crate::api::GPUClaim;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// What one claim adds to its namespace and class: the GPUs it holds or
/// owes (Bound, Attached, Lost) and, of them, those a VMI uses (Attached).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holding<'a> {
    namespace: &'a str,
    class: &'a str,
    held: u64,
    attached: u64,
}

impl<'a> Holding<'a> {
    /// None for a claim that holds nothing (Pending).
    pub(crate) fn of(c: &'a GPUClaim) -> Option<Self> {
        let phase = c.phase();
        if !phase.counts_against_budget() {
            return None;
        }
        let gpus = u64::from(c.spec.count);
        Some(Self {
            namespace: c.metadata.namespace.as_deref().unwrap_or_default(),
            class: &c.spec.class_name,
            held: gpus,
            attached: if phase == crate::api::ClaimPhase::Attached {
                gpus
            } else {
                0
            },
        })
    }
}

/// One namespace and class: GPUs held and attached now, and since when
/// the integrals below are counted up to.
#[derive(Debug, Default)]
struct Account {
    held: u64,
    attached: u64,
    since: Option<Instant>,
    held_seconds: f64,
    attached_seconds: f64,
}

impl Account {
    /// Counts the time since the last move at the GPUs held over it.
    fn advance(&mut self, now: Instant) {
        if let Some(t) = self.since {
            let dt = now.saturating_duration_since(t).as_secs_f64();
            // u64 to f64: exact below 2^53 GPUs, which no cluster holds.
            self.held_seconds += self.held as f64 * dt;
            self.attached_seconds += self.attached as f64 * dt;
        }
        self.since = Some(now);
    }
}

/// The integrals of one namespace and class, as `GpuSeconds::read` saw them.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSecondsRow {
    pub namespace: String,
    pub class: String,
    /// GPUs held now.
    pub held: u64,
    /// GPUs attached now.
    pub attached: u64,
    pub held_seconds: f64,
    pub attached_seconds: f64,
}

/// The accounts, one lock: taken only when a claim's holding moves (not
/// on a status write that changes nothing it holds) and once per scrape.
#[derive(Debug, Default)]
pub struct GpuSeconds {
    accounts: Mutex<HashMap<(String, String), Account>>,
}

impl GpuSeconds {
    /// A claim changed from `old` to `new` (None: it holds nothing, or is gone).
    pub(crate) fn moved(&self, old: Option<Holding<'_>>, new: Option<Holding<'_>>, now: Instant) {
        if old == new {
            return;
        }
        let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        for (h, add) in [(old, false), (new, true)] {
            let Some(h) = h else { continue };
            let a = accounts
                .entry((h.namespace.to_string(), h.class.to_string()))
                .or_default();
            a.advance(now);
            let step = |v: u64, d: u64| {
                if add {
                    v.saturating_add(d)
                } else {
                    v.saturating_sub(d)
                }
            };
            a.held = step(a.held, h.held);
            a.attached = step(a.attached, h.attached);
        }
    }

    /// Every account counted up to `now`, sorted. An account whose claims
    /// are all gone stays (a counter must not go back), at zero GPUs.
    pub fn read(&self, now: Instant) -> Vec<GpuSecondsRow> {
        let mut accounts = self.accounts.lock().unwrap_or_else(|e| e.into_inner());
        let mut rows: Vec<GpuSecondsRow> = accounts
            .iter_mut()
            .map(|((ns, class), a)| {
                a.advance(now);
                GpuSecondsRow {
                    namespace: ns.clone(),
                    class: class.clone(),
                    held: a.held,
                    attached: a.attached,
                    held_seconds: a.held_seconds,
                    attached_seconds: a.attached_seconds,
                }
            })
            .collect();
        drop(accounts);
        rows.sort_by(|a, b| (&a.namespace, &a.class).cmp(&(&b.namespace, &b.class)));
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn holding<'a>(ns: &'a str, held: u64, attached: u64) -> Option<Holding<'a>> {
        Some(Holding {
            namespace: ns,
            class: "a10",
            held,
            attached,
        })
    }

    #[test]
    fn gpu_seconds_integrate_the_gpus_held_between_moves() {
        let m = GpuSeconds::default();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        // Bound with 2 GPUs for 10 s, then Attached for 5 s, then released.
        m.moved(None, holding("t1", 2, 0), t0);
        m.moved(holding("t1", 2, 0), holding("t1", 2, 2), t0 + s(10));
        m.moved(holding("t1", 2, 2), None, t0 + s(15));
        let rows = m.read(t0 + s(100));
        assert_eq!(rows.len(), 1, "{rows:?}");
        let r = &rows[0];
        assert_eq!((r.held, r.attached), (0, 0));
        assert_eq!(r.held_seconds, 30.0);
        assert_eq!(r.attached_seconds, 10.0);
    }

    #[test]
    fn gpu_seconds_count_up_to_the_scrape_and_not_twice() {
        let m = GpuSeconds::default();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        m.moved(None, holding("t1", 1, 1), t0);
        m.moved(None, holding("t2", 4, 0), t0);
        assert_eq!(m.read(t0 + s(3))[0].held_seconds, 3.0);
        let rows = m.read(t0 + s(7));
        assert_eq!(
            rows.iter()
                .map(|r| (r.namespace.as_str(), r.held_seconds, r.attached_seconds))
                .collect::<Vec<_>>(),
            [("t1", 7.0, 7.0), ("t2", 28.0, 0.0)]
        );
    }

    #[test]
    fn gpu_seconds_ignore_a_change_that_holds_the_same() {
        let m = GpuSeconds::default();
        let t0 = Instant::now();
        m.moved(holding("t1", 1, 0), holding("t1", 1, 0), t0);
        assert!(m.read(t0).is_empty());
    }
}
