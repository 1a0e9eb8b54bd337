//! `Table` answers (`Accept: application/json;as=Table;g=meta.k8s.io`), as
//! kubectl asks for them: the CRDs' printer columns for our kinds, a few
//! columns for the built-in ones, and the object in each row.

use super::Resource;
use serde_json::{Value, json};

/// One printer column: as a CRD's `additionalPrinterColumns` names it
/// (kubectl shows a column of priority above 0 only with `-o wide`).
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub type_: String,
    pub json_path: String,
    pub priority: i32,
    pub description: String,
}

impl Column {
    pub fn new(name: &str, type_: &str, json_path: &str) -> Self {
        Self {
            name: name.into(),
            type_: type_.into(),
            json_path: json_path.into(),
            priority: 0,
            description: String::new(),
        }
    }
}

fn columns(r: &Resource, custom: Option<&[Column]>) -> Vec<Column> {
    let c = Column::new;
    if let Some(cols) = custom.filter(|c| !c.is_empty()) {
        return cols.to_vec();
    }
    let age = c("Age", "date", ".metadata.creationTimestamp");
    match r.kind {
        "Pod" => vec![
            c("Status", "string", ".status.phase"),
            c("Node", "string", ".spec.nodeName"),
            age,
        ],
        "VirtualMachineInstance" => vec![
            c("Phase", "string", ".status.phase"),
            c("Node", "string", ".status.nodeName"),
            age,
        ],
        "Lease" => vec![c("Holder", "string", ".spec.holderIdentity"), age],
        // As kubectl's printers: computed cells start with '@'.
        "Node" => vec![
            c("Status", "string", "@node-status"),
            c("Roles", "string", "@node-roles"),
            age,
            c("Version", "string", ".status.nodeInfo.kubeletVersion"),
        ],
        "Namespace" => vec![c("Status", "string", ".status.phase"), age],
        // kubectl get pdb: a bound not set is N/A.
        #[cfg(feature = "conformance")]
        "PodDisruptionBudget" => vec![
            c("Min Available", "string", "@pdb-minAvailable"),
            c("Max Unavailable", "string", "@pdb-maxUnavailable"),
            c(
                "Allowed Disruptions",
                "integer",
                ".status.disruptionsAllowed",
            ),
            age,
        ],
        // kubectl get events: the last time seen, what it is about.
        "Event" => vec![
            c("Last Seen", "string", "@event-last-seen"),
            c("Type", "string", ".type"),
            c("Reason", "string", ".reason"),
            c("Object", "string", "@event-object"),
            if r.group.is_empty() {
                c("Message", "string", ".message")
            } else {
                c("Note", "string", ".note")
            },
        ],
        // kubectl's printers for DRA (`printResourceClaim`, `printResourceSlice`).
        "ResourceClaim" => {
            let mut state = c("State", "string", "@claim-state");
            state.description =
                "A summary of the current state (allocated, pending, reserved, etc.).".into();
            vec![state, age]
        }
        "ResourceSlice" => vec![
            c("Node", "string", "@slice-node"),
            c("Driver", "string", ".spec.driver"),
            c("Pool", "string", ".spec.pool.name"),
            age,
        ],
        _ => vec![age],
    }
}

/// A ResourceClaim's State as kubectl prints it: `deleted`, then
/// `pending` or `allocated`, then `reserved`, joined by commas.
fn claim_state(obj: &Value) -> String {
    let mut parts = Vec::new();
    let deleted = obj["metadata"]["deletionTimestamp"].is_string();
    if deleted {
        parts.push("deleted");
    }
    let allocated = obj["status"]["allocation"].is_object();
    if !allocated && !deleted {
        parts.push("pending");
    }
    if allocated {
        parts.push("allocated");
        if obj["status"]["reservedFor"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        {
            parts.push("reserved");
        }
    }
    parts.join(",")
}

/// The part of JSONPath printer columns use: `.a.b`, an index `[0]`,
/// and a filter on a list `[?(@.type=='Ready')]` (the first match, as
/// kubectl prints one value), as KubeVirt's CRDs write them. Anything
/// else reads as absent.
fn at<'a>(obj: &'a Value, path: &str) -> &'a Value {
    static NULL: Value = Value::Null;
    let mut v = obj;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            v = &v[&r[..end]];
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else {
                return &NULL;
            };
            let inner = &r[..end];
            rest = &r[end + 1..];
            v = match inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                Some(filter) => {
                    let Some((key, want)) = filter.split_once("==") else {
                        return &NULL;
                    };
                    let want = want.trim().trim_matches(|c| c == '\'' || c == '"');
                    let key = key.trim();
                    v.as_array()
                        .and_then(|items| items.iter().find(|i| i[key].as_str() == Some(want)))
                        .unwrap_or(&NULL)
                }
                None => match inner.parse::<usize>() {
                    Ok(i) => &v[i],
                    Err(_) => return &NULL,
                },
            };
        } else {
            return &NULL;
        }
    }
    v
}

/// How long ago an RFC 3339 time was, as kubectl prints ages.
fn age(ts: &str) -> String {
    let Ok(t) = ts.parse::<k8s_openapi::jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = k8s_openapi::jiff::Timestamp::now()
        .duration_since(t)
        .as_secs()
        .max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// A node's STATUS as kubectl prints it: its Ready condition, and
/// `SchedulingDisabled` when cordoned.
fn node_status(obj: &Value) -> String {
    let ready = obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"].as_str().unwrap_or_default());
    let mut s = match ready {
        Some("True") => "Ready",
        Some("False") => "NotReady",
        _ => "Unknown",
    }
    .to_string();
    if obj["spec"]["unschedulable"] == true {
        s.push_str(",SchedulingDisabled");
    }
    s
}

/// A node's ROLES: its `node-role.kubernetes.io/<role>` labels.
fn node_roles(obj: &Value) -> String {
    let roles: Vec<&str> = obj["metadata"]["labels"]
        .as_object()
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

/// When an Event (either form) was last seen: its series, its last
/// timestamp, or its event time.
fn event_last_seen(obj: &Value) -> String {
    [
        &obj["series"]["lastObservedTime"],
        &obj["lastTimestamp"],
        &obj["deprecatedLastTimestamp"],
        &obj["eventTime"],
    ]
    .into_iter()
    .find_map(Value::as_str)
    .map_or_else(|| "<unknown>".into(), age)
}

/// `kind/name` of what an Event is about, as kubectl prints it.
fn event_object(obj: &Value) -> String {
    let about = if obj["regarding"].is_object() {
        &obj["regarding"]
    } else {
        &obj["involvedObject"]
    };
    format!(
        "{}/{}",
        about["kind"].as_str().unwrap_or_default().to_lowercase(),
        about["name"].as_str().unwrap_or_default()
    )
}

fn cell(obj: &Value, col: &Column) -> Value {
    let (type_, path) = (&col.type_, &col.json_path);
    match path.as_str() {
        "@node-status" => return node_status(obj).into(),
        "@node-roles" => return node_roles(obj).into(),
        "@event-last-seen" => return event_last_seen(obj).into(),
        "@event-object" => return event_object(obj).into(),
        "@claim-state" => return claim_state(obj).into(),
        // A slice of devices not local to one node prints an empty node.
        "@slice-node" => return obj["spec"]["nodeName"].as_str().unwrap_or_default().into(),
        #[cfg(feature = "conformance")]
        p if p.starts_with("@pdb-") => {
            return match &obj["spec"][&p["@pdb-".len()..]] {
                Value::Null => "N/A".into(),
                Value::String(s) => s.clone().into(),
                v => v.to_string().into(),
            };
        }
        _ => {}
    }
    match (type_.as_str(), at(obj, path)) {
        (_, Value::Null) => Value::Null,
        ("date", Value::String(s)) => age(s).into(),
        (_, v) => v.clone(),
    }
}

/// A `meta.k8s.io/v1` Table of `items`.
/// `custom`: a custom resource's printer columns, from its CRD.
pub fn table(r: &Resource, custom: Option<&[Column]>, items: &[Value], metadata: Value) -> Value {
    let cols = columns(r, custom);
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}),
    ];
    defs.extend(cols.iter().map(|c| {
        let (t, f) = if c.type_ == "date" {
            ("string", "date")
        } else {
            (c.type_.as_str(), "")
        };
        json!({"name": c.name, "type": t, "format": f, "description": c.description,
            "priority": c.priority})
    }));
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            cells.extend(cols.iter().map(|c| cell(o, c)));
            json!({"cells": cells, "object": o})
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
        "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::at;
    use serde_json::json;

    /// The JSONPath of KubeVirt's printer columns, as kubectl reads them.
    #[test]
    fn printer_column_paths_read_fields_indexes_and_filters() {
        let vmi = json!({"status": {
            "phase": "Running",
            "interfaces": [{"ipAddress": "10.0.0.7"}],
            "conditions": [
                {"type": "LiveMigratable", "status": "False"},
                {"type": "Ready", "status": "True"},
            ],
        }});
        assert_eq!(at(&vmi, ".status.phase"), "Running");
        assert_eq!(at(&vmi, ".status.interfaces[0].ipAddress"), "10.0.0.7");
        assert_eq!(
            at(&vmi, ".status.conditions[?(@.type=='Ready')].status"),
            "True"
        );
        assert_eq!(
            at(
                &vmi,
                ".status.conditions[?(@.type==\"LiveMigratable\")].status"
            ),
            "False"
        );
        for absent in [
            ".status.conditions[?(@.type=='Paused')].status",
            ".status.interfaces[3].ipAddress",
            ".status.nodeName",
            ".status.conditions[?(@.type)]",
            ".status.conditions[x]",
            ".status[",
        ] {
            assert!(at(&vmi, absent).is_null(), "{absent}");
        }
    }
}
