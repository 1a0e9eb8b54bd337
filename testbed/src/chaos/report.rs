//! What a chaos run found: the figures `gpu-claims-chaos` prints as a
//! table and writes as JSON, and that `tests/chaos.rs` asserts.

use super::{Disruption, Done, Options};
use crate::terms::{Failover, Terms, failover};
use gpu_claims_apiserver::WriteRecord;
use std::collections::BTreeMap;

#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub replicas: usize,
    pub lease_duration_s: f64,
    pub renew_deadline_s: f64,
    pub retry_period_s: f64,
    pub seed: u64,
    pub faults: String,
    /// How long the chaos lasted (convergence after it aside).
    pub duration_s: f64,
    pub kills: usize,
    pub pauses: usize,
    pub partitions: usize,
    /// Replica processes started again (after a kill).
    pub restarts: usize,
    /// Writes by the replicas that took effect, Lease writes aside.
    pub writes: usize,
    pub writes_by_replica: BTreeMap<String, usize>,
    pub writes_outside_term: usize,
    pub leader_changes: usize,
    pub invariant_checks: usize,
    pub invariant_violations: usize,
    pub converged: bool,
    /// From the leader's death or pause to the next leader's first write.
    pub failover_p50_s: Option<f64>,
    pub failover_max_s: Option<f64>,
    /// From the death or pause to the next leader's Lease write: the lease wait.
    pub takeover_p50_s: Option<f64>,
    /// From taking the Lease to the first write: what a warm standby adds
    /// to the lease wait.
    pub acquire_to_write_p50_s: Option<f64>,
    pub acquire_to_write_max_s: Option<f64>,
    pub failovers: Vec<Failover>,
    /// Kills and pauses after which no one took over and wrote (in the log).
    pub failovers_unmeasured: usize,
    pub disruptions: Vec<Done>,
    /// Each change of the Lease's holder.
    pub holders: Vec<crate::terms::Holding>,
    pub churn: BTreeMap<&'static str, usize>,
    pub violations: Vec<String>,
    pub outside_term: Vec<WriteRecord>,
    /// The replicas' log tails, when the run was not clean.
    #[serde(skip)]
    pub logs: String,
}

pub(super) struct Inputs<'a> {
    pub o: &'a Options,
    pub chaos_s: f64,
    pub log: &'a [WriteRecord],
    pub done: &'a [Done],
    pub checks: usize,
    pub violations: usize,
    pub violation_lines: &'a [String],
    pub converged: bool,
    pub actions: &'a BTreeMap<&'static str, usize>,
    pub restarts: usize,
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

fn max(v: impl Iterator<Item = f64>) -> Option<f64> {
    v.reduce(f64::max)
}

impl Report {
    pub(super) fn new(i: Inputs) -> Report {
        let terms = Terms::of(i.log);
        let count = |w: Disruption| i.done.iter().filter(|d| d.what == w).count();
        let deaths: Vec<&Done> = i
            .done
            .iter()
            .filter(|d| matches!(d.what, Disruption::Kill | Disruption::Pause))
            .collect();
        let failovers: Vec<Failover> = deaths
            .iter()
            .filter_map(|d| failover(i.log, &d.victim, d.at_s))
            .collect();
        let first: Vec<f64> = failovers.iter().map(|f| f.first_write_s).collect();
        let wait: Vec<f64> = failovers
            .iter()
            .map(|f| f.first_write_s - f.acquired_s)
            .collect();
        Report {
            replicas: i.o.replicas,
            lease_duration_s: i.o.lease.duration.as_secs_f64(),
            renew_deadline_s: i.o.lease.renew.as_secs_f64(),
            retry_period_s: i.o.lease.retry.as_secs_f64(),
            seed: i.o.seed,
            faults: i.o.faults.clone(),
            duration_s: i.chaos_s,
            kills: count(Disruption::Kill),
            pauses: count(Disruption::Pause),
            partitions: count(Disruption::Partition),
            restarts: i.restarts,
            writes: terms.writes(),
            writes_by_replica: terms.writes_by_user.clone(),
            writes_outside_term: terms.outside.len(),
            leader_changes: terms.history.len().saturating_sub(1),
            invariant_checks: i.checks,
            invariant_violations: i.violations,
            converged: i.converged,
            failover_p50_s: median(first.clone()),
            failover_max_s: max(first.into_iter()),
            takeover_p50_s: median(failovers.iter().map(|f| f.acquired_s).collect()),
            acquire_to_write_p50_s: median(wait.clone()),
            acquire_to_write_max_s: max(wait.into_iter()),
            failovers_unmeasured: deaths.len() - failovers.len(),
            failovers,
            disruptions: i.done.to_vec(),
            holders: terms.history.clone(),
            churn: i.actions.clone(),
            violations: i.violation_lines.to_vec(),
            outside_term: terms.outside.into_iter().take(20).collect(),
            logs: String::new(),
        }
    }

    /// Nothing outside a term, no invariant broken, converged, and each
    /// kind of disruption happened.
    pub fn clean(&self) -> bool {
        self.writes_outside_term == 0
            && self.invariant_violations == 0
            && self.converged
            && self.kills > 0
            && self.pauses > 0
            && self.partitions > 0
    }

    /// The figures, one per line.
    pub fn table(&self) -> String {
        let s = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}s"));
        let rows: Vec<(&str, String)> = vec![
            ("replicas", self.replicas.to_string()),
            (
                "lease (duration/renew/retry)",
                format!(
                    "{}s / {}s / {}s",
                    self.lease_duration_s, self.renew_deadline_s, self.retry_period_s
                ),
            ),
            ("faults", self.faults.clone()),
            ("chaos lasted", format!("{:.1}s", self.duration_s)),
            (
                "kills / pauses / partitions",
                format!("{} / {} / {}", self.kills, self.pauses, self.partitions),
            ),
            ("replica restarts", self.restarts.to_string()),
            ("leader changes", self.leader_changes.to_string()),
            ("writes (Lease aside)", self.writes.to_string()),
            (
                "writes outside a term",
                self.writes_outside_term.to_string(),
            ),
            (
                "invariant checks (I1-I5)",
                self.invariant_checks.to_string(),
            ),
            (
                "invariant violations",
                self.invariant_violations.to_string(),
            ),
            ("converged", self.converged.to_string()),
            (
                "failover p50 / max",
                format!("{} / {}", s(self.failover_p50_s), s(self.failover_max_s)),
            ),
            ("  of which the lease wait, p50", s(self.takeover_p50_s)),
            (
                "  Lease to first write, p50 / max",
                format!(
                    "{} / {}",
                    s(self.acquire_to_write_p50_s),
                    s(self.acquire_to_write_max_s)
                ),
            ),
            (
                "failovers measured",
                format!(
                    "{} of {}",
                    self.failovers.len(),
                    self.failovers.len() + self.failovers_unmeasured
                ),
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut out = String::new();
        for (k, v) in rows {
            out.push_str(&format!("{k:<width$}  {v}\n"));
        }
        for v in &self.violations {
            out.push_str(&format!("violation: {v}\n"));
        }
        for w in &self.outside_term {
            out.push_str(&format!("outside its term: {w}\n"));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![]), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}
