//! D1: the devices of a class, from slices as NVIDIA's driver publishes
//! them: complete pools only, the DeviceClass's selectors then the
//! class's, a bad selector said in the allocator's words.

use super::*;
use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::json;

const VFIO: &str =
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'";

fn slice(node: &str, generation: i64, count: i64, devices: &[(&str, &str)]) -> ResourceSlice {
    let devices: Vec<_> = devices
        .iter()
        .map(|(name, product)| {
            json!({"name": name, "attributes": {
            "type": {"string": "vfio"}, "productName": {"string": product}}})
        })
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": format!("{node}-{generation}-{}", devices.len())},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": devices}}),
    )
    .unwrap()
}

fn names(d: &[Published]) -> Vec<String> {
    d.iter()
        .map(|d| format!("{}/{}", d.node, d.device.name))
        .collect()
}

#[test]
fn d1_only_complete_pools_at_their_newest_generation_count() {
    let slices = vec![
        // n1: generation 2 replaced generation 1.
        slice("n1", 1, 1, &[("gpu-vfio-9", "NVIDIA H200")]),
        slice("n1", 2, 1, &[("gpu-vfio-0", "NVIDIA H200")]),
        // n2: one of its two slices is missing.
        slice("n2", 1, 2, &[("gpu-vfio-0", "NVIDIA H200")]),
    ];
    assert_eq!(names(&complete_devices(&slices)), ["n1/gpu-vfio-0"]);
    // More slices than the pool says it has is as broken as fewer.
    let crowded = vec![
        slice("n3", 1, 1, &[("gpu-vfio-0", "NVIDIA H200")]),
        slice("n3", 1, 1, &[("gpu-vfio-1", "NVIDIA H200")]),
    ];
    assert!(complete_devices(&crowded).is_empty());
    let p = pools::pools(&slices);
    assert_eq!(
        p[&("gpu.nvidia.com", "n2")].0,
        PoolState::Incomplete {
            present: 1,
            expected: 2
        }
    );
}

#[test]
fn d1_a_class_takes_what_its_device_class_and_then_its_own_selectors_select() {
    let slices = vec![slice(
        "n1",
        1,
        1,
        &[("gpu-vfio-0", "NVIDIA H200"), ("gpu-vfio-1", "NVIDIA L40S")],
    )];
    let devices = complete_devices(&slices);
    let class = ClassSelectors::compile(
        "vfio.gpu.nvidia.com",
        &[VFIO.into()],
        "h200",
        &["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'".into()],
    )
    .unwrap();
    let served: Vec<&str> = devices
        .iter()
        .filter(|d| class.serves(d).unwrap())
        .map(|d| d.device.name.as_str())
        .collect();
    assert_eq!(served, ["gpu-vfio-0"]);
}

#[test]
fn d1_a_bad_selector_is_selector_invalid_in_the_allocators_words() {
    let e = ClassSelectors::compile(
        "vfio.gpu.nvidia.com",
        &[VFIO.into()],
        "h200",
        &["device.driver ==".into()],
    )
    .unwrap_err();
    assert_eq!(e.origin, class::Origin::Class);
    assert!(
        e.to_string()
            .starts_with("gpuclass h200: selector #0: CEL compile error: compilation failed:"),
        "{e}"
    );
    let slices = vec![slice("n1", 1, 1, &[("gpu-vfio-0", "NVIDIA H200")])];
    let devices = complete_devices(&slices);
    let erring = ClassSelectors::compile(
        "vfio.gpu.nvidia.com",
        &[VFIO.into()],
        "h200",
        &["device.attributes['gpu.nvidia.com'].model == 'x'".into()],
    )
    .unwrap();
    let e = erring.serves(&devices[0]).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "gpuclass h200: selector #0 on device gpu.nvidia.com/n1/gpu-vfio-0: CEL runtime error: no such key: model"
        ),
        "{e}"
    );
    // The DeviceClass's selectors come first, and a false one stops there.
    let other = ClassSelectors::compile(
        "gpu.nvidia.com",
        &["device.attributes['gpu.nvidia.com'].type == 'gpu'".into()],
        "h200",
        &["device.attributes['gpu.nvidia.com'].model == 'x'".into()],
    )
    .unwrap();
    assert_eq!(other.serves(&devices[0]), Ok(false));
}
