//! D3 against a tenant's selectors: placement evaluates the selectors of
//! a ResourceClaimTemplate's requests for every tenant, on one actor. A
//! selector whose estimated cost is over upstream's limit is never
//! evaluated (the set waits, saying so); one under it that is still dear
//! is evaluated a budget at a time, each answer remembered, while other
//! tenants' sets are decided in between. Counted in writes, never timed.
mod common;
use common::*;
use gpu_claims_actors::config::Config;
use gpu_claims_testbed::standin::nvidia;
use serde_json::{Value, json};

/// `[0,…,n-1]` written out, as a tenant loops n times.
fn range(n: usize) -> String {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!("[{}]", items.join(","))
}

/// A request of one device of the passthrough class, with `selector`.
fn request(selector: Option<&str>) -> Value {
    let mut r = json!({"name": "gpu", "exactly": {"deviceClassName": VFIO, "count": 1}});
    if let Some(s) = selector {
        r["exactly"]["selectors"] = json!([{"cel": {"expression": s}}]);
    }
    r
}

/// Tenant `ns`'s VMI `vm` asking through its template `one`, its launcher
/// pod at the gate and the ResourceClaim Kubernetes made from it.
fn vm_through_template(ns: &str, selector: Option<&str>) -> Vec<gpu_claims_actors::api::Obj> {
    use gpu_claims_actors::api::Kind;
    let template = typed(
        Kind::ResourceClaimTemplate,
        json!({"metadata": {"name": "one", "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [request(selector)]}}}}),
    );
    let vmi = typed(
        Kind::Vmi,
        json!({"metadata": {"name": "vm", "namespace": ns, "uid": format!("u-{ns}")},
            "spec": {"domain": {"devices": {"gpus": [{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}]}},
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}]},
            "status": {"phase": "Scheduling"}}),
    );
    let pod = typed(
        Kind::Pod,
        json!({"metadata": {"name": "virt-launcher-vm", "namespace": ns, "uid": format!("p-{ns}"),
                "labels": {"kubevirt.io": "virt-launcher"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                    "name": "vm", "uid": format!("u-{ns}"), "controller": true}]},
            "spec": {"containers": [{"name": "compute", "resources": {"claims": [{"name": "gpu"}]}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one"}],
                "schedulingGates": [{"name": "gpu.cozystack.io/claims"}]},
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "virt-launcher-vm-gpu"}]}}),
    );
    let claim = typed(
        Kind::ResourceClaim,
        json!({"metadata": {"name": "virt-launcher-vm-gpu", "namespace": ns,
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "virt-launcher-vm",
                    "uid": format!("p-{ns}"), "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"devices": {"requests": [request(selector)]}}}),
    );
    vec![template, vmi, pod, claim]
}

/// Eight H200s on n1, a DRA class of them, tenant `a-mallory` (decided
/// first: keys in order) asking with `selector`, and `b-alice` with none.
fn two_tenants(selector: &str) -> Vec<gpu_claims_actors::api::Obj> {
    let mut v = vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", 8, "141Gi", "0x2335")
            .obj(),
        dra_class("h200", VFIO).obj(),
    ];
    v.extend(vm_through_template("a-mallory", Some(selector)));
    v.extend(vm_through_template("b-alice", None));
    v
}

/// Settles `objects` once NVIDIA's driver published its devices and
/// classes (checking I1-I5 and I9), and hands the cluster to `look`.
fn published(
    config: Config,
    objects: Vec<gpu_claims_actors::api::Obj>,
    look: impl FnOnce(&TestCluster),
) {
    with_world(config, objects, |mut t| async move {
        nvidia::publish(&t.sim.store);
        t.settle().await;
        look(&t);
    });
}

/// Where the first write about tenant `ns`'s placement stands.
fn placed_at(t: &TestCluster, ns: &str) -> Option<usize> {
    t.all_entries().iter().position(|e| {
        e.op == "create" && e.kind == "GPUAllocation" && e.namespace.as_deref() == Some(ns)
    })
}

#[test]
fn d3_a_template_selector_over_the_cost_limit_waits_saying_so_and_another_tenant_is_placed() {
    // 60^4 steps a device: an estimated 145,635,251, which kube-apiserver
    // refuses; the embedded one would too, so it is written past it here
    // as an older API server, or a stored one, would hold it.
    let r = range(60);
    let selector = format!("{r}.all(a, {r}.all(b, {r}.all(c, {r}.all(d, a+b+c+d >= 0))))");
    published(Config::default(), two_tenants(&selector), |t| {
        assert!(placed_at(t, "b-alice").is_some(), "alice is placed");
        assert_eq!(
            placed_at(t, "a-mallory"),
            None,
            "the selector is never evaluated"
        );
        let (reason, message) = t.waiting("a-mallory/vm-gpu").expect("mallory set waits");
        assert_eq!(reason, "DeviceClaimPending");
        assert!(
            message.contains(
                "too complex, exceeds cost limit (estimated cost 145635251, the limit is 1000000)"
            ),
            "{message}"
        );
    });
}

#[test]
fn d3_a_dear_selector_is_evaluated_a_budget_at_a_time_while_another_tenant_is_placed_first() {
    // Under the limit (360 x 360 steps: an estimated 912,251 a device),
    // true only on the last of eight devices: each device costs a whole
    // budget, so mallory's set is decided over eight turns, and alice's,
    // queued behind it, is placed in between.
    let r = range(360);
    // The eighth GPU of an HGX board sits on bus 0xdb.
    let selector = format!(
        "device.attributes['resource.kubernetes.io'].pciBusID == '0000:db:00.0' && {r}.all(a, {r}.all(b, a+b >= 0))"
    );
    let mut one_write = Config::default();
    one_write.placement.writes_in_flight = 1;
    published(one_write, two_tenants(&selector), |t| {
        let alice = placed_at(t, "b-alice").expect("alice is placed");
        let mallory = placed_at(t, "a-mallory").expect("mallory is placed, in the end");
        assert!(
            alice < mallory,
            "alice's set was decided while mallory's selectors were evaluated"
        );
        let record = t
            .sim
            .store
            .get("GPUAllocation", "a-mallory", "vm-gpu")
            .unwrap();
        assert_eq!(
            record["spec"]["devices"][0]["device"], "gpu-vfio-7",
            "the device its selector takes"
        );
    });
}
