//! The objects the controller reads and writes, as one typed value: a
//! kind, an object of it, a reference to one. The ports, the world and the
//! adapters all speak these.

use super::{GPUAllocation, GPUClaim, GPUClass, GPUQuota, VirtualMachine, Vmi};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::Value;
use std::fmt;

/// The kinds the controller reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Class,
    Claim,
    Allocation,
    Quota,
    Vmi,
    Pod,
    Node,
    /// DRA (D1-D8): a cluster that serves none of these has no DRA.
    DeviceClass,
    ResourceSlice,
    ResourceClaim,
    /// D5: what a VMI's `spec.resourceClaims` asks for through a template.
    ResourceClaimTemplate,
    /// D2: taints on published devices, from outside their slices.
    /// Optional beyond DRA itself: a cluster may serve DRA without it.
    DeviceTaintRule,
    /// O1: what a VMI's `spec.priorityClassName` is worth.
    PriorityClass,
    /// Read live (E2), never watched: not in `ALL`.
    Vm,
}

impl Kind {
    pub const ALL: [Kind; 13] = [
        Kind::Class,
        Kind::Claim,
        Kind::Allocation,
        Kind::Quota,
        Kind::Vmi,
        Kind::Pod,
        Kind::Node,
        Kind::DeviceClass,
        Kind::ResourceSlice,
        Kind::ResourceClaim,
        Kind::ResourceClaimTemplate,
        Kind::DeviceTaintRule,
        Kind::PriorityClass,
    ];

    /// The DRA kinds: optional, as a cluster without DRA serves none.
    pub const DRA: [Kind; 4] = [
        Kind::DeviceClass,
        Kind::ResourceSlice,
        Kind::ResourceClaim,
        Kind::ResourceClaimTemplate,
    ];

    /// The Kubernetes kind name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Class => "GPUClass",
            Kind::Claim => "GPUClaim",
            Kind::Allocation => "GPUAllocation",
            Kind::Quota => "GPUQuota",
            Kind::Vmi => "VirtualMachineInstance",
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::ResourceClaimTemplate => "ResourceClaimTemplate",
            Kind::DeviceTaintRule => "DeviceTaintRule",
            Kind::PriorityClass => "PriorityClass",
            Kind::Vm => "VirtualMachine",
        }
    }

    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }

    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Kind::Class
                | Kind::Node
                | Kind::DeviceClass
                | Kind::ResourceSlice
                | Kind::DeviceTaintRule
                | Kind::PriorityClass
        )
    }
}

/// A typed object of one of the kinds. Moved a few times per watch event;
/// boxing the large variants would add an allocation to every event.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Obj {
    Class(GPUClass),
    Claim(GPUClaim),
    Allocation(GPUAllocation),
    Quota(GPUQuota),
    Vmi(Vmi),
    Pod(Pod),
    Node(Node),
    DeviceClass(DeviceClass),
    ResourceSlice(ResourceSlice),
    ResourceClaim(ResourceClaim),
    ResourceClaimTemplate(ResourceClaimTemplate),
    DeviceTaintRule(DeviceTaintRule),
    PriorityClass(PriorityClass),
    Vm(VirtualMachine),
}

impl Obj {
    pub fn kind(&self) -> Kind {
        match self {
            Obj::Class(_) => Kind::Class,
            Obj::Claim(_) => Kind::Claim,
            Obj::Allocation(_) => Kind::Allocation,
            Obj::Quota(_) => Kind::Quota,
            Obj::Vmi(_) => Kind::Vmi,
            Obj::Pod(_) => Kind::Pod,
            Obj::Node(_) => Kind::Node,
            Obj::DeviceClass(_) => Kind::DeviceClass,
            Obj::ResourceSlice(_) => Kind::ResourceSlice,
            Obj::ResourceClaim(_) => Kind::ResourceClaim,
            Obj::ResourceClaimTemplate(_) => Kind::ResourceClaimTemplate,
            Obj::DeviceTaintRule(_) => Kind::DeviceTaintRule,
            Obj::PriorityClass(_) => Kind::PriorityClass,
            Obj::Vm(_) => Kind::Vm,
        }
    }

    pub fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Obj::Class(o) => &o.metadata,
            Obj::Claim(o) => &o.metadata,
            Obj::Allocation(o) => &o.metadata,
            Obj::Quota(o) => &o.metadata,
            Obj::Vmi(o) => &o.metadata,
            Obj::Pod(o) => &o.metadata,
            Obj::Node(o) => &o.metadata,
            Obj::DeviceClass(o) => &o.metadata,
            Obj::ResourceSlice(o) => &o.metadata,
            Obj::ResourceClaim(o) => &o.metadata,
            Obj::ResourceClaimTemplate(o) => &o.metadata,
            Obj::DeviceTaintRule(o) => &o.metadata,
            Obj::PriorityClass(o) => &o.metadata,
            Obj::Vm(o) => &o.metadata,
        }
    }

    pub fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Obj::Class(o) => &mut o.metadata,
            Obj::Claim(o) => &mut o.metadata,
            Obj::Allocation(o) => &mut o.metadata,
            Obj::Quota(o) => &mut o.metadata,
            Obj::Vmi(o) => &mut o.metadata,
            Obj::Pod(o) => &mut o.metadata,
            Obj::Node(o) => &mut o.metadata,
            Obj::DeviceClass(o) => &mut o.metadata,
            Obj::ResourceSlice(o) => &mut o.metadata,
            Obj::ResourceClaim(o) => &mut o.metadata,
            Obj::ResourceClaimTemplate(o) => &mut o.metadata,
            Obj::DeviceTaintRule(o) => &mut o.metadata,
            Obj::PriorityClass(o) => &mut o.metadata,
            Obj::Vm(o) => &mut o.metadata,
        }
    }

    pub fn obj_ref(&self) -> ObjRef {
        let m = self.meta();
        ObjRef::new(
            self.kind(),
            m.namespace.as_deref(),
            m.name.as_deref().unwrap_or_default(),
        )
    }
}

/// Names one object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjRef {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjRef {
    pub fn new(kind: Kind, namespace: Option<&str>, name: &str) -> Self {
        Self {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for ObjRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind.name(), self.name),
            None => write!(f, "{} {}", self.kind.name(), self.name),
        }
    }
}

impl Kind {
    /// The apiVersion objects of the kind are served under.
    pub fn api_version(self) -> &'static str {
        match self {
            Kind::Class | Kind::Claim | Kind::Allocation | Kind::Quota => {
                "gpu.cozystack.io/v1alpha1"
            }
            Kind::Vmi | Kind::Vm => "kubevirt.io/v1",
            Kind::Pod | Kind::Node => "v1",
            Kind::DeviceClass
            | Kind::ResourceSlice
            | Kind::ResourceClaim
            | Kind::ResourceClaimTemplate
            | Kind::DeviceTaintRule => "resource.k8s.io/v1",
            Kind::PriorityClass => "scheduling.k8s.io/v1",
        }
    }

    /// The kind as kube-rs' dynamic API names it (group, version, plural).
    pub fn api_resource(self) -> kube::core::ApiResource {
        use kube::core::ApiResource;
        match self {
            Kind::Class => ApiResource::erase::<GPUClass>(&()),
            Kind::Claim => ApiResource::erase::<GPUClaim>(&()),
            Kind::Allocation => ApiResource::erase::<GPUAllocation>(&()),
            Kind::Quota => ApiResource::erase::<GPUQuota>(&()),
            Kind::Vmi => ApiResource::erase::<Vmi>(&()),
            Kind::Pod => ApiResource::erase::<Pod>(&()),
            Kind::Node => ApiResource::erase::<Node>(&()),
            Kind::DeviceClass => ApiResource::erase::<DeviceClass>(&()),
            Kind::ResourceSlice => ApiResource::erase::<ResourceSlice>(&()),
            Kind::ResourceClaim => ApiResource::erase::<ResourceClaim>(&()),
            Kind::ResourceClaimTemplate => ApiResource::erase::<ResourceClaimTemplate>(&()),
            Kind::DeviceTaintRule => ApiResource::erase::<DeviceTaintRule>(&()),
            Kind::PriorityClass => ApiResource::erase::<PriorityClass>(&()),
            Kind::Vm => ApiResource::erase::<VirtualMachine>(&()),
        }
    }
}

/// An object that cannot be read as its kind, and where: the field path
/// (`spec.count`) and what is wrong there.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct DecodeError {
    pub path: String,
    pub message: String,
}

/// An object as JSON, with its apiVersion and kind: what the API server
/// stores and serves. Both adapters (kube-rs and the in-memory cluster)
/// convert through here, so they read and write objects identically.
pub fn to_json(obj: &Obj) -> Value {
    let v = match obj {
        Obj::Class(o) => serde_json::to_value(o),
        Obj::Claim(o) => serde_json::to_value(o),
        Obj::Allocation(o) => serde_json::to_value(o),
        Obj::Quota(o) => serde_json::to_value(o),
        Obj::Vmi(o) => serde_json::to_value(o),
        Obj::Pod(o) => serde_json::to_value(o),
        Obj::Node(o) => serde_json::to_value(o),
        Obj::DeviceClass(o) => serde_json::to_value(o),
        Obj::ResourceSlice(o) => serde_json::to_value(o),
        Obj::ResourceClaim(o) => serde_json::to_value(o),
        Obj::ResourceClaimTemplate(o) => serde_json::to_value(o),
        Obj::DeviceTaintRule(o) => serde_json::to_value(o),
        Obj::PriorityClass(o) => serde_json::to_value(o),
        Obj::Vm(o) => serde_json::to_value(o),
    };
    let mut v = v.unwrap_or(Value::Null);
    v["apiVersion"] = obj.kind().api_version().into();
    v["kind"] = obj.kind().name().into();
    v
}

/// JSON text as an object of `kind`, read straight into its typed form
/// (no JSON tree in between): the watches' fast path. An error here says
/// only that this path cannot read it; [`from_json`] says why, by field.
pub fn from_text(kind: Kind, text: &str) -> Result<Obj, serde_json::Error> {
    use serde_json::from_str;
    Ok(match kind {
        Kind::Class => Obj::Class(from_str(text)?),
        Kind::Claim => Obj::Claim(from_str(text)?),
        Kind::Allocation => Obj::Allocation(from_str(text)?),
        Kind::Quota => Obj::Quota(from_str(text)?),
        Kind::Vmi => Obj::Vmi(from_str(text)?),
        Kind::Pod => Obj::Pod(from_str(text)?),
        Kind::Node => Obj::Node(from_str(text)?),
        Kind::DeviceClass => Obj::DeviceClass(from_str(text)?),
        Kind::ResourceSlice => Obj::ResourceSlice(from_str(text)?),
        Kind::ResourceClaim => Obj::ResourceClaim(from_str(text)?),
        Kind::ResourceClaimTemplate => Obj::ResourceClaimTemplate(from_str(text)?),
        Kind::DeviceTaintRule => Obj::DeviceTaintRule(from_str(text)?),
        Kind::PriorityClass => Obj::PriorityClass(from_str(text)?),
        Kind::Vm => Obj::Vm(from_str(text)?),
    })
}

/// JSON as an object of `kind`; an error names the field
/// (`spec.count: invalid value: integer `-1`, expected u32`).
pub fn from_json(kind: Kind, mut v: Value) -> Result<Obj, DecodeError> {
    // DeviceTaintRule at `resource.k8s.io/v1beta2` (Kubernetes 1.36, what
    // `kubectl get -o yaml` gives there) has v1's fields: read as v1.
    if kind == Kind::DeviceTaintRule && v["apiVersion"] == "resource.k8s.io/v1beta2" {
        v["apiVersion"] = "resource.k8s.io/v1".into();
    }
    fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, DecodeError> {
        serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            DecodeError {
                path: if path == "." { String::new() } else { path },
                message: e.into_inner().to_string(),
            }
        })
    }
    Ok(match kind {
        Kind::Class => Obj::Class(typed(v)?),
        Kind::Claim => Obj::Claim(typed(v)?),
        Kind::Allocation => Obj::Allocation(typed(v)?),
        Kind::Quota => Obj::Quota(typed(v)?),
        Kind::Vmi => Obj::Vmi(typed(v)?),
        Kind::Pod => Obj::Pod(typed(v)?),
        Kind::Node => Obj::Node(typed(v)?),
        Kind::DeviceClass => Obj::DeviceClass(typed(v)?),
        Kind::ResourceSlice => Obj::ResourceSlice(typed(v)?),
        Kind::ResourceClaim => Obj::ResourceClaim(typed(v)?),
        Kind::ResourceClaimTemplate => Obj::ResourceClaimTemplate(typed(v)?),
        Kind::DeviceTaintRule => Obj::DeviceTaintRule(typed(v)?),
        Kind::PriorityClass => Obj::PriorityClass(typed(v)?),
        Kind::Vm => Obj::Vm(typed(v)?),
    })
}
