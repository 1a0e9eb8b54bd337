//! RBAC's authorizer, as kube-apiserver's (plugin/pkg/auth/authorizer/rbac)
//! judges a request: the bindings whose subjects name the user or one of
//! its groups, the role each refers to, and a rule of that role matching
//! the request. Allowing only: RBAC never denies, it has no opinion. The
//! server judges SubjectAccessReviews with it; the stored Roles and
//! bindings are what it reads, as they are after `kubectl apply`.
//!
//! An aggregated ClusterRole's rules are what the aggregation controller
//! (`aggregation`) wrote into it, as kube-controller-manager's. The
//! `system:masters` superuser group is allowed before RBAC is asked, as
//! kube-apiserver allows it.

use crate::store::Store;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleRef, Subject};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Who asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

/// What is asked: a resource or a path that is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Resource {
        verb: String,
        group: String,
        resource: String,
        subresource: String,
        namespace: String,
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

/// The answer, with the reason kube-apiserver gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub reason: String,
}

/// Judges `request` by the RBAC objects in `store`.
pub fn authorize(store: &Store, user: &User, request: &Request) -> Decision {
    if user.groups.iter().any(|g| g == "system:masters") {
        return Decision {
            allowed: true,
            reason: String::new(),
        };
    }
    let namespace = match request {
        Request::Resource { namespace, .. } => namespace.as_str(),
        Request::NonResource { .. } => "",
    };
    // ClusterRoleBindings grant everywhere; RoleBindings in their namespace,
    // and only for namespaced resources (never for a path that is none).
    let mut bindings: Vec<(&str, Value)> = store
        .list("ClusterRoleBinding")
        .0
        .into_iter()
        .map(|b| ("ClusterRoleBinding", b))
        .collect();
    if !namespace.is_empty() {
        let (in_ns, _, _) =
            store.list_page("RoleBinding", Some(namespace), None, usize::MAX, |_| true);
        bindings.extend(in_ns.into_iter().map(|b| ("RoleBinding", b)));
    }
    for (kind, binding) in bindings {
        let binding_ns = binding["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default();
        let subjects: Vec<Subject> = field(&binding, "subjects").unwrap_or_default();
        let Some(subject) = subjects
            .iter()
            .find(|s| subject_matches(s, user, binding_ns))
        else {
            continue;
        };
        let Some(role_ref) = field::<RoleRef>(&binding, "roleRef") else {
            continue;
        };
        if rules(store, &role_ref, binding_ns)
            .iter()
            .any(|r| rule_allows(r, request))
        {
            let name = binding["metadata"]["name"].as_str().unwrap_or_default();
            let at = if binding_ns.is_empty() {
                String::new()
            } else {
                format!(" in namespace {binding_ns:?}")
            };
            return Decision {
                allowed: true,
                reason: format!(
                    "RBAC: allowed by {kind} {name:?} of {} {:?} to {} {:?}{at}",
                    role_ref.kind, role_ref.name, subject.kind, subject.name
                ),
            };
        }
    }
    Decision {
        allowed: false,
        reason: String::new(),
    }
}

fn field<T: DeserializeOwned>(obj: &Value, f: &str) -> Option<T> {
    serde_json::from_value(obj.get(f)?.clone()).ok()
}

/// The rules of the role a binding refers to (none when it is missing).
fn rules(store: &Store, role_ref: &RoleRef, binding_ns: &str) -> Vec<PolicyRule> {
    let stored = match role_ref.kind.as_str() {
        "ClusterRole" => store.get("ClusterRole", "", &role_ref.name),
        "Role" if !binding_ns.is_empty() => store.get("Role", binding_ns, &role_ref.name),
        _ => None,
    };
    let Some(obj) = stored else {
        return Vec::new();
    };
    let rules = match role_ref.kind.as_str() {
        "ClusterRole" => serde_json::from_value::<ClusterRole>(obj)
            .ok()
            .and_then(|r| r.rules),
        _ => serde_json::from_value::<Role>(obj)
            .ok()
            .and_then(|r| r.rules),
    };
    rules.unwrap_or_default()
}

fn subject_matches(s: &Subject, user: &User, binding_ns: &str) -> bool {
    match s.kind.as_str() {
        "User" => s.name == user.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s.namespace.as_deref().unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        _ => false,
    }
}

fn any_or(list: &[String], want: &str) -> bool {
    list.iter().any(|v| v == "*" || v == want)
}

/// One rule against one request, as rbac/v1's helpers match them.
pub fn rule_allows(rule: &PolicyRule, request: &Request) -> bool {
    match request {
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let resources = rule.resources.as_deref().unwrap_or_default();
            let combined = if subresource.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{subresource}")
            };
            let resource_ok = resources.iter().any(|r| {
                r == "*"
                    || *r == combined
                    || (!subresource.is_empty() && *r == format!("*/{subresource}"))
            });
            let names = rule.resource_names.as_deref().unwrap_or_default();
            any_or(&rule.verbs, verb)
                && any_or(rule.api_groups.as_deref().unwrap_or_default(), group)
                && resource_ok
                && (names.is_empty() || names.contains(name))
        }
        Request::NonResource { verb, path } => {
            let urls = rule.non_resource_urls.as_deref().unwrap_or_default();
            any_or(&rule.verbs, verb)
                && urls.iter().any(|u| {
                    u == "*"
                        || u == path
                        || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn store() -> Store {
        let s = Store::new(Arc::new(k8s_openapi::jiff::Timestamp::now), &[]);
        s.seed(
            "ClusterRole",
            json!({"metadata": {"name": "metrics-reader"}, "rules": [
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            ]}),
        );
        s.seed(
            "ClusterRole",
            json!({"metadata": {"name": "debug-reader"}, "rules": [
                {"nonResourceURLs": ["/debug", "/debug/*"], "verbs": ["get"]},
            ]}),
        );
        s.seed(
            "ClusterRole",
            json!({"metadata": {"name": "claims-status"}, "rules": [
                {"apiGroups": ["gpu.cozystack.io"], "resources": ["gpuclaims/status"], "verbs": ["update"]},
                {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["only"], "verbs": ["get"]},
            ]}),
        );
        s.seed(
            "ClusterRoleBinding",
            json!({"metadata": {"name": "prometheus"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}]}),
        );
        s.seed(
            "ClusterRoleBinding",
            json!({"metadata": {"name": "oncall"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "debug-reader"},
                "subjects": [{"kind": "Group", "name": "oncall"}]}),
        );
        s.seed(
            "RoleBinding",
            json!({"metadata": {"name": "tenant", "namespace": "t1"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "claims-status"},
                "subjects": [{"kind": "User", "name": "alice"}]}),
        );
        s
    }

    fn path(verb: &str, p: &str) -> Request {
        Request::NonResource {
            verb: verb.into(),
            path: p.into(),
        }
    }

    fn res(ns: &str, resource: &str, sub: &str, name: &str, verb: &str) -> Request {
        let group = if resource == "pods" {
            ""
        } else {
            "gpu.cozystack.io"
        };
        Request::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn rbac_decisions_as_kube_apiserver_makes_them() {
        let s = store();
        let sa = user(
            "system:serviceaccount:monitoring:prometheus",
            &["system:authenticated"],
        );
        let oncall = user("bob", &["oncall", "system:authenticated"]);
        let alice = user("alice", &["system:authenticated"]);
        let cases: &[(&User, Request, bool)] = &[
            (&sa, path("get", "/metrics"), true),
            (&sa, path("post", "/metrics"), false),
            (&sa, path("get", "/debug"), false),
            (&sa, path("get", "/metrics/extra"), false),
            (&oncall, path("get", "/debug"), true),
            (&oncall, path("get", "/debug/claims/t/c"), true),
            (&oncall, path("get", "/metrics"), false),
            (
                &alice,
                res("t1", "gpuclaims", "status", "c", "update"),
                true,
            ),
            (&alice, res("t1", "gpuclaims", "", "c", "update"), false),
            (
                &alice,
                res("t2", "gpuclaims", "status", "c", "update"),
                false,
            ),
            (&alice, res("t1", "pods", "", "only", "get"), true),
            (&alice, res("t1", "pods", "", "other", "get"), false),
            // A RoleBinding grants nothing outside a namespace.
            (&alice, path("get", "/metrics"), false),
            (
                &user("system:anonymous", &["system:unauthenticated"]),
                path("get", "/debug"),
                false,
            ),
            (
                &user("root", &["system:masters"]),
                path("get", "/anything"),
                true,
            ),
        ];
        for (u, req, want) in cases {
            let d = authorize(&s, u, req);
            assert_eq!(d.allowed, *want, "{u:?} {req:?}: {d:?}");
        }
        let d = authorize(&s, &sa, &path("get", "/metrics"));
        assert_eq!(
            d.reason,
            "RBAC: allowed by ClusterRoleBinding \"prometheus\" of ClusterRole \"metrics-reader\" to ServiceAccount \"prometheus\""
        );
    }

    #[test]
    fn a_binding_to_a_missing_role_grants_nothing() {
        let s = store();
        s.seed(
            "ClusterRoleBinding",
            json!({"metadata": {"name": "dangling"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gone"},
                "subjects": [{"kind": "User", "name": "carol"}]}),
        );
        assert!(!authorize(&s, &user("carol", &[]), &path("get", "/metrics")).allowed);
    }
}
