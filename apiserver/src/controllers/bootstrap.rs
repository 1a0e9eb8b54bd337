//! The objects a cluster has before anyone writes, which
//! kube-apiserver and kube-controller-manager keep there (and this server
//! stands in for, as it does for garbage collection): the `kubernetes`
//! Service in `default` with its Endpoints, naming the API server itself
//! (the bootstrap controller, `pkg/controlplane/controller/kubernetesservice`),
//! and a `default` ServiceAccount in every active namespace, made again
//! if deleted (`pkg/controller/serviceaccount`).

use crate::store::{EventType, Store, StoreEvent};
use serde_json::{Value, json};
use std::net::SocketAddr;

/// Stores the `kubernetes` Service and Endpoints for a server at `addr`,
/// unless they are there.
pub(crate) fn kubernetes_service(store: &Store, addr: SocketAddr) {
    let labels = json!({"component": "apiserver", "provider": "kubernetes"});
    if store.get("Service", "default", "kubernetes").is_none() {
        store.seed(
            "Service",
            json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
                "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                    "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                    "internalTrafficPolicy": "Cluster", "sessionAffinity": "None",
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                        "targetPort": addr.port()}]},
                "status": {"loadBalancer": {}}}),
        );
    }
    if store.get("Endpoints", "default", "kubernetes").is_none() {
        store.seed(
            "Endpoints",
            json!({"apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": "kubernetes", "namespace": "default",
                    "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                "subsets": [{"addresses": [{"ip": addr.ip().to_string()}],
                    "ports": [{"name": "https", "port": addr.port(), "protocol": "TCP"}]}]}),
        );
    }
}

/// The control plane's ComponentStatuses, all healthy: this server is
/// the scheduler's, the controller manager's and etcd's stand-in.
#[cfg(feature = "conformance")]
pub(crate) fn component_statuses(store: &Store) {
    for (name, message) in [
        ("scheduler", "ok"),
        ("controller-manager", "ok"),
        ("etcd-0", "{\"health\":\"true\",\"reason\":\"\"}"),
    ] {
        if store.get("ComponentStatus", "", name).is_none() {
            store.seed(
                "ComponentStatus",
                json!({"apiVersion": "v1", "kind": "ComponentStatus", "metadata": {"name": name},
                    "conditions": [{"type": "Healthy", "status": "True", "message": message}]}),
            );
        }
    }
}

/// An APIService for every built-in group version served, as
/// kube-apiserver's autoregistration keeps them (`v1.` for the core group,
/// `v1.apps`, ...), each Available and served locally.
pub(crate) fn api_services(store: &Store, versions: &[(&'static str, &'static str)]) {
    let mut seen = std::collections::BTreeSet::new();
    for r in &crate::resources::builtin_at(versions) {
        if !seen.insert((r.group, r.version)) {
            continue;
        }
        let name = format!("{}.{}", r.version, r.group);
        if store.get("APIService", "", &name).is_some() {
            continue;
        }
        let (group_priority, version_priority) = if r.group.is_empty() {
            (18000, 1)
        } else {
            (17000, 15)
        };
        store.seed(
            "APIService",
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name, "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
                "spec": {"group": r.group, "version": r.version,
                    "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
                "status": {"conditions": [{"type": "Available", "status": "True",
                    "reason": "Local", "message": "Local APIServices are always available"}]}}),
        );
    }
}

fn active(ns: &Value) -> bool {
    !ns["metadata"]["deletionTimestamp"].is_string()
}

/// A `default` ServiceAccount in `ns`, unless it is there or `ns` is gone
/// or terminating (its objects are going, this one with them).
fn ensure_default_account(store: &Store, ns: &str) {
    let live = store.get("Namespace", "", ns).is_some_and(|n| active(&n));
    if live && store.get("ServiceAccount", ns, "default").is_none() {
        store.seed(
            "ServiceAccount",
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": ns}}),
        );
    }
}

/// A `default` ServiceAccount in every active namespace now: done before
/// the server serves, so that a client's first read sees them.
pub(crate) fn default_accounts(store: &Store) {
    let names: Vec<String> = store
        .list("Namespace")
        .0
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    for ns in names {
        ensure_default_account(store, &ns);
    }
}

/// The service account controller's part of a change: a namespace made
/// (or changed) gets its `default` ServiceAccount, and one deleted from
/// an active namespace is made again.
pub(crate) fn keep_default_account(store: &Store, ev: &StoreEvent) {
    let ns = match (ev.kind.as_str(), ev.type_) {
        ("Namespace", EventType::Added | EventType::Modified) => {
            ev.object["metadata"]["name"].as_str()
        }
        ("ServiceAccount", EventType::Deleted) if ev.object["metadata"]["name"] == "default" => {
            ev.object["metadata"]["namespace"].as_str()
        }
        _ => None,
    };
    if let Some(ns) = ns {
        ensure_default_account(store, ns);
    }
}
