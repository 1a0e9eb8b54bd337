//! The stand-in as KubeVirt, the scheduler and the kubelet behave, on a
//! store without an API server (the stand-in gates GPU pods itself).

use super::*;
use crate::fixtures::{class, node};
use gpu_claims_actors::api::pod::{is_gated, unschedulable_message};
use gpu_claims_actors::api::resources::pod_requests;
use gpu_claims_actors::api::to_json;
use k8s_openapi::api::core::v1::Pod;

const H200: &str = "nvidia.com/GH100_H200";

fn cluster() -> (Arc<Store>, Arc<StandIn>) {
    let store = crate::crds::cluster_store();
    store.seed("GPUClass", to_json(&class("h200", H200).obj()));
    store.seed(
        "Node",
        to_json(&node("n1").gpus(H200, 2).kubelet("16", "64Gi").obj()),
    );
    let s = StandIn::new(store.clone());
    (store, s)
}

fn launcher(store: &Store, vm: &str) -> Value {
    store
        .list("Pod")
        .0
        .into_iter()
        .find(|p| m(p, "generateName") == format!("virt-launcher-{vm}-"))
        .expect("the launcher pod")
}

fn typed(p: &Value) -> Pod {
    serde_json::from_value(p.clone()).unwrap()
}

fn ungate(store: &Store, pod: &Value) {
    let mut p = pod.clone();
    p["spec"]["schedulingGates"] = Value::Null;
    p["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": "n1"});
    store.update("Pod", p, Subresource::Main).unwrap();
}

#[test]
fn a_launcher_pod_carries_its_vmis_annotations_and_a_gpu_one_is_gated() {
    let (store, s) = cluster();
    s.start_vm("t", "gpu", "h200", 2);
    s.create_vmi("t", "plain", &VmSpec::default().annotate("team", "web"));
    s.create_vmi("t", "spec-only", &VmSpec::sized(4, "16Gi").gpus(H200, 1));
    s.reconcile();
    let gpu = launcher(&store, "gpu");
    assert_eq!(gpu["metadata"]["annotations"][CLASS_ANNOTATION], "h200");
    assert!(is_gated(&typed(&gpu)));
    let plain = launcher(&store, "plain");
    assert_eq!(plain["metadata"]["annotations"]["team"], "web");
    assert!(!is_gated(&typed(&plain)));
    assert!(
        is_gated(&typed(&launcher(&store, "spec-only"))),
        "a VM asking in its spec alone"
    );
}

#[test]
fn a_launcher_pod_takes_its_vmis_priority_class_as_kubevirt_renders_it() {
    let (store, s) = cluster();
    s.create_vmi(
        "t",
        "urgent",
        &VmSpec::sized(1, "1Gi").gpus(H200, 1).priority("gold"),
    );
    s.create_vmi("t", "plain", &VmSpec::sized(1, "1Gi").gpus(H200, 1));
    s.reconcile();
    assert_eq!(
        launcher(&store, "urgent")["spec"]["priorityClassName"],
        "gold"
    );
    assert!(launcher(&store, "plain")["spec"]["priorityClassName"].is_null());
}

#[test]
fn a_launcher_pod_requests_what_virt_controller_renders_for_the_vms_spec() {
    let (store, s) = cluster();
    s.start_vm("t", "vm", "h200", 2);
    s.reconcile();
    let p = typed(&launcher(&store, "vm"));
    let r = pod_requests(p.spec.as_ref().unwrap());
    assert_eq!(r.get(H200), 2, "one per gpus[] entry");
    assert_eq!(
        r.get("cpu"),
        100 + 5,
        "one vCPU at a tenth, and the console sidecar"
    );
    assert!(r.get("memory") > 1 << 30, "guest memory and its overhead");
    assert_eq!(r.get("devices.kubevirt.io/kvm"), 1);
}

#[test]
fn the_scheduler_refuses_a_pinned_pod_without_room_in_upstreams_words_and_binds_it_once_there_is() {
    let (store, s) = cluster();
    s.create_vmi("t", "vm", &VmSpec::sized(1, "48Gi").gpus(H200, 1));
    s.reconcile();
    s.run_pod("ml", "db", Some("n1"), &[("memory", "20Gi")]);
    ungate(&store, &launcher(&store, "vm"));
    s.reconcile();
    let p = typed(&launcher(&store, "vm"));
    let why = unschedulable_message(&p).expect("Unschedulable");
    assert!(
        why.starts_with("0/1 nodes are available: 1 Insufficient memory."),
        "{why}"
    );
    assert!(p.spec.unwrap().node_name.is_none());
    store.delete("Pod", "ml", "db").unwrap();
    // Bind, run, and the VMI follows: a pass each.
    for _ in 0..3 {
        s.reconcile();
    }
    let p = launcher(&store, "vm");
    assert_eq!(p["spec"]["nodeName"], "n1");
    assert_eq!(phase(&p), "Running");
    let vmi = store.get(VMI, "t", "vm").unwrap();
    assert_eq!(phase(&vmi), "Running");
}

#[test]
fn the_kubelet_rejects_a_pod_whose_devices_another_pod_took_and_the_vmi_fails() {
    let (store, s) = cluster();
    s.create_vmi("t", "vm", &VmSpec::sized(1, "1Gi").gpus(H200, 2));
    s.reconcile();
    let mut p = launcher(&store, "vm");
    // Bound by hand past the scheduler, as a stale view would.
    p["spec"]["schedulingGates"] = Value::Null;
    p["spec"]["nodeName"] = "n1".into();
    store.update("Pod", p, Subresource::Main).unwrap();
    s.run_pod("ml", "cuda", Some("n1"), &[(H200, "1")]);
    s.reconcile();
    s.reconcile();
    let p = launcher(&store, "vm");
    assert_eq!(phase(&p), "Failed");
    assert_eq!(p["status"]["reason"], "UnexpectedAdmissionError");
    assert!(
        p["status"]["message"]
            .as_str()
            .unwrap()
            .contains("Requested: 2, Available: 1"),
        "{p}"
    );
    assert_eq!(phase(&store.get(VMI, "t", "vm").unwrap()), "Failed");
}

#[test]
fn a_running_vm_gets_its_vmi_again_when_it_is_deleted_and_a_halted_one_stops() {
    let (store, s) = cluster();
    s.run_vm("t", "vm", &VmSpec::default());
    let first = store
        .get(VMI, "t", "vm")
        .expect("the VM controller made a VMI");
    assert_eq!(
        first["metadata"]["ownerReferences"][0]["kind"],
        "VirtualMachine"
    );
    store.delete(VMI, "t", "vm").unwrap();
    s.reconcile();
    let second = store.get(VMI, "t", "vm").expect("made again");
    assert_ne!(m(&first, "uid"), m(&second, "uid"));
    s.halt_vm("t", "vm");
    assert!(
        store.get(VMI, "t", "vm").is_none(),
        "halted: stopVMI deletes it"
    );
    s.reconcile();
    assert!(
        store.get(VMI, "t", "vm").is_none(),
        "halted: not made again"
    );
    assert_eq!(
        store.get(vms::VM, "t", "vm").unwrap()["status"]["printableStatus"],
        "Stopped"
    );
}

/// KubeVirt's `syncRunStrategy` for a VMI someone else deleted (what E2
/// does to restart a VM): Always and Once start a new one, RerunOnFailure
/// and Manual do not; RerunOnFailure starts one again after a failure.
/// The VM's printableStatus follows.
#[test]
fn a_deleted_vmi_comes_back_only_under_always_and_once_and_rerun_on_failure_reruns_a_failed_one() {
    for (strategy, comes_back) in [
        ("Always", true),
        ("Once", true),
        ("RerunOnFailure", false),
        ("Manual", false),
    ] {
        let (store, s) = cluster();
        s.run_vm("t", "vm", &VmSpec::default());
        vms::set_run_strategy(&store, "t", "vm", strategy);
        s.reconcile();
        let vm = store.get(vms::VM, "t", "vm").unwrap();
        assert_eq!(vm["status"]["runStrategy"], strategy, "{strategy}");
        assert_eq!(vm["status"]["printableStatus"], "Starting", "{strategy}");
        store.delete(VMI, "t", "vm").unwrap();
        s.reconcile();
        assert_eq!(
            store.get(VMI, "t", "vm").is_some(),
            comes_back,
            "{strategy}: a deleted VMI comes back"
        );
        if !comes_back {
            let vm = store.get(vms::VM, "t", "vm").unwrap();
            assert_eq!(vm["status"]["printableStatus"], "Stopped", "{strategy}");
        }
    }
    // RerunOnFailure: a VMI that failed is replaced, one that succeeded is not.
    for (end, again) in [("Failed", true), ("Succeeded", false)] {
        let (store, s) = cluster();
        s.run_vm("t", "vm", &VmSpec::default());
        vms::set_run_strategy(&store, "t", "vm", "RerunOnFailure");
        s.reconcile();
        let mut v = store.get(VMI, "t", "vm").unwrap();
        let first = m(&v, "uid").to_string();
        v["status"]["phase"] = end.into();
        store.update(VMI, v, Subresource::Status).unwrap();
        s.reconcile();
        s.reconcile();
        let now = store.get(VMI, "t", "vm");
        assert_eq!(
            now.as_ref().is_some_and(|v| m(v, "uid") != first),
            again,
            "RerunOnFailure after {end}"
        );
    }
}

/// The VMI's Ready condition as virt-controller keeps it: True once its
/// guest runs in a Ready launcher pod; the VM's printableStatus and ready
/// follow, and go False with the VMI once the VM is halted.
#[test]
fn a_vmi_is_ready_while_its_guest_runs_and_its_vm_shows_it() {
    let (store, s) = cluster();
    s.run_vm("t", "vm", &VmSpec::sized(1, "1Gi").gpus(H200, 1));
    s.reconcile();
    ungate(&store, &launcher(&store, "vm"));
    // Bound, run, the VMI Running, then the VM controller's next look.
    for _ in 0..4 {
        s.reconcile();
    }
    let ready = |v: &Value| {
        v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready")
            .map(|c| (c["status"].clone(), c["reason"].clone()))
    };
    let v = store.get(VMI, "t", "vm").unwrap();
    assert_eq!(phase(&v), "Running");
    assert_eq!(ready(&v), Some(("True".into(), Value::Null)));
    let vm = store.get(vms::VM, "t", "vm").unwrap();
    assert_eq!(vm["status"]["printableStatus"], "Running");
    assert_eq!(vm["status"]["ready"], true);
    s.halt_vm("t", "vm");
    assert!(store.get(VMI, "t", "vm").is_none(), "halted: its VMI goes");
    let vm = store.get(vms::VM, "t", "vm").unwrap();
    assert_eq!(vm["status"]["ready"], false);
    assert_eq!(vm["status"]["conditions"][0]["status"], "False");
}

/// A passthrough node `d1` with `gpus` H200s, and a template `t/<name>`
/// asking for `count` vfio GPUs (sharing a PCIe root when `same_root`).
fn dra_cluster(gpus: u32, templates: &[(&str, u32, bool)]) -> (Arc<Store>, Arc<StandIn>) {
    let store = crate::crds::cluster_store();
    store.seed(
        "Node",
        to_json(
            &node("d1")
                .kubelet("64", "512Gi")
                .passthrough_gpus("NVIDIA H200", gpus, "141Gi", "0x2335")
                .obj(),
        ),
    );
    for (name, count, same_root) in templates {
        let mut devices = json!({"requests": [{"name": "vfio",
            "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": count}}]});
        if *same_root {
            devices["constraints"] = json!([{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]);
        }
        store.seed(
            "ResourceClaimTemplate",
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"namespace": "t", "name": name},
                "spec": {"spec": {"devices": devices}}}),
        );
    }
    let s = StandIn::new(store.clone());
    (store, s)
}

/// The claim the resourceclaim controller made for VM `vm`'s launcher pod.
fn pod_claim(store: &Store, vm: &str) -> Value {
    let pod = launcher(store, vm);
    let name = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .expect("recorded on the pod")
        .to_string();
    store
        .get(claims::CLAIM, "t", &name)
        .expect("the pod's claim")
}

fn allocated_devices(claim: &Value) -> Vec<String> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["device"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Issue 35, item 2: the DRA world a VM meets on a passthrough node.
/// NVIDIA's driver publishes the node's GPUs as `vfio` devices in its
/// pool; KubeVirt renders a VMI that asks through a template into a pod
/// with that claim; kube-controller-manager makes the pod's claim from the
/// template; the scheduler allocates it first fit, reserves it and binds
/// the pod where the allocation says; the kubelet runs it; a gone pod's
/// claim is released and deleted.
#[test]
fn a_vmi_asking_through_a_template_gets_a_claim_allocated_reserved_and_runs() {
    let (store, s) = dra_cluster(4, &[("one-h200", 1, false)]);
    s.create_vmi(
        "t",
        "vm",
        &VmSpec::sized(4, "16Gi").gpus_through_template("one-h200", "vfio"),
    );
    for _ in 0..4 {
        s.reconcile();
    }
    // The driver's slice: one pool named after the node, four vfio devices.
    let (slices, _) = store.list("ResourceSlice");
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    assert!(m(slice, "name").starts_with("0-gpu.nvidia.com-d1-"));
    assert_eq!(slice["spec"]["pool"]["name"], "d1");
    let gpu0 = &slice["spec"]["devices"][0];
    assert_eq!(gpu0["name"], "gpu-vfio-0");
    assert_eq!(gpu0["attributes"]["type"]["string"], "vfio");
    assert_eq!(gpu0["attributes"]["productName"]["string"], "NVIDIA H200");
    assert_eq!(
        gpu0["attributes"]["resource.kubernetes.io/pciBusID"]["string"],
        "0000:18:00.0"
    );
    assert_eq!(gpu0["capacity"]["addressableMemory"]["value"], "141Gi");
    assert!(
        store
            .get("DeviceClass", "", "vfio.gpu.nvidia.com")
            .is_some()
    );
    // As the API types have it: nothing a cluster would drop.
    let as_typed: k8s_openapi::api::resource::v1::ResourceSlice =
        serde_json::from_value(slice.clone()).unwrap();
    assert_eq!(
        serde_json::to_value(&as_typed).unwrap()["spec"],
        slice["spec"]
    );
    // The pod's claim, made from the template and recorded on the pod.
    let pod = launcher(&store, "vm");
    assert_eq!(pod["status"]["resourceClaimStatuses"][0]["name"], "gpu");
    let claim = pod_claim(&store, "vm");
    assert!(m(&claim, "name").starts_with(&format!("{}-gpu-", m(&pod, "name"))));
    assert_eq!(
        claim["metadata"]["annotations"][claims::POD_CLAIM_NAME],
        "gpu"
    );
    assert_eq!(
        claim["metadata"]["ownerReferences"][0]["uid"],
        pod["metadata"]["uid"]
    );
    // Allocated first fit, protected, reserved; the pod bound and running.
    assert_eq!(allocated_devices(&claim), ["gpu-vfio-0"]);
    assert_eq!(
        claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"],
        json!(["d1"])
    );
    assert_eq!(
        claim["metadata"]["finalizers"],
        json!(["resource.kubernetes.io/delete-protection"])
    );
    assert!(claims::reserved_for(&claim, m(&pod, "uid")));
    assert_eq!(pod["spec"]["nodeName"], "d1");
    assert_eq!(phase(&pod), "Running");
    assert_eq!(phase(&store.get(VMI, "t", "vm").unwrap()), "Running");
    // A failed GPU is tainted NoExecute in the slice.
    let mut n = store.get("Node", "", "d1").unwrap();
    n["metadata"]["annotations"][nvidia::FAILED_GPUS] = "gpu-vfio-0".into();
    store.update("Node", n, Subresource::Main).unwrap();
    s.reconcile();
    let slice = &store.list("ResourceSlice").0[0];
    assert_eq!(
        slice["spec"]["devices"][0]["taints"][0]["effect"],
        "NoExecute"
    );
    // The pod gone: unreserved, deallocated, unprotected, deleted.
    store.delete("Pod", "t", m(&pod, "name")).unwrap();
    s.reconcile();
    assert!(store.get(claims::CLAIM, "t", m(&claim, "name")).is_none());
}

/// The scheduler honours an allocation another allocator made (what
/// gpu-claims will write for the claims of its classes): the pod goes
/// where it says, on those devices, and nothing is allocated twice; a
/// node without room says so in upstream's words.
#[test]
fn the_scheduler_keeps_an_allocation_made_by_another_and_never_hands_a_device_out_twice() {
    let (store, s) = allocated_by_another(Some("2026-01-01T00:00:00Z"));
    for vm in ["b", "c"] {
        s.create_vmi(
            "t",
            vm,
            &VmSpec::default().gpus_through_template("one-h200", "vfio"),
        );
    }
    for _ in 0..4 {
        s.reconcile();
    }
    assert_eq!(allocated_devices(&pod_claim(&store, "a")), ["gpu-vfio-1"]);
    assert_eq!(phase(&launcher(&store, "a")), "Running");
    assert_eq!(allocated_devices(&pod_claim(&store, "b")), ["gpu-vfio-0"]);
    let third = typed(&launcher(&store, "c"));
    let why = unschedulable_message(&third).unwrap_or_default();
    assert!(
        why.starts_with("0/1 nodes are available: 1 cannot allocate all claims."),
        "{why}"
    );
}

/// VM `a`'s pod's claim, made from its template while the scheduler was
/// held, allocated to d1's gpu-vfio-1 by another allocator (stamped at
/// `stamped`, or not); the scheduler runs again.
fn allocated_by_another(stamped: Option<&str>) -> (Arc<Store>, Arc<StandIn>) {
    let (store, s) = dra_cluster(2, &[("one-h200", 1, false)]);
    s.hold_scheduling(true);
    s.create_vmi(
        "t",
        "a",
        &VmSpec::default().gpus_through_template("one-h200", "vfio"),
    );
    // Its pod, then the pod's claim.
    s.reconcile();
    s.reconcile();
    let mut c = pod_claim(&store, "a");
    assert!(
        !c["status"]["allocation"].is_object(),
        "held: not allocated"
    );
    let mut a = json!({"devices": {"results": [{"request": "vfio",
        "driver": "gpu.nvidia.com", "pool": "d1", "device": "gpu-vfio-1"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["d1"]}]}]}});
    if let Some(t) = stamped {
        a["allocationTimestamp"] = t.into();
    }
    c["status"] = json!({ "allocation": a });
    store.update(claims::CLAIM, c, Subresource::Status).unwrap();
    s.hold_scheduling(false);
    (store, s)
}

/// Kubernetes 1.36: the scheduler's PreBind stamps an allocation made
/// without a timestamp as it reserves the claim, and the API server
/// refuses that as a change to the allocation: the pod is never bound
/// (why gpu-claims stamps the allocations it writes, D4). Its own
/// allocations are stamped.
#[test]
fn d4_the_scheduler_cannot_reserve_an_unstamped_allocation_made_by_another_and_stamps_its_own() {
    let (store, s) = allocated_by_another(None);
    s.create_vmi(
        "t",
        "b",
        &VmSpec::default().gpus_through_template("one-h200", "vfio"),
    );
    for _ in 0..4 {
        s.reconcile();
    }
    let a = pod_claim(&store, "a");
    assert!(
        a["status"]["reservedFor"].is_null(),
        "the reservation was refused: {a}"
    );
    assert!(a["status"]["allocation"]["allocationTimestamp"].is_null());
    assert_ne!(phase(&launcher(&store, "a")), "Running");
    let b = pod_claim(&store, "b");
    assert!(
        b["status"]["allocation"]["allocationTimestamp"].is_string(),
        "the scheduler's own allocation is stamped: {b}"
    );
    assert_eq!(phase(&launcher(&store, "b")), "Running");
}

/// `matchAttribute`: the devices of one request share the attribute's
/// value; with the first of a pair taken, two GPUs under one PCIe root
/// come from the next pair, never one of each.
#[test]
fn a_match_attribute_constraint_takes_devices_that_share_the_value() {
    let (store, s) = dra_cluster(4, &[("one-h200", 1, false), ("pair", 2, true)]);
    s.create_vmi(
        "t",
        "one",
        &VmSpec::default().gpus_through_template("one-h200", "vfio"),
    );
    for _ in 0..3 {
        s.reconcile();
    }
    s.create_vmi(
        "t",
        "two",
        &VmSpec::default().gpus_through_template("pair", "vfio"),
    );
    for _ in 0..3 {
        s.reconcile();
    }
    assert_eq!(allocated_devices(&pod_claim(&store, "one")), ["gpu-vfio-0"]);
    assert_eq!(
        allocated_devices(&pod_claim(&store, "two")),
        ["gpu-vfio-2", "gpu-vfio-3"]
    );
}

#[test]
fn a_generated_claims_name_is_cut_in_proportion_as_upstream_cuts_it() {
    assert_eq!(claims::generate_name("pod", "gpu"), "pod-gpu-");
    let long = claims::generate_name(&"p".repeat(60), &"c".repeat(20));
    // 82 characters cut to 57 in proportion, no trailing hyphen.
    assert_eq!(long, format!("{}-{}", "p".repeat(41), "c".repeat(13)));
    // A name no DNS label (hostile input) is cut between characters.
    let wide = claims::generate_name(&format!("pp{}", "é".repeat(30)), "gpu");
    assert!(wide.len() <= 57, "{wide}");
}
