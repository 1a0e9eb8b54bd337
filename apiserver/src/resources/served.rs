//! What a server serves at one moment (the built-ins and its CRDs'
//! resources), rebuilt when a CRD changes, and how a path reads against it.

use super::{BUILTIN, Custom, Resource, custom_of};
use crate::store::Store;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub status: bool,
    /// `pods/{name}/eviction`: a POST evicts the pod (handlers/evict.rs).
    pub eviction: bool,
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
    let (plural, name, status, eviction) = match rest {
        [p] => (*p, None, false, false),
        [p, n] => (*p, Some(n.to_string()), false, false),
        [p, n, "status"] => (*p, Some(n.to_string()), true, false),
        [p, n, "eviction"] => (*p, Some(n.to_string()), false, true),
        _ => return None,
    };
    let resource = find(group, version, plural)?;
    if (namespace.is_some() && !resource.namespaced)
        || (status && !resource.status)
        || (eviction && resource.kind != "Pod")
    {
        return None;
    }
    Some(Target {
        resource,
        namespace,
        name,
        status,
        eviction,
    })
}
