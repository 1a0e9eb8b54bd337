//! The resources the embedded API server serves, and how their paths
//! read: the built-in kinds (`BUILTIN`), and the custom resources of the
//! CustomResourceDefinitions stored in it, as kube-apiserver serves a CRD
//! once it is created (`Registry`).

use crate::store::Store;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

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
    /// Served from a CustomResourceDefinition.
    pub custom: bool,
}

impl Resource {
    /// Served from a CustomResourceDefinition, not built in.
    pub fn is_custom(&self) -> bool {
        self.custom
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
        custom: false,
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

/// The built-in kinds: Pod, Node, Namespace, Lease and Event (core and
/// events.k8s.io), which clients, the controller and leader election use;
/// RBAC, which SubjectAccessReviews are judged by; the token and access
/// reviews that delegated authentication and authorization send; what a
/// chart installs (ConfigMaps, Services, Deployments, webhooks, ...),
/// stored and served with no behaviour beyond the API machinery; and
/// CustomResourceDefinitions, whose resources the `Registry` serves.
pub const BUILTIN: &[Resource] = &[
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
    // What charts and operators install, stored as they are.
    Resource {
        short_names: &["cm"],
        ..plain("", "configmaps", "configmap", "ConfigMap", true)
    },
    plain("", "secrets", "secret", "Secret", true),
    Resource {
        short_names: &["sa"],
        ..plain(
            "",
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            true,
        )
    },
    Resource {
        short_names: &["svc"],
        categories: &["all"],
        status: true,
        ..plain("", "services", "service", "Service", true)
    },
    Resource {
        short_names: &["ep"],
        ..plain("", "endpoints", "endpoints", "Endpoints", true)
    },
    workload(
        "apps",
        "deployments",
        "deployment",
        "Deployment",
        &["deploy"],
    ),
    workload(
        "apps",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        &["sts"],
    ),
    workload("apps", "daemonsets", "daemonset", "DaemonSet", &["ds"]),
    workload("apps", "replicasets", "replicaset", "ReplicaSet", &["rs"]),
    workload("batch", "jobs", "job", "Job", &[]),
    workload("batch", "cronjobs", "cronjob", "CronJob", &["cj"]),
    Resource {
        short_names: &["pdb"],
        status: true,
        generation: true,
        ..plain(
            "policy",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            "PodDisruptionBudget",
            true,
        )
    },
    Resource {
        short_names: &["netpol"],
        generation: true,
        ..plain(
            "networking.k8s.io",
            "networkpolicies",
            "networkpolicy",
            "NetworkPolicy",
            true,
        )
    },
    Resource {
        short_names: &["pc"],
        ..plain(
            "scheduling.k8s.io",
            "priorityclasses",
            "priorityclass",
            "PriorityClass",
            false,
        )
    },
    plain(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        "ValidatingWebhookConfiguration",
        false,
    ),
    Resource {
        short_names: &["crd", "crds"],
        status: true,
        generation: true,
        ..plain(
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            false,
        )
    },
];

/// A namespaced workload of `group`/v1: spec, status, generation.
const fn workload(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    short_names: &'static [&'static str],
) -> Resource {
    Resource {
        short_names,
        status: true,
        generation: true,
        categories: &["all"],
        ..plain(group, plural, singular, kind, true)
    }
}

/// The store keys of the built-in kinds with a status subresource (the
/// custom resources' are set as their CRDs are stored).
pub fn status_kinds() -> Vec<&'static str> {
    let mut out: Vec<&str> = BUILTIN
        .iter()
        .filter(|r| r.status)
        .map(|r| r.store_kind)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The store keys of the built-in kinds whose objects carry no generation.
pub fn kinds_without_generation() -> Vec<&'static str> {
    let mut out: Vec<&str> = BUILTIN
        .iter()
        .filter(|r| !r.generation)
        .map(|r| r.store_kind)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A name kept for the life of the process: a CRD's names become a
/// Resource's `&'static str`s. Each distinct text is kept once, so serving
/// the same CRDs again keeps nothing more.
fn interned(text: &str) -> &'static str {
    static NAMES: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<&'static str>>> =
        std::sync::OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(text) {
        return n;
    }
    let n: &'static str = Box::leak(text.to_string().into_boxed_str());
    names.insert(n);
    n
}

fn interned_list(list: &Option<Vec<String>>) -> &'static [&'static str] {
    let v: Vec<&'static str> = list.iter().flatten().map(|s| interned(s)).collect();
    if v.is_empty() {
        return &[];
    }
    // Interned as a whole too: the same list is leaked once.
    static LISTS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashSet<&'static [&'static str]>>,
    > = std::sync::OnceLock::new();
    let mut lists = LISTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(l) = lists.get(v.as_slice()) {
        return l;
    }
    let l: &'static [&'static str] = Box::leak(v.into_boxed_slice());
    lists.insert(l);
    l
}

/// One served custom resource and its CRD.
#[derive(Clone, Debug)]
pub struct Custom {
    pub resource: Resource,
    /// The served version's `openAPIV3Schema`.
    pub schema: Option<serde_json::Value>,
    /// The served version's printer columns: (name, type, jsonPath).
    pub columns: Vec<(String, String, String)>,
}

/// What a CRD serves: its storage version (one version per kind: the
/// store keeps objects by kind, with no conversion between versions).
pub fn custom_of(crd: &CustomResourceDefinition) -> Option<Custom> {
    let spec = &crd.spec;
    let v = spec
        .versions
        .iter()
        .find(|v| v.storage && v.served)
        .or_else(|| spec.versions.iter().find(|v| v.served))?;
    let names = &spec.names;
    let singular = names
        .singular
        .clone()
        .unwrap_or_else(|| names.kind.to_lowercase());
    let resource = Resource {
        group: interned(&spec.group),
        version: interned(&v.name),
        plural: interned(&names.plural),
        singular: interned(&singular),
        kind: interned(&names.kind),
        store_kind: interned(&names.kind),
        namespaced: spec.scope == "Namespaced",
        status: v.subresources.as_ref().is_some_and(|s| s.status.is_some()),
        short_names: interned_list(&names.short_names),
        categories: interned_list(&names.categories),
        generation: true,
        review: false,
        custom: true,
    };
    let schema = v
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| serde_json::to_value(s).ok());
    let columns = v
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.type_.clone(), c.json_path.clone()))
        .collect();
    Some(Custom {
        resource,
        schema,
        columns,
    })
}

/// What a server serves at one moment.
#[derive(Debug, Default)]
pub struct Served {
    pub custom: Vec<Custom>,
    /// OpenAPI documents by group version, made once per CRD set.
    pub openapi: std::sync::Mutex<
        std::collections::HashMap<(String, String), std::sync::Arc<serde_json::Value>>,
    >,
}

impl Served {
    /// Every served resource: the built-ins, then the custom ones.
    pub fn all(&self) -> impl Iterator<Item = &Resource> {
        BUILTIN
            .iter()
            .chain(self.custom.iter().map(|c| &c.resource))
    }

    /// The custom resource of a kind, with its schema and columns.
    pub fn custom(&self, kind: &str) -> Option<&Custom> {
        self.custom.iter().find(|c| c.resource.kind == kind)
    }

    /// The resource a store kind is served as.
    pub fn by_store_kind(&self, kind: &str) -> Option<&Resource> {
        self.all().find(|r| r.store_kind == kind)
    }

    /// Reads `/api/v1/...` and `/apis/<group>/<version>/...` paths.
    pub fn parse(&self, path: &str) -> Option<Target> {
        parse_with(path, |g, v, p| {
            self.all()
                .find(|r| r.group == g && r.version == v && r.plural == p)
                .copied()
        })
    }
}

/// The CRDs' (name, resourceVersion)s a `Served` was built from.
type Built = (Vec<(String, String)>, std::sync::Arc<Served>);

/// The CRDs stored in a server, served: rebuilt when one of them changes.
#[derive(Default)]
pub struct Registry {
    cache: std::sync::Mutex<Built>,
}

impl Registry {
    /// What `store` serves now (the store's status subresources follow).
    pub fn served(&self, store: &Store) -> std::sync::Arc<Served> {
        let (crds, _) = store.list("CustomResourceDefinition");
        let key: Vec<(String, String)> = crds
            .iter()
            .map(|c| {
                let m = &c["metadata"];
                let s = |f: &str| m[f].as_str().unwrap_or_default().to_string();
                (s("name"), s("resourceVersion"))
            })
            .collect();
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.0 == key {
            return cache.1.clone();
        }
        let custom: Vec<Custom> = crds
            .into_iter()
            .filter_map(|c| serde_json::from_value::<CustomResourceDefinition>(c).ok())
            .filter_map(|c| custom_of(&c))
            .collect();
        for c in &custom {
            store.set_status_subresource(c.resource.store_kind, c.resource.status);
        }
        let served = std::sync::Arc::new(Served {
            custom,
            ..Default::default()
        });
        *cache = (key, served.clone());
        served
    }
}

/// A request path, read.
#[derive(Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
}

/// Reads a path against what `find` (group, version, plural) serves.
fn parse_with(path: &str, find: impl Fn(&str, &str, &str) -> Option<Resource>) -> Option<Target> {
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
    let resource = find(group, version, plural)?;
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

/// What a server with some real CRDs installed serves (unit tests: the
/// ones in this repository's deploy/crds, structural CRDs with defaults,
/// enums, bounds and CEL rules).
#[cfg(test)]
pub fn served_for_tests() -> Served {
    let texts = [
        include_str!("../../deploy/crds/gpuclasses.yaml"),
        include_str!("../../deploy/crds/gpuclaims.yaml"),
        include_str!("../../deploy/crds/gpuallocations.yaml"),
    ];
    let crds: Vec<CustomResourceDefinition> = texts
        .iter()
        .map(|t| crate::yaml::from_str(t).expect("a CRD"))
        .collect();
    Served {
        custom: crds.iter().filter_map(custom_of).collect(),
        ..Default::default()
    }
}
