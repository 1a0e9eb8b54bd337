//! An in-memory cluster: the ports implemented over a [`store::Store`]
//! with the API server's semantics, its changes fed back to a supervisor
//! as watch events, and a journal of every write for `plan` and the
//! invariant checks.

mod cluster;
mod feed;
pub mod invariants;
pub mod journal;
pub mod sim;
pub use gpu_claims_apiserver::store;

pub use cluster::{MemCluster, WriteFaults, devices_of};
pub use feed::{Lag, feed};
pub use journal::{Entry, Journal};

/// The embedded API server's writes over HTTP, journaled as the in-memory
/// cluster journals its own (the I1-I5 checker reads both alike).
impl gpu_claims_apiserver::WriteJournal for MemCluster {
    fn wrote(&self, w: &gpu_claims_apiserver::WriteRecord) {
        if !self.journals(&w.user) {
            return;
        }
        self.journal().entries.push(journal::Entry {
            at: humantime::format_duration(w.elapsed).to_string(),
            elapsed: w.elapsed,
            op: w.op,
            kind: w.kind,
            namespace: w.namespace.clone(),
            name: w.name.clone(),
            rule: "",
            status: None,
            devices: None,
            changed: w.changed,
            error: w.error.clone(),
            invalid: w.invalid,
            resource_version: w.resource_version,
        });
    }
}
