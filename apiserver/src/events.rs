//! One store of Events behind both APIs, as the API server keeps them:
//! stored as core/v1 Events, served as events.k8s.io/v1 by converting
//! field for field (upstream's `pkg/apis/events/v1` conversion), so that
//! what the controller records through events.k8s.io is what `kubectl get
//! events` and `kubectl describe` show.

use super::Resource;
use serde_json::{Map, Value};

/// (events.k8s.io/v1 field, core/v1 field), where the names differ.
const RENAMED: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Whether `r` is served from the core Event store in the other form.
pub fn converted(r: &Resource) -> bool {
    r.group == "events.k8s.io" && r.kind == "Event"
}

fn rename(obj: &Value, from_events: bool) -> Value {
    let Some(fields) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in fields {
        let renamed = RENAMED.iter().find_map(|(e, c)| {
            if from_events {
                (k == e).then_some(*c)
            } else {
                (k == c).then_some(*e)
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    Value::Object(out)
}

/// A stored (core/v1) Event as `r` serves it.
pub fn served(r: &Resource, stored: Value) -> Value {
    if !converted(r) {
        return stored;
    }
    let mut v = rename(&stored, false);
    v["apiVersion"] = "events.k8s.io/v1".into();
    v["kind"] = "Event".into();
    v
}

/// An Event written through `r`, as it is stored (core/v1).
pub fn stored(r: &Resource, written: Value) -> Value {
    if !converted(r) {
        return written;
    }
    let mut v = rename(&written, true);
    v["apiVersion"] = "v1".into();
    v["kind"] = "Event".into();
    v
}

/// A field selector's path on `r`, as the stored form names it.
pub fn stored_field(r: &Resource, path: &str) -> String {
    if !converted(r) {
        return path.to_string();
    }
    for (e, c) in RENAMED {
        if path == *e {
            return c.to_string();
        }
        if let Some(rest) = path.strip_prefix(&format!("{e}.")) {
            return format!("{c}.{rest}");
        }
    }
    path.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BUILTIN;
    use serde_json::json;

    fn events_api() -> &'static Resource {
        BUILTIN.iter().find(|r| converted(r)).unwrap()
    }

    #[test]
    fn an_event_converts_both_ways_without_loss() {
        let e = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "x.1", "namespace": "a"},
            "regarding": {"kind": "GPUClaim", "name": "c", "namespace": "a"},
            "note": "placed on n1", "reason": "Bound", "type": "Normal", "action": "G4",
            "reportingController": "gpu-claims", "reportingInstance": "gpu-claims-0",
            "eventTime": "2026-11-30T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-11-30T00:00:01.000000Z"}});
        let core = stored(events_api(), e.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "c");
        assert_eq!(core["message"], "placed on n1");
        assert_eq!(core["reportingComponent"], "gpu-claims");
        assert_eq!(core["series"]["count"], 2);
        assert_eq!(served(events_api(), core), e);
        assert_eq!(
            stored_field(events_api(), "regarding.name"),
            "involvedObject.name"
        );
        assert_eq!(stored_field(events_api(), "reason"), "reason");
    }
}
