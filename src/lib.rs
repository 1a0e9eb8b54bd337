//! The operator around the actors: CRDs and CLI, the kube-rs watchers that
//! feed the supervisor, the kube-backed writer and reader, leader
//! election, the gate webhook, config loading and reload, telemetry and
//! HTTP endpoints; with the `dev` feature (on by default) the commands
//! that run it in the testbed's worlds (`demo`, `plan`, `cluster`).
#![forbid(unsafe_code)]

pub mod cli;
pub mod clients;
pub mod config;
pub mod controller;
pub mod crd;
#[cfg(feature = "dev")]
pub mod dev;
pub mod drain;
pub mod error_words;
pub mod file_read;
pub mod file_watch;
pub mod http;
pub mod kube_args;
pub mod kube_events;
pub mod kube_ports;
pub mod leader;
pub mod metrics;
pub mod run;
pub mod serve;
pub mod status;
pub mod telemetry;
pub mod watch;
pub mod webhook;

/// The operator's errors: each module's, wrapped where one call can meet
/// several (`run` reads its config, serves its webhook, talks to the API
/// server). Commands turn them into one line with the causes (`main`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
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
