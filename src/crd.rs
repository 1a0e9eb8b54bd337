//! The CRDs, generated from the Rust types; `deploy/crds/` holds the
//! committed copies, and a test fails when they drift.

pub use gpu_claims_actors::api::crds::all;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

pub fn to_yaml(crd: &CustomResourceDefinition) -> anyhow::Result<String> {
    Ok(serde_saphyr::to_string(crd)?)
}

/// Every CRD, as one multi-document YAML.
pub fn all_yaml() -> anyhow::Result<String> {
    let mut out = String::new();
    for (_, crd) in all() {
        out.push_str("---\n");
        out.push_str(&to_yaml(&crd)?);
    }
    Ok(out)
}

/// Writes the CRDs into `dir` (deploy/crds): what `cargo run -- crd` prints, one file each.
pub fn write_all(dir: &std::path::Path) -> anyhow::Result<()> {
    for (file, crd) in all() {
        std::fs::write(dir.join(file), to_yaml(&crd)?)?;
    }
    Ok(())
}
