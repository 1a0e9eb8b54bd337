//! gpu-claims' brain: the lifecycle rules (SPEC section 4) as pure
//! decisions, the claim, class and supervisor actors that apply them, and
//! the ports through which they reach a cluster (the operator implements
//! them over kube-rs; `gpu-claims-testbed` in memory).
//!
//! No HTTP and no `kube::Client` here: everything is testable without a
//! cluster. The CRD types live here too, because both the rules and the
//! operator crate need them and the operator depends on this crate.
#![forbid(unsafe_code)]

pub mod api;
pub mod config;
pub mod controller;
pub mod dra;
pub mod ports;
pub mod printable;
pub mod rules;
pub mod status;
pub mod world;
pub mod yaml;

pub use config::Config;
