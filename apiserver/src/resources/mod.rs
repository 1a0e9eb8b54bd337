//! The resources the embedded API server serves, and how their paths
//! read: the built-in kinds (`BUILTIN`), and the custom resources of the
//! CustomResourceDefinitions stored in it, as kube-apiserver serves a CRD
//! once it is created (`Registry`).

mod builtin;
mod custom;
mod served;

pub use builtin::{BUILTIN, kinds_without_generation, status_kinds};
pub use custom::{Custom, custom_of};
pub use served::{Registry, Served, Sub, Target, builtin_at};

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
    /// Only read (get, list), as ComponentStatuses: the server keeps them.
    pub read_only: bool,
    /// A custom resource's scale subresource, as its CRD declares it.
    pub scale: Option<ScalePaths>,
}

/// Where a custom resource keeps what its `scale` subresource shows
/// (`.spec.replicas`-style JSON paths, from the CRD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: &'static str,
    pub status_replicas: &'static str,
    pub label_selector: Option<&'static str>,
}

/// The verbs of a resource that can be written.
const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

impl Resource {
    /// The verbs discovery lists.
    pub fn verbs(&self) -> &'static [&'static str] {
        if self.review {
            &["create"]
        } else if self.read_only {
            &["get", "list"]
        } else {
            VERBS
        }
    }

    /// Served from a CustomResourceDefinition, not built in.
    pub fn is_custom(&self) -> bool {
        self.custom
    }

    /// The resource as apimachinery names it in messages: the plural,
    /// group-qualified outside the core group (`gpuclaims.gpu.cozystack.io`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// enums, bounds and CEL rules).
/// What a server with some real CRDs installed serves (unit tests: the
/// ones in this repository's deploy/crds, structural CRDs with defaults,
#[cfg(test)]
pub fn served_for_tests() -> Served {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let texts = [
        include_str!("../../tests/crds/gpuclasses.yaml"),
        include_str!("../../tests/crds/gpuclaims.yaml"),
        include_str!("../../tests/crds/gpuallocations.yaml"),
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
