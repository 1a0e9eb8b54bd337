//! The custom resource of a CustomResourceDefinition, as kube-apiserver
//! serves one once it is Established.

use super::{Resource, ScalePaths};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

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
    pub columns: Vec<crate::table::Column>,
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
        read_only: false,
        custom: true,
        scale: v
            .subresources
            .as_ref()
            .and_then(|s| s.scale.as_ref())
            .map(|s| ScalePaths {
                spec_replicas: interned(&s.spec_replicas_path),
                status_replicas: interned(&s.status_replicas_path),
                label_selector: s.label_selector_path.as_deref().map(interned),
            }),
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
        .map(|c| crate::table::Column {
            name: c.name.clone(),
            type_: c.type_.clone(),
            json_path: c.json_path.clone(),
            priority: c.priority.unwrap_or(0),
            description: c.description.clone().unwrap_or_default(),
        })
        .collect();
    Some(Custom {
        resource,
        schema,
        columns,
    })
}
