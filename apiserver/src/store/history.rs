//! The change history of the store: what a watch that starts behind
//! replays, bounded as a real API server's watch cache is (and etcd
//! compacts): by count and by bytes. Older is `410 Gone`.

use super::{EventType, Inner, Store, StoreEvent, Subscriber, WATCH_BUFFER, WATCH_QUEUE_BYTES};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::mpsc;

/// What a watch over HTTP has waiting: events and their bytes.
#[derive(Default)]
struct Queued {
    events: AtomicUsize,
    bytes: AtomicUsize,
}

/// The store's end of a watch over HTTP.
pub(super) struct WatchTx {
    tx: mpsc::UnboundedSender<(Arc<StoreEvent>, usize)>,
    queued: Arc<Queued>,
}

impl WatchTx {
    /// Queues `ev`, or false when the watch is gone or too far behind
    /// (`WATCH_BUFFER` events or `WATCH_QUEUE_BYTES` waiting): it is then
    /// closed, as kube-apiserver's cacher closes a watcher that does not
    /// keep up, and its client lists or watches again.
    fn send(&self, ev: &Arc<StoreEvent>, size: usize) -> bool {
        let events = self.queued.events.load(Ordering::Acquire);
        let bytes = self.queued.bytes.load(Ordering::Acquire);
        if events >= WATCH_BUFFER || bytes.saturating_add(size) > WATCH_QUEUE_BYTES {
            return false;
        }
        self.queued.events.fetch_add(1, Ordering::AcqRel);
        self.queued.bytes.fetch_add(size, Ordering::AcqRel);
        self.tx.send((ev.clone(), size)).is_ok()
    }
}

/// A watch's end: the changes, in order, until it is closed.
pub struct WatchRx {
    rx: mpsc::UnboundedReceiver<(Arc<StoreEvent>, usize)>,
    queued: Arc<Queued>,
}

impl WatchRx {
    /// The next change, or None once the store closed the watch.
    pub async fn recv(&mut self) -> Option<Arc<StoreEvent>> {
        let (ev, size) = self.rx.recv().await?;
        self.queued.events.fetch_sub(1, Ordering::AcqRel);
        self.queued.bytes.fetch_sub(size, Ordering::AcqRel);
        Some(ev)
    }
}

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
        Self::publish_sized(g, kind, type_, object, super::json_len(object), prev);
    }

    /// `publish`, the object's JSON bytes known already.
    pub(super) fn publish_sized(
        g: &mut Inner,
        kind: &str,
        type_: EventType,
        object: &Value,
        object_len: usize,
        prev: Option<Value>,
    ) {
        let size = object_len.saturating_add(prev.as_ref().map_or(0, super::json_len));
        let ev = Arc::new(StoreEvent {
            kind: kind.to_string(),
            type_,
            object: object.clone(),
            prev,
            resource_version: g.rv,
        });
        g.history.push_back((ev.clone(), size));
        g.history_bytes += size;
        Self::trim_history(g);
        g.watchers.retain(|w| match w {
            Subscriber::All(tx) => tx.send(StoreEvent::clone(&ev)).is_ok(),
            Subscriber::Bounded(tx) => tx.send(&ev, size),
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
    /// now on, at most `WATCH_BUFFER` of them and `WATCH_QUEUE_BYTES`
    /// waiting to be read: past either the receiver is closed (the watch
    /// ends).
    pub fn watch_from(&self, rv: u64) -> Result<(Vec<Arc<StoreEvent>>, WatchRx), Gone> {
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
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(Queued::default());
        g.watchers.push(Subscriber::Bounded(WatchTx {
            tx,
            queued: queued.clone(),
        }));
        Ok((replay, WatchRx { rx, queued }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn store() -> Store {
        Store::new(Arc::new(k8s_openapi::jiff::Timestamp::now), &[])
    }

    /// 20 watches that never read, of a 400 KB ConfigMap written 25
    /// times, held a copy of every event each (350 MB); the events are
    /// shared now, and a watch with `WATCH_QUEUE_BYTES` waiting is closed.
    #[tokio::test]
    async fn a_watch_that_never_reads_holds_shared_events_and_at_most_its_bytes() {
        let store = store();
        let rv = store.list("ConfigMap").1;
        let mut watches: Vec<_> = (0..20).map(|_| store.watch_from(rv).unwrap().1).collect();
        let big = "x".repeat(400 << 10);
        store
            .create(
                "ConfigMap",
                json!({"metadata": {"namespace": "t", "name": "big"}, "data": {"v": big}}),
            )
            .unwrap();
        let writes = 60;
        for i in 0..writes {
            let mut o = store.get("ConfigMap", "t", "big").unwrap();
            o["data"]["i"] = json!(i.to_string());
            store.update("ConfigMap", o, Subresource::Main).unwrap();
        }
        let (first, second) = watches.split_at_mut(1);
        let a = first[0].recv().await.unwrap();
        let b = second[0].recv().await.unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one event, shared by every watch");
        for w in &mut watches {
            let mut got = 1;
            while w.recv().await.is_some() {
                got += 1;
            }
            // Each event holds the object and the one before: ~800 KB.
            assert!(got < writes, "closed after {got} of {} events", writes + 1);
            assert!(got * (800 << 10) <= WATCH_QUEUE_BYTES + (800 << 10));
        }
    }

    /// 50 writes of a 1 MiB object held 51 MB of history after the object
    /// was gone; the bytes bound the history now, as the count does.
    #[test]
    fn the_change_history_is_bounded_by_bytes_as_well_as_count() {
        let store = store();
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
