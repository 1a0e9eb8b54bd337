//! The world as a controller started afresh would list it from the
//! cluster: what I6 and I11 judge the running controller against.

use super::*;

/// The world as a freshly started controller would list it.
pub(super) fn world_of(c: &MemCluster) -> WorldWriter {
    let fresh = WorldWriter::new(gpu_claims_actors::config::Config::default());
    for kind in Kind::ALL {
        for v in c.store.list(kind.name()).0 {
            let k = match v["metadata"]["namespace"].as_str() {
                Some(ns) => key(ns, v["metadata"]["name"].as_str().unwrap_or_default()),
                None => v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            };
            // As the controller's watch: what it cannot read is said so.
            match from_value(kind, v) {
                Ok(o) => fresh.load(o),
                Err(e) => {
                    fresh.set_unreadable(kind, &k, Some(e.to_string()));
                }
            }
        }
    }
    fresh
}
