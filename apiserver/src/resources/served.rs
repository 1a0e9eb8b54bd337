//! What a server serves at one moment (the built-ins and its CRDs'
//! resources), rebuilt when a CRD changes, and how a path reads against it.

use super::{BUILTIN, Custom, Resource, custom_of};
use crate::store::Store;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// What a server serves at one moment.
#[derive(Debug)]
pub struct Served {
    /// The built-in kinds, each at the version this server serves it.
    pub builtin: Vec<Resource>,
    pub custom: Vec<Custom>,
    /// OpenAPI documents by group version, made once per CRD set.
    pub openapi: std::sync::Mutex<
        std::collections::HashMap<(String, String), std::sync::Arc<serde_json::Value>>,
    >,
}

impl Default for Served {
    /// The built-ins at their newest versions, no custom resources.
    fn default() -> Self {
        Self {
            builtin: BUILTIN.to_vec(),
            custom: Vec::new(),
            openapi: std::sync::Mutex::default(),
        }
    }
}

impl Served {
    /// Every served resource: the built-ins, then the custom ones.
    pub fn all(&self) -> impl Iterator<Item = &Resource> {
        self.builtin
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
    /// Built-in kinds served at another version than `BUILTIN`'s.
    versions: Vec<(&'static str, &'static str)>,
}

/// The built-in kinds, with `versions` (kind, version) moving some to
/// the version an older Kubernetes serves them at.
pub fn builtin_at(versions: &[(&'static str, &'static str)]) -> Vec<Resource> {
    BUILTIN
        .iter()
        .map(|r| match versions.iter().find(|(k, _)| *k == r.kind) {
            Some((_, v)) => Resource { version: v, ..*r },
            None => *r,
        })
        .collect()
}

impl Registry {
    /// A registry serving the built-in kinds `versions` names at those
    /// versions (DeviceTaintRule at v1beta2, as Kubernetes 1.36 does).
    pub fn with_versions(versions: Vec<(&'static str, &'static str)>) -> Self {
        let served = Served {
            builtin: builtin_at(&versions),
            ..Served::default()
        };
        Self {
            cache: std::sync::Mutex::new((Vec::new(), std::sync::Arc::new(served))),
            versions,
        }
    }

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
            builtin: builtin_at(&self.versions),
            custom,
            ..Default::default()
        });
        *cache = (key, served.clone());
        served
    }
}

/// A request path, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The subresource addressed, if any.
    pub sub: Option<Sub>,
}

/// The subresources served, each as upstream's registry serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sub {
    /// `status`: the status alone is written.
    Status,
    /// `pods/eviction`: a POST evicts the pod (handlers/evict.rs).
    #[cfg(feature = "conformance")]
    Eviction,
    /// `scale` of a custom resource that declares one: an autoscaling/v1
    /// Scale over its replicas paths (handlers/views.rs).
    Scale,
    /// `pods/ephemeralcontainers`: the pod, where only ephemeral
    /// containers may be added (handlers/views.rs).
    #[cfg(feature = "conformance")]
    EphemeralContainers,
    /// `certificatesigningrequests/approval`: the CSR, where only its
    /// conditions change (handlers/views.rs).
    #[cfg(feature = "conformance")]
    Approval,
    /// `serviceaccounts/token`: a POSTed TokenRequest answered with a
    /// token the server accepts (handlers/token.rs).
    Token,
}

impl Sub {
    fn named(name: &str) -> Option<Self> {
        Some(match name {
            "status" => Self::Status,
            #[cfg(feature = "conformance")]
            "eviction" => Self::Eviction,
            "scale" => Self::Scale,
            #[cfg(feature = "conformance")]
            "ephemeralcontainers" => Self::EphemeralContainers,
            #[cfg(feature = "conformance")]
            "approval" => Self::Approval,
            "token" => Self::Token,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Status => "status",
            #[cfg(feature = "conformance")]
            Self::Eviction => "eviction",
            Self::Scale => "scale",
            #[cfg(feature = "conformance")]
            Self::EphemeralContainers => "ephemeralcontainers",
            #[cfg(feature = "conformance")]
            Self::Approval => "approval",
            Self::Token => "token",
        }
    }

    /// Every subresource, in discovery's order.
    pub const ALL: &[Sub] = &[
        Self::Status,
        Self::Scale,
        #[cfg(feature = "conformance")]
        Self::Eviction,
        #[cfg(feature = "conformance")]
        Self::EphemeralContainers,
        #[cfg(feature = "conformance")]
        Self::Approval,
        Self::Token,
    ];

    /// What discovery says of this subresource of `r`: the group,
    /// version and kind it answers with (empty group and version: `r`'s
    /// own), and its verbs.
    pub fn discovered(
        self,
        r: &Resource,
    ) -> (
        &'static str,
        &'static str,
        &'static str,
        &'static [&'static str],
    ) {
        const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];
        match self {
            Self::Status => ("", "", r.kind, GET_PATCH_UPDATE),
            #[cfg(feature = "conformance")]
            Self::EphemeralContainers | Self::Approval => ("", "", r.kind, GET_PATCH_UPDATE),
            Self::Scale => ("autoscaling", "v1", "Scale", GET_PATCH_UPDATE),
            #[cfg(feature = "conformance")]
            Self::Eviction => ("policy", "v1", "Eviction", &["create"]),
            Self::Token => ("authentication.k8s.io", "v1", "TokenRequest", &["create"]),
        }
    }

    /// Whether this subresource is another view of its object, read with
    /// GET and written with PUT or a patch (handlers/subresource.rs).
    pub fn is_view(self) -> bool {
        match self {
            Self::Scale => true,
            #[cfg(feature = "conformance")]
            Self::EphemeralContainers | Self::Approval => true,
            _ => false,
        }
    }

    /// Whether `r` has this subresource.
    pub fn of(self, r: &Resource) -> bool {
        let builtin = !r.custom;
        match self {
            Self::Status => r.status,
            #[cfg(feature = "conformance")]
            Self::Eviction | Self::EphemeralContainers => builtin && r.kind == "Pod",
            Self::Scale => r.scale.is_some(),
            #[cfg(feature = "conformance")]
            Self::Approval => builtin && r.kind == "CertificateSigningRequest",
            Self::Token => builtin && r.kind == "ServiceAccount",
        }
    }
}

impl Target {
    /// The status subresource.
    pub fn is_status(&self) -> bool {
        self.sub == Some(Sub::Status)
    }
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
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, sub] => (*p, Some(n.to_string()), Some(Sub::named(sub)?)),
        _ => return None,
    };
    let resource = find(group, version, plural)?;
    if (namespace.is_some() && !resource.namespaced) || sub.is_some_and(|s| !s.of(&resource)) {
        return None;
    }
    Some(Target {
        resource,
        namespace,
        name,
        sub,
    })
}

#[cfg(test)]
mod version_tests {
    use super::*;

    #[test]
    fn a_kind_served_at_an_older_version_is_found_there_and_not_at_the_newest() {
        let served = Served {
            builtin: builtin_at(&[("DeviceTaintRule", "v1beta2")]),
            ..Served::default()
        };
        let old = served.parse("/apis/resource.k8s.io/v1beta2/devicetaintrules");
        assert_eq!(old.map(|t| t.resource.kind), Some("DeviceTaintRule"));
        assert!(
            served
                .parse("/apis/resource.k8s.io/v1/devicetaintrules")
                .is_none()
        );
        // The group's other kinds stay at v1.
        assert!(
            served
                .parse("/apis/resource.k8s.io/v1/resourceclaims")
                .is_some()
        );
    }
}
