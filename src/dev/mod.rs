//! The operator's dev commands (feature `dev`, on by default; the image
//! is built without it): `demo`, `plan` and `cluster`, which run the
//! controller in the testbed's worlds, and what they need of the
//! operator: its gate webhook wired into the embedded API server, and the
//! controller started for the testbed's benchmarks.

pub mod bench;
pub mod cluster;
pub mod dashboard;
pub mod demo;
pub mod plan;
pub mod webhook;
pub mod webhook_storm;
