//! gpu-claims' brain: the lifecycle rules (SPEC section 4) as pure
//! decisions, the claim, class and supervisor actors that apply them, the
//! ports through which they reach a cluster, and an in-memory cluster that
//! implements those ports with the API server's semantics.
//!
//! No HTTP and no `kube::Client` here: everything is testable without a
//! cluster. The CRD types live here too, because both the rules and the
//! operator crate need them and the operator depends on this crate.
#![forbid(unsafe_code)]

pub mod api;
pub mod config;
pub mod controller;
#[cfg(any(test, feature = "sim"))]
pub mod fixtures;
#[cfg(feature = "sim")]
pub mod memory;
pub mod ports;
pub mod rules;
pub mod world;

pub use config::Config;
