//! Aggregated ClusterRoles, as kube-controller-manager's
//! clusterrole-aggregation controller keeps them
//! (`pkg/controller/clusterroleaggregation`): a ClusterRole with an
//! `aggregationRule` has as its rules those of every ClusterRole its
//! selectors match, in name order, each rule once, written back to the
//! object whenever one of them changes. And the built-in `admin`, `edit`
//! and `view` roles that aggregate what carries
//! `rbac.authorization.k8s.io/aggregate-to-<role>: "true"`, as
//! kube-apiserver's RBAC bootstrap policy makes them, so that a project
//! extending them (gpu-claims' tenant roles) can be tried as on a cluster.

use crate::admission::selects;
use crate::store::{Store, StoreEvent, Subresource};
use k8s_openapi::api::rbac::v1::{AggregationRule, PolicyRule};
use serde_json::{Value, json};

/// The built-in user-facing roles, and the role each is itself gathered
/// into (upstream's bootstrap policy labels `edit` to join `admin` and
/// `view` to join `edit`, so what joins `view` reaches all three). The
/// rules a role grants of its own (pods, deployments...) come in upstream
/// through the `system:aggregate-to-*` roles; only the aggregation is kept.
const USER_FACING: [(&str, Option<&str>); 3] = [
    ("admin", None),
    ("edit", Some("admin")),
    ("view", Some("edit")),
];

/// Stores `admin`, `edit` and `view` unless they are there.
pub(crate) fn builtin_roles(store: &Store) {
    // cluster-admin, bound to system:masters, as the bootstrap policy
    // makes it: what `kubectl get clusterrole cluster-admin` and kube-rs's
    // tests find on every cluster.
    let bootstrap = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let autoupdate = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    if store.get("ClusterRole", "", "cluster-admin").is_none() {
        store.seed(
            "ClusterRole",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "cluster-admin", "labels": bootstrap, "annotations": autoupdate},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                    {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
        );
    }
    if store
        .get("ClusterRoleBinding", "", "cluster-admin")
        .is_none()
    {
        store.seed(
            "ClusterRoleBinding",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "cluster-admin", "labels": bootstrap, "annotations": autoupdate},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]}),
        );
    }
    for (role, joins) in USER_FACING {
        if store.get("ClusterRole", "", role).is_some() {
            continue;
        }
        let label = format!("rbac.authorization.k8s.io/aggregate-to-{role}");
        let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
        if let Some(j) = joins {
            labels[format!("rbac.authorization.k8s.io/aggregate-to-{j}")] = "true".into();
        }
        store.seed(
            "ClusterRole",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": role, "labels": labels,
                    "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
                "rules": []}),
        );
    }
    aggregate_all(store);
}

/// The controller's part of a change: any ClusterRole made, changed or
/// deleted may change what an aggregated one holds.
pub(crate) fn keep_aggregated(store: &Store, ev: &StoreEvent) {
    if ev.kind == "ClusterRole" {
        aggregate_all(store);
    }
}

/// Writes every aggregated ClusterRole's rules where they differ from
/// what its selectors gather. Writing one is itself a change to a
/// ClusterRole; the next pass finds nothing to write, so it ends.
fn aggregate_all(store: &Store) {
    let roles = store.list("ClusterRole").0;
    for role in &roles {
        let Some(rule) = aggregation_rule(role) else {
            continue;
        };
        let name = role["metadata"]["name"].as_str().unwrap_or_default();
        let gathered = gather(&roles, name, &rule);
        if role["rules"] == gathered {
            continue;
        }
        let mut updated = role.clone();
        updated["rules"] = gathered;
        // A conflict means another writer moved it: its change comes back
        // as an event, and this pass runs again on it.
        let _ = store.update("ClusterRole", updated, Subresource::Main);
    }
}

fn aggregation_rule(role: &Value) -> Option<AggregationRule> {
    serde_json::from_value(role.get("aggregationRule")?.clone()).ok()
}

/// The rules of the ClusterRoles (other than `name` itself) each selector
/// matches, selector by selector and by name within one, each rule once,
/// as upstream gathers them (an empty selector matches every role).
fn gather(roles: &[Value], name: &str, rule: &AggregationRule) -> Value {
    let mut by_name: Vec<&Value> = roles
        .iter()
        .filter(|r| r["metadata"]["name"].as_str() != Some(name))
        .collect();
    by_name.sort_by_key(|r| {
        r["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    });
    let mut rules: Vec<PolicyRule> = Vec::new();
    for selector in rule.cluster_role_selectors.iter().flatten() {
        for source in by_name
            .iter()
            .filter(|r| selects(Some(selector), &r["metadata"]["labels"]))
        {
            let own: Vec<PolicyRule> =
                serde_json::from_value(source["rules"].clone()).unwrap_or_default();
            for r in own {
                if !rules.contains(&r) {
                    rules.push(r);
                }
            }
        }
    }
    serde_json::to_value(rules).unwrap_or_else(|_| json!([]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    fn rules_of(store: &Store, name: &str) -> Value {
        store.get("ClusterRole", "", name).unwrap()["rules"].clone()
    }

    #[test]
    fn a_labelled_role_joins_edit_and_leaves_it_when_deleted_or_relabelled() {
        let store = crate::new_store();
        builtin_roles(&store);
        assert_eq!(rules_of(&store, "edit"), json!([]));
        let claims = json!([{"apiGroups": ["gpu.cozystack.io"], "resources": ["gpuclaims"], "verbs": ["create"]}]);
        store.seed(
            "ClusterRole",
            role(
                "tenant-edit",
                json!({"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
                claims.clone(),
            ),
        );
        aggregate_all(&store);
        assert_eq!(rules_of(&store, "edit"), claims);
        assert_eq!(
            rules_of(&store, "view"),
            json!([]),
            "view selects another label"
        );
        let mut relabelled = store.get("ClusterRole", "", "tenant-edit").unwrap();
        relabelled["metadata"]["labels"] = json!({"team": "x"});
        store
            .update("ClusterRole", relabelled, Subresource::Main)
            .unwrap();
        aggregate_all(&store);
        assert_eq!(rules_of(&store, "edit"), json!([]));
    }

    #[test]
    fn rules_are_gathered_in_name_order_each_once_and_a_second_pass_writes_nothing() {
        let store = crate::new_store();
        builtin_roles(&store);
        let label = json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"});
        let read = json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]});
        let quotas = json!({"apiGroups": ["gpu.cozystack.io"], "resources": ["gpuquotas"], "verbs": ["get"]});
        store.seed(
            "ClusterRole",
            role("b", label.clone(), json!([read, quotas])),
        );
        store.seed("ClusterRole", role("a", label, json!([quotas])));
        aggregate_all(&store);
        assert_eq!(rules_of(&store, "view"), json!([quotas, read]));
        let rv =
            store.get("ClusterRole", "", "view").unwrap()["metadata"]["resourceVersion"].clone();
        aggregate_all(&store);
        let again =
            store.get("ClusterRole", "", "view").unwrap()["metadata"]["resourceVersion"].clone();
        assert_eq!(rv, again);
    }

    #[test]
    fn a_role_that_joins_view_reaches_edit_and_admin_through_the_built_in_labels() {
        let store = crate::new_store();
        builtin_roles(&store);
        let read = json!([{"apiGroups": ["gpu.cozystack.io"], "resources": ["gpuquotas"], "verbs": ["get"]}]);
        store.seed(
            "ClusterRole",
            role(
                "reader",
                json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"}),
                read.clone(),
            ),
        );
        // Each write is a change the controller sees again: view, then
        // edit (which gathers view), then admin (which gathers edit).
        for _ in 0..3 {
            aggregate_all(&store);
        }
        for r in ["view", "edit", "admin"] {
            assert_eq!(rules_of(&store, r), read, "{r}");
        }
    }
}
