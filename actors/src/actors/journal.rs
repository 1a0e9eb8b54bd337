//! Each actor's recent decisions, for `/debug/claims/<ns>/<name>` and
//! tests: a bounded ring, so an actor's memory does not grow with time.

use serde::Serialize;
use std::collections::VecDeque;

/// One decision: when, by which rule, what it meant to do and what came of it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Decision {
    /// Milliseconds since the process (or simulation) started.
    pub at_ms: u64,
    pub rule: &'static str,
    pub intent: &'static str,
    pub result: String,
}

/// The last few decisions. Allocated on first use: most actors of a
/// converged cluster never decide anything.
#[derive(Default, Debug)]
pub struct DecisionLog(Option<VecDeque<Decision>>);

impl DecisionLog {
    pub const CAPACITY: usize = 16;

    pub fn push(&mut self, d: Decision) {
        let ring = self
            .0
            .get_or_insert_with(|| VecDeque::with_capacity(Self::CAPACITY));
        if ring.len() == Self::CAPACITY {
            ring.pop_front();
        }
        ring.push_back(d);
    }

    pub fn to_vec(&self) -> Vec<Decision> {
        self.0
            .as_ref()
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }
}
