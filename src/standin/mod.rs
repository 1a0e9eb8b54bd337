//! A stand-in for KubeVirt and the kubelet, for `demo` and the end-to-end
//! tests: what the cluster around gpu-claims does to VMIs and their
//! launcher pods, written straight to the store (it is part of the
//! cluster, not a client of it).
//!
//! - A new VMI gets a launcher pod, with the VMI's annotations, and moves
//!   Pending → Scheduling. Made `through_api`, the pod is created over
//!   HTTP as virt-controller creates it, so the API server's mutating
//!   webhooks (the G1 gate of `run`) admit it or refuse it; a refusal is a
//!   `FailedCreate` Warning Event on the VMI and is retried, as KubeVirt
//!   does. Made with `new`, there is no webhook: the stand-in puts a GPU
//!   VMI's pod at the gate itself, as the webhook would.
//! - An ungated pod is bound to a Ready node that honours its pin and has
//!   room for the GPUs of the claims attached to its VMI; its VMI moves
//!   Scheduled, then Running on that node.
//! - A stopped VMI is Succeeded and its pods too.
//! - Nodes can be made NotReady and Ready again; a VMI on a NotReady node
//!   keeps running (KubeVirt fails it only after the node is declared dead).

mod scheduler;

use gpu_claims_actors::api::{
    CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION, LAUNCHER_LABEL, LAUNCHER_LABEL_VALUE,
    SCHEDULING_GATE, VMI_API_VERSION, VMI_KIND,
};
use gpu_claims_actors::memory::store::{Store, Subresource};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const VMI: &str = "VirtualMachineInstance";
/// The annotation where the stand-in's kubelet notes the GPUs a pod holds.
pub const HOLDS_ANNOTATION: &str = "standin.gpu-claims.dev/gpus";

pub struct StandIn {
    store: Arc<Store>,
    /// Launcher pods are created through this client, admitted by the
    /// server's webhooks; None: written to the store, gated here.
    api: Option<kube::Client>,
    /// VMIs (by uid) whose launcher pod is being created over HTTP, or
    /// was refused and waits out its backoff.
    creating: Arc<std::sync::Mutex<std::collections::HashMap<String, Attempt>>>,
}

/// A launcher pod's creation over HTTP: in flight, or refused and retried
/// after a backoff that doubles from 200 ms to 5 s (virt-controller's
/// queue backs off too; without it a refusal's Event would wake the next
/// pass at once).
#[derive(Clone, Copy, Debug)]
struct Attempt {
    in_flight: bool,
    next: tokio::time::Instant,
    delay: Duration,
    /// The store's version once the pod was created: a pass whose list
    /// is older does not see the pod yet and must not make another.
    created: Option<u64>,
}

fn m<'a>(v: &'a Value, f: &str) -> &'a str {
    v["metadata"][f].as_str().unwrap_or_default()
}

fn phase(v: &Value) -> &str {
    v["status"]["phase"].as_str().unwrap_or_default()
}

fn is_final(v: &Value) -> bool {
    matches!(phase(v), "Succeeded" | "Failed")
}

/// The pods a VMI controls.
fn launchers_of<'a>(pods: &'a [Value], vmi: &Value) -> Vec<&'a Value> {
    pods.iter()
        .filter(|p| {
            m(p, "namespace") == m(vmi, "namespace")
                && p["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| {
                        refs.iter()
                            .any(|r| r["controller"] == true && r["uid"] == vmi["metadata"]["uid"])
                    })
        })
        .collect()
}

fn set_status(store: &Store, kind: &str, obj: &Value, f: impl FnOnce(&mut Value)) {
    let mut o = obj.clone();
    if !o["status"].is_object() {
        o["status"] = json!({});
    }
    f(&mut o["status"]);
    if let Err(e) = store.update(kind, o, Subresource::Status) {
        tracing::debug!(error = %e, "stand-in status write lost a race; next pass retries");
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

impl StandIn {
    pub fn new(store: Arc<Store>) -> Arc<Self> {
        Arc::new(Self {
            store,
            api: None,
            creating: Default::default(),
        })
    }

    /// A stand-in that creates launcher pods through `api` (the API
    /// server's admission, webhooks included); the rest it writes to the
    /// store. Its passes must run on a tokio runtime.
    pub fn through_api(store: Arc<Store>, api: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            store,
            api: Some(api),
            creating: Default::default(),
        })
    }

    /// Runs the stand-in: a pass after every change of the store (and
    /// every 200 ms), until the store goes.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let me = self.clone();
        tokio::spawn(async move {
            let (mut rx, _) = me.store.watch();
            loop {
                me.reconcile();
                match tokio::time::timeout(Duration::from_millis(200), rx.recv()).await {
                    Ok(None) => return,
                    Ok(Some(_)) | Err(_) => {
                        // Take the burst, then one pass.
                        while rx.try_recv().is_ok() {}
                    }
                }
            }
        })
    }

    fn set_status(&self, kind: &str, obj: &Value, f: impl FnOnce(&mut Value)) {
        set_status(&self.store, kind, obj, f)
    }

    /// One pass over every VMI and launcher pod; returns how many writes it made.
    pub fn reconcile(&self) -> usize {
        let before = self.store.resource_version();
        // The kubelet: a pod marked Terminating on its node is stopped and
        // its deletion confirmed (no grace left), releasing its devices.
        for (ns, name) in crate::apiserver::pods::terminating(&self.store) {
            let _ = crate::apiserver::pods::delete(
                &self.store,
                &ns,
                &name,
                None,
                None,
                Some(0),
                gpu_claims_actors::memory::store::Apply::Commit,
            );
        }
        let (vmis, _) = self.store.list(VMI);
        let (pods, seen) = self.store.list("Pod");
        let (nodes, _) = self.store.list("Node");
        // What is known of the creations of VMIs that are gone goes too.
        let live: std::collections::HashSet<&str> = vmis.iter().map(|v| m(v, "uid")).collect();
        self.creating
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|uid, a| a.in_flight || live.contains(uid.as_str()));
        for vmi in &vmis {
            if !m(vmi, "deletionTimestamp").is_empty() {
                continue;
            }
            let mine = launchers_of(&pods, vmi);
            if is_final(vmi) {
                let done = phase(vmi).to_string();
                for p in mine.iter().filter(|p| !is_final(p)) {
                    self.set_status("Pod", p, |s| s["phase"] = done.clone().into());
                }
                continue;
            }
            if mine.is_empty() {
                self.create_launcher(vmi, seen);
                continue;
            }
            for p in &mine {
                self.step_pod(vmi, p, &pods, &nodes);
            }
        }
        (self.store.resource_version() - before) as usize
    }

    /// `seen`: the store's version the pass's list of pods is current at.
    fn create_launcher(&self, vmi: &Value, seen: u64) {
        let (ns, name) = (m(vmi, "namespace"), m(vmi, "name"));
        let a = &vmi["metadata"]["annotations"];
        let asks = [CLAIMS_ANNOTATION, CLASS_ANNOTATION]
            .iter()
            .any(|k| a[*k].as_str().is_some_and(|v| !v.trim().is_empty()));
        let mut spec =
            json!({"containers": [{"name": "compute", "image": "quay.io/kubevirt/virt-launcher"}]});
        if asks && self.api.is_none() {
            spec["schedulingGates"] = json!([{"name": SCHEDULING_GATE}]);
        }
        // KubeVirt copies the VMI's annotations onto its launcher pod
        // (kubectl's last-applied aside): the webhook's matchConditions
        // read the GPU ones there (SPEC G1).
        let mut annotations = a.as_object().cloned().unwrap_or_default();
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "namespace": ns, "generateName": format!("virt-launcher-{name}-"),
                "annotations": annotations,
                "labels": {LAUNCHER_LABEL: LAUNCHER_LABEL_VALUE, "kubevirt.io/created-by": m(vmi, "uid")},
                "ownerReferences": [{"apiVersion": VMI_API_VERSION, "kind": VMI_KIND, "name": name,
                    "uid": m(vmi, "uid"), "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": spec,
        });
        if let Some(api) = &self.api {
            return self.create_through(api.clone(), vmi, pod, seen);
        }
        match self.store.create("Pod", pod) {
            Ok(_) => self.set_status(VMI, vmi, |s| s["phase"] = "Scheduling".into()),
            Err(e) => {
                tracing::warn!(error = %e, vmi = %format!("{ns}/{name}"), "stand-in could not create a launcher")
            }
        }
    }

    /// Creates a launcher pod over HTTP, once at a time per VMI; a refusal
    /// becomes a Warning Event on the VMI and the next pass tries again.
    fn create_through(&self, api: kube::Client, vmi: &Value, pod: Value, seen: u64) {
        let uid = m(vmi, "uid").to_string();
        {
            let mut creating = self.creating.lock().unwrap_or_else(|e| e.into_inner());
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
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("the stand-in creates pods over HTTP only on a tokio runtime");
            return;
        };
        let (store, vmi) = (self.store.clone(), vmi.clone());
        let creating = self.creating.clone();
        rt.spawn(async move {
            let ns = m(&vmi, "namespace").to_string();
            let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(api, &ns);
            let made = serde_json::from_value(pod).map_err(|e| e.to_string());
            let pp = kube::api::PostParams::default();
            let result = match made {
                Ok(p) => match tokio::time::timeout(Duration::from_secs(30), pods.create(&pp, &p))
                    .await
                {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("no answer within 30s".to_string()),
                },
                Err(e) => Err(e),
            };
            let mut c = creating.lock().unwrap_or_else(|e| e.into_inner());
            match result {
                Ok(()) => {
                    let rv = store.resource_version();
                    if let Some(a) = c.get_mut(&uid) {
                        a.in_flight = false;
                        a.created = Some(rv);
                        a.delay = Duration::from_millis(100);
                    }
                    drop(c);
                    set_status(&store, VMI, &vmi, |s| s["phase"] = "Scheduling".into());
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

    fn step_pod(&self, vmi: &Value, pod: &Value, pods: &[Value], nodes: &[Value]) {
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if !node.is_empty() {
            // Bound: the VMI follows its pod to Scheduled, then Running.
            let next = match phase(vmi) {
                "Running" => return,
                "Scheduled" => "Running",
                _ => "Scheduled",
            };
            let node = node.to_string();
            self.set_status(VMI, vmi, |s| {
                s["phase"] = next.into();
                s["nodeName"] = node.into();
            });
            return;
        }
        let gated = pod["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| !g.is_empty());
        if gated {
            return;
        }
        let claims = self.store.list("GPUClaim").0;
        let classes = self.store.list("GPUClass").0;
        let needs = scheduler::needs_of(vmi, &claims, &classes);
        let Some(chosen) = scheduler::pick_node(pod, &needs, pods, nodes) else {
            return; // Unschedulable for now; a later pass tries again.
        };
        let mut bound = pod.clone();
        bound["spec"]["nodeName"] = chosen.clone().into();
        bound["metadata"]["annotations"][HOLDS_ANNOTATION] = scheduler::holds_text(&needs).into();
        match self.store.update("Pod", bound, Subresource::Main) {
            Ok(w) => self.set_status("Pod", &w.object, |s| s["phase"] = "Running".into()),
            Err(e) => tracing::debug!(error = %e, "stand-in lost a race binding a pod"),
        }
    }

    fn vmi(&self, ns: &str, name: &str) -> Option<Value> {
        self.store.get(VMI, ns, name)
    }

    /// Starts a VM that asks for `count` GPUs of `class` (a template claim).
    pub fn start_vm(&self, ns: &str, name: &str, class: &str, count: u32) {
        self.create_vmi(
            ns,
            name,
            json!({CLASS_ANNOTATION: class, COUNT_ANNOTATION: count.to_string()}),
        );
    }

    /// Starts a VM that uses existing claims by name.
    pub fn start_vm_with_claims(&self, ns: &str, name: &str, claims: &[&str]) {
        self.create_vmi(ns, name, json!({CLAIMS_ANNOTATION: claims.join(",")}));
    }

    /// Starts a VM that asks for no GPUs.
    pub fn start_vm_without_gpus(&self, ns: &str, name: &str) {
        self.create_vmi(ns, name, json!({}));
    }

    fn create_vmi(&self, ns: &str, name: &str, annotations: Value) {
        let vmi = json!({
            "apiVersion": VMI_API_VERSION, "kind": VMI_KIND,
            "metadata": {"namespace": ns, "name": name, "annotations": annotations},
            "spec": {"domain": {"devices": {}}},
        });
        match self.store.create(VMI, vmi) {
            Ok(w) => self.set_status(VMI, &w.object, |s| s["phase"] = "Pending".into()),
            Err(e) => tracing::warn!(error = %e, "stand-in could not create a VMI"),
        }
    }

    fn finish_vm(&self, ns: &str, name: &str, how: &str) {
        if let Some(v) = self.vmi(ns, name) {
            self.set_status(VMI, &v, |s| s["phase"] = how.into());
            self.reconcile();
        }
    }

    /// The VM is shut down: its VMI and pods are Succeeded.
    pub fn stop_vm(&self, ns: &str, name: &str) {
        self.finish_vm(ns, name, "Succeeded");
    }

    /// The VMI object is deleted (its pods follow by garbage collection).
    pub fn delete_vm(&self, ns: &str, name: &str) {
        let _ = self.store.delete(VMI, ns, name, None, None);
    }

    /// Marks a node Ready or NotReady.
    pub fn set_node_ready(&self, name: &str, ready: bool) {
        let Some(n) = self.store.get("Node", "", name) else {
            return;
        };
        let want = if ready { "True" } else { "False" };
        self.set_status("Node", &n, |s| {
            let conds = s["conditions"].as_array().cloned().unwrap_or_default();
            let mut conds: Vec<Value> =
                conds.into_iter().filter(|c| c["type"] != "Ready").collect();
            conds.push(json!({"type": "Ready", "status": want,
                "reason": if ready { "KubeletReady" } else { "NodeStatusUnknown" }}));
            s["conditions"] = conds.into();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launcher_pod_carries_its_vmis_annotations_and_a_gpu_one_is_gated() {
        let store = crate::crd::cluster_store();
        for (name, annotations) in [
            ("gpu", json!({CLASS_ANNOTATION: "h200", "team": "ml"})),
            ("plain", json!({"team": "web"})),
        ] {
            store.seed(
                VMI,
                json!({"apiVersion": VMI_API_VERSION, "kind": VMI_KIND,
                    "metadata": {"namespace": "t", "name": name, "uid": format!("u-{name}"),
                        "annotations": annotations}}),
            );
        }
        StandIn::new(store.clone()).reconcile();
        let (pods, _) = store.list("Pod");
        let of = |vm: &str| {
            pods.iter()
                .find(|p| m(p, "generateName") == format!("virt-launcher-{vm}-"))
                .unwrap()
                .clone()
        };
        let gpu = of("gpu");
        assert_eq!(gpu["metadata"]["annotations"][CLASS_ANNOTATION], "h200");
        assert_eq!(gpu["metadata"]["annotations"]["team"], "ml");
        assert!(gpu["spec"]["schedulingGates"].is_array());
        let plain = of("plain");
        assert_eq!(plain["metadata"]["annotations"]["team"], "web");
        assert!(plain["spec"]["schedulingGates"].is_null());
    }
}
