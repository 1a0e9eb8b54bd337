//! `fits_request` against upstream's `fit_test.go` (`TestEnoughRequests`,
//! `TestNotEnoughRequests`, `TestStorageRequests`), case by case: the
//! same node (cpu 10m, memory 20, pods 32, example.com/aaa 5,
//! ephemeral-storage 20, hugepages-2Mi 5) with one pod already bound.

use super::*;
use crate::api::resources::pod_requests;
use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Value, json};

const AAA: &str = "example.com/aaa";
const BBB: &str = "example.com/bbb";
const K8S: &str = "kubernetes.io/something";
const SUB: &str = "subdomain.kubernetes.io/something";
const HP: &str = "hugepages-2Mi";

/// Requests as a container's resources: cpu in millicores, the rest in units.
fn r(pairs: &[(&str, u64)]) -> Value {
    let m: serde_json::Map<String, Value> = pairs
        .iter()
        .map(|(n, a)| {
            let q = if *n == "cpu" {
                format!("{a}m")
            } else {
                a.to_string()
            };
            (n.to_string(), Value::String(q))
        })
        .collect();
    json!({"requests": m})
}

fn containers(list: &[&[(&str, u64)]]) -> Value {
    list.iter()
        .enumerate()
        .map(|(i, p)| json!({"name": format!("c{i}"), "resources": r(p)}))
        .collect()
}

fn pod(c: &[&[(&str, u64)]], init: &[&[(&str, u64)]], extra: Value) -> Resources {
    let mut spec = json!({"containers": containers(c), "initContainers": containers(init)});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    let spec: PodSpec = serde_json::from_value(spec).expect("a pod spec");
    pod_requests(&spec)
}

fn allocatable(pods: u64) -> BTreeMap<String, u64> {
    [
        (CPU, 10),
        (MEMORY, 20),
        (PODS, pods),
        (AAA, 5),
        (EPHEMERAL_STORAGE, 20),
        (HP, 5),
    ]
    .into_iter()
    .map(|(n, a)| (n.to_string(), a))
    .collect()
}

/// `(resource, requested, used, capacity)`.
type Want = &'static [(&'static str, u64, u64, u64)];
/// What the node's bound pods use, by resource.
type Used = Vec<(&'static str, u64)>;
/// A case: its name, the pod's request, the node's use, what it lacks.
type Case = (&'static str, Resources, Used, Want);

fn run(
    name: &str,
    request: &Resources,
    used: &[(&str, u64)],
    pods: u64,
    skip: &[&str],
    want: Want,
) {
    let used: BTreeMap<String, u64> = used.iter().map(|(n, a)| (n.to_string(), *a)).collect();
    let requested = |n: &str| used.get(n).copied().unwrap_or(0);
    let alloc = allocatable(pods);
    let room = NodeRoom {
        allocatable: &alloc,
        requested: &requested,
        pods: 1,
    };
    let got = fits_request(request, room, &|n| skip.contains(&n));
    let want: Vec<Insufficient> = want
        .iter()
        .map(|(n, rq, u, c)| Insufficient {
            resource: n.to_string(),
            requested: *rq,
            used: *u,
            capacity: *c,
        })
        .collect();
    assert_eq!(got, want, "{name}");
}

#[test]
fn node_resources_fit_as_upstreams_enough_requests_table() {
    let none = json!({});
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("no resources requested always fits", pod(&[], &[], none.clone()), vec![("cpu", 10), ("memory", 20)], &[]),
        ("too many resources fails", pod(&[&[("cpu", 1), ("memory", 1)]], &[], none.clone()), vec![("cpu", 10), ("memory", 20)],
            &[("cpu", 1, 10, 10), ("memory", 1, 20, 20)]),
        ("too many resources fails due to init container cpu", pod(&[&[("cpu", 1), ("memory", 1)]], &[&[("cpu", 3), ("memory", 1)]], none.clone()),
            vec![("cpu", 8), ("memory", 19)], &[("cpu", 3, 8, 10)]),
        ("too many resources fails due to highest init container cpu",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[&[("cpu", 3), ("memory", 1)], &[("cpu", 2), ("memory", 1)]], none.clone()),
            vec![("cpu", 8), ("memory", 19)], &[("cpu", 3, 8, 10)]),
        ("too many resources fails due to init container memory", pod(&[&[("cpu", 1), ("memory", 1)]], &[&[("cpu", 1), ("memory", 3)]], none.clone()),
            vec![("cpu", 9), ("memory", 19)], &[("memory", 3, 19, 20)]),
        ("too many resources fails due to highest init container memory",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[&[("cpu", 1), ("memory", 3)], &[("cpu", 1), ("memory", 2)]], none.clone()),
            vec![("cpu", 9), ("memory", 19)], &[("memory", 3, 19, 20)]),
        ("init container fits because it's the max, not sum, of containers and init containers",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[&[("cpu", 1), ("memory", 1)]], none.clone()), vec![("cpu", 9), ("memory", 19)], &[]),
        ("multiple init containers fit because it's the max, not sum, of containers and init containers",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[&[("cpu", 1), ("memory", 1)], &[("cpu", 1), ("memory", 1)]], none.clone()),
            vec![("cpu", 9), ("memory", 19)], &[]),
        ("both resources fit", pod(&[&[("cpu", 1), ("memory", 1)]], &[], none.clone()), vec![("cpu", 5), ("memory", 5)], &[]),
        ("one resource memory fits", pod(&[&[("cpu", 2), ("memory", 1)]], &[], none.clone()), vec![("cpu", 9), ("memory", 5)], &[("cpu", 2, 9, 10)]),
        ("one resource cpu fits", pod(&[&[("cpu", 1), ("memory", 2)]], &[], none.clone()), vec![("cpu", 5), ("memory", 19)], &[("memory", 2, 19, 20)]),
        ("equal edge case", pod(&[&[("cpu", 5), ("memory", 1)]], &[], none.clone()), vec![("cpu", 5), ("memory", 19)], &[]),
        ("equal edge case for init container", pod(&[&[("cpu", 4), ("memory", 1)]], &[&[("cpu", 5), ("memory", 1)]], none.clone()),
            vec![("cpu", 5), ("memory", 19)], &[]),
        ("extended resource fits", pod(&[&[(AAA, 1)]], &[], none.clone()), vec![], &[]),
        ("extended resource fits for init container", pod(&[], &[&[(AAA, 1)]], none.clone()), vec![], &[]),
        ("extended resource capacity enforced", pod(&[&[("cpu", 1), ("memory", 1), (AAA, 10)]], &[], none.clone()), vec![(AAA, 0)],
            &[(AAA, 10, 0, 5)]),
        ("extended resource capacity enforced for init container", pod(&[], &[&[("cpu", 1), ("memory", 1), (AAA, 10)]], none.clone()),
            vec![(AAA, 0)], &[(AAA, 10, 0, 5)]),
        ("extended resource allocatable enforced", pod(&[&[("cpu", 1), ("memory", 1), (AAA, 1)]], &[], none.clone()), vec![(AAA, 5)],
            &[(AAA, 1, 5, 5)]),
        ("extended resource allocatable enforced for init container", pod(&[], &[&[("cpu", 1), ("memory", 1), (AAA, 1)]], none.clone()),
            vec![(AAA, 5)], &[(AAA, 1, 5, 5)]),
        ("extended resource allocatable enforced for multiple containers",
            pod(&[&[("cpu", 1), ("memory", 1), (AAA, 3)], &[("cpu", 1), ("memory", 1), (AAA, 3)]], &[], none.clone()),
            vec![(AAA, 2)], &[(AAA, 6, 2, 5)]),
        ("extended resource allocatable admits multiple init containers",
            pod(&[], &[&[("cpu", 1), ("memory", 1), (AAA, 3)], &[("cpu", 1), ("memory", 1), (AAA, 3)]], none.clone()),
            vec![(AAA, 2)], &[]),
        ("extended resource allocatable enforced for multiple init containers",
            pod(&[], &[&[("cpu", 1), ("memory", 1), (AAA, 6)], &[("cpu", 1), ("memory", 1), (AAA, 3)]], none.clone()),
            vec![(AAA, 2)], &[(AAA, 6, 2, 5)]),
        ("extended resource allocatable enforced for unknown resource", pod(&[&[("cpu", 1), ("memory", 1), (BBB, 1)]], &[], none.clone()),
            vec![], &[(BBB, 1, 0, 0)]),
        ("extended resource allocatable enforced for unknown resource for init container",
            pod(&[], &[&[("cpu", 1), ("memory", 1), (BBB, 1)]], none.clone()), vec![], &[(BBB, 1, 0, 0)]),
        ("kubernetes.io resource capacity enforced", pod(&[&[("cpu", 1), ("memory", 1), (K8S, 10)]], &[], none.clone()), vec![],
            &[(K8S, 10, 0, 0)]),
        ("kubernetes.io resource capacity enforced for init container", pod(&[], &[&[("cpu", 1), ("memory", 1), (SUB, 10)]], none.clone()),
            vec![], &[(SUB, 10, 0, 0)]),
        ("hugepages resource capacity enforced", pod(&[&[("cpu", 1), ("memory", 1), (HP, 10)]], &[], none.clone()), vec![(HP, 0)],
            &[(HP, 10, 0, 5)]),
        ("hugepages resource capacity enforced for init container", pod(&[], &[&[("cpu", 1), ("memory", 1), (HP, 10)]], none.clone()),
            vec![(HP, 0)], &[(HP, 10, 0, 5)]),
        ("hugepages resource allocatable enforced for multiple containers",
            pod(&[&[("cpu", 1), ("memory", 1), (HP, 3)], &[("cpu", 1), ("memory", 1), (HP, 3)]], &[], none.clone()),
            vec![(HP, 2)], &[(HP, 6, 2, 5)]),
        ("resources + pod overhead fits", pod(&[&[("cpu", 1), ("memory", 1)]], &[], json!({"overhead": {"cpu": "3m", "memory": "13"}})),
            vec![("cpu", 5), ("memory", 5)], &[]),
        ("requests + overhead does not fit for memory",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[], json!({"overhead": {"cpu": "1m", "memory": "15"}})),
            vec![("cpu", 5), ("memory", 5)], &[("memory", 16, 5, 20)]),
        ("skip checking resource request with quantity zero",
            pod(&[&[("cpu", 0), ("memory", 0), (AAA, 1)]], &[], none.clone()), vec![("cpu", 20), ("memory", 30), (AAA, 1)], &[]),
        ("both pod-level and container-level resources fit",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[], json!({"resources": {"requests": {"cpu": "1m", "memory": "2"}}})),
            vec![("cpu", 5), ("memory", 5)], &[]),
        ("pod-level cpu resource not fit",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[], json!({"resources": {"requests": {"cpu": "7m", "memory": "2"}}})),
            vec![("cpu", 5), ("memory", 5)], &[("cpu", 7, 5, 10)]),
        ("pod-level memory resource not fit",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[], json!({"resources": {"requests": {"cpu": "3m", "memory": "2"}}})),
            vec![("cpu", 5), ("memory", 19)], &[("memory", 2, 19, 20)]),
        ("pod-level hugepages resource fit",
            pod(&[], &[], json!({"resources": {"requests": {"cpu": "3m", "memory": "2", HP: "5"}}})), vec![], &[]),
        ("both pod-level and container-level hugepages resources fit",
            pod(&[&[("cpu", 1), ("memory", 1), (HP, 3)]], &[], json!({"resources": {"requests": {"cpu": "3m", "memory": "2", HP: "5"}}})),
            vec![], &[]),
        ("pod-level hugepages resource not fit",
            pod(&[], &[], json!({"resources": {"requests": {"cpu": "3m", "memory": "2", HP: "10"}}})), vec![], &[(HP, 10, 0, 5)]),
        ("one pod-level cpu resource fits and all init and non-init containers resources fit",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[&[("cpu", 1), ("memory", 1)]],
                json!({"resources": {"requests": {"cpu": "3m", "memory": "2"}}})),
            vec![("cpu", 5), ("memory", 19)], &[("memory", 2, 19, 20)]),
    ];
    for (name, request, used, want) in &cases {
        run(name, request, used, 32, &[], want);
    }
}

#[test]
fn node_resources_fit_skips_what_it_is_told_to_as_ignored_resources() {
    let request = pod(&[&[("cpu", 1), ("memory", 1), (BBB, 1)]], &[], json!({}));
    run(
        "skip checking ignored extended resource",
        &request,
        &[],
        32,
        &[BBB],
        &[],
    );
}

#[test]
fn node_resources_fit_refuses_a_pod_past_the_nodes_pod_number() {
    let none = json!({});
    #[rustfmt::skip]
    let cases: Vec<(&str, Resources, Used)> = vec![
        ("even without specified resources, predicate fails when there's no space for additional pod", pod(&[], &[], none.clone()),
            vec![("cpu", 10), ("memory", 20)]),
        ("even if both resources fit, predicate fails when there's no space for additional pod",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[], none.clone()), vec![("cpu", 5), ("memory", 5)]),
        ("even for equal edge case, predicate fails when there's no space for additional pod",
            pod(&[&[("cpu", 5), ("memory", 1)]], &[], none.clone()), vec![("cpu", 5), ("memory", 19)]),
        ("even for equal edge case, predicate fails when there's no space for additional pod due to init container",
            pod(&[&[("cpu", 5), ("memory", 1)]], &[&[("cpu", 5), ("memory", 1)]], none.clone()), vec![("cpu", 5), ("memory", 19)]),
    ];
    for (name, request, used) in &cases {
        run(name, request, used, 1, &[], &[("pods", 1, 1, 1)]);
    }
}

#[test]
fn node_resources_fit_checks_ephemeral_storage_as_upstreams_storage_requests() {
    let none = json!({});
    let cases: Vec<Case> = vec![
        (
            "empty storage requested, and pod fits",
            pod(&[&[("cpu", 1), ("memory", 1)]], &[], none.clone()),
            vec![("cpu", 2), ("memory", 10)],
            &[],
        ),
        (
            "storage ephemeral local storage request exceeds allocatable",
            pod(&[&[(EPHEMERAL_STORAGE, 25)]], &[], none.clone()),
            vec![("cpu", 2), ("memory", 2)],
            &[(EPHEMERAL_STORAGE, 25, 0, 20)],
        ),
        (
            "ephemeral local storage is sufficient",
            pod(&[&[(EPHEMERAL_STORAGE, 10)]], &[], none.clone()),
            vec![("cpu", 2), ("memory", 2)],
            &[],
        ),
        (
            "pod fits",
            pod(&[&[(EPHEMERAL_STORAGE, 5)]], &[], none.clone()),
            vec![(EPHEMERAL_STORAGE, 10)],
            &[],
        ),
    ];
    for (name, request, used, want) in &cases {
        run(name, request, used, 32, &[], want);
    }
}

#[test]
fn insufficient_reasons_are_worded_as_the_scheduler_words_them() {
    let i = |r: &str| Insufficient {
        resource: r.into(),
        requested: 1,
        used: 0,
        capacity: 0,
    };
    assert_eq!(i("pods").reason(), "Too many pods");
    assert_eq!(i("memory").reason(), "Insufficient memory");
    assert_eq!(i(AAA).reason(), "Insufficient example.com/aaa");
}
