#![doc = include_str!("../README.md")]

mod admission;
mod answers;
mod auth;
mod builder;
mod controllers;
mod discovery;
mod events;
pub mod faults;
mod handlers;
mod journal;
mod partial;
pub mod patch;
#[cfg(feature = "conformance")]
mod protobuf;
mod quantity;
mod registry;
mod resources;
mod select;
mod server;
pub mod store;
mod table;
mod watch;
mod yaml;

pub use admission::match_conditions_hold;
pub use auth::audit::Access;
pub use auth::identity::ANONYMOUS;
pub use builder::{Builder, CrdError, Handle, StartError, install_crd};
pub use controllers::kubelet;
pub use controllers::namespaces;
pub use faults::Faults;
pub use journal::{WriteJournal, WriteRecord};
pub use registry::dra_rules::refusal as dra_refusal;
pub use registry::schema::{SchemaVerdict, verdict as schema_verdict};
pub use resources::Served;
pub use server::{ApiServer, HEADER_READ_TIMEOUT, new_store};

pub(crate) use resources::{
    Custom, Registry, Resource, Sub, Target, kinds_without_generation, status_kinds,
};

pub(crate) use answers::{object_status, status, status_with};
pub(crate) use server::kubeconfig;
