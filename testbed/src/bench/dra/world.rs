//! The DRA benchmark's world: nodes with their slices as NVIDIA's driver
//! publishes them, the class, the VMs with their templates and launcher
//! pods, and the changes the benchmark makes to it (a device tainted, a
//! node NotReady, a VM running where it was pinned).

use super::*;
use crate::bench::harness::Harness;
use crate::bench::in_system;
use crate::fixtures::node;
use crate::memory::MemCluster;
use crate::memory::store::{Store, Subresource};
use crate::standin::nvidia;
use gpu_claims_actors::api::{Kind, Obj, from_json};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) fn ns(i: usize) -> String {
    format!("dra-{}", i % NAMESPACES)
}

pub(super) fn node_name(i: usize) -> String {
    format!("dra-node-{i:05}")
}

pub(super) fn typed(kind: Kind, v: Value) -> Obj {
    from_json(kind, v).expect("a benchmark object")
}

/// The world: nodes with passthrough GPUs (their slices are published by
/// the stand-in's NVIDIA driver once seeded), the DRA class, a template
/// per namespace, and `vms` VMIs whose launcher pods wait at the gate with
/// the ResourceClaims Kubernetes made for them.
pub fn objects(nodes: usize, vms: usize) -> Vec<Obj> {
    let mut out = vec![typed(
        Kind::Class,
        json!({"metadata": {"name": CLASS}, "spec": {"deviceClassName": VFIO}}),
    )];
    for n in 0..NAMESPACES.min(vms) {
        out.push(typed(
            Kind::ResourceClaimTemplate,
            json!({"metadata": {"name": "two-gpus", "namespace": ns(n)},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": VFIO, "count": ASKS}}]}}}}),
        ));
    }
    for i in 0..nodes {
        out.push(
            node(&node_name(i))
                .kubelet("128", "2Ti")
                .passthrough_gpus("NVIDIA H200", GPUS, "141Gi", "0x2335")
                .obj(),
        );
    }
    for i in 0..vms {
        let (ns, vmi, pod) = (ns(i), format!("vm-{i}"), format!("virt-launcher-vm-{i}"));
        let rc = format!("{pod}-gpu");
        out.push(typed(
            Kind::Vmi,
            json!({"metadata": {"name": vmi, "namespace": ns, "uid": format!("u-{i}")},
                "spec": {"domain": {"devices": {"gpus": [{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}]}},
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}]},
                "status": {"phase": "Scheduling"}}),
        ));
        out.push(typed(
            Kind::Pod,
            json!({"metadata": {"name": pod, "namespace": ns, "uid": format!("p-{i}"),
                    "labels": {"kubevirt.io": "virt-launcher"},
                    "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                        "name": vmi, "uid": format!("u-{i}"), "controller": true}]},
                "spec": {"containers": [{"name": "compute", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}],
                    "schedulingGates": [{"name": gpu_claims_actors::api::SCHEDULING_GATE}]},
                "status": {"phase": "Pending", "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": rc}]}}),
        ));
        out.push(typed(
            Kind::ResourceClaim,
            json!({"metadata": {"name": rc, "namespace": ns,
                    "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod,
                        "uid": format!("p-{i}"), "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": VFIO, "count": ASKS}}]}}}),
        ));
    }
    out
}

pub(super) fn set_status(store: &Store, kind: &str, mut obj: Value, f: impl FnOnce(&mut Value)) {
    f(&mut obj["status"]);
    store
        .update(kind, obj, Subresource::Status)
        .expect("a benchmark change applies");
}

/// The record of VM `i`.
pub(super) fn record(store: &Store, i: usize) -> Value {
    store
        .get("GPUAllocation", &ns(i), &format!("vm-{i}-gpu"))
        .expect("the VM's record")
}

/// VM `i`'s node's slice with the VM's first GPU tainted NoExecute
/// (NVIDIA's driver marking it failed), or untainted: the change, made
/// ready before the clock starts (finding the slice lists them all).
pub(super) fn tainted_slice(store: &Store, by_node: &SliceNames, i: usize, failed: bool) -> Value {
    let r = record(store, i);
    let device = r["spec"]["devices"][0]["device"].clone();
    let node = r["spec"]["nodeName"].as_str().unwrap_or_default();
    let name = by_node.get(node).expect("the node's slice");
    let mut s = store
        .get("ResourceSlice", "", name)
        .expect("the node's slice");
    for d in s["spec"]["devices"].as_array_mut().into_iter().flatten() {
        if d["name"] == device {
            if failed {
                d["taints"] = json!([{"key": nvidia::UNHEALTHY_TAINT, "value": "Xid79", "effect": "NoExecute"}]);
            } else if let Some(o) = d.as_object_mut() {
                o.remove("taints");
            }
        }
    }
    s
}

/// Per node, the name of its slice (the driver's are generated).
pub(super) type SliceNames = std::collections::HashMap<String, String>;

/// Read once before the changes: listing every slice (or record) before
/// each change would churn the heap the controller runs on by the
/// megabyte, and time that, not the change.
pub(super) fn slice_names(store: &Store) -> SliceNames {
    store
        .list("ResourceSlice")
        .0
        .iter()
        .filter_map(|s| {
            Some((
                s["spec"]["nodeName"].as_str()?.to_string(),
                s["metadata"]["name"].as_str()?.to_string(),
            ))
        })
        .collect()
}

/// Node `name` Ready or NotReady: the change, made ready before the clock.
pub(super) fn ready_node(store: &Store, name: &str, ready: bool) -> Value {
    let mut n = store.get("Node", "", name).expect("the node");
    n["status"]["conditions"] =
        json!([{"type": "Ready", "status": if ready { "True" } else { "False" }}]);
    n
}

/// The store converged by the controller itself (every VM placed), and
/// how long that took.
pub(super) fn converged(nodes: usize, vms: usize) -> (Arc<Store>, Duration) {
    let store = crate::crds::cluster_store();
    let cluster = MemCluster::new(store.clone());
    for o in objects(nodes, vms) {
        cluster.seed(&o);
    }
    nvidia::publish(&store);
    let s = store.clone();
    let took = in_system(move || {
        Box::pin(async move {
            let h = Harness::start(s.clone());
            h.settle(Duration::from_millis(50)).await;
            let t0 = Instant::now();
            h.lead();
            h.settle(Duration::from_millis(300)).await;
            let took = t0.elapsed();
            // The scheduler binds each pod where placement pinned it and
            // the VM runs (as the stand-ins would): the claims are
            // Attached, and a Lost one stays with its running VM.
            for i in 0..vms {
                run_where_pinned(&s, i);
            }
            h.settle(Duration::from_millis(300)).await;
            took
        })
    });
    (store, took)
}

/// VM `i`'s launcher pod bound to the node its pin names, and the VM
/// running there.
pub(super) fn run_where_pinned(store: &Store, i: usize) {
    let (ns, vmi, pod) = (ns(i), format!("vm-{i}"), format!("virt-launcher-vm-{i}"));
    let mut p = store.get("Pod", &ns, &pod).expect("the launcher pod");
    let node = p["spec"]["nodeSelector"]["kubernetes.io/hostname"].clone();
    assert!(node.is_string(), "VM {i} placed and pinned");
    p["spec"]["nodeName"] = node.clone();
    let p = store
        .update("Pod", p, Subresource::Main)
        .expect("the pod binds")
        .object;
    set_status(store, "Pod", p, |s| s["phase"] = "Running".into());
    let v = store
        .get("VirtualMachineInstance", &ns, &vmi)
        .expect("the VMI");
    set_status(store, "VirtualMachineInstance", v, |s| {
        s["phase"] = "Running".into();
        s["nodeName"] = node;
    });
}
