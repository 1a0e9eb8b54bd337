//! The controller's Events, written as core/v1 Events with their first and
//! last timestamps and a count, as client-go's `record` package writes
//! them (and KubeVirt's controllers with it).
//!
//! Why not events.k8s.io (kube-runtime's `Recorder`): the API server
//! refuses an events.k8s.io/v1 Event that sets `deprecatedLastTimestamp`
//! ("needs to be unset", `ValidateEventCreate`), so such an Event's core
//! form has no `lastTimestamp`, and the command every platform engineer
//! types, `kubectl get events -A --sort-by=.lastTimestamp`, leaves it
//! out of order or out of the list. Written as core/v1, the same Event is
//! listed, sorted and shown by `kubectl get events`, `kubectl events` and
//! `kubectl describe` alike.
//!
//! An Event that repeats (same object, type, reason, message, rule and
//! related object) within [`REPEAT_WINDOW`] is one Event whose count and
//! last timestamp move, as client-go's correlator does: a VMI told each
//! minute that it waits keeps one line, not a page of them.

use async_trait::async_trait;
use gpu_claims_actors::ports::{Event, ObjRef};
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a repeat counts as the same Event (client-go's aggregation
/// interval, `defaultAggregateIntervalInSeconds`).
pub const REPEAT_WINDOW: Duration = Duration::from_secs(600);

/// How many Events are remembered for repeats (client-go's
/// `maxLruCacheEntries`): beyond it, the oldest are forgotten, and a
/// repeat of one of them starts a new Event.
const REMEMBERED: usize = 4096;

/// The longest message the API server keeps whole on an Event
/// (`NoteLengthLimit`): longer ones are cut, on a character's boundary.
const MESSAGE_MAX: usize = 1024;

/// The component that reports the Events.
const COMPONENT: &str = "gpu-claims";

/// What makes two Events the same Event.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Same {
    regarding: ObjRef,
    uid: Option<String>,
    warning: bool,
    reason: String,
    message: String,
    action: &'static str,
    related: Option<ObjRef>,
}

/// An Event written: where it is, how often it was seen, and when last.
#[derive(Clone, Debug)]
struct Written {
    namespace: String,
    name: String,
    count: i32,
    at: Instant,
}

/// Events through the API server's core/v1 Events, best effort, and only
/// while the fence (if any) is open: a standby tells nothing.
pub struct KubeRecorder {
    client: Client,
    fence: Option<Arc<crate::leader::Fence>>,
    /// This replica, as `reportingInstance` says it (its pod's name).
    instance: String,
    written: Mutex<HashMap<Same, Written>>,
}

impl KubeRecorder {
    pub fn new(client: Client, fence: Option<Arc<crate::leader::Fence>>) -> Arc<Self> {
        let instance = std::env::var("POD_NAME").unwrap_or_else(|_| COMPONENT.into());
        Arc::new(Self {
            client,
            fence,
            instance,
            written: Mutex::new(HashMap::new()),
        })
    }

    /// A repeat of an Event written within the window: its place and its
    /// count now, counted.
    fn repeat_of(&self, same: &Same, now: Instant) -> Option<Written> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let w = written.get_mut(same)?;
        if now.duration_since(w.at) >= REPEAT_WINDOW {
            written.remove(same);
            return None;
        }
        w.count = w.count.saturating_add(1);
        w.at = now;
        Some(w.clone())
    }

    fn remember(&self, same: Same, w: Written) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.len() >= REMEMBERED {
            let now = w.at;
            written.retain(|_, x| now.duration_since(x.at) < REPEAT_WINDOW);
            if written.len() >= REMEMBERED {
                // All recent: the oldest half goes.
                let mut ats: Vec<Instant> = written.values().map(|x| x.at).collect();
                ats.sort_unstable();
                let cut = ats[ats.len() / 2];
                written.retain(|_, x| x.at > cut);
            }
        }
        written.insert(same, w);
    }

    /// Forgets a repeat whose Event is gone (it expired on the server).
    fn forget(&self, same: &Same) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.remove(same);
    }

    /// A repeat: the Event's count and last timestamp, patched. False when
    /// the Event is gone (the server's TTL took it) and a new one is due.
    async fn count(&self, w: &Written, now: Timestamp) -> Result<bool, kube::Error> {
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &w.namespace);
        let patch = serde_json::json!({
            "count": w.count,
            "lastTimestamp": Time(now),
        });
        match api
            .patch(&w.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn create(&self, ev: CoreEvent, namespace: &str) -> Result<(), kube::Error> {
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), namespace);
        api.create(&PostParams::default(), &ev).await.map(|_| ())
    }
}

fn reference(r: &ObjRef, uid: Option<&String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(r.kind.api_version().into()),
        kind: Some(r.kind.name().into()),
        namespace: r.namespace.clone(),
        name: Some(r.name.clone()),
        uid: uid.cloned(),
        ..Default::default()
    }
}

/// `s` cut to at most `max` bytes, on a character's boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The core/v1 Event for `event`, first seen `now`, named as client-go
/// names it (the object's name and the time in hex nanoseconds).
fn core_event(event: &Event, instance: &str, now: Timestamp) -> CoreEvent {
    // Cluster-scoped objects' Events live in `default`, as upstream's.
    let namespace = event
        .regarding
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let nanos = u128::try_from(now.as_nanosecond()).unwrap_or_default();
    CoreEvent {
        metadata: ObjectMeta {
            name: Some(format!("{}.{nanos:x}", event.regarding.name)),
            namespace: Some(namespace),
            ..Default::default()
        },
        involved_object: reference(&event.regarding, event.uid.as_ref()),
        type_: Some(if event.warning { "Warning" } else { "Normal" }.into()),
        reason: Some(event.reason.clone()),
        // Messages carry what tenants wrote; shown, not acted on.
        message: Some(cut(&event.note(), MESSAGE_MAX).to_string()),
        action: Some(event.rule.as_str().into()),
        related: event
            .related
            .as_ref()
            .map(|(r, uid)| reference(r, uid.as_ref())),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(instance.to_string()),
        ..Default::default()
    }
}

#[async_trait]
impl gpu_claims_actors::ports::Recorder for KubeRecorder {
    async fn publish(&self, event: Event) {
        if self.fence.as_ref().is_some_and(|f| !f.open()) {
            tracing::debug!(regarding = %event.regarding, "event not published: this process does not lead");
            return;
        }
        let same = Same {
            regarding: event.regarding.clone(),
            uid: event.uid.clone(),
            warning: event.warning,
            reason: event.reason.clone(),
            message: event.message.clone(),
            action: event.rule.as_str(),
            related: event.related.as_ref().map(|(r, _)| r.clone()),
        };
        let (now, wall) = (Instant::now(), Timestamp::now());
        if let Some(w) = self.repeat_of(&same, now) {
            match self.count(&w, wall).await {
                Ok(true) => return,
                Ok(false) => self.forget(&same),
                Err(e) => {
                    tracing::debug!(error = %e, regarding = %event.regarding, "event repeat not counted");
                    return;
                }
            }
        }
        let ev = core_event(&event, &self.instance, wall);
        let (namespace, name) = (
            ev.metadata.namespace.clone().unwrap_or_default(),
            ev.metadata.name.clone().unwrap_or_default(),
        );
        match self.create(ev, &namespace).await {
            Ok(()) => self.remember(
                same,
                Written {
                    namespace,
                    name,
                    count: 1,
                    at: now,
                },
            ),
            Err(e) => {
                tracing::debug!(error = %e, regarding = %event.regarding, "event not published")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary() {
        let s = "é".repeat(600);
        let c = cut(&s, MESSAGE_MAX);
        assert!(c.len() <= MESSAGE_MAX && c.len() >= MESSAGE_MAX - 1);
        assert_eq!(cut("short", MESSAGE_MAX), "short");
    }
}
