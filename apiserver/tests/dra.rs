//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as kube-apiserver
//! 1.37 serves it, through kube-rs with k8s-openapi's types (issue 35,
//! item 1): discovery, scopes, the claim's status subresource, field
//! selectors and tables as kubectl reads them, and the validation a
//! client meets (`pkg/apis/resource/validation`).

mod common;

use common::{from, invalid_saying, refusal, server};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn slice(node: &str, driver: &str) -> ResourceSlice {
    from(json!({"metadata": {"name": format!("{node}-{driver}")},
        "spec": {"driver": driver, "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "vfio"}}}]}}))
}

fn claim(name: &str) -> ResourceClaim {
    from(json!({"metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": 1}}]}}}))
}

fn allocation(request: &str) -> Value {
    json!({"status": {"allocation": {"devices": {"results": [
        {"request": request, "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}})
}

#[tokio::test]
async fn discovery_serves_the_five_dra_kinds_at_v1_in_their_scopes() {
    let (s, c) = server().await;
    let req = http::Request::get("/apis/resource.k8s.io/v1")
        .body(Vec::new())
        .unwrap();
    let list: Value = c.request(req).await.unwrap();
    let mut served: Vec<(String, bool)> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["namespaced"] == true,
            )
        })
        .collect();
    served.sort();
    let want = [
        ("deviceclasses", false),
        ("devicetaintrules", false),
        ("devicetaintrules/status", false),
        ("resourceclaims", true),
        ("resourceclaims/status", true),
        ("resourceclaimtemplates", true),
        ("resourceslices", false),
    ];
    let want: Vec<(String, bool)> = want.iter().map(|(n, ns)| (n.to_string(), *ns)).collect();
    assert_eq!(served, want);
    // Each kind round-trips through its k8s-openapi type.
    let classes: Api<DeviceClass> = Api::all(c.clone());
    let class: DeviceClass = from(json!({"metadata": {"name": "vfio.gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"}}]}}));
    let made = classes
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    assert_eq!(made.metadata.generation, Some(1));
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(c.clone(), "a");
    let template: ResourceClaimTemplate = from(json!({"metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "vfio.gpu.nvidia.com"}}]}}}}));
    templates
        .create(&PostParams::default(), &template)
        .await
        .unwrap();
    let rules: Api<DeviceTaintRule> = Api::all(c.clone());
    let rule: DeviceTaintRule = from(json!({"metadata": {"name": "drain-n1"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1"},
            "taint": {"key": "maintenance", "effect": "NoExecute"}}}));
    rules.create(&PostParams::default(), &rule).await.unwrap();
    assert_eq!(s.store.list("DeviceTaintRule").0.len(), 1);
}

#[tokio::test]
async fn a_claims_status_is_its_own_subresource_and_its_allocation_names_its_requests() {
    let (_s, c) = server().await;
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "a");
    let made = claims
        .create(&PostParams::default(), &claim("vm-gpu"))
        .await
        .unwrap();
    assert_eq!(
        made.metadata.generation, None,
        "the claim's strategy keeps none"
    );
    // The main resource ignores a status; the status subresource takes it.
    let pp = PatchParams::default();
    claims
        .patch("vm-gpu", &pp, &Patch::Merge(allocation("gpu")))
        .await
        .unwrap();
    assert!(claims.get("vm-gpu").await.unwrap().status.is_none());
    let wrong = claims
        .patch_status("vm-gpu", &pp, &Patch::Merge(allocation("other")))
        .await;
    invalid_saying(
        &refusal(wrong),
        "status.allocation.devices.results[0].request: Invalid value: \"other\": must be the name of a request in the claim",
    );
    let done = claims
        .patch_status("vm-gpu", &pp, &Patch::Merge(allocation("gpu")))
        .await
        .unwrap();
    assert!(done.status.unwrap().allocation.is_some());
    // Once set, an allocation is only cleared, never changed.
    let mut other = allocation("gpu");
    other["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1".into();
    let changed = claims
        .patch_status("vm-gpu", &pp, &Patch::Merge(other))
        .await;
    invalid_saying(&refusal(changed), "status.allocation: Invalid value");
    // The spec never changes.
    let grown = claims
        .patch(
            "vm-gpu",
            &pp,
            &Patch::Merge(json!({"spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": 2}}]}}})),
        )
        .await;
    invalid_saying(&refusal(grown), "field is immutable");
    let reserved_alone = claims
        .patch_status(
            "vm-gpu",
            &pp,
            &Patch::Merge(json!({"status": {"allocation": null,
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}})),
        )
        .await;
    invalid_saying(
        &refusal(reserved_alone),
        "may not be specified when `allocated` is not set",
    );
}

#[tokio::test]
async fn slices_are_selected_by_node_and_driver_and_tables_print_kubectls_columns() {
    let (_s, c) = server().await;
    let slices: Api<ResourceSlice> = Api::all(c.clone());
    for (node, driver) in [
        ("n1", "gpu.nvidia.com"),
        ("n2", "gpu.nvidia.com"),
        ("n1", "nic.example.com"),
    ] {
        slices
            .create(&PostParams::default(), &slice(node, driver))
            .await
            .unwrap();
    }
    let names = |l: kube::core::ObjectList<ResourceSlice>| -> Vec<String> {
        l.items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect()
    };
    let on_n1 = slices
        .list(&ListParams::default().fields("spec.nodeName=n1,spec.driver=gpu.nvidia.com"))
        .await
        .unwrap();
    assert_eq!(names(on_n1), ["n1-gpu.nvidia.com"]);
    let by_pool = slices
        .list(&ListParams::default().fields("spec.pool.name=n1"))
        .await;
    assert_eq!(refusal(by_pool).code, 400, "not a field label in 1.37");
    // A slice's node never changes.
    let moved = slices
        .patch(
            "n1-gpu.nvidia.com",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"nodeName": "n2"}})),
        )
        .await;
    invalid_saying(
        &refusal(moved),
        "spec.nodeName: Invalid value: \"n2\": field is immutable",
    );
    let t = common::table(
        &c,
        "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn2",
    )
    .await;
    let columns: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Node", "Driver", "Pool", "Age"]);
    assert_eq!(
        t["rows"][0]["cells"].as_array().unwrap()[1..4],
        ["n2", "gpu.nvidia.com", "n2"]
    );
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "a");
    claims
        .create(&PostParams::default(), &claim("pending"))
        .await
        .unwrap();
    claims
        .create(&PostParams::default(), &claim("used"))
        .await
        .unwrap();
    let mut used = allocation("gpu");
    used["status"]["reservedFor"] = json!([{"resource": "pods", "name": "p", "uid": "u"}]);
    claims
        .patch_status("used", &PatchParams::default(), &Patch::Merge(used))
        .await
        .unwrap();
    let t = common::table(&c, "/apis/resource.k8s.io/v1/namespaces/a/resourceclaims").await;
    let states: Vec<(&str, &str)> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["cells"][0].as_str().unwrap(),
                r["cells"][1].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [("pending", "pending"), ("used", "allocated,reserved")]
    );
}

/// Kubernetes 1.36's `DRAResourceClaimGranularStatusAuthorization`: a
/// status write that changes the allocation (or reservedFor) is also
/// authorized as its verb on `resourceclaims/binding`, cluster-wide; the
/// server's record of requests, which RBAC tests judge, shows it.
#[tokio::test]
async fn an_allocations_write_is_also_asked_of_rbac_as_resourceclaims_binding() {
    let (s, c) = server().await;
    let claims: Api<ResourceClaim> = Api::namespaced(c.clone(), "a");
    claims
        .create(&PostParams::default(), &claim("vm-gpu"))
        .await
        .unwrap();
    let binding = |s: &gpu_claims_apiserver::Handle| {
        s.audit()
            .into_iter()
            .filter(|a| a.resource == "resourceclaims/binding")
            .map(|a| (a.verb, a.group, a.namespace))
            .collect::<Vec<_>>()
    };
    let pp = PatchParams::default();
    claims
        .patch(
            "vm-gpu",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert!(binding(&s).is_empty(), "no allocation changed");
    claims
        .patch_status("vm-gpu", &pp, &Patch::Merge(allocation("gpu")))
        .await
        .unwrap();
    assert_eq!(
        binding(&s),
        [("patch".to_string(), "resource.k8s.io".to_string(), None)]
    );
}
