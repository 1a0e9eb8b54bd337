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

/// A tenant's selector of `levels` nested loops of sixty.
fn nested_loops(levels: usize) -> String {
    let r: Vec<String> = (0..60).map(|i| i.to_string()).collect();
    let r = format!("[{}]", r.join(","));
    let vars = ["a", "b", "c", "d"];
    let mut e = format!("{} >= 0", vars[..levels].join("+"));
    for v in vars[..levels].iter().rev() {
        e = format!("{r}.all({v}, {e})");
    }
    e
}

#[tokio::test]
async fn a_template_whose_selector_costs_more_than_upstream_allows_is_refused_in_its_words() {
    let (_s, c) = server().await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(c.clone(), "a");
    let with = |levels: usize, name: &str| -> ResourceClaimTemplate {
        from(json!({"metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": 1,
                    "selectors": [{"cel": {"expression": nested_loops(levels)}}]}}]}}}}))
    };
    // Four levels: an estimated 145,635,251, 146 times upstream's limit.
    let refused = templates
        .create(&PostParams::default(), &with(4, "costly"))
        .await;
    let e = refusal(refused);
    assert_eq!(
        e.message,
        "ResourceClaimTemplate.resource.k8s.io \"costly\" is invalid: spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: Forbidden: too complex, exceeds cost limit"
    );
    invalid_saying(&e, "too complex");
    // Two levels: an estimated 26,051, taken.
    templates
        .create(&PostParams::default(), &with(2, "cheap"))
        .await
        .unwrap();
}

/// A DeviceTaintRule as a client writes one at `version`.
fn taint_rule_json(version: &str, effect: &str) -> Value {
    json!({"apiVersion": format!("resource.k8s.io/{version}"), "kind": "DeviceTaintRule",
        "metadata": {"name": "closed-n1"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1"},
            "taint": {"key": "gpu.cozystack.io/managed", "effect": effect}}})
}

/// The dynamic API of DeviceTaintRules at `version`.
fn taint_rules_at(c: &kube::Client, version: &str) -> Api<kube::api::DynamicObject> {
    let ar = kube::api::ApiResource {
        group: "resource.k8s.io".into(),
        version: version.into(),
        api_version: format!("resource.k8s.io/{version}"),
        kind: "DeviceTaintRule".into(),
        plural: "devicetaintrules".into(),
    };
    Api::all_with(c.clone(), &ar)
}

#[tokio::test]
async fn a_device_taint_rule_at_v1_is_stamped_validated_and_updated_only_on_the_version_read() {
    let (_s, c) = server().await;
    let rules = taint_rules_at(&c, "v1");
    let body = taint_rule_json("v1", "NoSchedule");
    let mut with_status = body.clone();
    with_status["status"] = json!({"conditions": [{"type": "EvictionInProgress", "status": "True",
        "reason": "X", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
    let made = rules
        .create(
            &PostParams::default(),
            &serde_json::from_value(with_status).unwrap(),
        )
        .await
        .unwrap();
    // PrepareForCreate: no status, generation 1; SetDefaults: timeAdded.
    assert_eq!(made.metadata.generation, Some(1));
    assert!(
        made.data["status"].is_null() || made.data["status"] == json!({}),
        "{:?}",
        made.data
    );
    let added = made.data["spec"]["taint"]["timeAdded"].clone();
    assert!(added.is_string(), "{:?}", made.data);
    // v1: an update must name the version it read.
    let mut unconditional: kube::api::DynamicObject = serde_json::from_value(body.clone()).unwrap();
    unconditional.data["spec"]["taint"]["effect"] = "NoExecute".into();
    let refused = rules
        .replace("closed-n1", &PostParams::default(), &unconditional)
        .await;
    invalid_saying(&refusal(refused), "metadata.resourceVersion");
    // Its effect changed on the version read: generation and timeAdded move
    // (timeAdded to now, which may be the same second: not compared).
    let mut changed = made.clone();
    changed.data["spec"]["taint"]["effect"] = "NoExecute".into();
    let updated = rules
        .replace("closed-n1", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_eq!(updated.metadata.generation, Some(2));
    // An effect upstream does not know, and a key that is no label name.
    let mut bad = updated.clone();
    bad.data["spec"]["taint"]["effect"] = "PreferNoSchedule".into();
    bad.data["spec"]["taint"]["key"] = "no/such/key".into();
    let e = refusal(
        rules
            .replace("closed-n1", &PostParams::default(), &bad)
            .await,
    );
    invalid_saying(
        &e,
        "spec.taint.effect: Unsupported value: \"PreferNoSchedule\": supported values: \"NoExecute\", \"NoSchedule\", \"None\"",
    );
    invalid_saying(&e, "spec.taint.key: Invalid value: \"no/such/key\"");
}

#[tokio::test]
async fn at_v1beta2_as_kubernetes_1_36_serves_it_a_rule_takes_an_unconditional_update() {
    let s = common::builder(&["a"])
        .serve_kind_at("DeviceTaintRule", "v1beta2")
        .start()
        .await
        .unwrap();
    let c = s.client();
    let rules = taint_rules_at(&c, "v1beta2");
    rules
        .create(
            &PostParams::default(),
            &serde_json::from_value(taint_rule_json("v1beta2", "NoSchedule")).unwrap(),
        )
        .await
        .unwrap();
    let mut none = taint_rule_json("v1beta2", "None");
    none["metadata"]["name"] = "closed-n1".into();
    let updated = rules
        .replace(
            "closed-n1",
            &PostParams::default(),
            &serde_json::from_value(none).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(updated.data["spec"]["taint"]["effect"], "None");
    assert_eq!(updated.metadata.generation, Some(2));
    // v1 is not served there.
    let at_v1 = taint_rules_at(&c, "v1").list(&ListParams::default()).await;
    assert_eq!(refusal(at_v1).code, 404);
}
