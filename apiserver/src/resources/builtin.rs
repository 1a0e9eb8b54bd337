//! The built-in kinds a controller and a chart use, as kube-apiserver
//! serves them.

use super::Resource;

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
        read_only: false,
        custom: false,
        scale: None,
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
const DRA: &str = "resource.k8s.io";

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
    scalable(workload(
        "apps",
        "deployments",
        "deployment",
        "Deployment",
        &["deploy"],
    )),
    scalable(workload(
        "apps",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        &["sts"],
    )),
    workload("apps", "daemonsets", "daemonset", "DaemonSet", &["ds"]),
    scalable(workload(
        "apps",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        &["rs"],
    )),
    // The conformance-only kinds and subresources: the `conformance`
    // feature (Cargo.toml says why).
    #[cfg(feature = "conformance")]
    scalable(workload(
        "",
        "replicationcontrollers",
        "replicationcontroller",
        "ReplicationController",
        &["rc"],
    )),
    workload("batch", "jobs", "job", "Job", &[]),
    workload("batch", "cronjobs", "cronjob", "CronJob", &["cj"]),
    #[cfg(feature = "conformance")]
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
    // The control plane's components, as the deprecated API still lists
    // them (bootstrap.rs keeps them; kube-runtime's tests read one).
    #[cfg(feature = "conformance")]
    Resource {
        short_names: &["cs"],
        read_only: true,
        ..plain(
            "",
            "componentstatuses",
            "componentstatus",
            "ComponentStatus",
            false,
        )
    },
    // The API's group versions as kube-aggregator lists them
    // (bootstrap.rs stores one per group version served).
    Resource {
        status: true,
        ..plain(
            "apiregistration.k8s.io",
            "apiservices",
            "apiservice",
            "APIService",
            false,
        )
    },
    // What kube-rs's tests and a kubelet's client certificates use: a
    // request, its approval (a subresource), its signed certificate.
    #[cfg(feature = "conformance")]
    Resource {
        short_names: &["csr"],
        status: true,
        ..plain(
            "certificates.k8s.io",
            "certificatesigningrequests",
            "certificatesigningrequest",
            "CertificateSigningRequest",
            false,
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
    // Dynamic Resource Allocation as kube-apiserver 1.37 serves it
    // (`pkg/registry/resource/`): no short names or categories; a claim's
    // and a taint rule's status their own subresource; generation kept
    // where the strategy sets it (classes, slices, taint rules).
    Resource {
        generation: true,
        ..plain(DRA, "deviceclasses", "deviceclass", "DeviceClass", false)
    },
    Resource {
        generation: true,
        ..plain(
            DRA,
            "resourceslices",
            "resourceslice",
            "ResourceSlice",
            false,
        )
    },
    Resource {
        status: true,
        ..plain(
            DRA,
            "resourceclaims",
            "resourceclaim",
            "ResourceClaim",
            true,
        )
    },
    plain(
        DRA,
        "resourceclaimtemplates",
        "resourceclaimtemplate",
        "ResourceClaimTemplate",
        true,
    ),
    Resource {
        status: true,
        generation: true,
        ..plain(
            DRA,
            "devicetaintrules",
            "devicetaintrule",
            "DeviceTaintRule",
            false,
        )
    },
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
/// A workload with replicas: its `scale` subresource over
/// `.spec.replicas` (what `kubectl scale` and autoscalers write).
const fn scalable(r: Resource) -> Resource {
    Resource {
        scale: Some(super::ScalePaths {
            spec_replicas: ".spec.replicas",
            status_replicas: ".status.replicas",
            label_selector: None,
        }),
        ..r
    }
}

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
