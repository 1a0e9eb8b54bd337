//! D1's selectors, against the cases of upstream's `compile_test.go`.

use super::*;
use crate::dra::values::Semver;
use serde_json::json;

const NVIDIA: &str = "gpu.nvidia.com";

/// A vfio GPU as NVIDIA's driver publishes it.
fn gpu() -> Device {
    serde_json::from_value(json!({"name": "gpu-vfio-0",
        "attributes": {
            "type": {"string": "vfio"},
            "productName": {"string": "NVIDIA H200"},
            "iommuFDEnabled": {"bool": false},
            "driverVersion": {"version": "580.65.6"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:14"},
            "resource.kubernetes.io/numaNode": {"int": 0}},
        "capacity": {"addressableMemory": {"value": "141Gi"}}}))
    .unwrap()
}

fn matches(expr: &str) -> Result<bool, SelectorError> {
    Selector::compile(expr)?.matches(NVIDIA, &gpu())
}

#[test]
fn d1_the_driver_classes_select_by_driver_and_the_drivers_domain_for_bare_names() {
    let vfio =
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'";
    assert_eq!(matches(vfio), Ok(true));
    let gpu_class =
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'";
    assert_eq!(matches(gpu_class), Ok(false));
    assert_eq!(
        Selector::compile(vfio)
            .unwrap()
            .matches("other.example.com", &gpu()),
        Ok(false),
        "another driver's device"
    );
    // A qualified name keeps its own domain.
    assert_eq!(
        matches("device.attributes['resource.kubernetes.io'].numaNode == 0"),
        Ok(true)
    );
    assert_eq!(
        matches("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H')"),
        Ok(true)
    );
}

#[test]
fn d1_capacities_are_quantities_and_versions_semvers() {
    assert_eq!(
        matches(
            "device.capacity['gpu.nvidia.com'].addressableMemory.isGreaterThan(quantity('80Gi'))"
        ),
        Ok(true)
    );
    assert_eq!(
        matches(
            "device.capacity['gpu.nvidia.com'].addressableMemory.compareTo(quantity('141Gi')) == 0"
        ),
        Ok(true)
    );
    assert_eq!(
        matches(
            "device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('580.100.0'))"
        ),
        Ok(true),
        "580.65.6 < 580.100.0 by number, not by text"
    );
    assert_eq!(
        matches("device.attributes['gpu.nvidia.com'].driverVersion.major() == 580"),
        Ok(true)
    );
}

#[test]
fn d1_an_unknown_domain_is_empty_and_a_missing_name_is_a_runtime_error() {
    assert_eq!(
        matches("has(device.attributes['dra.example.com'].model)"),
        Ok(false),
        "upstream's maps default an unknown domain to an empty one"
    );
    assert_eq!(
        matches("device.attributes['gpu.nvidia.com'].noSuchAttr == 'x'"),
        Err(SelectorError::Runtime(
            "no such key: noSuchAttr. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields".into()
        ))
    );
}

#[test]
fn d1_a_selector_that_does_not_compile_or_is_not_a_bool_is_refused_in_upstreams_words() {
    let e = Selector::compile("device.driver ==").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("CEL compile error: compilation failed:"),
        "{e}"
    );
    let e = matches("device.attributes['resource.kubernetes.io'].numaNode").unwrap_err();
    assert!(matches!(e, SelectorError::NotBool(_)), "{e}");
    assert_eq!(
        matches("quantity('nonsense').isGreaterThan(quantity('1'))")
            .map_err(|e| e.to_string().starts_with("CEL runtime error")),
        Err(true)
    );
}

#[test]
fn d1_semver_precedence_is_semvers() {
    let v = |s: &str| Semver::parse(s).unwrap();
    assert!(v("1.0.0-alpha") < v("1.0.0-alpha.1"));
    assert!(v("1.0.0-alpha.1") < v("1.0.0-alpha.beta"));
    assert!(v("1.0.0-beta.11") > v("1.0.0-beta.2"));
    assert!(v("1.0.0-rc.1") < v("1.0.0"));
    assert_eq!(v("1.2.3+build.7"), v("1.2.3"));
    for bad in ["1.2", "01.2.3", "1.2.3-", "a.b.c", "1.2.3-al..pha"] {
        assert!(Semver::parse(bad).is_none(), "{bad}");
    }
}

/// Hostile input: a tenant's template may carry request selectors, which
/// placement compiles. Upstream refuses an expression longer than
/// `CELSelectorExpressionMaxLength` (10 Ki); a nesting the parser cannot
/// take is a compile error, never a crash of the controller.
#[test]
fn d1_an_expression_past_upstreams_length_or_nested_past_reason_is_a_compile_error() {
    let long = format!("device.driver == '{}'", "x".repeat(10 * 1024));
    assert!(matches!(
        Selector::compile(&long),
        Err(SelectorError::Compile(m)) if m.contains("10240")
    ));
    let deep = format!("{}true{}", "(".repeat(4000), ")".repeat(4000));
    assert!(deep.len() <= 10 * 1024);
    assert!(matches!(
        Selector::compile(&deep),
        Err(SelectorError::Compile(_))
    ));
    let nested = format!("{}true{}", "!".repeat(4000), "");
    assert!(matches!(
        Selector::compile(&nested),
        Err(SelectorError::Compile(_))
    ));
}

/// The device is read in place: what a selector asks of a map other than
/// a name (`in`, `size`, comprehensions, `==`, a map as the result) is
/// answered by the map made whole, as a map built up front answered it.
#[test]
fn d1_a_device_read_in_place_answers_every_question_a_map_does() {
    let yes = |e: &str| assert_eq!(matches(e), Ok(true), "{e}");
    yes("'gpu.nvidia.com' in device.attributes && !('dra.example.com' in device.attributes)");
    yes("'productName' in device.attributes['gpu.nvidia.com']");
    yes("size(device.attributes['gpu.nvidia.com']) == 4");
    yes("size(device.attributes['resource.kubernetes.io']) == 2");
    yes("size(device.attributes) == 2 && size(device.capacity) == 1");
    yes("size(device.attributes['dra.example.com']) == 0");
    yes("device.attributes['gpu.nvidia.com'].exists(n, n == 'iommuFDEnabled')");
    yes("device.attributes['resource.kubernetes.io'] == {'pcieRoot': 'pci0000:14', 'numaNode': 0}");
    yes("{'numaNode': 0, 'pcieRoot': 'pci0000:14'} == device.attributes['resource.kubernetes.io']");
    yes("device.attributes['dra.example.com'] == {}");
    yes(
        "device.attributes['resource.kubernetes.io'] == device.attributes['resource.kubernetes.io']",
    );
    yes("device.attributes['gpu.nvidia.com'] != device.attributes['resource.kubernetes.io']");
    yes("device.attributes['gpu.nvidia.com'].productName != '{not a map}'");
    yes("device.allowMultipleAllocations == false && has(device.driver)");
    yes("device.attributes['gpu.nvidia.com'].?model.orValue('none') == 'none'");
    yes("device.attributes['gpu.nvidia.com'][?'type'].orValue('') == 'vfio'");
    assert_eq!(
        matches("device.attributes['resource.kubernetes.io']"),
        Err(SelectorError::NotBool("map".into())),
        "a map as the result is a map, not an error of ours"
    );
    assert!(
        matches!(
            matches("device.attributes[1] == 'x'"),
            Err(SelectorError::Runtime(_))
        ),
        "a map of domains is indexed by strings"
    );
}

/// List-valued attributes (`bools`, `ints`, `strings`, `versions`) read
/// as lists; a version in a list that is no semver leaves the attribute
/// out, as a lone one does.
#[test]
fn d1_list_attributes_read_as_lists_and_a_bad_version_leaves_the_attribute_out() {
    let d: Device = serde_json::from_value(json!({"name": "gpu-0",
        "attributes": {
            "links": {"ints": [0, 2, 3]},
            "modes": {"strings": ["vfio", "mig"]},
            "firmware": {"versions": ["1.2.3", "1.10.0"]},
            "broken": {"versions": ["1.2"]}}}))
    .unwrap();
    let on = |e: &str| Selector::compile(e).unwrap().matches(NVIDIA, &d);
    assert_eq!(
        on("2 in device.attributes['gpu.nvidia.com'].links"),
        Ok(true)
    );
    assert_eq!(
        on("device.attributes['gpu.nvidia.com'].modes[1] == 'mig'"),
        Ok(true)
    );
    assert_eq!(
        on("device.attributes['gpu.nvidia.com'].firmware[1].isGreaterThan(semver('1.9.0'))"),
        Ok(true)
    );
    assert_eq!(
        on("has(device.attributes['gpu.nvidia.com'].broken)"),
        Ok(false)
    );
}

/// `matches` compiles its pattern once, within a size limit: a short
/// pattern that compiles to megabytes (`[\pL\pN]{200}`) is refused as it
/// is written, never compiled again on every device.
#[test]
fn d1_a_regex_that_compiles_past_the_limit_is_refused_and_others_match_as_upstream() {
    let big = Selector::compile(r#"device.driver.matches("[\\pL\\pN]{200}")"#).unwrap_err();
    assert!(
        matches!(&big, SelectorError::Compile(m) if m.contains("is not a regex a selector may use")),
        "{big:?}"
    );
    let d: k8s_openapi::api::resource::v1::Device =
        serde_json::from_value(serde_json::json!({"name": "gpu-0"})).unwrap();
    for e in [
        r#"device.driver.matches("^gpu\\.nvidia\\.com$")"#,
        r#"matches(device.driver, "nvidia")"#,
    ] {
        assert_eq!(
            Selector::compile(e).unwrap().matches("gpu.nvidia.com", &d),
            Ok(true),
            "{e}"
        );
    }
    assert_eq!(
        Selector::compile(r#"device.driver.matches("^amd")"#)
            .unwrap()
            .matches("gpu.nvidia.com", &d),
        Ok(false)
    );
}
