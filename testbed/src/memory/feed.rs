//! Feeds the in-memory cluster's changes to a supervisor as watch events:
//! a list of each kind first, then every change in order, optionally late
//! by a fixed lag (a watch that trails our own writes).

use super::store::{EventType, Store};
use actix::Addr;
use gpu_claims_actors::api::{DecodeError, from_json as from_value};
use gpu_claims_actors::controller::{Supervisor, WorldEvent};
use gpu_claims_actors::ports::{Kind, Obj};
use std::sync::Arc;
use std::time::Duration;

/// How late each kind's watch trails the store's changes. Kinds lag
/// independently: the watches of two kinds are not ordered with each other.
#[derive(Clone, Debug, Default)]
pub struct Lag {
    /// Every kind, unless `kinds` names it.
    pub all: Option<Duration>,
    pub kinds: Vec<(Kind, Duration)>,
}

impl Lag {
    /// Only the watch of `kind` trails, by `d`.
    pub fn of(kind: Kind, d: Duration) -> Self {
        Lag {
            all: None,
            kinds: vec![(kind, d)],
        }
    }

    /// The most any kind's watch trails.
    pub fn most(&self) -> Duration {
        self.kinds
            .iter()
            .map(|(_, d)| *d)
            .chain(self.all)
            .max()
            .unwrap_or_default()
    }

    fn for_kind(&self, kind: Kind) -> Option<Duration> {
        self.kinds
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, d)| *d)
            .or(self.all)
    }
}

impl From<Option<Duration>> for Lag {
    fn from(all: Option<Duration>) -> Self {
        Lag {
            all,
            kinds: Vec::new(),
        }
    }
}

/// Objects copied out of the store at once while listing.
const LIST_PAGE: usize = 500;

/// Starts the feed on the current tokio runtime.
pub fn feed(
    store: Arc<Store>,
    kinds: Vec<Kind>,
    to: Addr<Supervisor>,
    lag: Lag,
) -> tokio::task::JoinHandle<()> {
    // Subscribe before listing, so no change falls between the two.
    let (mut rx, _) = store.watch();
    let mut listed_at = 0;
    for kind in &kinds {
        // A page at a time, each read as typed before the next is copied:
        // a cluster of 50,000 pods is never copied whole (nothing writes
        // meanwhile: the simulation runs on this one thread).
        let (mut objects, mut unreadable) = (Vec::new(), Vec::new());
        let mut after: Option<(String, String)> = None;
        let rv = loop {
            let at = after.as_ref().map(|(ns, n)| (ns.as_str(), n.as_str()));
            let (page, more, rv) = store.list_page(kind.name(), None, at, LIST_PAGE, |_| true);
            after = page.last().map(|v| {
                let m = &v["metadata"];
                let s = |f: &str| m[f].as_str().unwrap_or_default().to_string();
                (s("namespace"), s("name"))
            });
            for v in page {
                match typed(*kind, v) {
                    Ok(o) => objects.push(o),
                    Err(bad) => unreadable.push(bad),
                }
            }
            if !more || after.is_none() {
                break rv;
            }
        };
        listed_at = listed_at.max(rv);
        to.do_send(WorldEvent::Relisted {
            kind: *kind,
            objects,
            list_rv: Some(rv),
            unreadable,
        });
    }
    // Each kind's events are stamped on arrival and delivered by its own
    // task `lag` later, in order.
    let mut lanes = std::collections::HashMap::new();
    let mut tasks = Vec::new();
    for kind in kinds {
        let (tx, mut delayed) = tokio::sync::mpsc::unbounded_channel();
        lanes.insert(kind, tx);
        let (to, lag) = (to.clone(), lag.for_kind(kind));
        tasks.push(tokio::spawn(async move {
            while let Some((at, ev)) = delayed.recv().await {
                if let Some(lag) = lag {
                    tokio::time::sleep_until(at + lag).await;
                }
                deliver(kind, ev, &to);
            }
        }));
    }
    // Aborting the feed (a process killed) stops every lane with it.
    let lanes_guard = AbortOnDrop(tasks);
    tokio::spawn(async move {
        let _lanes = lanes_guard;
        while let Some(ev) = rx.recv().await {
            let lane = Kind::from_name(&ev.kind).and_then(|k| lanes.get(&k));
            if let Some(tx) = lane.filter(|_| ev.resource_version > listed_at)
                && tx.send((tokio::time::Instant::now(), ev)).is_err()
            {
                break;
            }
        }
    })
}

struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

fn deliver(kind: Kind, ev: super::store::StoreEvent, to: &Addr<Supervisor>) {
    let gone = ev.type_ == EventType::Deleted;
    to.do_send(WorldEvent::read(kind, typed(kind, ev.object), gone));
}

/// The object read, or its key (`ns/name`, or its name) and why not.
fn typed(kind: Kind, v: serde_json::Value) -> Result<Obj, (String, DecodeError)> {
    let (ns, name) = (
        v["metadata"]["namespace"].as_str().unwrap_or_default(),
        v["metadata"]["name"].as_str().unwrap_or_default(),
    );
    let name = if ns.is_empty() {
        name.to_string()
    } else {
        format!("{ns}/{name}")
    };
    from_value(kind, v).map_err(|e| (name, e))
}
