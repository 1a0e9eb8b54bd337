//! gpu-claims' brain: its rules (`docs/design.md`: the seed's lifecycle,
//! placement, quotas, DRA, evacuation) as pure decisions (`rules`), the
//! world they read (`world`: caches and indexes), the actors that apply
//! them (`controller`: the supervisor, one actor per claim, class and
//! quota, and placement), and the ports through which they reach a
//! cluster (the operator implements them over kube-rs;
//! `gpu-claims-testbed` in memory).
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
