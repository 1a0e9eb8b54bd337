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

/// An API server serving our CRDs, as `kubectl apply -f deploy/crds/` makes them.
async fn served() -> gpu_claims_apiserver::Handle {
    let mut b = gpu_claims_apiserver::ApiServer::builder().namespace("t");
    for (_, crd) in gpu_claims::crd::all() {
        b = b.crd_json(serde_json::to_value(crd).unwrap());
    }
    b.start().await.expect("the API server starts")
}

/// Creates `obj` (JSON) of our kind `plural` in namespace t; the refusal, if any.
async fn create(
    h: &gpu_claims_apiserver::Handle,
    plural: &str,
    obj: serde_json::Value,
) -> Option<(u16, String)> {
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::discovery::ApiResource;
    let kind = obj["kind"].as_str().unwrap().to_string();
    let gvk = kube::api::GroupVersionKind::gvk("gpu.cozystack.io", "v1alpha1", &kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    let api: Api<DynamicObject> = Api::namespaced_with(h.client(), "t", &ar);
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => None,
        Err(kube::Error::Api(s)) => Some((s.code, s.message)),
        Err(e) => panic!("{e}"),
    }
}

/// Issue 33, items 2 and 3: what the controller could not read, or a
/// tenant could use to write to an operator's terminal, is refused at the
/// API server, with why (422), as upstream refuses what its schemas forbid.
#[tokio::test]
async fn the_api_server_refuses_what_our_types_cannot_hold() {
    let h = served().await;
    let quota = |hard: serde_json::Value| {
        serde_json::json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUQuota",
            "metadata": {"name": "q"}, "spec": {"hard": hard}})
    };
    let claim = |class: &str, count: serde_json::Value| {
        serde_json::json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
            "metadata": {"name": "c"}, "spec": {"className": class, "count": count}})
    };
    let many: serde_json::Map<String, serde_json::Value> = (0..129)
        .map(|i| (format!("c{i}"), serde_json::json!(1)))
        .collect();
    let refused = [
        (
            "gpuquotas",
            quota(serde_json::json!({"probe": 1, "l40s": 4_294_967_296u64})),
            "4294967295",
        ),
        (
            "gpuquotas",
            quota(serde_json::json!({"\u{1b}[2Jx": 1})),
            "each key must be a GPUClass name",
        ),
        (
            "gpuquotas",
            quota(serde_json::json!({"H200": 1})),
            "each key must be a GPUClass name",
        ),
        ("gpuquotas", quota(serde_json::Value::Object(many)), "128"),
        (
            "gpuclaims",
            claim("h200\u{1b}]0;pwned\u{7}\r\nWAITING", serde_json::json!(1)),
            "spec.className",
        ),
        (
            "gpuclaims",
            claim("h200", serde_json::json!(4_294_967_296u64)),
            "4294967295",
        ),
    ];
    for (plural, obj, why) in refused {
        let got = create(&h, plural, obj.clone()).await;
        let (code, message) = got.unwrap_or_else(|| panic!("stored: {obj}"));
        assert_eq!(code, 422, "{message}");
        assert!(message.contains(why), "{why:?} in {message}");
    }
    let accepted = [
        (
            "gpuquotas",
            quota(serde_json::json!({"h200": 4_294_967_295u64, "a100.gpu": 0})),
        ),
        ("gpuclaims", claim("h200", serde_json::json!(2))),
    ];
    for (plural, obj) in accepted {
        assert_eq!(create(&h, plural, obj).await, None, "{plural}");
    }
}
