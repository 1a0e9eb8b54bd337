//! The launcher pod of a VMI, as KubeVirt's virt-controller renders it
//! (`pkg/virt-controller/services/template.go`, `renderresources.go`):
//! the compute container's requests and limits from the VMI's spec, one
//! device per `gpus[]` / `hostDevices[]` entry with a `deviceName`, the
//! device plugins' kvm, tun and vhost-net, the memory overhead of
//! `GetMemoryOverhead`, and the guest-console-log sidecar.

use gpu_claims_actors::api::quantity::scheduler_amount;
use gpu_claims_actors::api::{
    LAUNCHER_LABEL, LAUNCHER_LABEL_VALUE, SCHEDULING_GATE, VMI_API_VERSION, VMI_KIND,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

const MI: u64 = 1 << 20;
/// virt-launcher's monitor, virt-launcher, virtlogd, virtqemud and QEMU:
/// 25 + 100 + 25 + 40 + 50 MiB (`hypervisorbackend.go`).
const FIXED_OVERHEAD: u64 = 240 * MI;
const PER_VCPU: u64 = 8 * MI;
const IOTHREAD: u64 = 8 * MI;
const VIDEO: u64 = 32 * MI;
/// A VM with a device passed through (VFIO) locks its memory: 1 GiB more.
const VFIO: u64 = 1 << 30;
/// `DefaultCPUAllocationRatio`: a vCPU requests a tenth of a CPU.
const CPU_ALLOCATION_RATIO: u64 = 10;
/// Requested on top of the VMI's own (`ephemeralStorageOverheadSize`).
const EPHEMERAL_STORAGE: &str = "50M";

/// `hardware.GetNumberOfVCPUs`: cores × sockets × threads (absent ones
/// count 1); no `cpu` at all is one vCPU.
pub fn vcpus(vmi: &Value) -> u64 {
    let cpu = &vmi["spec"]["domain"]["cpu"];
    let part = |f: &str| cpu[f].as_u64().filter(|n| *n > 0).unwrap_or(1);
    part("cores") * part("sockets") * part("threads")
}

/// The VMI's memory request: `resources.requests.memory`, else
/// `memory.guest` (`WithMemoryRequests`), in bytes, and whether it came
/// from the requests (only then does the page-table term count).
fn guest_memory(vmi: &Value) -> (u64, bool) {
    let d = &vmi["spec"]["domain"];
    let read = |v: &Value| v.as_str().and_then(|q| scheduler_amount("memory", q).ok());
    match read(&d["resources"]["requests"]["memory"]) {
        Some(m) => (m, true),
        None => (read(&d["memory"]["guest"]).unwrap_or(0), false),
    }
}

fn passed_through(vmi: &Value) -> impl Iterator<Item = &Value> {
    let d = &vmi["spec"]["domain"]["devices"];
    ["gpus", "hostDevices"]
        .into_iter()
        .flat_map(move |list| d[list].as_array().into_iter().flatten())
}

/// The devices its spec asks of device plugins: one per entry naming one
/// and no claim (`WithGPUsDevicePlugins`: an entry with a `claimName` is
/// DRA's, or with both, neither's).
pub fn devices(vmi: &Value) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for e in passed_through(vmi).filter(|e| e.get("claimName").is_none()) {
        if let Some(name) = e["deviceName"].as_str().filter(|n| !n.is_empty()) {
            *out.entry(name.to_string()).or_default() += 1;
        }
    }
    out
}

/// The compute container's `resources.claims` (`WithGPUsDRA`,
/// `WithHostDevicesDRA`): one per entry with a claim and no `deviceName`.
pub fn claims(vmi: &Value) -> Vec<Value> {
    passed_through(vmi)
        .filter(|e| e["deviceName"].as_str().is_none_or(str::is_empty))
        .filter_map(|e| {
            let claim = e["claimName"].as_str()?;
            let mut c = json!({"name": claim});
            if let Some(r) = e["requestName"].as_str().filter(|r| !r.is_empty()) {
                c["request"] = r.into();
            }
            Some(c)
        })
        .collect()
}

/// `GetMemoryOverhead` for amd64, with a video device and no probes, TPM
/// or SEV: page tables (from the requested memory only, as upstream),
/// the fixed processes, 8 MiB per vCPU, an IOThread, video RAM, and 1 GiB
/// when a device is passed through.
pub fn memory_overhead(vmi: &Value) -> u64 {
    let (memory, requested) = guest_memory(vmi);
    let pagetables = if requested {
        memory.div_ceil(1000) * 1000 / 512
    } else {
        0
    };
    // `IsVFIOVMI`: any GPU or host device, a device plugin's or DRA's.
    let vfio = if passed_through(vmi).next().is_none() {
        0
    } else {
        VFIO
    };
    pagetables + FIXED_OVERHEAD + PER_VCPU * vcpus(vmi) + IOTHREAD + VIDEO + vfio
}

/// The compute container's resources. Requests are written beside every
/// limit, as the API server's defaulting would (the embedded server stores
/// pods as sent).
fn compute_resources(vmi: &Value) -> Value {
    let mut limits = Map::new();
    let mut requests = Map::new();
    for kvm in ["kvm", "tun", "vhost-net"] {
        limits.insert(format!("devices.kubevirt.io/{kvm}"), "1".into());
    }
    for (device, n) in devices(vmi) {
        limits.insert(device, n.to_string().into());
    }
    let d = &vmi["spec"]["domain"]["resources"];
    let millis = vcpus(vmi) * 1000 / CPU_ALLOCATION_RATIO;
    requests.insert("cpu".into(), format!("{millis}m").into());
    let (memory, _) = guest_memory(vmi);
    requests.insert(
        "memory".into(),
        (memory + memory_overhead(vmi)).to_string().into(),
    );
    requests.insert("ephemeral-storage".into(), EPHEMERAL_STORAGE.into());
    // What the user set explicitly wins over what is calculated.
    for (k, v) in d["requests"].as_object().into_iter().flatten() {
        if k != "memory" {
            requests.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in d["limits"].as_object().into_iter().flatten() {
        limits.insert(k.clone(), v.clone());
    }
    for (k, v) in &limits {
        requests.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let mut out = json!({"requests": requests, "limits": limits});
    let claims = claims(vmi);
    if !claims.is_empty() {
        out["claims"] = claims.into();
    }
    out
}

/// The launcher pod for `vmi`; `gated`: at our gate already (when no
/// webhook is there to put it there).
pub fn launcher_pod(vmi: &Value, gated: bool) -> Value {
    let m = &vmi["metadata"];
    let (ns, name, uid) = (
        m["namespace"].as_str().unwrap_or_default(),
        m["name"].as_str().unwrap_or_default(),
        m["uid"].as_str().unwrap_or_default(),
    );
    // KubeVirt copies the VMI's annotations onto its launcher pod, all but
    // kubectl's and its own observed-api-version ones: the webhook's
    // matchConditions read the GPU ones there (G1).
    let mut annotations: Map<String, Value> = m["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !k.starts_with("kubectl.kubernetes.io")
                && !k.starts_with("kubevirt.io/storage-observed-api-version")
                && !k.starts_with("kubevirt.io/latest-observed-api-version")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert("kubevirt.io/domain".into(), name.into());
    annotations.insert(
        "kubectl.kubernetes.io/default-container".into(),
        "compute".into(),
    );
    let mut labels: Map<String, Value> = m["labels"].as_object().cloned().unwrap_or_default();
    labels.insert(LAUNCHER_LABEL.into(), LAUNCHER_LABEL_VALUE.into());
    labels.insert("kubevirt.io/created-by".into(), uid.into());
    let mut spec = json!({
        "containers": [{
            "name": "compute",
            "image": "quay.io/kubevirt/virt-launcher:v1.6.0",
            "resources": compute_resources(vmi),
        }],
        // virt-tail as a native sidecar (restartPolicy Always).
        "initContainers": [{
            "name": "guest-console-log",
            "image": "quay.io/kubevirt/virt-launcher:v1.6.0",
            "restartPolicy": "Always",
            "resources": {
                "requests": {"cpu": "5m", "memory": "35M"},
                "limits": {"cpu": "15m", "memory": "60M"},
            },
        }],
        "terminationGracePeriodSeconds": 30,
    });
    for f in ["nodeSelector", "tolerations", "affinity"] {
        let v = &vmi["spec"][f];
        if !v.is_null() {
            spec[f] = v.clone();
        }
    }
    // `template.go`: `if vmi.Spec.PriorityClassName != "" {
    // pod.Spec.PriorityClassName = vmi.Spec.PriorityClassName }` (the API
    // server's Priority admission then gives the pod its priority).
    if let Some(c) = vmi["spec"]["priorityClassName"]
        .as_str()
        .filter(|c| !c.is_empty())
    {
        spec["priorityClassName"] = c.into();
    }
    // `drautil.ToPodResourceClaims`: the VMI's claims, one to one.
    if let Some(rc) = vmi["spec"]["resourceClaims"].as_array() {
        spec["resourceClaims"] = rc
            .iter()
            .map(|c| {
                let mut o = json!({"name": c["name"]});
                for f in ["resourceClaimName", "resourceClaimTemplateName"] {
                    if c[f].is_string() {
                        o[f] = c[f].clone();
                    }
                }
                o
            })
            .collect();
    }
    if gated {
        spec["schedulingGates"] = json!([{"name": SCHEDULING_GATE}]);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "namespace": ns, "generateName": format!("virt-launcher-{name}-"),
            "annotations": annotations,
            "labels": labels,
            "ownerReferences": [{"apiVersion": VMI_API_VERSION, "kind": VMI_KIND, "name": name,
                "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_claims_actors::api::resources::pod_requests;

    fn vmi(spec: Value) -> Value {
        json!({"metadata": {"namespace": "t", "name": "vm", "uid": "u"}, "spec": spec})
    }

    #[test]
    fn the_memory_overhead_is_upstreams_for_a_4_vcpu_16gi_vm() {
        // Upstream's worked figures: 33,554,433 page tables + 240 + 32 +
        // 8 + 32 MiB = 360,710,145 bytes.
        let v = vmi(json!({"domain": {"cpu": {"cores": 4},
            "resources": {"requests": {"memory": "16Gi"}}}}));
        assert_eq!(memory_overhead(&v), 360_710_145);
        // Only memory.guest: no page-table term (upstream reads requests).
        let guest = vmi(json!({"domain": {"cpu": {"cores": 4}, "memory": {"guest": "16Gi"}}}));
        assert_eq!(memory_overhead(&guest), 312 * MI);
        // template_test.go: 1G requested, 1 vCPU: 303,943,013.
        let upstream = vmi(json!({"domain": {"resources": {"requests": {"memory": "1G"}}}}));
        assert_eq!(memory_overhead(&upstream), 303_943_013);
    }

    /// KubeVirt's DRA guide: a VMI asks through a template and names the
    /// claim in `gpus[]`; the pod gets the claim, the compute container
    /// its reference, no device-plugin request, and VFIO's locked memory.
    #[test]
    fn a_dra_gpu_entry_renders_as_a_pod_claim_and_a_container_claim_not_a_device() {
        let v = vmi(json!({"domain": {
            "resources": {"requests": {"memory": "1G"}},
            "devices": {"gpus": [{"name": "gpu1", "claimName": "gpu", "requestName": "vfio"}]}},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-h200"}]}));
        let pod = launcher_pod(&v, true);
        assert_eq!(
            pod["spec"]["resourceClaims"],
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-h200"}])
        );
        let resources = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(
            resources["claims"],
            json!([{"name": "gpu", "request": "vfio"}])
        );
        assert!(devices(&v).is_empty(), "{resources}");
        assert_eq!(memory_overhead(&v), 303_943_013 + VFIO);
    }

    #[test]
    fn the_compute_container_requests_one_device_per_gpu_entry_and_the_vms_size() {
        let v = vmi(json!({"domain": {
            "cpu": {"cores": 4, "sockets": 2},
            "resources": {"requests": {"memory": "16Gi"}},
            "devices": {"gpus": [
                {"name": "gpu1", "deviceName": "nvidia.com/H200"},
                {"name": "gpu2", "deviceName": "nvidia.com/H200"},
                {"name": "dra", "claimName": "x"}]}}}));
        let pod = launcher_pod(&v, false);
        let spec: k8s_openapi::api::core::v1::PodSpec =
            serde_json::from_value(pod["spec"].clone()).unwrap();
        let r = pod_requests(&spec);
        assert_eq!(
            r.get("nvidia.com/H200"),
            2,
            "one per entry with a deviceName"
        );
        assert_eq!(
            r.get("cpu"),
            800 + 5,
            "8 vCPUs at a tenth each, and the sidecar"
        );
        let overhead = memory_overhead(&v);
        assert_eq!(overhead, 33_554_433 + (240 + 64 + 8 + 32) * MI + VFIO);
        assert_eq!(r.get("memory"), (16 << 30) + overhead + 35_000_000);
        assert_eq!(r.get("devices.kubevirt.io/kvm"), 1);
        let limits = &pod["spec"]["containers"][0]["resources"]["limits"];
        assert_eq!(limits["nvidia.com/H200"], "2");
    }
}
