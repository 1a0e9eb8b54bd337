//! The operator around the actors: CRDs and CLI, the kube-rs watchers that
//! feed the supervisor, the kube-backed writer and reader, config loading
//! and reload, telemetry, HTTP endpoints, and `plan`.
#![forbid(unsafe_code)]

/// The embedded API server (its own crate: it knows nothing of gpu-claims).
pub use gpu_claims_apiserver as apiserver;
pub mod bench;
pub mod chaos;
pub mod cli;
pub mod clients;
pub mod cluster;
pub mod config;
pub mod controller;
pub mod crd;
pub mod demo;
pub mod file_read;
pub mod file_watch;
pub mod http;
pub mod kube_ports;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod run;
pub mod serve;
pub mod snapshot;
pub mod standin;
pub mod telemetry;
pub mod watch;
pub mod webhook;
pub mod yaml;

/// The operator's errors: each module's, wrapped where one call can meet
/// several (`run` reads its config, serves its webhook, talks to the API
/// server). Commands turn them into one line with the causes (`main`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotError),
    #[error("webhook: {0}")]
    Tls(#[from] webhook::TlsError),
    #[error("kube: {0}")]
    Kube(#[source] Box<kube::Error>),
    /// No kubeconfig or in-cluster config, or one that cannot be read.
    #[error("no usable kubeconfig or in-cluster config: {0}")]
    Kubeconfig(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(Box::new(e))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
