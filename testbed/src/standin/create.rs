//! virt-controller creating launcher pods over HTTP: once at a time per
//! VMI, through the API server's admission (the gate webhook among it); a
//! refusal is a `FailedCreate` Warning Event on the VMI and is retried
//! after a backoff that doubles from 200 ms to 5 s, as virt-controller's
//! queue backs off (without it a refusal's Event would wake the next pass
//! at once).

use crate::memory::store::{Store, Subresource};
use gpu_claims_actors::api::{VMI_API_VERSION, VMI_KIND};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const VMI: &str = "VirtualMachineInstance";

fn m<'a>(v: &'a Value, f: &str) -> &'a str {
    v["metadata"][f].as_str().unwrap_or_default()
}

/// A launcher pod's creation over HTTP: in flight, or refused and waiting
/// out its backoff.
#[derive(Clone, Copy, Debug)]
struct Attempt {
    in_flight: bool,
    next: tokio::time::Instant,
    delay: Duration,
    /// The store's version once the pod was created: a pass whose list
    /// is older does not see the pod yet and must not make another.
    created: Option<u64>,
}

/// The creations under way, by VMI uid.
#[derive(Default, Clone)]
pub struct Creations(Arc<Mutex<HashMap<String, Attempt>>>);

impl Creations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Attempt>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What is known of the creations of VMIs that are gone goes too.
    pub fn forget_gone(&self, vmis: &[Value]) {
        let live: HashSet<&str> = vmis.iter().map(|v| m(v, "uid")).collect();
        self.lock()
            .retain(|uid, a| a.in_flight || live.contains(uid.as_str()));
    }

    /// Creates `pod` for `vmi` over HTTP, unless one is under way or
    /// waits out its backoff. `seen`: the store's version the pass's list
    /// of pods is current at.
    pub fn create_through(
        &self,
        store: &Arc<Store>,
        api: kube::Client,
        vmi: &Value,
        pod: Value,
        seen: u64,
    ) {
        let uid = m(vmi, "uid").to_string();
        // A pass off the runtime (a test's own thread) leaves the creation
        // to the next pass on it.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        {
            let mut creating = self.lock();
            let now = tokio::time::Instant::now();
            let a = creating.entry(uid.clone()).or_insert(Attempt {
                in_flight: false,
                next: now,
                delay: Duration::from_millis(100),
                created: None,
            });
            match a.created {
                Some(rv) if seen < rv => return,
                // Seen after its creation and gone: a pod to make again.
                Some(_) => a.created = None,
                None => {}
            }
            if a.in_flight || a.next > now {
                return;
            }
            a.in_flight = true;
        }
        let (store, vmi, me) = (store.clone(), vmi.clone(), self.clone());
        rt.spawn(async move {
            let result = create(api, &vmi, pod).await;
            let mut c = me.lock();
            match result {
                Ok(()) => {
                    let rv = store.resource_version();
                    if let Some(a) = c.get_mut(&uid) {
                        a.in_flight = false;
                        a.created = Some(rv);
                        a.delay = Duration::from_millis(100);
                    }
                    drop(c);
                    super::set_status(&store, VMI, &vmi, |s| s["phase"] = "Scheduling".into());
                }
                Err(e) => {
                    if let Some(a) = c.get_mut(&uid) {
                        a.in_flight = false;
                        a.delay = (a.delay * 2).min(Duration::from_secs(5));
                        a.next = tokio::time::Instant::now() + a.delay;
                    }
                    drop(c);
                    failed_create(&store, &vmi, &e);
                }
            }
        });
    }
}

async fn create(api: kube::Client, vmi: &Value, pod: Value) -> Result<(), String> {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(api, m(vmi, "namespace"));
    let p = serde_json::from_value(pod).map_err(|e| e.to_string())?;
    let pp = kube::api::PostParams::default();
    match tokio::time::timeout(Duration::from_secs(30), pods.create(&pp, &p)).await {
        Ok(Ok(_)) => Ok(()),
        // client-go's StatusError prints the Status' message alone, and
        // virt-controller's Event says that.
        Ok(Err(kube::Error::Api(status))) => Err(status.message.clone()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("no answer within 30s".to_string()),
    }
}

/// virt-controller's Warning Event when a launcher pod is refused: one
/// per VMI, its count and message kept current (as the API server's
/// event aggregation shows it).
fn failed_create(store: &Store, vmi: &Value, error: &str) {
    let (ns, name) = (m(vmi, "namespace"), m(vmi, "name"));
    let event_name = format!("{name}.failedcreate");
    let message = format!("Error creating pod: {error}");
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    match store.get("Event", ns, &event_name) {
        Some(mut e) => {
            e["count"] = json!(e["count"].as_i64().unwrap_or(1) + 1);
            e["message"] = message.into();
            e["lastTimestamp"] = now.into();
            let _ = store.update("Event", e, Subresource::Main);
        }
        None => {
            let e = json!({
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"namespace": ns, "name": event_name},
                "involvedObject": {"apiVersion": VMI_API_VERSION, "kind": VMI_KIND,
                    "namespace": ns, "name": name, "uid": m(vmi, "uid")},
                "reason": "FailedCreate", "type": "Warning", "message": message,
                "source": {"component": "virtualmachine-controller"},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
            });
            let _ = store.create("Event", e);
        }
    }
    tracing::debug!(vmi = %format!("{ns}/{name}"), %error, "stand-in: launcher pod refused; retried on the next pass");
}
