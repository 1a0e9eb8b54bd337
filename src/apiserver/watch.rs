//! Watch: the changes after a resourceVersion (replayed from the store's
//! history, `410 Gone` as an ERROR event when it is too old), or every
//! object as ADDED then the changes, until `timeoutSeconds`.

use super::{Target, in_namespace, labels_match, line};
use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use gpu_claims_actors::memory::store::{EventType, Store, StoreEvent};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

struct Watch {
    pending: VecDeque<Value>,
    rx: Option<UnboundedReceiver<StoreEvent>>,
    deadline: tokio::time::Instant,
    target: Target,
    selector: Option<String>,
}

fn event(ev: &StoreEvent) -> Value {
    let type_ = match ev.type_ {
        EventType::Added => "ADDED",
        EventType::Modified => "MODIFIED",
        EventType::Deleted => "DELETED",
    };
    json!({"type": type_, "object": ev.object})
}

impl Watch {
    fn wants(&self, ev: &StoreEvent) -> bool {
        ev.kind == self.target.resource.kind
            && in_namespace(&ev.object, self.target.namespace.as_deref())
            && labels_match(&ev.object, self.selector.as_ref())
    }
}

pub fn watch(store: Arc<Store>, target: Target, q: HashMap<String, String>) -> Response {
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .unwrap_or(1800u64);
    let selector = q.get("labelSelector").cloned();
    let from: Option<u64> = q
        .get("resourceVersion")
        .and_then(|r| r.parse().ok())
        .filter(|r| *r > 0);
    let mut w = Watch {
        pending: VecDeque::new(),
        rx: None,
        deadline: tokio::time::Instant::now() + Duration::from_secs(timeout),
        target,
        selector,
    };
    let start = match from {
        Some(rv) => rv,
        None => {
            // No version: every object as ADDED, then what follows.
            let (objs, rv) = store.list(w.target.resource.kind);
            for o in objs.into_iter().filter(|o| {
                in_namespace(o, w.target.namespace.as_deref())
                    && labels_match(o, w.selector.as_ref())
            }) {
                w.pending.push_back(json!({"type": "ADDED", "object": o}));
            }
            rv
        }
    };
    match store.watch_from(start) {
        Ok((replay, rx)) => {
            let wanted: Vec<Value> = replay.iter().filter(|e| w.wants(e)).map(event).collect();
            w.pending.extend(wanted);
            w.rx = Some(rx);
        }
        Err(_) => w.pending.push_back(
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "Expired", "code": 410,
            "message": format!("too old resource version: {start}")}}),
        ),
    }
    let stream = futures::stream::unfold(w, |mut w| async move {
        loop {
            if let Some(v) = w.pending.pop_front() {
                return Some((Ok::<Bytes, Infallible>(line(&v)), w));
            }
            let rx = w.rx.as_mut()?;
            let ev = tokio::time::timeout_at(w.deadline, rx.recv())
                .await
                .ok()
                .flatten()?;
            if w.wants(&ev) {
                w.pending.push_back(event(&ev));
            }
        }
    });
    (
        [("content-type", "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}
