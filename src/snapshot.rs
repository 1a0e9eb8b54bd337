//! Snapshots for `plan`: multi-document YAML (or a `List`) of the kinds the
//! controller reads. An error names the file and the document.

use crate::{Error, Result};
use gpu_claims_actors::ports::{Kind, Obj};
use serde_json::Value;
use std::path::Path;

/// The objects of a snapshot file.
pub fn load(path: &Path) -> Result<Vec<Obj>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Snapshot {
        path: path.display().to_string(),
        doc: 0,
        reason: e.to_string(),
    })?;
    parse(&text).map_err(|(doc, reason)| Error::Snapshot {
        path: path.display().to_string(),
        doc,
        reason,
    })
}

/// Parses snapshot text; Err carries the (1-based) document number (0
/// when the text is not YAML at all: the reason says where).
pub fn parse(text: &str) -> Result<Vec<Obj>, (usize, String)> {
    let docs: Vec<Value> = crate::yaml::documents(text).map_err(|e| (0, e.to_string()))?;
    let mut objs = Vec::new();
    for (i, v) in docs.into_iter().enumerate() {
        let n = i + 1;
        let items = if v["kind"] == "List" {
            v["items"].as_array().cloned().unwrap_or_default()
        } else {
            vec![v]
        };
        for item in items {
            objs.push(object(item).map_err(|e| (n, e))?);
        }
    }
    Ok(objs)
}

fn object(v: Value) -> Result<Obj, String> {
    let kind_name = v["kind"].as_str().ok_or("no kind")?.to_string();
    let kind = Kind::from_name(&kind_name)
        .ok_or_else(|| format!("kind {kind_name} is not one plan reads"))?;
    let name = v["metadata"]["name"]
        .as_str()
        .ok_or_else(|| format!("{kind_name} without metadata.name"))?
        .to_string();
    if kind.namespaced() && v["metadata"]["namespace"].as_str().is_none() {
        return Err(format!("{kind_name} {name} without metadata.namespace"));
    }
    let obj = gpu_claims_actors::api::from_json(kind, v)
        .map_err(|e| format!("{kind_name} {name}: {e}"))?;
    // What the API server would refuse cannot be in a cluster.
    if let Obj::Claim(c) = &obj
        && let Some(problem) = c.spec_problem()
    {
        return Err(format!("{kind_name} {name}: {problem}"));
    }
    Ok(obj)
}
