//! The RBAC in deploy/ against what the controller asks of the API server:
//! the real binary plays the demo's story (with conflicts injected, so that
//! the re-reads after a 409 happen too) against the embedded API server,
//! which notes every kind of request. Every request must be allowed, and
//! every grant used, or named below with the rule that needs it and why
//! this run may not reach it. Neither side can drift from the other.
mod common;

use common::Cluster;
use gpu_claims_apiserver::Faults;
use gpu_claims_testbed::demo::story::{self, Ctx};
use gpu_claims_testbed::demo::{self, Snapshot};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// Grants this run may not exercise: (group, resource, verb, why).
const NOT_ALWAYS_REACHED: &[(&str, &str, &str, &str)] = &[
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
        "events.k8s.io",
        "events",
        "patch",
        "kube-runtime's recorder patches an Event that repeats (its series)",
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
        let now: Snapshot = c.snapshot();
        (step.act)(&Ctx {
            standin: &c.standin,
            store: &c.store,
            now: &now,
        });
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
