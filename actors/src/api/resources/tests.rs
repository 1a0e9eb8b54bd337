//! `pod_requests` against the cases of upstream's
//! `component-helpers/resource/helpers_test.go` (TestPodRequestsAndLimits
//! and the restartable init container cases), as tables.

use super::*;
use k8s_openapi::api::core::v1::Container;
use serde_json::json;

fn spec(v: serde_json::Value) -> PodSpec {
    serde_json::from_value(v).expect("a pod spec")
}

fn c(name: &str, requests: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "resources": {"requests": requests}})
}

fn sidecar(name: &str, requests: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "restartPolicy": "Always", "resources": {"requests": requests}})
}

fn want(pairs: &[(&str, u64)]) -> Resources {
    pairs.iter().map(|(n, a)| (n.to_string(), *a)).collect()
}

#[test]
fn pod_requests_sum_containers_take_the_largest_init_container_and_add_sidecars_and_overhead() {
    let cases: Vec<(&str, serde_json::Value, Resources)> = vec![
        ("no containers", json!({"containers": []}), want(&[])),
        (
            "containers are summed",
            json!({"containers": [c("a", json!({"cpu": "1", "memory": "1Gi"})), c("b", json!({"cpu": "500m"}))]}),
            want(&[("cpu", 1500), ("memory", 1 << 30)]),
        ),
        (
            "an init container larger than the containers wins per resource",
            json!({"containers": [c("a", json!({"cpu": "1", "memory": "1Gi"}))],
                   "initContainers": [c("i", json!({"cpu": "2", "memory": "512Mi"}))]}),
            want(&[("cpu", 2000), ("memory", 1 << 30)]),
        ),
        (
            "regular init containers run one at a time: the largest, not the sum",
            json!({"containers": [c("a", json!({"cpu": "100m"}))],
                   "initContainers": [c("i1", json!({"cpu": "1"})), c("i2", json!({"cpu": "2"}))]}),
            want(&[("cpu", 2000)]),
        ),
        (
            "a restartable init container (sidecar) adds to the containers",
            json!({"containers": [c("a", json!({"cpu": "1"}))],
                   "initContainers": [sidecar("s", json!({"cpu": "1"}))]}),
            want(&[("cpu", 2000)]),
        ),
        (
            "an init container after a sidecar runs beside it",
            json!({"containers": [c("a", json!({"cpu": "1"}))],
                   "initContainers": [sidecar("s", json!({"cpu": "1"})), c("i", json!({"cpu": "5"}))]}),
            want(&[("cpu", 6000)]),
        ),
        (
            "an init container before a sidecar does not",
            json!({"containers": [c("a", json!({"cpu": "1"}))],
                   "initContainers": [c("i", json!({"cpu": "5"})), sidecar("s", json!({"cpu": "1"}))]}),
            want(&[("cpu", 5000)]),
        ),
        (
            "overhead is added on top",
            json!({"containers": [c("a", json!({"cpu": "1", "memory": "1Gi"}))],
                   "overhead": {"cpu": "250m", "memory": "120Mi"}}),
            want(&[("cpu", 1250), ("memory", (1 << 30) + 120 * (1 << 20))]),
        ),
        (
            "a limit without a request requests the limit (API server defaulting)",
            json!({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"},
                                                               "requests": {"cpu": "500m"}}}]}),
            want(&[("cpu", 500), ("nvidia.com/gpu", 2)]),
        ),
        (
            "extended resources are summed like the rest",
            json!({"containers": [c("a", json!({"nvidia.com/gpu": "1"})), c("b", json!({"nvidia.com/gpu": "2"}))]}),
            want(&[("nvidia.com/gpu", 3)]),
        ),
        (
            "pod-level resources replace the containers' cpu and memory, not the rest",
            json!({"containers": [c("a", json!({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}))],
                   "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}),
            want(&[("cpu", 4000), ("memory", 8 << 30), ("nvidia.com/gpu", 1)]),
        ),
        (
            "zero requests are no requests",
            json!({"containers": [c("a", json!({"cpu": "0"}))]}),
            want(&[]),
        ),
    ];
    for (name, s, want) in cases {
        assert_eq!(pod_requests(&spec(s)), want, "{name}");
    }
}

#[test]
fn node_allocatable_counts_cpu_in_millicores_and_refuses_fractional_devices() {
    let list: BTreeMap<String, Quantity> = [
        ("cpu", "3500m"),
        ("memory", "16Gi"),
        ("pods", "110"),
        ("nvidia.com/gpu", "8"),
        ("nvidia.com/bad", "8.5"),
    ]
    .into_iter()
    .map(|(n, q)| (n.to_string(), Quantity(q.to_string())))
    .collect();
    let (ok, bad) = allocatable(Some(&list));
    assert_eq!(ok["cpu"], 3500);
    assert_eq!(ok["memory"], 16 << 30);
    assert_eq!(ok["pods"], 110);
    assert_eq!(ok["nvidia.com/gpu"], 8);
    assert_eq!(bad["nvidia.com/bad"].1, QuantityError::Fractional);
}

#[test]
fn resources_answer_by_name_and_none_is_zero() {
    let r = want(&[("memory", 5), ("cpu", 2), ("nvidia.com/gpu", 1)]);
    assert_eq!(r.get("cpu"), 2);
    assert_eq!(r.get("memory"), 5);
    assert_eq!(r.get("nvidia.com/gpu"), 1);
    assert_eq!(r.get("pods"), 0);
    let names: Vec<&str> = r.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["cpu", "memory", "nvidia.com/gpu"]);
    let _unused: Option<Container> = None;
}
