//! A decoded message as the JSON Kubernetes writes for it: the fields a Go
//! client set (not the zeros Go's protobuf encoding writes for every
//! field), Kubernetes' own types in their JSON spelling, and the few
//! fields whose JSON name is not their protobuf name.

use super::tables::{self, Tables};
use base64::Engine;
use prost_reflect::{DynamicMessage, MapKey, ReflectMessage, Value as Pb};
use serde_json::{Map, Value, json};

pub(super) fn message(t: &Tables, m: &DynamicMessage) -> Value {
    let d = m.descriptor();
    let full = d.full_name();
    let field = |name: &str| m.get_field_by_name(name).map(|v| v.into_owned());
    match full {
        tables::QUANTITY | tables::QUANTITY_VALUE => field("string")
            .and_then(|v| v.as_str().map(|s| json!(s)))
            .unwrap_or(Value::Null),
        tables::TIME | tables::MICRO_TIME => {
            let seconds = field("seconds").and_then(|v| v.as_i64()).unwrap_or(0);
            let nanos = field("nanos").and_then(|v| v.as_i32()).unwrap_or(0);
            time(seconds, nanos, full == tables::MICRO_TIME)
        }
        tables::DURATION => json!(go_duration(
            field("duration").and_then(|v| v.as_i64()).unwrap_or(0)
        )),
        tables::INT_OR_STRING => match field("type").and_then(|v| v.as_i64()) {
            Some(1) => json!(field("strVal").and_then(|v| v.as_str().map(str::to_owned))),
            _ => json!(field("intVal").and_then(|v| v.as_i32()).unwrap_or(0)),
        },
        tables::RAW_EXTENSION | tables::SCHEMA_JSON => raw_json(field("raw")),
        tables::FIELDS_V1 => raw_json(field("Raw")),
        list if tables::STRING_LISTS.contains(&list) => field("items")
            .map(|v| scalar(&v))
            .unwrap_or_else(|| json!([])),
        tables::SCHEMA_OR_BOOL => match m.has_field_by_name("schema") {
            true => field("schema").map_or(Value::Null, |v| value(t, &v)),
            false => json!(field("allows").and_then(|v| v.as_bool()).unwrap_or(false)),
        },
        tables::SCHEMA_OR_ARRAY | tables::SCHEMA_OR_STRINGS => {
            let list = if full == tables::SCHEMA_OR_ARRAY {
                "jSONSchemas"
            } else {
                "property"
            };
            match m.has_field_by_name(list) {
                true => field(list).map_or(Value::Null, |v| value(t, &v)),
                false => field("schema").map_or(Value::Null, |v| value(t, &v)),
            }
        }
        _ => object(t, m),
    }
}

fn object(t: &Tables, m: &DynamicMessage) -> Value {
    let d = m.descriptor();
    let mut out = Map::new();
    for (f, v) in m.fields() {
        let name = t.json_name(d.full_name(), f.name());
        // A zero Go's JSON would leave out (omitempty, not a pointer),
        // and an empty list or map, which Go's omitempty leaves out too.
        let zero = is_zero(v);
        if (zero && !t.keeps_zero(d.full_name(), name)) || is_empty(v) {
            continue;
        }
        let json = value(t, v);
        if !json.is_null() {
            out.insert(name.to_owned(), json);
        }
    }
    Value::Object(out)
}

fn value(t: &Tables, v: &Pb) -> Value {
    match v {
        Pb::Message(m) => message(t, m),
        Pb::List(items) => Value::Array(items.iter().map(|i| value(t, i)).collect()),
        Pb::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    MapKey::Bool(b) => b.to_string(),
                    MapKey::I32(n) => n.to_string(),
                    MapKey::I64(n) => n.to_string(),
                    MapKey::U32(n) => n.to_string(),
                    MapKey::U64(n) => n.to_string(),
                };
                out.insert(key, value(t, v));
            }
            Value::Object(out)
        }
        other => scalar(other),
    }
}

fn scalar(v: &Pb) -> Value {
    match v {
        Pb::Bool(b) => json!(b),
        Pb::I32(n) => json!(n),
        Pb::I64(n) => json!(n),
        Pb::U32(n) => json!(n),
        Pb::U64(n) => json!(n),
        Pb::F32(n) => json!(n),
        Pb::F64(n) => json!(n),
        Pb::String(s) => json!(s),
        Pb::Bytes(b) => json!(base64::engine::general_purpose::STANDARD.encode(b)),
        Pb::EnumNumber(n) => json!(n),
        Pb::List(items) => Value::Array(items.iter().map(scalar).collect()),
        Pb::Message(_) | Pb::Map(_) => Value::Null,
    }
}

fn is_zero(v: &Pb) -> bool {
    match v {
        Pb::Bool(b) => !b,
        Pb::I32(n) => *n == 0,
        Pb::I64(n) => *n == 0,
        Pb::U32(n) => *n == 0,
        Pb::U64(n) => *n == 0,
        Pb::F32(n) => *n == 0.0,
        Pb::F64(n) => *n == 0.0,
        Pb::String(s) => s.is_empty(),
        Pb::Bytes(b) => b.is_empty(),
        Pb::EnumNumber(n) => *n == 0,
        Pb::Message(_) | Pb::List(_) | Pb::Map(_) => false,
    }
}

fn is_empty(v: &Pb) -> bool {
    match v {
        Pb::List(items) => items.is_empty(),
        Pb::Map(entries) => entries.is_empty(),
        _ => false,
    }
}

/// Raw bytes that hold JSON (a RawExtension, a schema's `default`,
/// managedFields' FieldsV1), as that JSON.
fn raw_json(raw: Option<Pb>) -> Value {
    match raw {
        Some(Pb::Bytes(b)) if !b.is_empty() => serde_json::from_slice(&b)
            .unwrap_or_else(|_| json!(base64::engine::general_purpose::STANDARD.encode(&b))),
        _ => Value::Null,
    }
}

/// metav1.Time (RFC 3339 in seconds) or MicroTime (in microseconds), in
/// UTC; the zero time, which Go writes as an empty message, is null.
fn time(seconds: i64, nanos: i32, micro: bool) -> Value {
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let Ok(ts) = jiff::Timestamp::new(seconds, if micro { nanos } else { 0 }) else {
        return Value::Null;
    };
    let whole = ts.strftime("%Y-%m-%dT%H:%M:%S").to_string();
    json!(match micro {
        true => format!("{whole}.{:06}Z", ts.subsec_nanosecond() / 1000),
        false => format!("{whole}Z"),
    })
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub(super) fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    let fraction = |whole: u64, unit: u64, digits: usize| -> String {
        let rest = n % unit;
        let mut s = whole.to_string();
        if rest > 0 {
            let frac = format!("{rest:0digits$}");
            s.push('.');
            s.push_str(frac.trim_end_matches('0'));
        }
        s
    };
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", fraction(n / 1_000, 1_000, 3));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", fraction(n / 1_000_000, 1_000_000, 6));
    }
    let (h, m) = (n / 3_600_000_000_000, (n / 60_000_000_000) % 60);
    let s = fraction((n / 1_000_000_000) % 60, 1_000_000_000, 9);
    match (h, m) {
        (0, 0) => format!("{sign}{s}s"),
        (0, m) => format!("{sign}{m}m{s}s"),
        (h, m) => format!("{sign}{h}h{m}m{s}s"),
    }
}
