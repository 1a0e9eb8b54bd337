use super::*;
use serde_json::json;

fn fields(c: &[Cause]) -> Vec<String> {
    c.iter()
        .map(|c| format!("{}: {}", c.field, c.message()))
        .collect()
}

fn claim() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "vm-gpu", "namespace": "t"},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": 2}}]}}})
}

fn allocated(c: &Value, request: &str) -> Value {
    let mut c = c.clone();
    c["status"] = json!({"allocation": {"devices": {"results": [
        {"request": request, "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}});
    c
}

#[test]
fn a_claims_spec_is_checked_on_create_and_never_changes_after() {
    assert!(check("ResourceClaim", None, &claim()).is_empty());
    let mut neither = claim();
    neither["spec"]["devices"]["requests"][0] = json!({"name": "gpu"});
    assert_eq!(
        fields(&check("ResourceClaim", None, &neither)),
        [
            "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"
        ]
    );
    let mut bad_name = claim();
    bad_name["spec"]["devices"]["requests"][0]["name"] = "GPU".into();
    assert!(
        fields(&check("ResourceClaim", None, &bad_name))[0].starts_with(
            "spec.devices.requests[0].name: Invalid value: \"GPU\": a lowercase RFC 1123 label"
        )
    );
    let mut changed = claim();
    changed["spec"]["devices"]["requests"][0]["exactly"]["count"] = 3.into();
    let causes = fields(&check("ResourceClaim", Some(&claim()), &changed));
    assert_eq!(causes.len(), 1);
    assert!(
        causes[0].starts_with("spec: Invalid value: ") && causes[0].ends_with("field is immutable")
    );
}

#[test]
fn an_allocation_names_the_claims_requests_is_set_once_and_reserved_only_with_it() {
    let c = claim();
    assert!(check("ResourceClaim", Some(&c), &allocated(&c, "gpu")).is_empty());
    assert_eq!(
        fields(&check("ResourceClaim", Some(&c), &allocated(&c, "other"))),
        [
            "status.allocation.devices.results[0].request: Invalid value: \"other\": must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
        ]
    );
    // Set, then changed: refused; set, then cleared: allowed.
    let set = allocated(&c, "gpu");
    let mut moved = set.clone();
    moved["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1".into();
    let causes = fields(&check("ResourceClaim", Some(&set), &moved));
    assert!(
        causes[0].starts_with("status.allocation: Invalid value:"),
        "{causes:?}"
    );
    assert!(check("ResourceClaim", Some(&set), &c).is_empty());
    let mut reserved = c.clone();
    reserved["status"] = json!({"reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}]});
    assert_eq!(
        fields(&check("ResourceClaim", Some(&c), &reserved)),
        ["status.reservedFor: Forbidden: may not be specified when `allocated` is not set"]
    );
}

#[test]
fn upstreams_size_limits_hold_for_requests_results_and_reservations() {
    let mut many = claim();
    many["spec"]["devices"]["requests"] = (0..33)
        .map(|i| json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "c"}}))
        .collect();
    assert_eq!(
        fields(&check("ResourceClaim", None, &many)),
        ["spec.devices.requests: Too many: 33: must have at most 32 items"]
    );
    let mut crowded = allocated(&claim(), "gpu");
    crowded["status"]["reservedFor"] = (0..257)
        .map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": i.to_string()}))
        .collect();
    assert_eq!(
        fields(&check("ResourceClaim", Some(&claim()), &crowded)),
        ["status.reservedFor: Too many: 257: must have at most 256 items"]
    );
    let long = "a".repeat(CEL_MAX_BYTES + 1);
    let class = json!({"spec": {"selectors": [{"cel": {"expression": long}}]}});
    assert_eq!(
        fields(&check("DeviceClass", None, &class)),
        ["spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"]
    );
}

fn slice() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "n1-gpu.nvidia.com-abcde"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1",
            "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "vfio"}}}]}})
}

#[test]
fn a_slice_has_one_node_field_a_fixed_driver_and_pool_and_bounded_devices() {
    assert!(check("ResourceSlice", None, &slice()).is_empty());
    let mut both = slice();
    both["spec"]["allNodes"] = true.into();
    assert_eq!(
        fields(&check("ResourceSlice", None, &both)),
        [
            "spec: Invalid value: {...}: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set"
        ]
    );
    let mut moved = slice();
    moved["spec"]["nodeName"] = "n2".into();
    assert_eq!(
        fields(&check("ResourceSlice", Some(&slice()), &moved)),
        ["spec.nodeName: Invalid value: \"n2\": field is immutable"]
    );
    let mut full = slice();
    full["spec"]["devices"] = (0..129)
        .map(|i| json!({"name": format!("gpu-{i}")}))
        .collect();
    assert_eq!(
        fields(&check("ResourceSlice", None, &full)),
        ["spec.devices: Too many: 129: must have at most 128 items"]
    );
    // With a taint the bound is upstream's 64.
    full["spec"]["devices"] = (0..65)
        .map(|i| json!({"name": format!("gpu-{i}"), "taints": [{"key": "k", "effect": "NoSchedule"}]}))
        .collect();
    assert_eq!(
        fields(&check("ResourceSlice", None, &full)),
        ["spec.devices: Too many: 65: must have at most 64 items"]
    );
    let mut bad = slice();
    bad["spec"]["devices"][0]["name"] = "GPU_0".into();
    assert!(
        fields(&check("ResourceSlice", None, &bad))[0]
            .starts_with("spec.devices[0].name: Invalid value: \"GPU_0\"")
    );
}

#[test]
fn selectors_compile_on_write_and_names_attributes_and_consumers_are_checked() {
    let class = json!({"spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}});
    let causes = fields(&check("DeviceClass", None, &class));
    assert!(
        causes[0].starts_with("spec.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed"),
        "{causes:?}"
    );
    let mut twice = claim();
    let r = twice["spec"]["devices"]["requests"][0].clone();
    twice["spec"]["devices"]["requests"] = json!([r.clone(), r]);
    assert_eq!(
        fields(&check("ResourceClaim", None, &twice)),
        ["spec.devices.requests[1].name: Invalid value: \"gpu\": Duplicate value"]
    );
    let mut bad = slice();
    bad["spec"]["devices"][0]["attributes"] = json!({
        "empty": {}, "driverVersion": {"version": "580.65"}, "both": {"int": 1, "string": "x"}});
    assert_eq!(
        fields(&check("ResourceSlice", None, &bad)),
        [
            "spec.devices[0].attributes[both]: Invalid value: {\"int\":1,\"string\":\"x\"}: exactly one value must be specified",
            "spec.devices[0].attributes[driverVersion].version: Invalid value: \"580.65\": must be a string compatible with semver.org spec 2.0.0",
            "spec.devices[0].attributes[empty]: Invalid value: {}: exactly one value must be specified",
        ]
    );
    let mut doubled = allocated(&claim(), "gpu");
    doubled["status"]["reservedFor"] = json!([
        {"resource": "pods", "name": "p", "uid": "1"}, {"resource": "pods", "name": "p", "uid": "1"}]);
    assert_eq!(
        fields(&check("ResourceClaim", Some(&claim()), &doubled)),
        ["status.reservedFor[1].uid: Invalid value: \"1\": Duplicate value"]
    );
    // A claim being deleted takes no new consumer.
    let mut leaving = allocated(&claim(), "gpu");
    leaving["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z".into();
    let mut more = leaving.clone();
    more["status"]["reservedFor"] = json!([{"resource": "pods", "name": "p", "uid": "1"}]);
    assert_eq!(
        fields(&check("ResourceClaim", Some(&leaving), &more)),
        [
            "status.reservedFor: Forbidden: new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"
        ]
    );
}

/// `[0,…,59]`: a loop of sixty, as a tenant writes one.
fn sixty() -> String {
    let items: Vec<String> = (0..60).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(","))
}

#[test]
fn a_selector_over_upstream_s_cost_limit_is_refused_where_it_is_written() {
    let r = sixty();
    let costly = format!("{r}.all(a, {r}.all(b, {r}.all(c, a+b+c >= 0)))");
    let cheap = format!("{r}.all(a, {r}.all(b, a+b >= 0))");
    let with = |e: &str| json!([{"cel": {"expression": e}}]);
    // A template's request, as kube-apiserver words it.
    let mut template = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "t"},
        "spec": {"spec": claim()["spec"].clone()}});
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = with(&costly);
    assert_eq!(
        fields(&check("ResourceClaimTemplate", None, &template)),
        [
            "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"
        ]
    );
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = with(&cheap);
    assert!(check("ResourceClaimTemplate", None, &template).is_empty());
    // A DeviceClass's, and a claim's subrequest.
    let class = json!({"spec": {"selectors": with(&costly)}});
    assert_eq!(
        fields(&check("DeviceClass", None, &class)),
        ["spec.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"]
    );
    let mut c = claim();
    c["spec"]["devices"]["requests"][0] = json!({"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "vfio.gpu.nvidia.com", "selectors": with(&costly)}]});
    assert_eq!(
        fields(&check("ResourceClaim", None, &c)),
        [
            "spec.devices.requests[0].firstAvailable[0].selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"
        ]
    );
}
