//! The descriptor set build.rs compiled, and the two tables vendor.py
//! wrote beside the protos: what Go's types say that the protos do not.

use prost_reflect::{DescriptorPool, MessageDescriptor};
use std::collections::{HashMap, HashSet};
use std::sync::OnceLock;

/// Kubernetes' types whose JSON is not their message's (by full name).
pub(super) const QUANTITY: &str = "apimachinery.pkg.api.resource.Quantity";
pub(super) const QUANTITY_VALUE: &str = "apimachinery.pkg.api.resource.QuantityValue";
pub(super) const TIME: &str = "apimachinery.pkg.apis.meta.v1.Time";
pub(super) const MICRO_TIME: &str = "apimachinery.pkg.apis.meta.v1.MicroTime";
pub(super) const DURATION: &str = "apimachinery.pkg.apis.meta.v1.Duration";
pub(super) const FIELDS_V1: &str = "apimachinery.pkg.apis.meta.v1.FieldsV1";
pub(super) const INT_OR_STRING: &str = "apimachinery.pkg.util.intstr.IntOrString";
pub(super) const RAW_EXTENSION: &str = "apimachinery.pkg.runtime.RawExtension";
pub(super) const UNKNOWN: &str = "apimachinery.pkg.runtime.Unknown";
const EXTENSIONS: &str = "apiextensions_apiserver.pkg.apis.apiextensions";
pub(super) const SCHEMA_JSON: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON";
pub(super) const SCHEMA_OR_ARRAY: &str =
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray";
pub(super) const SCHEMA_OR_BOOL: &str =
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool";
pub(super) const SCHEMA_OR_STRINGS: &str =
    "apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray";
/// Go's `type X []string`: a message of `items` on the wire, a list in JSON.
pub(super) const STRING_LISTS: &[&str] = &[
    "apimachinery.pkg.apis.meta.v1.Verbs",
    "api.authentication.v1.ExtraValue",
    "api.authorization.v1.ExtraValue",
];

/// The meta.k8s.io kinds every group version carries (a DeleteOptions
/// body comes as `apps/v1, Kind=DeleteOptions`).
const META_KINDS: &[&str] = &[
    "Status",
    "DeleteOptions",
    "ListOptions",
    "GetOptions",
    "CreateOptions",
    "UpdateOptions",
    "PatchOptions",
    "WatchEvent",
];

pub(super) struct Tables {
    pub(super) pool: DescriptorPool,
    /// Per message, the fields whose zero JSON keeps (Go pointers, and
    /// fields without `omitempty`).
    zero_kept: HashMap<String, HashSet<String>>,
    /// Per message, protobuf name to JSON name, where they differ.
    json_names: HashMap<String, HashMap<String, String>>,
    /// Per message, JSON name to protobuf name, where they differ.
    proto_names: HashMap<String, HashMap<String, String>>,
}

pub(super) fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let set = include_bytes!(concat!(env!("OUT_DIR"), "/kubernetes.fds"));
        let pool = DescriptorPool::decode(&set[..]).expect("build.rs wrote a valid descriptor set");
        let mut zero_kept: HashMap<String, HashSet<String>> = HashMap::new();
        for (message, field) in rows(include_str!("../../proto/zero_kept.txt")) {
            zero_kept
                .entry(message.into())
                .or_default()
                .insert(field.into());
        }
        let mut json_names: HashMap<String, HashMap<String, String>> = HashMap::new();
        let mut proto_names: HashMap<String, HashMap<String, String>> = HashMap::new();
        for (message, names) in rows(include_str!("../../proto/renamed.txt")) {
            let Some((proto, json)) = names.split_once(' ') else {
                continue;
            };
            let entry = json_names.entry(message.into()).or_default();
            entry.insert(proto.into(), json.into());
            let back = proto_names.entry(message.into()).or_default();
            back.insert(json.into(), proto.into());
        }
        Tables {
            pool,
            zero_kept,
            json_names,
            proto_names,
        }
    })
}

/// `message rest` rows of a vendored table, without its comments.
fn rows(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(' '))
}

impl Tables {
    pub(super) fn keeps_zero(&self, message: &str, json_name: &str) -> bool {
        self.zero_kept
            .get(message)
            .is_some_and(|fields| fields.contains(json_name))
    }

    pub(super) fn json_name<'a>(&'a self, message: &str, proto_name: &'a str) -> &'a str {
        self.json_names
            .get(message)
            .and_then(|names| names.get(proto_name))
            .map_or(proto_name, String::as_str)
    }

    pub(super) fn proto_name<'a>(&'a self, message: &str, json_name: &'a str) -> &'a str {
        self.proto_names
            .get(message)
            .and_then(|names| names.get(json_name))
            .map_or(json_name, String::as_str)
    }

    /// The message an object of `apiVersion`/`kind` is on the wire.
    pub(super) fn message(&self, api_version: &str, kind: &str) -> Option<MessageDescriptor> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let name = if META_KINDS.contains(&kind) {
            format!("apimachinery.pkg.apis.meta.v1.{kind}")
        } else if group == "apiextensions.k8s.io" {
            format!("{EXTENSIONS}.{version}.{kind}")
        } else {
            let package = match group {
                "" => "core",
                g => g.split('.').next().unwrap_or(g),
            };
            format!("api.{package}.{version}.{kind}")
        };
        self.pool.get_message_by_name(&name)
    }
}
