//! An in-memory cluster: the ports implemented over a [`store::Store`]
//! with the API server's semantics, its changes fed back to a supervisor
//! as watch events, and a journal of every write for `plan` and the
//! invariant checks.

mod cluster;
mod feed;
pub mod invariants;
pub mod journal;
pub mod sim;
pub mod store;

pub use cluster::{MemCluster, WriteFaults};
pub use feed::{Lag, feed};
pub use journal::{Entry, Journal};
