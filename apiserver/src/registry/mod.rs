//! The write pipeline, as upstream's registries and their strategies
//! run it for an object before it is stored: decoded into its type
//! (`typed`, `resource_values`), defaulted (`defaults`), given what a
//! create sets (`created`), validated (`validate`; the built-in kinds'
//! own rules in `kind_rules` and `dra_rules`; custom resources by their
//! CRD's structural schema and CEL rules in `schema`), and a pod's graceful
//! deletion (`pods`).

pub(crate) mod created;
pub(crate) mod defaults;
pub(crate) mod dra_rules;
pub(crate) mod kind_rules;
pub(crate) mod pods;
pub(crate) mod priorities;
pub(crate) mod resource_values;
pub(crate) mod schema;
pub(crate) mod typed;
pub(crate) mod validate;
