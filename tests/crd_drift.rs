//! The committed CRDs in deploy/crds are what the Rust types generate.
//! Regenerate with: `GPU_CLAIMS_WRITE_CRDS=1 cargo test --test crd_drift`.
use std::path::Path;

#[test]
fn committed_crds_match_the_rust_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
    if std::env::var_os("GPU_CLAIMS_WRITE_CRDS").is_some() {
        gpu_claims::crd::write_all(&dir).unwrap();
        // The chart carries the same files (tests/deploy.rs compares them).
        let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/helm/gpu-claims/crds");
        gpu_claims::crd::write_all(&chart).unwrap();
    }
    for (file, crd) in gpu_claims::crd::all() {
        let want = gpu_claims::crd::to_yaml(&crd).unwrap();
        let got = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(
            got == want,
            "deploy/crds/{file} drifted from the Rust types; regenerate with GPU_CLAIMS_WRITE_CRDS=1 cargo test --test crd_drift"
        );
    }
}

#[test]
fn claim_crd_validates_count_and_keeps_class_and_count_immutable() {
    let yaml = gpu_claims::crd::all_yaml().unwrap();
    assert!(yaml.contains("className is immutable") && yaml.contains("count is immutable"));
    assert!(yaml.contains("minimum: 1.0"));
    for col in ["Class", "Count", "Phase", "Node", "VMI", "Age"] {
        assert!(
            yaml.contains(&format!("name: {col}\n")),
            "printer column {col}"
        );
    }
}

#[test]
fn quota_crd_bounds_its_limits_and_shows_used_and_total() {
    let (_, crd) = gpu_claims::crd::all()
        .into_iter()
        .find(|(f, _)| *f == "gpuquotas.yaml")
        .expect("the GPUQuota CRD");
    assert_eq!(crd.spec.scope, "Namespaced");
    let v = serde_json::to_value(&crd.spec.versions[0]).unwrap();
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["hard"]["additionalProperties"]["minimum"], 0.0);
    assert_eq!(spec["total"]["minimum"], 0.0);
    let columns: Vec<&str> = v["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Used", "Total", "Age"]);
    assert!(v["subresources"]["status"].is_object());
}
