//! The operator around the actors: CRDs and CLI, the kube-rs watchers that
//! feed the supervisor, the kube-backed writer and reader, config loading
//! and reload, telemetry, HTTP endpoints, and `plan`.
#![forbid(unsafe_code)]

pub mod apiserver;
pub mod bench;
pub mod cli;
pub mod config;
pub mod crd;
pub mod demo;
pub mod http;
pub mod kube_ports;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod run;
pub mod snapshot;
pub mod standin;
pub mod telemetry;
pub mod watch;
pub mod webhook;
pub mod yaml;

/// The operator's errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("config {path}: {reason}")]
    Config { path: String, reason: String },
    /// `doc` is 1-based; 0 when the text is not YAML (the reason says where).
    #[error("snapshot {path}{}: {reason}", if *doc == 0 { String::new() } else { format!(", document {doc}") })]
    Snapshot {
        path: String,
        doc: usize,
        reason: String,
    },
    #[error("kube: {0}")]
    Kube(#[source] Box<kube::Error>),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// A label for error metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Config { .. } => "config",
            Error::Snapshot { .. } => "snapshot",
            Error::Kube(_) => "kube",
            Error::Io(_) => "io",
        }
    }
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        Error::Kube(Box::new(e))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
