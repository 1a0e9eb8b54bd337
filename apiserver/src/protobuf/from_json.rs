//! JSON as the message Kubernetes sends for it: the inverse of to_json,
//! for answers to a client that accepts only protobuf. A JSON field the
//! message has no field for (a newer field, an extension) is left out, as
//! an older Kubernetes would.

use super::tables::{self, Tables};
use base64::Engine;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value as Pb,
};
use serde_json::Value;
use std::collections::HashMap;

pub(super) fn message(t: &Tables, d: &MessageDescriptor, v: &Value) -> DynamicMessage {
    let mut m = DynamicMessage::new(d.clone());
    let set = |m: &mut DynamicMessage, name: &str, value: Pb| {
        if let Some(f) = d.get_field_by_name(name) {
            m.set_field(&f, value);
        }
    };
    match d.full_name() {
        tables::QUANTITY | tables::QUANTITY_VALUE => {
            let q = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            set(&mut m, "string", Pb::String(q));
        }
        tables::TIME | tables::MICRO_TIME => {
            if let Some(ts) = v.as_str().and_then(|s| s.parse::<jiff::Timestamp>().ok()) {
                set(&mut m, "seconds", Pb::I64(ts.as_second()));
                set(&mut m, "nanos", Pb::I32(ts.subsec_nanosecond()));
            }
        }
        tables::DURATION => {
            if let Some(d) = v.as_str().and_then(|s| humantime::parse_duration(s).ok()) {
                let nanos = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
                set(&mut m, "duration", Pb::I64(nanos));
            }
        }
        tables::INT_OR_STRING => match v {
            Value::String(s) => {
                set(&mut m, "type", Pb::I64(1));
                set(&mut m, "strVal", Pb::String(s.clone()));
            }
            other => {
                set(&mut m, "type", Pb::I64(0));
                let n = other.as_i64().unwrap_or(0);
                set(&mut m, "intVal", Pb::I32(i32::try_from(n).unwrap_or(0)));
            }
        },
        tables::RAW_EXTENSION | tables::SCHEMA_JSON => raw(&mut m, d, "raw", v),
        tables::FIELDS_V1 => raw(&mut m, d, "Raw", v),
        list if tables::STRING_LISTS.contains(&list) => {
            if let Some(f) = d.get_field_by_name("items") {
                m.set_field(&f, field_value(t, &f, v));
            }
        }
        tables::SCHEMA_OR_BOOL => match v {
            Value::Bool(b) => set(&mut m, "allows", Pb::Bool(*b)),
            other => set_from_json(t, &mut m, d, "schema", other),
        },
        tables::SCHEMA_OR_ARRAY | tables::SCHEMA_OR_STRINGS => {
            let list = if d.full_name() == tables::SCHEMA_OR_ARRAY {
                "jSONSchemas"
            } else {
                "property"
            };
            let name = if v.is_array() { list } else { "schema" };
            set_from_json(t, &mut m, d, name, v);
        }
        _ => {
            if let Value::Object(fields) = v {
                for (name, value) in fields {
                    if value.is_null() {
                        continue;
                    }
                    let proto = t.proto_name(d.full_name(), name);
                    set_from_json(t, &mut m, d, proto, value);
                }
            }
        }
    }
    m
}

fn set_from_json(t: &Tables, m: &mut DynamicMessage, d: &MessageDescriptor, name: &str, v: &Value) {
    if let Some(f) = d.get_field_by_name(name) {
        m.set_field(&f, field_value(t, &f, v));
    }
}

fn raw(m: &mut DynamicMessage, d: &MessageDescriptor, name: &str, v: &Value) {
    if let Some(f) = d.get_field_by_name(name) {
        let bytes = serde_json::to_vec(v).unwrap_or_default();
        m.set_field(&f, Pb::Bytes(bytes.into()));
    }
}

fn field_value(t: &Tables, f: &FieldDescriptor, v: &Value) -> Pb {
    let kind = f.kind();
    if f.is_map() {
        let Kind::Message(entry) = &kind else {
            return Pb::Map(HashMap::new());
        };
        let value_kind = entry.map_entry_value_field().kind();
        let entries = v.as_object().into_iter().flatten();
        let map = entries
            .map(|(k, v)| (MapKey::String(k.clone()), single(t, &value_kind, v)))
            .collect();
        return Pb::Map(map);
    }
    if f.is_list() {
        let items = v.as_array().into_iter().flatten();
        return Pb::List(items.map(|i| single(t, &kind, i)).collect());
    }
    single(t, &kind, v)
}

fn single(t: &Tables, kind: &Kind, v: &Value) -> Pb {
    let int = || {
        v.as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .unwrap_or(0)
    };
    match kind {
        Kind::Message(d) => Pb::Message(message(t, d, v)),
        Kind::Bool => Pb::Bool(v.as_bool().unwrap_or(false)),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => Pb::I32(i32::try_from(int()).unwrap_or(0)),
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => Pb::I64(int()),
        Kind::Uint32 | Kind::Fixed32 => Pb::U32(u32::try_from(int()).unwrap_or(0)),
        Kind::Uint64 | Kind::Fixed64 => Pb::U64(u64::try_from(int()).unwrap_or(0)),
        Kind::Float => Pb::F32(v.as_f64().unwrap_or(0.0) as f32),
        Kind::Double => Pb::F64(v.as_f64().unwrap_or(0.0)),
        Kind::String => Pb::String(match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        Kind::Bytes => {
            let b64 = v.as_str().unwrap_or_default();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_default();
            Pb::Bytes(bytes.into())
        }
        Kind::Enum(_) => Pb::EnumNumber(i32::try_from(int()).unwrap_or(0)),
    }
}
