//! The resources the embedded API server serves, and how their paths read.

/// One served resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    /// The kind's key in the store: the kind (core and events.k8s.io
    /// Events share one store, as in Kubernetes).
    pub store_kind: &'static str,
    pub namespaced: bool,
    /// Served with a status subresource.
    pub status: bool,
    pub short_names: &'static [&'static str],
    /// Groups `kubectl get <category>` expands to (`all`).
    pub categories: &'static [&'static str],
    /// Objects carry `metadata.generation` (custom resources and pods; not
    /// nodes, namespaces, events or leases).
    pub generation: bool,
    /// A review (TokenReview, SubjectAccessReview): only created, answered
    /// with its status filled in, and never stored.
    pub review: bool,
}

impl Resource {
    /// Served from a CustomResourceDefinition, not built in.
    pub fn is_custom(&self) -> bool {
        !(self.group.is_empty() || self.group.ends_with(".k8s.io"))
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const fn r(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    status: bool,
) -> Resource {
    Resource {
        group,
        version,
        plural,
        singular,
        kind,
        store_kind: kind,
        namespaced,
        status,
        short_names: &[],
        categories: &[],
        generation: true,
        review: false,
    }
}

/// A built-in kind served with no behaviour beyond the API machinery.
const fn plain(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        generation: false,
        ..r(group, "v1", plural, singular, kind, namespaced, false)
    }
}

/// A review: POSTed, answered, not stored.
const fn review(group: &'static str, plural: &'static str, kind: &'static str) -> Resource {
    Resource {
        review: true,
        ..plain(group, plural, "", kind, false)
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";

const GPU: &str = "gpu.cozystack.io";
const V1A1: &str = "v1alpha1";

/// What the server serves: the SPEC's kinds; Namespace, Lease and Event
/// (core and events.k8s.io), which clients and leader election use; RBAC,
/// which SubjectAccessReviews are judged by; and the token and access
/// reviews that delegated authentication and authorization send.
pub const RESOURCES: &[Resource] = &[
    r(GPU, V1A1, "gpuclasses", "gpuclass", "GPUClass", false, true),
    Resource {
        short_names: &["gc"],
        ..r(GPU, V1A1, "gpuclaims", "gpuclaim", "GPUClaim", true, true)
    },
    r(
        GPU,
        V1A1,
        "gpuallocations",
        "gpuallocation",
        "GPUAllocation",
        true,
        false,
    ),
    Resource {
        short_names: &["vmi", "vmis"],
        categories: &["all"],
        ..r(
            "kubevirt.io",
            "v1",
            "virtualmachineinstances",
            "virtualmachineinstance",
            "VirtualMachineInstance",
            true,
            true,
        )
    },
    Resource {
        short_names: &["po"],
        categories: &["all"],
        ..r("", "v1", "pods", "pod", "Pod", true, true)
    },
    Resource {
        short_names: &["no"],
        generation: false,
        ..r("", "v1", "nodes", "node", "Node", false, true)
    },
    Resource {
        short_names: &["ns"],
        generation: false,
        ..r(
            "",
            "v1",
            "namespaces",
            "namespace",
            "Namespace",
            false,
            false,
        )
    },
    Resource {
        short_names: &["ev"],
        generation: false,
        ..r("", "v1", "events", "event", "Event", true, false)
    },
    // Stored as core Events, served converted (events.rs).
    Resource {
        generation: false,
        ..r(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            true,
            false,
        )
    },
    Resource {
        generation: false,
        ..r(
            "coordination.k8s.io",
            "v1",
            "leases",
            "lease",
            "Lease",
            true,
            false,
        )
    },
    plain(RBAC, "clusterroles", "clusterrole", "ClusterRole", false),
    plain(
        RBAC,
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
    ),
    plain(RBAC, "roles", "role", "Role", true),
    plain(RBAC, "rolebindings", "rolebinding", "RoleBinding", true),
    plain(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        "MutatingWebhookConfiguration",
        false,
    ),
    review("authentication.k8s.io", "tokenreviews", "TokenReview"),
    review(
        "authorization.k8s.io",
        "subjectaccessreviews",
        "SubjectAccessReview",
    ),
];

/// The store keys of the kinds with a status subresource.
pub fn status_kinds() -> Vec<&'static str> {
    store_kinds(|r| r.status)
}

/// The store keys of the resources `pick` accepts, each once.
pub fn store_kinds(pick: impl Fn(&Resource) -> bool) -> Vec<&'static str> {
    let mut out: Vec<&str> = RESOURCES
        .iter()
        .filter(|r| pick(r))
        .map(|r| r.store_kind)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The store keys of the kinds whose objects carry no generation.
pub fn kinds_without_generation() -> Vec<&'static str> {
    store_kinds(|r| !r.generation)
}

/// The resource a store kind is served as.
pub fn by_store_kind(kind: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.store_kind == kind)
}

/// A request path, read.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

/// Reads `/api/v1/...` and `/apis/<group>/<version>/...` paths.
pub fn parse(path: &str) -> Option<Target> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, status) = match rest {
        [p] => (*p, None, false),
        [p, n] => (*p, Some(n.to_string()), false),
        [p, n, "status"] => (*p, Some(n.to_string()), true),
        _ => return None,
    };
    let resource = *RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)?;
    if (namespace.is_some() && !resource.namespaced) || (status && !resource.status) {
        return None;
    }
    Some(Target {
        resource,
        namespace,
        name,
        status,
    })
}
