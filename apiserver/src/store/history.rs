//! The change history of the store: what a watch that starts behind
//! replays, bounded as a real API server's watch cache is (and etcd
//! compacts): by count and by bytes. Older is `410 Gone`.

use super::{EventType, Inner, Store, StoreEvent, Subscriber, WATCH_BUFFER};
use serde_json::Value;
use std::collections::BTreeMap;
use tokio::sync::mpsc;

/// How much change history is kept: as a real API server's watch cache is
/// bounded by its capacity (and etcd compacts), by count and by bytes; a
/// watch that would start before the oldest change kept is `410 Gone`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryLimits {
    pub changes: usize,
    pub bytes: usize,
}

impl Default for HistoryLimits {
    fn default() -> Self {
        HistoryLimits {
            changes: HISTORY,
            bytes: HISTORY_BYTES,
        }
    }
}

/// How many changes a watch can start behind; older is `410 Gone`.
pub const HISTORY: usize = 10_000;
/// How many bytes of changed objects are kept for watches that start behind.
pub const HISTORY_BYTES: usize = 16 << 20;

/// A watch asked to start before the oldest change kept.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone;

impl Store {
    /// Drops the change history, as a restarted API server's empty watch
    /// cache does: a watch from an older resourceVersion is then `Gone`.
    pub fn forget_history(&self) {
        let mut g = self.lock();
        g.history.clear();
        g.history_bytes = 0;
    }

    /// Bounds the change history differently (tests of the bound).
    pub fn set_history_limits(&self, limits: HistoryLimits) {
        let mut g = self.lock();
        g.limits = limits;
        Self::trim_history(&mut g);
    }

    /// The changes kept and their bytes.
    pub fn history_size(&self) -> (usize, usize) {
        let g = self.lock();
        (g.history.len(), g.history_bytes)
    }

    pub(super) fn trim_history(g: &mut Inner) {
        while g.history.len() > g.limits.changes || g.history_bytes > g.limits.bytes {
            let Some((_, size)) = g.history.pop_front() else {
                break;
            };
            g.history_bytes -= size;
        }
    }

    /// Changes from now on, and the resourceVersion they follow.
    pub fn watch(&self) -> (mpsc::UnboundedReceiver<StoreEvent>, u64) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut g = self.lock();
        g.watchers.push(Subscriber::All(tx));
        (rx, g.rv)
    }

    pub(super) fn publish(
        g: &mut Inner,
        kind: &str,
        type_: EventType,
        object: &Value,
        prev: Option<Value>,
    ) {
        let json_len = |v: &Value| serde_json::to_vec(v).map_or(0, |b| b.len());
        let size = json_len(object) + prev.as_ref().map_or(0, json_len);
        let ev = StoreEvent {
            kind: kind.to_string(),
            type_,
            object: object.clone(),
            prev,
            resource_version: g.rv,
        };
        g.history.push_back((ev.clone(), size));
        g.history_bytes += size;
        Self::trim_history(g);
        // A watch over HTTP whose consumer falls `WATCH_BUFFER` events
        // behind is closed, as kube-apiserver's cacher closes one: its
        // client lists or watches again from its last version.
        g.watchers.retain(|w| match w {
            Subscriber::All(tx) => tx.send(ev.clone()).is_ok(),
            Subscriber::Bounded(tx) => tx.try_send(ev.clone()).is_ok(),
        });
    }

    /// Whether the history holds every change after `rv`.
    fn reaches(g: &Inner, rv: u64) -> bool {
        let oldest = g
            .history
            .front()
            .map_or(g.rv + 1, |(e, _)| e.resource_version);
        rv + 1 >= oldest || rv >= g.rv
    }

    /// A kind's objects (in `namespace`, if one) as they were at `rv`, in
    /// (namespace, name) order: today's, with every change made since rolled
    /// back from the history (each change keeps the object before it).
    /// Gone when the history no longer reaches back to `rv`. What a later
    /// page of a paged list, or a list at an exact version, is read from.
    pub fn objects_at(
        &self,
        kind: &str,
        namespace: Option<&str>,
        rv: u64,
    ) -> Result<Vec<Value>, Gone> {
        let g = self.lock();
        if !Self::reaches(&g, rv) {
            return Err(Gone);
        }
        let in_scope = |ns: &str| namespace.is_none_or(|n| n == ns);
        let mut view: BTreeMap<(String, String), Option<Value>> = g
            .objects
            .iter()
            .filter(|((k, ns, _), _)| k == kind && in_scope(ns))
            .map(|((_, ns, name), v)| ((ns.clone(), name.clone()), Some(v.clone())))
            .collect();
        for (e, _) in g.history.iter().rev() {
            if e.resource_version <= rv {
                break;
            }
            if e.kind != kind {
                continue;
            }
            let m = &e.object["metadata"];
            let ns = m["namespace"].as_str().unwrap_or_default();
            if !in_scope(ns) {
                continue;
            }
            let name = m["name"].as_str().unwrap_or_default();
            view.insert((ns.to_string(), name.to_string()), e.prev.clone());
        }
        Ok(view.into_values().flatten().collect())
    }

    /// Changes after `rv` (replayed from history), then every change from
    /// now on, at most `WATCH_BUFFER` of them waiting to be read: past it
    /// the receiver is closed (the watch ends).
    #[allow(clippy::type_complexity)]
    pub fn watch_from(
        &self,
        rv: u64,
    ) -> Result<(Vec<StoreEvent>, mpsc::Receiver<StoreEvent>), Gone> {
        let mut g = self.lock();
        if !Self::reaches(&g, rv) {
            return Err(Gone);
        }
        let replay = g
            .history
            .iter()
            .filter(|(e, _)| e.resource_version > rv)
            .map(|(e, _)| e.clone())
            .collect();
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        g.watchers.push(Subscriber::Bounded(tx));
        Ok((replay, rx))
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use serde_json::json;
    use std::sync::Arc;

    /// 50 writes of a 1 MiB object held 51 MB of history after the object
    /// was gone; the bytes bound the history now, as the count does.
    #[test]
    fn the_change_history_is_bounded_by_bytes_as_well_as_count() {
        let store = Store::new(Arc::new(k8s_openapi::jiff::Timestamp::now), &[]);
        let big = "x".repeat(1 << 20);
        let first = store.seed(
            "ConfigMap",
            json!({"metadata": {"namespace": "t", "name": "big"}, "data": {"v": big}}),
        );
        let first_rv: u64 = meta_str(&first, "resourceVersion").parse().unwrap();
        for i in 0..50 {
            let mut o = store.get("ConfigMap", "t", "big").unwrap();
            o["data"]["i"] = json!(i.to_string());
            store.update("ConfigMap", o, Subresource::Main).unwrap();
        }
        store.delete("ConfigMap", "t", "big").unwrap();
        let (changes, bytes) = store.history_size();
        assert!(bytes <= HISTORY_BYTES, "{bytes} bytes in {changes} changes");
        assert!(changes < 52, "older changes were dropped: {changes}");
        assert!(
            store.watch_from(first_rv).is_err(),
            "a watch from the first write is Gone"
        );

        store.set_history_limits(HistoryLimits {
            changes: 2,
            bytes: usize::MAX,
        });
        assert_eq!(store.history_size().0, 2, "the count bounds it too");
    }
}
