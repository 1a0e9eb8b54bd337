//! NVIDIA's DRA driver (`kubernetes-sigs/dra-driver-nvidia-gpu`) on a
//! node whose GPUs are bound to `vfio-pci` for passthrough, as its kubelet
//! plugin publishes them with `PassthroughSupport` on: one pool named
//! after the node, in one ResourceSlice owned by the Node and named as
//! the resourceslice controller names it (`<index>-gpu.nvidia.com-<node>-`
//! and a random suffix); each GPU a device `gpu-vfio-<i>` with the
//! attributes `VfioDeviceInfo.GetDevice` writes (`type: vfio`, a UUID
//! made from its PCI address, its PCI IDs and product name, `iommuFDEnabled`,
//! the standard `resource.kubernetes.io/pciBusID`, `pcieRoot` and
//! `numaNode`) and its `addressableMemory`. A GPU bound to `vfio-pci` is
//! out of NVML's sight, so no `gpu-<minor>` twin is published beside it.
//! The DeviceClasses are the driver's chart's (`gpu.nvidia.com`,
//! `vfio.gpu.nvidia.com`).
//!
//! With the driver's `FabricManagerPartitioning` gate (alpha) on an HGX
//! board, each GPU also publishes `gpuModuleID` and `partition1/2/4/8`
//! (`addFabricManagerAttributes`): what a class's `matchAttribute:
//! gpu.nvidia.com/partition4` groups by, and what the driver's Prepare
//! requires (a claim's GPUs exactly one partition).
//!
//! The node's hardware is the stand-in's to know: an annotation
//! (`PASSTHROUGH_GPUS`) says how many GPUs of which product it has, and
//! another (`FAILED_GPUS`) which have failed: those get a `NoExecute`
//! device taint, as a driver that watches its devices' health taints them.

use crate::memory::store::{Store, Subresource};
use serde::Deserialize;
use serde_json::{Value, json};

pub const DRIVER: &str = "gpu.nvidia.com";
const SLICE: &str = "ResourceSlice";
/// The node's passthrough GPUs (JSON: `PassthroughGpus`).
pub const PASSTHROUGH_GPUS: &str = "standin.gpu-claims.dev/passthrough-gpus";
/// The names of the node's failed devices, comma separated.
pub const FAILED_GPUS: &str = "standin.gpu-claims.dev/failed-gpus";
/// The taint a failed device gets.
pub const UNHEALTHY_TAINT: &str = "gpu.nvidia.com/unhealthy";

/// What a node's annotation says of its GPUs.
#[derive(Clone, Debug, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PassthroughGpus {
    pub product: String,
    pub count: u32,
    /// Each GPU's memory, a quantity (`141Gi`).
    pub memory: String,
    /// The PCI device ID (`0x2335` for an H200).
    pub device_id: String,
    /// An HGX board whose NVSwitches Fabric Manager runs in shared
    /// virtualization mode, with the driver's `FabricManagerPartitioning`
    /// gate on: each GPU publishes its module and the partitions of 1, 2,
    /// 4 and 8 GPUs it belongs to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fabric_manager: bool,
}

/// The GPUs of one HGX board, which Fabric Manager partitions.
pub const HGX_GPUS: u32 = 8;

/// `addFabricManagerAttributes`: `gpuModuleID` and `partition<size>`, the
/// ID of the partition of that size holding the GPU, as Fabric Manager's
/// HGX partition table numbers them (0: all 8 modules; 1-2: modules 1-4
/// and 5-8; 3-6: pairs; 7-14: each alone). Only on a full HGX board.
fn fabric_manager_attributes(i: u32, count: u32) -> Vec<(String, Value)> {
    if count != HGX_GPUS {
        return Vec::new();
    }
    let i = i64::from(i);
    vec![
        ("gpuModuleID".into(), json!({"int": i + 1})),
        ("partition1".into(), json!({"int": 7 + i})),
        ("partition2".into(), json!({"int": 3 + i / 2})),
        ("partition4".into(), json!({"int": 1 + i / 4})),
        ("partition8".into(), json!({"int": 0})),
    ]
}

/// The most GPUs the stand-in puts in one node.
pub const MAX_GPUS: u32 = 16;

/// PCI buses of an HGX board's eight GPUs, in the order NVIDIA's driver
/// enumerates them (`nvpci.GetGPUs`); further GPUs count on from 0xe0.
const HGX_BUSES: [u32; 8] = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb];

fn bus(i: u32) -> u32 {
    HGX_BUSES
        .get(i as usize)
        .copied()
        .unwrap_or_else(|| 0xe0 + (i - HGX_BUSES.len() as u32))
}

/// The driver's DeviceClasses, as its chart installs them.
pub fn device_classes() -> Vec<Value> {
    let class = |name: &str, type_: &str, extra: Value| {
        let mut spec = json!({"selectors": [{"cel": {"expression": format!(
            "device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{type_}'")}}]});
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name}, "spec": spec})
    };
    vec![
        class(
            "gpu.nvidia.com",
            "gpu",
            json!({"extendedResourceName": "nvidia.com/gpu"}),
        ),
        class("vfio.gpu.nvidia.com", "vfio", json!({})),
    ]
}

/// The devices the driver publishes for `node`: None where it runs no
/// passthrough GPUs (or its annotation cannot be read).
pub fn devices(node: &Value) -> Option<Vec<Value>> {
    let annotations = &node["metadata"]["annotations"];
    let gpus: PassthroughGpus =
        serde_json::from_str(annotations[PASSTHROUGH_GPUS].as_str()?).ok()?;
    // No machine holds more: a larger count is a fixture's mistake, not
    // a node to publish (and one slice holds at most 128 devices).
    if gpus.count > MAX_GPUS {
        return None;
    }
    let failed: Vec<&str> = annotations[FAILED_GPUS]
        .as_str()
        .map(|f| f.split(',').map(str::trim).collect())
        .unwrap_or_default();
    let out = (0..gpus.count)
        .map(|i| {
            let name = format!("gpu-vfio-{i}");
            let pci = format!("0000:{:02x}:00.0", bus(i));
            let uuid = uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_DNS, pci.as_bytes());
            // Two GPUs share a PCIe switch under one root; half the board
            // hangs off each socket.
            let root = format!("pci0000:{:02x}", bus(i & !1) - 4);
            let numa = i64::from(i >= gpus.count.div_ceil(2));
            let mut d = json!({"name": name,
                "attributes": {
                    "type": {"string": "vfio"},
                    "uuid": {"string": uuid.to_string()},
                    "deviceID": {"string": gpus.device_id},
                    "vendorID": {"string": "0x10de"},
                    "productName": {"string": gpus.product},
                    "iommuFDEnabled": {"bool": false},
                    "resource.kubernetes.io/pciBusID": {"string": pci},
                    "resource.kubernetes.io/pcieRoot": {"string": root},
                    "resource.kubernetes.io/numaNode": {"int": numa},
                },
                "capacity": {"addressableMemory": {"value": gpus.memory}}});
            if gpus.fabric_manager {
                for (name, value) in fabric_manager_attributes(i, gpus.count) {
                    d["attributes"][name] = value;
                }
            }
            if failed.contains(&d["name"].as_str().unwrap_or_default()) {
                d["taints"] = json!([{"key": UNHEALTHY_TAINT, "value": "Xid79",
                    "effect": "NoExecute"}]);
            }
            d
        })
        .collect();
    Some(out)
}

/// The slices the driver made: its own, owned by their node (one that
/// anybody else wrote is not the driver's to change).
fn published(s: &Value) -> bool {
    s["spec"]["driver"] == DRIVER
        && s["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|o| {
                o.iter()
                    .any(|o| o["kind"] == "Node" && o["controller"] == true)
            })
}

fn slices_of<'a>(slices: &'a [Value], node: &str) -> Vec<&'a Value> {
    slices
        .iter()
        .filter(|s| published(s) && s["spec"]["nodeName"] == node)
        .collect()
}

/// One pass of every node's kubelet plugin: a node's slice published,
/// brought to its devices when they change, removed when the node no
/// longer has passthrough GPUs or is gone. Whether it wrote.
pub fn publish(store: &Store) -> bool {
    let (nodes, _) = store.list("Node");
    let (slices, _) = store.list(SLICE);
    let mut wrote = false;
    for node in &nodes {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let mine = slices_of(&slices, name);
        let Some(devices) = devices(node) else {
            for s in mine {
                wrote |= delete(store, s);
            }
            continue;
        };
        // The driver's chart comes with its classes.
        install_classes(store);
        match mine.first() {
            None => {
                let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": SLICE,
                    "metadata": {"generateName": format!("0-{DRIVER}-{name}-"),
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                            "uid": node["metadata"]["uid"], "controller": true}]},
                    "spec": {"driver": DRIVER, "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": devices}});
                wrote |= store.create(SLICE, slice).is_ok();
            }
            Some(s) if s["spec"]["devices"] != Value::Array(devices.clone()) => {
                let mut o = (*s).clone();
                o["spec"]["devices"] = Value::Array(devices);
                wrote |= store.update(SLICE, o, Subresource::Main).is_ok();
            }
            Some(_) => {}
        }
    }
    // A node gone takes its slices (the garbage collector, by owner).
    for s in &slices {
        let node = s["spec"]["nodeName"].as_str().unwrap_or_default();
        if published(s) && !nodes.iter().any(|n| n["metadata"]["name"] == node) {
            wrote |= delete(store, s);
        }
    }
    wrote
}

fn delete(store: &Store, s: &Value) -> bool {
    let name = s["metadata"]["name"].as_str().unwrap_or_default();
    store.delete(SLICE, "", name).is_ok()
}

/// Installs the driver's DeviceClasses (what its chart does).
pub fn install_classes(store: &Store) {
    for c in device_classes() {
        let name = c["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if store.get("DeviceClass", "", &name).is_none() {
            store.seed("DeviceClass", c);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::fixtures::node;
    use serde_json::Value;

    fn published(n: crate::fixtures::NodeBuilder) -> Vec<Value> {
        let v = gpu_claims_actors::api::to_json(&n.obj());
        super::devices(&v).unwrap()
    }

    fn attr(d: &Value, name: &str) -> Option<i64> {
        d["attributes"][name]["int"].as_i64()
    }

    #[test]
    fn d1_an_hgx_board_under_fabric_manager_publishes_each_gpus_module_and_partitions() {
        let hgx = node("n1")
            .passthrough_gpus("NVIDIA H200", 8, "141Gi", "0x2335")
            .fabric_manager();
        let table: Vec<[Option<i64>; 5]> = published(hgx)
            .iter()
            .map(|d| {
                [
                    "gpuModuleID",
                    "partition1",
                    "partition2",
                    "partition4",
                    "partition8",
                ]
                .map(|a| attr(d, a))
            })
            .collect();
        // Fabric Manager's HGX table: 0 all eight, 1-2 halves, 3-6 pairs,
        // 7-14 each GPU alone.
        let want: Vec<[Option<i64>; 5]> = (0..8)
            .map(|i| [i + 1, 7 + i, 3 + i / 2, 1 + i / 4, 0].map(Some))
            .collect();
        assert_eq!(table, want);
    }

    #[test]
    fn d1_without_fabric_manager_or_a_full_board_no_partition_is_published() {
        let plain = node("n1").passthrough_gpus("NVIDIA H200", 8, "141Gi", "0x2335");
        let four = node("n2")
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .fabric_manager();
        for d in published(plain).iter().chain(published(four).iter()) {
            assert_eq!(attr(d, "partition4"), None, "{d}");
            assert_eq!(attr(d, "gpuModuleID"), None, "{d}");
        }
    }
}
