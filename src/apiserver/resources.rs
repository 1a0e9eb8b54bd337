//! The resources the embedded API server serves, and how their paths read.

/// One served resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

pub const RESOURCES: &[Resource] = &[
    Resource {
        group: "gpu.cozystack.io",
        version: "v1alpha1",
        plural: "gpuclasses",
        kind: "GPUClass",
        namespaced: false,
    },
    Resource {
        group: "gpu.cozystack.io",
        version: "v1alpha1",
        plural: "gpuclaims",
        kind: "GPUClaim",
        namespaced: true,
    },
    Resource {
        group: "gpu.cozystack.io",
        version: "v1alpha1",
        plural: "gpuallocations",
        kind: "GPUAllocation",
        namespaced: true,
    },
    Resource {
        group: "kubevirt.io",
        version: "v1",
        plural: "virtualmachineinstances",
        kind: "VirtualMachineInstance",
        namespaced: true,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "nodes",
        kind: "Node",
        namespaced: false,
    },
];

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
    if namespace.is_some() && !resource.namespaced {
        return None;
    }
    Some(Target {
        resource,
        namespace,
        name,
        status,
    })
}
