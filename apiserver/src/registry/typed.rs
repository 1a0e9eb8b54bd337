//! The built-in kinds decoded as kube-apiserver decodes them: into their
//! Go types (here k8s-openapi's), so that a value of the wrong type is a
//! 400 and a field the type does not have is unknown (dropped, warned
//! about, or refused under `fieldValidation=Strict`), as for a custom
//! resource by its CRD's schema.

use serde_json::Value;

/// How a built-in object decodes.
pub enum Decoded {
    /// Not a kind decoded here (custom resources, reviews).
    Untyped,
    /// Decoded: the fields the type does not have.
    Unknown(Vec<String>),
    /// Not decodable: the decoder's words.
    Invalid(String),
}

fn decode<T: serde::de::DeserializeOwned + serde::Serialize + k8s_openapi::Resource>(
    obj: &Value,
) -> Decoded {
    // A kind served at an older version than the type's (DeviceTaintRule
    // at v1beta2, as 1.36 serves it) has the type's fields: decoded as
    // the type's version, which the request's path chose already.
    let mut as_type = obj.clone();
    if as_type.get("apiVersion").is_some() {
        as_type["apiVersion"] = T::API_VERSION.into();
    }
    match serde_json::from_value::<T>(as_type) {
        Err(e) => Decoded::Invalid(e.to_string()),
        Ok(t) => {
            let back = serde_json::to_value(&t).unwrap_or(Value::Null);
            let mut unknown = Vec::new();
            crate::registry::schema::dropped(obj, &back, "", &mut unknown);
            Decoded::Unknown(unknown)
        }
    }
}

macro_rules! kinds {
    ($($kind:literal => $ty:ty),* $(,)?) => {
        /// Decodes `obj`, stored as `kind`, by its type.
        pub fn check(kind: &str, obj: &Value) -> Decoded {
            match kind {
                $($kind => decode::<$ty>(obj),)*
                _ => Decoded::Untyped,
            }
        }

        /// Adds `kind`'s schema (and those it refers to) to `generator`'s
        /// definitions: its name there, or None for a kind not typed here.
        pub fn schema(kind: &str, generator: &mut schemars::SchemaGenerator) -> Option<String> {
            match kind {
                $($kind => {
                    let _ = generator.subschema_for::<$ty>();
                    Some(<$ty as schemars::JsonSchema>::schema_name().into_owned())
                })*
                _ => None,
            }
        }
    };
}

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, batch::v1 as batch,
    certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core,
    networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac, resource::v1 as dra,
    scheduling::v1 as scheduling,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;

kinds! {
    "Pod" => core::Pod,
    "Node" => core::Node,
    "Namespace" => core::Namespace,
    "Event" => core::Event,
    "ConfigMap" => core::ConfigMap,
    "Secret" => core::Secret,
    "ServiceAccount" => core::ServiceAccount,
    "Service" => core::Service,
    "Endpoints" => core::Endpoints,
    "Lease" => coordination::Lease,
    "ClusterRole" => rbac::ClusterRole,
    "ClusterRoleBinding" => rbac::ClusterRoleBinding,
    "Role" => rbac::Role,
    "RoleBinding" => rbac::RoleBinding,
    "MutatingWebhookConfiguration" => admission::MutatingWebhookConfiguration,
    "ValidatingWebhookConfiguration" => admission::ValidatingWebhookConfiguration,
    "Deployment" => apps::Deployment,
    "StatefulSet" => apps::StatefulSet,
    "DaemonSet" => apps::DaemonSet,
    "ReplicaSet" => apps::ReplicaSet,
    "ReplicationController" => core::ReplicationController,
    "Job" => batch::Job,
    "CronJob" => batch::CronJob,
    "PodDisruptionBudget" => policy::PodDisruptionBudget,
    "CertificateSigningRequest" => certificates::CertificateSigningRequest,
    "APIService" => apiregistration::APIService,
    "ComponentStatus" => core::ComponentStatus,
    "NetworkPolicy" => networking::NetworkPolicy,
    "PriorityClass" => scheduling::PriorityClass,
    "CustomResourceDefinition" => apiextensions::CustomResourceDefinition,
    "DeviceClass" => dra::DeviceClass,
    "ResourceSlice" => dra::ResourceSlice,
    "ResourceClaim" => dra::ResourceClaim,
    "ResourceClaimTemplate" => dra::ResourceClaimTemplate,
    "DeviceTaintRule" => dra::DeviceTaintRule,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_built_in_object_decodes_by_its_type() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"a": "1"}, "colour": "red"});
        match check("ConfigMap", &cm) {
            Decoded::Unknown(u) => assert_eq!(u, ["colour"]),
            _ => panic!("decodes"),
        }
        let bad = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": "two", "selector": {}, "template": {}}});
        assert!(matches!(check("Deployment", &bad), Decoded::Invalid(_)));
        assert!(matches!(check("GPUClaim", &cm), Decoded::Untyped));
    }
}
