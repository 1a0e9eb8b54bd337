//! YAML as Kubernetes users write it: YAML 1.2's core schema, where only
//! `true` and `false` are booleans (`y`, `no`, `on` are strings, as
//! kubectl reads them). Apply bodies are read with it.

use serde::de::DeserializeOwned;

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
    }
}

/// One document.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}
