//! The Lease's terms as the API server saw them, from its write log: a
//! term starts with the Lease write that makes a replica its holder and
//! ends with the Lease write that makes anyone else (or no one) holder. A
//! write by a replica outside its own term is what single-writer forbids;
//! a failover is the time from a leader's death or pause to the next
//! holder's first write.

use gpu_claims_apiserver::{ANONYMOUS, WriteRecord};
use std::collections::BTreeMap;

/// The pod a Lease holder identity names: what precedes its `_suffix`, as
/// the operator's `leader::identity` writes it (`<pod>_<8 hex digits>`).
pub fn pod_of(identity: &str) -> &str {
    identity.rsplit_once('_').map_or(identity, |(pod, _)| pod)
}

/// A change of holder.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Holding {
    pub seq: u64,
    pub at_s: f64,
    pub holder: Option<String>,
}

#[derive(Debug, Default)]
pub struct Terms {
    /// Each change of holder, in order.
    pub history: Vec<Holding>,
    /// Each replica's writes that took effect, Lease writes aside.
    pub writes_by_user: BTreeMap<String, usize>,
    /// Writes (that took effect or were refused: they reached the server)
    /// by a replica that did not hold the Lease then.
    pub outside: Vec<WriteRecord>,
}

fn is_lease(w: &WriteRecord) -> bool {
    w.kind == "Lease"
}

impl Terms {
    /// Judges every write of `log` (in the server's order) against the
    /// holder of the Lease at that point. Callers without a token (the
    /// stand-in's, a test's) are not replicas and are not judged.
    pub fn of(log: &[WriteRecord]) -> Terms {
        let mut t = Terms::default();
        let mut holder: Option<String> = None;
        for w in log {
            if is_lease(w) {
                if w.applied() && w.holder != holder {
                    holder = w.holder.clone().filter(|h| !h.is_empty());
                    t.history.push(Holding {
                        seq: w.seq,
                        at_s: w.elapsed.as_secs_f64(),
                        holder: holder.clone(),
                    });
                }
                continue;
            }
            if w.user == ANONYMOUS {
                continue;
            }
            if w.applied() {
                *t.writes_by_user.entry(w.user.clone()).or_default() += 1;
            }
            // The server knows replicas by their tokens, which are per pod.
            if holder.as_deref().map(pod_of) != Some(w.user.as_str()) {
                t.outside.push(w.clone());
            }
        }
        t
    }

    /// The writes that took effect, Lease writes aside.
    pub fn writes(&self) -> usize {
        self.writes_by_user.values().sum()
    }
}

/// How one failover went, in seconds from the leader's death or pause.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Failover {
    /// The Lease identities of the old and the next holder.
    pub victim: String,
    pub next: String,
    /// Until the next holder's Lease write.
    pub acquired_s: f64,
    /// Until the next holder's first write of anything else.
    pub first_write_s: f64,
}

/// The failover after the holder `victim` (a Lease identity) died or froze
/// at `at_s`: None when no one else took the Lease, or the next holder
/// wrote nothing, in the log.
pub fn failover(log: &[WriteRecord], victim: &str, at_s: f64) -> Option<Failover> {
    let acquired = log.iter().find(|w| {
        is_lease(w)
            && w.applied()
            && w.elapsed.as_secs_f64() >= at_s
            && w.holder
                .as_deref()
                .is_some_and(|h| !h.is_empty() && h != victim)
    })?;
    let next = acquired.holder.clone()?;
    let first = log
        .iter()
        .skip_while(|w| w.seq <= acquired.seq)
        .find(|w| !is_lease(w) && w.applied() && w.user == pod_of(&next))?;
    Some(Failover {
        victim: victim.to_string(),
        next,
        acquired_s: acquired.elapsed.as_secs_f64() - at_s,
        first_write_s: first.elapsed.as_secs_f64() - at_s,
    })
}

/// The Lease's holders in order, each replica's writes, and the writes
/// made outside their writer's term.
pub fn summary(log: &[WriteRecord]) -> String {
    let terms = Terms::of(log);
    let mut out = String::from("\nLease holders, in order:\n");
    for t in &terms.history {
        out.push_str(&format!(
            "  {:>8.3}s  {}\n",
            t.at_s,
            t.holder.as_deref().unwrap_or("(none)")
        ));
    }
    out.push_str("writes by user (Lease renewals aside):\n");
    for (user, n) in &terms.writes_by_user {
        out.push_str(&format!("  {user}: {n}\n"));
    }
    out.push_str(&format!(
        "writes outside their writer's term: {}\n",
        terms.outside.len()
    ));
    for w in terms.outside.iter().take(20) {
        out.push_str(&format!("  {w}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(seq: u64, at_s: f64, user: &str, kind: &'static str, holder: Option<&str>) -> WriteRecord {
        WriteRecord {
            seq,
            elapsed: std::time::Duration::from_secs_f64(at_s),
            user: user.into(),
            op: "update",
            kind,
            namespace: None,
            name: "x".into(),
            changed: true,
            holder: holder.map(str::to_string),
            error: None,
            invalid: false,
            resource_version: seq + 1,
        }
    }

    /// The writes outside every term, by their order.
    fn outside(log: &[WriteRecord]) -> Vec<u64> {
        Terms::of(log).outside.iter().map(|w| w.seq).collect()
    }

    #[test]
    fn a_write_belongs_to_the_term_of_the_holder_at_that_point() {
        let log = vec![
            w(0, 0.0, "r1", "Lease", Some("r1_a")),
            w(1, 0.1, "r1", "GPUClaim", None),
            w(2, 0.2, "r1", "Lease", Some("r1_a")), // a renewal: no new term
            w(3, 5.0, "r2", "Lease", Some("r2_b")),
            w(4, 5.1, "r2", "GPUClaim", None),
            // r1 wakes from a pause and writes: outside its term.
            w(5, 5.2, "r1", "GPUClaim", None),
            w(6, 5.3, ANONYMOUS, "Pod", None),
        ];
        let t = Terms::of(&log);
        let holders: Vec<_> = t
            .history
            .iter()
            .map(|h| h.holder.clone().unwrap())
            .collect();
        assert_eq!(holders, ["r1_a", "r2_b"]);
        assert_eq!(t.outside.iter().map(|w| w.seq).collect::<Vec<_>>(), [5]);
        assert_eq!(t.writes(), 3, "the anonymous stand-in is no replica");
    }

    #[test]
    fn a_refused_write_outside_a_term_counts_and_a_write_before_any_lease_is_outside() {
        let mut refused = w(1, 0.1, "r1", "GPUClaim", None);
        refused.error = Some("injected Conflict".into());
        let log = vec![w(0, 0.0, "r1", "Pod", None), refused.clone()];
        let t = Terms::of(&log);
        assert_eq!(t.outside.len(), 2);
        assert_eq!(t.writes(), 1, "only what took effect is a write");
    }

    #[test]
    fn a_write_by_a_restarted_process_of_the_holders_pod_is_its_pods_write() {
        let held = w(0, 0.0, "r1", "Lease", Some("r1_a"));
        let (same, other) = (
            w(1, 0.1, "r1", "GPUClaim", None),
            w(2, 0.2, "r2", "GPUClaim", None),
        );
        assert_eq!(outside(&[held, same, other]), [2]);
    }

    #[test]
    fn a_released_lease_ends_the_term() {
        let (held, released) = (
            w(0, 0.0, "r1", "Lease", Some("r1_a")),
            w(1, 1.0, "r1", "Lease", None),
        );
        assert_eq!(
            outside(&[held, released, w(2, 1.1, "r1", "GPUClaim", None)]),
            [2]
        );
    }

    #[test]
    fn a_failover_runs_from_the_death_to_the_next_holders_first_write() {
        let log = vec![
            w(0, 0.0, "r1", "Lease", Some("r1_a")),
            w(1, 9.0, "r1", "GPUClaim", None),
            w(2, 14.0, "r2", "Lease", Some("r2_b")),
            w(3, 14.2, "r3", "Pod", None),
            w(4, 14.5, "r2", "GPUClaim", None),
            // r1 restarted: a new candidate of the same pod, which takes over in its turn.
            w(5, 30.0, "r1", "Lease", Some("r1_c")),
            w(6, 30.1, "r1", "GPUClaim", None),
        ];
        let f = failover(&log, "r1_a", 10.0).unwrap();
        assert_eq!(f.next, "r2_b");
        assert!((f.acquired_s - 4.0).abs() < 1e-9);
        assert!((f.first_write_s - 4.5).abs() < 1e-9);
        let f = failover(&log, "r2_b", 25.0).unwrap();
        assert_eq!(f.next, "r1_c");
        assert!((f.first_write_s - 5.1).abs() < 1e-9);
        assert_eq!(failover(&log, "r1_c", 31.0), None, "no one took over");
    }
}
