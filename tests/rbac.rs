//! The RBAC in deploy/ against what the controller asks of the API server:
//! the real binary plays the demo's story (with conflicts injected, so that
//! the re-reads after a 409 happen too) against the embedded API server,
//! which notes every kind of request. Every request must be allowed, and
//! every grant used, or named below with the rule that needs it and why
//! this run may not reach it. Neither side can drift from the other.
mod common;

use common::Cluster;
use gpu_claims_apiserver::Faults;
use gpu_claims_testbed::demo;
use gpu_claims_testbed::demo::story;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// Grants this run may not exercise: (group, resource, verb, why).
const NOT_ALWAYS_REACHED: &[(&str, &str, &str, &str)] = &[
    (
        "resource.k8s.io",
        "devicetaintrules",
        "delete",
        "D7: a pool no longer managed, or a rule of ours too many (actors/tests/d7_managed_pools.rs)",
    ),
    (
        "resource.k8s.io",
        "devicetaintrules",
        "update",
        "D7: a user's edit of our rule undone (actors/tests/d7_managed_pools.rs)",
    ),
    (
        "resource.k8s.io",
        "devicetaintrules",
        "get",
        "D7: the live read after a rule's write meets a newer rule (a 409)",
    ),
    (
        "kubevirt.io",
        "virtualmachineinstances",
        "delete",
        "L12: an unscheduled VMI pinned to a lost node (actors/tests/l12_unschedulable.rs)",
    ),
    (
        "kubevirt.io",
        "virtualmachineinstances",
        "get",
        "L10's live read, with KubeVirt integration off; and the G1 webhook's read",
    ),
    (
        "gpu.cozystack.io",
        "gpuallocations",
        "update",
        "G6: a Lost claim's record moves with it to a new node (actors/tests/g6_lost.rs)",
    ),
    (
        "gpu.cozystack.io",
        "gpuquotas",
        "get",
        "the live read after a quota's status write meets a newer quota (a 409)",
    ),
    (
        "gpu.cozystack.io",
        "gpuallocations",
        "get",
        "the live read before an orphaned record is deleted (actors/tests/g2_templates.rs)",
    ),
    (
        "gpu.cozystack.io",
        "gpuclasses",
        "get",
        "the class actor's re-read after a 409, when an injected conflict hits a class write",
    ),
    (
        "gpu.cozystack.io",
        "gpuclaims",
        "get",
        "the claim actor's re-read after a 409, when an injected conflict hits a claim write",
    ),
    (
        "",
        "nodes",
        "get",
        "E2's re-read after a 409, when an injected conflict hits a restart mark's patch",
    ),
    (
        "",
        "events",
        "patch",
        "the recorder patches the count of an Event that repeats within its window",
    ),
];

type Grant = (String, String, String, Option<String>);

/// (group, resource, verb, namespace) the manifests grant the controller:
/// the rules of the roles bound to its ServiceAccount (the chart's reader
/// ClusterRoles are for others).
fn granted() -> BTreeSet<Grant> {
    let text = std::fs::read_to_string("deploy/manifests/gpu-claims.yaml").unwrap();
    let docs = gpu_claims_actors::yaml::documents::<Value>(&text).unwrap();
    let bound: BTreeSet<(String, String)> = docs
        .iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("ClusterRoleBinding" | "RoleBinding")
            )
        })
        .filter(|d| {
            d["subjects"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["kind"] == "ServiceAccount" && s["name"] == "gpu-claims")
        })
        .map(|d| {
            let r = &d["roleRef"];
            (
                r["kind"].as_str().unwrap().into(),
                r["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    let mut out = BTreeSet::new();
    for d in &docs {
        let ns = match d["kind"].as_str() {
            Some("ClusterRole") => None,
            Some("Role") => Some(d["metadata"]["namespace"].as_str().unwrap().to_string()),
            _ => continue,
        };
        let key = (
            d["kind"].as_str().unwrap().to_string(),
            d["metadata"]["name"].as_str().unwrap().to_string(),
        );
        if !bound.contains(&key) {
            continue;
        }
        for rule in d["rules"].as_array().unwrap() {
            let list = |k: &str| -> Vec<String> {
                rule[k]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_string())
                    .collect()
            };
            for g in list("apiGroups") {
                for r in list("resources") {
                    for v in list("verbs") {
                        out.insert((g.clone(), r.clone(), v, ns.clone()));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_rbac_allows_every_request_of_the_controller_and_grants_nothing_unused() {
    let mut c = Cluster::new(demo::seed, "log: {filter: info, format: json}\n");
    c.server.set_faults(Faults::parse("conflict=0.2").unwrap());
    let ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, Duration::ZERO);
    for step in story::steps() {
        c.act(&step);
        c.settle(step.title, step.until, step.hold);
    }
    // /metrics and /debug are read as a platform team would: their
    // guard's reviews are requests of the controller too.
    assert_eq!(ctl.get("/metrics").unwrap().0, 200);
    assert_eq!(ctl.get("/debug").unwrap().0, 200);
    let grants = granted();
    let mut used: BTreeSet<(String, String, String)> = BTreeSet::new();
    // The controller connects without a token here; the KubeVirt
    // stand-in, which creates launcher pods over HTTP, with its own.
    for a in c
        .server
        .audit()
        .into_iter()
        .filter(|a| a.user == gpu_claims_apiserver::ANONYMOUS)
    {
        // Discovery is open to every authenticated user (system:discovery).
        if a.resource.starts_with('/') {
            assert!(
                ["/api", "/apis", "/version"]
                    .iter()
                    .any(|p| a.resource.starts_with(p)),
                "a non-resource request that is not discovery: {a:?}"
            );
            continue;
        }
        let allowed = grants.iter().any(|(g, r, v, ns)| {
            *g == a.group
                && *r == a.resource
                && *v == a.verb
                && ns
                    .as_ref()
                    .is_none_or(|ns| a.namespace.as_ref() == Some(ns))
        });
        assert!(allowed, "the RBAC does not allow {a:?}");
        used.insert((a.group, a.resource, a.verb));
    }
    eprintln!("the controller asked for: {used:#?}");
    for (g, r, v, _) in &grants {
        let reached = used.contains(&(g.clone(), r.clone(), v.clone()));
        let excused = NOT_ALWAYS_REACHED
            .iter()
            .any(|(eg, er, ev, _)| (eg, er, ev) == (&g.as_str(), &r.as_str(), &v.as_str()));
        assert!(
            reached || excused,
            "the RBAC grants {v} on {g}/{r}, which the controller never asked for"
        );
    }
    for (g, r, v, why) in NOT_ALWAYS_REACHED {
        assert!(
            grants
                .iter()
                .any(|(gg, rr, vv, _)| (gg.as_str(), rr.as_str(), vv.as_str()) == (*g, *r, *v)),
            "{v} on {g}/{r} is excused ({why}) but not granted"
        );
    }
}

/// Q3 (docs/design.md, "Tenant quotas"): the chart's tenant roles, aggregated into the built-in
/// roles as kube-controller-manager does it, give a tenant bound to `edit`
/// in its namespace what Q3 says and nothing more, as the API server's
/// SubjectAccessReviews judge it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn q3_a_tenant_bound_to_edit_makes_claims_reads_quotas_and_classes_and_writes_nothing_else() {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    use kube::api::{Api, DynamicObject, PostParams};
    let text = std::fs::read_to_string("deploy/manifests/gpu-claims.yaml").unwrap();
    let docs = gpu_claims_actors::yaml::documents::<Value>(&text).unwrap();
    let tenant_docs: Vec<&Value> = docs
        .iter()
        .filter(|d| {
            let name = d["metadata"]["name"].as_str().unwrap_or_default();
            name.starts_with("gpu-claims-tenant-") || name == "gpu-claims-class-reader"
        })
        .collect();
    assert_eq!(
        tenant_docs.len(),
        4,
        "view, edit, the class reader and its binding"
    );
    let store = gpu_claims_testbed::crds::cluster_store();
    for ns in ["tenant-a", "tenant-b"] {
        gpu_claims_apiserver::namespaces::ensure(&store, ns);
    }
    for d in &tenant_docs {
        store.seed(d["kind"].as_str().unwrap(), (*d).clone());
    }
    store.seed(
        "RoleBinding",
        serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-edit", "namespace": "tenant-a"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}),
    );
    let server = gpu_claims_apiserver::ApiServer::builder()
        .store(store)
        .start()
        .await
        .unwrap();
    // The built-in edit role gathers the tenant roles' rules.
    let roles: Api<DynamicObject> = Api::all_with(
        server.client(),
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::rbac::v1::ClusterRole>(&()),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let edit = roles.get("edit").await.unwrap();
        if edit.data["rules"].to_string().contains("gpuclaims") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "edit never aggregated: {edit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reviews: Api<SubjectAccessReview> = Api::all(server.client());
    let may = |verb: &str, resource: &str, ns: Option<&str>| {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some("alice".into()),
                groups: Some(vec!["system:authenticated".into()]),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some("gpu.cozystack.io".into()),
                    resource: Some(resource.into()),
                    namespace: ns.map(str::to_string),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviews = reviews.clone();
        async move {
            let answer = reviews
                .create(&PostParams::default(), &review)
                .await
                .unwrap();
            answer.status.is_some_and(|s| s.allowed)
        }
    };
    let a = Some("tenant-a");
    for (verb, resource, ns, allowed) in [
        ("create", "gpuclaims", a, true),
        ("delete", "gpuclaims", a, true),
        ("patch", "gpuclaims", a, false),
        ("update", "gpuclaims", a, false),
        ("list", "gpuclaims", a, true),
        ("get", "gpuquotas", a, true),
        ("list", "gpuclasses", None, true),
        ("create", "gpuquotas", a, false),
        ("update", "gpuquotas", a, false),
        ("get", "gpuallocations", a, false),
        ("create", "gpuallocations", a, false),
        ("update", "gpuclasses", None, false),
        ("create", "gpuclaims", Some("tenant-b"), false),
    ] {
        assert_eq!(
            may(verb, resource, ns).await,
            allowed,
            "Q3: alice {verb} {resource} in {ns:?}"
        );
    }
}
