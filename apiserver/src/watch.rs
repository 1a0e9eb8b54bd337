//! Watch: the changes after a resourceVersion (replayed from the store's
//! history, `410 Gone` as an ERROR event when it is too old), or every
//! object as ADDED then the changes; BOOKMARKs when asked for; the
//! streaming list of `sendInitialEvents`; ended by `timeoutSeconds`, an
//! injected cut, a server restart, or a partition that cuts its caller off.

use super::select::Selector;
use super::{ApiServer, Target, events, status, table};
use crate::store::{EventType, StoreEvent, WatchRx};
use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// The longest a watch runs (a day), whatever `timeoutSeconds` asks.
const MAX_WATCH_SECONDS: u64 = 86_400;

/// How long a watch from a resourceVersion the store has not reached
/// waits for it, before `504 Too large resource version` (kube-apiserver's
/// cacher waits 3 s).
const FUTURE_VERSION_WAIT: Duration = Duration::from_secs(3);

/// How often a quiet watch that asked for bookmarks gets one.
pub const BOOKMARK_EVERY: Duration = Duration::from_secs(5);

/// One line of a watch, in kube-apiserver's field order (its
/// `metav1.WatchEvent`): `type` before `object`, so that a client can read
/// the object as the type says without buffering it first (serde does for
/// an adjacently tagged event whose content comes before its tag).
#[derive(serde::Serialize, Debug)]
struct Event {
    #[serde(rename = "type")]
    type_: &'static str,
    object: Value,
}

impl Event {
    fn line(&self) -> Bytes {
        // An ERROR's Status in Go's order too.
        let mut b = if self.object["kind"] == "Status" {
            crate::answers::json_object([
                ("type", serde_json::to_vec(self.type_).unwrap_or_default()),
                ("object", crate::answers::go_json(&self.object)),
            ])
        } else {
            serde_json::to_vec(self).unwrap_or_default()
        };
        b.push(b'\n');
        Bytes::from(b)
    }
}

struct Watch {
    pending: VecDeque<Event>,
    rx: Option<WatchRx>,
    deadline: tokio::time::Instant,
    target: Target,
    selector: Selector,
    bookmarks: bool,
    /// The version of the last store change this stream has passed: a
    /// bookmark may say it, since nothing before it is still to come.
    seen: u64,
    epoch: tokio::sync::watch::Receiver<u64>,
    /// kubectl asked for Tables: each event's object is a one-row Table
    /// (with these printer columns, for a custom resource).
    as_table: Option<Option<Vec<table::Column>>>,
    /// A metadata-only watch: each object as PartialObjectMetadata.
    as_metadata: bool,
    /// Resolves when the caller is cut off the server.
    cut: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Watch {
    fn event(&self, type_: &'static str, obj: &Value) -> Event {
        let obj = &events::served(&self.target.resource, obj.clone());
        let object = match &self.as_table {
            Some(cols) => {
                let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
                table::table(
                    &self.target.resource,
                    cols.as_deref(),
                    std::slice::from_ref(obj),
                    meta,
                )
            }
            None if self.as_metadata => crate::partial::object(obj),
            None => obj.clone(),
        };
        Event { type_, object }
    }

    /// A store change as this watch shows it, or None when it does not
    /// concern it. As the API server's cacher: an object that starts
    /// matching the selector is ADDED, one that stops is DELETED (with its
    /// last matching state at the change's resourceVersion).
    fn store_event(&self, ev: &StoreEvent) -> Option<Event> {
        if ev.kind != self.target.resource.store_kind {
            return None;
        }
        let now = ev.type_ != EventType::Deleted && self.wants(&ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| self.wants(p));
        match (before, now) {
            (false, true) => Some(self.event("ADDED", &ev.object)),
            (true, true) => Some(self.event("MODIFIED", &ev.object)),
            (true, false) => {
                let mut last = ev.prev.clone().unwrap_or_default();
                last["metadata"]["resourceVersion"] = ev.resource_version.to_string().into();
                Some(self.event("DELETED", &last))
            }
            (false, false) => None,
        }
    }

    fn wants(&self, obj: &Value) -> bool {
        in_namespace(obj, self.target.namespace.as_deref()) && self.selector.matches(obj)
    }

    fn bookmark(&self, initial_end: bool) -> Event {
        let mut meta = json!({"resourceVersion": self.seen.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({
            "kind": self.target.resource.kind,
            "apiVersion": self.target.resource.api_version(),
            "metadata": meta,
        });
        let object = if self.as_metadata {
            crate::partial::object(&object)
        } else {
            object
        };
        Event {
            type_: "BOOKMARK",
            object,
        }
    }

    /// The next line, or None when the stream ends.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(v) = self.pending.pop_front() {
                return Some(v);
            }
            let rx = self.rx.as_mut()?;
            let tick = tokio::time::sleep(if self.bookmarks {
                BOOKMARK_EVERY
            } else {
                Duration::from_secs(3600)
            });
            tokio::select! {
                _ = tokio::time::sleep_until(self.deadline) => return None,
                _ = self.epoch.changed() => return None,
                _ = &mut self.cut => return None,
                _ = tick => {
                    if self.bookmarks {
                        return Some(self.bookmark(false));
                    }
                }
                ev = rx.recv() => {
                    let ev = ev?;
                    self.seen = self.seen.max(ev.resource_version);
                    if let Some(v) = self.store_event(&ev) {
                        return Some(v);
                    }
                }
            }
        }
    }
}

/// Waits, briefly, for the store to reach `rv`; the 504 kube-apiserver
/// answers when it does not.
pub async fn reach(s: &ApiServer, rv: u64, plural: &str) -> Result<(), Response> {
    let until = tokio::time::Instant::now() + FUTURE_VERSION_WAIT;
    loop {
        let current = s.store.resource_version();
        if current >= rv {
            return Ok(());
        }
        if tokio::time::Instant::now() >= until {
            let body = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("Timeout: Too large resource version: {rv}, current: {current}"),
                "reason": "Timeout",
                "details": {"kind": plural, "causes": [{"reason": "ResourceVersionTooLarge",
                    "message": "Too large resource version"}], "retryAfterSeconds": 1},
                "code": 504,
            });
            return Err(crate::answers::status_response(
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                &body,
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How a watch's objects are answered, as `Accept` asks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Shape {
    /// kubectl's one-row Tables.
    pub table: bool,
    /// Metadata alone (`PartialObjectMetadata`).
    pub metadata: bool,
}

pub fn watch(
    s: Arc<ApiServer>,
    target: Target,
    q: HashMap<String, String>,
    shape: Shape,
    user: &str,
) -> Response {
    let selector = match Selector::for_resource(
        q.get("labelSelector").map(String::as_str),
        q.get("fieldSelector").map(String::as_str),
        &target.resource,
    ) {
        Ok(sel) => sel,
        Err(e) => return status(400, "BadRequest", &e, None, target.resource.plural),
    };
    // As the API server bounds it: a number too large for a deadline
    // (2^63 seconds) is the longest a watch runs, not a panic.
    let mut timeout = Duration::from_secs(
        q.get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(1800)
            .min(MAX_WATCH_SECONDS),
    );
    if let Some(cut) = s.faults().cut_watches_every {
        timeout = timeout.min(cut);
    }
    let flag = |k: &str| q.get(k).is_some_and(|v| v == "true" || v == "1");
    let from: Option<u64> = q
        .get("resourceVersion")
        .and_then(|r| r.parse().ok())
        .filter(|r| *r > 0);
    let initial = flag("sendInitialEvents");
    let table_columns = shape.table.then(|| {
        s.served()
            .custom(target.resource.kind)
            .map(|c| c.columns.clone())
    });
    let mut w = Watch {
        pending: VecDeque::new(),
        rx: None,
        deadline: tokio::time::Instant::now() + timeout,
        target,
        selector,
        bookmarks: flag("allowWatchBookmarks"),
        seen: 0,
        epoch: s.epoch.subscribe(),
        as_table: table_columns,
        as_metadata: shape.metadata,
        cut: Box::pin(s.cut_off(user)),
    };
    let start = match from {
        Some(rv) if !initial => rv,
        _ => {
            // No version (or a streaming list): every object as ADDED,
            // then what follows.
            let (objs, rv) = s.store.list(w.target.resource.store_kind);
            let added: Vec<Event> = objs
                .into_iter()
                .filter(|o| w.wants(o))
                .map(|o| w.event("ADDED", &o))
                .collect();
            w.pending.extend(added);
            rv
        }
    };
    w.seen = start;
    if initial {
        let end = w.bookmark(true);
        w.pending.push_back(end);
    }
    match s.store.watch_from(start) {
        Ok((replay, rx)) => {
            for e in &replay {
                w.seen = w.seen.max(e.resource_version);
            }
            let wanted: Vec<Event> = replay.iter().filter_map(|e| w.store_event(e)).collect();
            w.pending.extend(wanted);
            w.rx = Some(rx);
        }
        Err(_) => w.pending.push_back(Event {
            type_: "ERROR",
            object: json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "Expired", "code": 410,
                "message": format!("too old resource version: {start}")}),
        }),
    }
    let stream = futures::stream::unfold(w, |mut w| async move {
        let v = w.next().await?;
        Some((Ok::<Bytes, Infallible>(v.line()), w))
    });
    (
        [("content-type", "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Whether `obj` is in namespace `ns` (any, for None).
fn in_namespace(obj: &Value, ns: Option<&str>) -> bool {
    ns.is_none_or(|ns| obj["metadata"]["namespace"].as_str() == Some(ns))
}
