//! Feeds the in-memory cluster's changes to a supervisor as watch events:
//! a list of each kind first, then every change in order, optionally late
//! by a fixed lag (a watch that trails our own writes).

use super::cluster::from_value;
use super::store::{EventType, Store};
use crate::actors::{Supervisor, WorldEvent};
use crate::ports::{Kind, Obj};
use actix::Addr;
use std::sync::Arc;
use std::time::Duration;

/// Starts the feed on the current tokio runtime.
pub fn feed(
    store: Arc<Store>,
    kinds: Vec<Kind>,
    to: Addr<Supervisor>,
    lag: Option<Duration>,
) -> tokio::task::JoinHandle<()> {
    // Subscribe before listing, so no change falls between the two.
    let (mut rx, _) = store.watch();
    let mut listed_at = 0;
    for kind in &kinds {
        let (objs, rv) = store.list(kind.name());
        listed_at = listed_at.max(rv);
        let objs: Vec<Obj> = objs
            .into_iter()
            .filter_map(|v| typed(*kind, v, &to))
            .collect();
        to.do_send(WorldEvent::Relisted(*kind, objs));
    }
    // Events are stamped on arrival and delivered `lag` later, in order.
    let (tx, mut delayed) = tokio::sync::mpsc::unbounded_channel();
    let stamp = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if tx.send((tokio::time::Instant::now(), ev)).is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        while let Some((at, ev)) = delayed.recv().await {
            let Some(kind) = Kind::from_name(&ev.kind).filter(|k| kinds.contains(k)) else {
                continue;
            };
            if ev.resource_version <= listed_at {
                continue;
            }
            if let Some(lag) = lag {
                tokio::time::sleep_until(at + lag).await;
            }
            let Some(obj) = typed(kind, ev.object, &to) else {
                continue;
            };
            to.do_send(match ev.type_ {
                EventType::Deleted => WorldEvent::Delete(obj),
                EventType::Added | EventType::Modified => WorldEvent::Apply(obj),
            });
        }
        stamp.abort();
    })
}

fn typed(kind: Kind, v: serde_json::Value, to: &Addr<Supervisor>) -> Option<Obj> {
    let name = format!(
        "{}/{}",
        v["metadata"]["namespace"].as_str().unwrap_or_default(),
        v["metadata"]["name"].as_str().unwrap_or_default()
    );
    match from_value(kind, v) {
        Ok(o) => Some(o),
        Err(error) => {
            to.do_send(WorldEvent::Unreadable { kind, name, error });
            None
        }
    }
}
