//! Snapshots for `plan`: multi-document YAML (or a `List`) of the kinds the
//! controller reads. An error names the file and the document.

use crate::{Error, Result};
use gpu_claims_actors::memory::cluster_from_value;
use gpu_claims_actors::ports::{Kind, Obj};
use serde_json::Value;
use std::path::Path;

/// Splits YAML text into its documents (at `---` lines).
/// The documents of a multi-document YAML text (comment-only ones dropped).
pub fn documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line == "---" || line.starts_with("--- ") {
            docs.push(String::new());
            continue;
        }
        let last = docs.last_mut().expect("one document at least");
        last.push_str(line);
        last.push('\n');
    }
    docs.into_iter()
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .collect()
}

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

/// Parses snapshot text; Err carries the (1-based) document number.
pub fn parse(text: &str) -> Result<Vec<Obj>, (usize, String)> {
    let mut objs = Vec::new();
    for (i, doc) in documents(text).iter().enumerate() {
        let n = i + 1;
        let v: Value = serde_saphyr::from_str(doc).map_err(|e| (n, e.to_string()))?;
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
    cluster_from_value(kind, v).map_err(|e| format!("{kind_name} {name}: {e}"))
}
