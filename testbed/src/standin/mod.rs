//! A stand-in for KubeVirt, kube-scheduler and the kubelet, for `demo`
//! and the end-to-end tests: what the cluster around gpu-claims does to
//! VMs, VMIs and pods, written straight to the store (it is part of the
//! cluster, not a client of it), each as upstream's code does it.
//!
//! - KubeVirt's VM controller keeps a VMI for each VirtualMachine whose
//!   runStrategy is Always (`vms`); virt-controller renders a new VMI's
//!   launcher pod as `renderresources.go` does (`render`): requests and
//!   limits from the VMI's size, one device per `gpus[]` entry, the
//!   memory overhead, the VMI's annotations copied. Made `through_api`,
//!   the pod is created over HTTP, so the API server's webhooks (the G1
//!   gate of `run`) admit or refuse it; a refusal is a `FailedCreate`
//!   Warning Event on the VMI, retried with backoff. Made with `new`,
//!   there is no webhook: the stand-in gates a GPU pod itself.
//! - The scheduler binds an ungated pod to the first node its filters
//!   and NodeResourcesFit (against every pod bound there) allow, or marks
//!   it `PodScheduled=False, Unschedulable` with upstream's message.
//! - The kubelet admits a bound pod's devices (the device manager
//!   refuses one whose devices are taken: `UnexpectedAdmissionError`)
//!   and runs it; the VMI follows its pod to Scheduled, Running or Failed.
//! - A stopped VMI is Succeeded and its pods too; nodes can be made
//!   NotReady and Ready again (a VMI on a NotReady node keeps running).

mod actions;
pub mod allocator;
pub mod claims;
mod create;
pub mod nvidia;
pub mod render;
pub mod scheduler;
mod status;
pub mod vms;

use status::{pod_phase, pod_scheduled, set_status, vmi_ready};
pub use vms::VmSpec;

use crate::memory::store::{Store, Subresource};
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_ANNOTATION};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const VMI: &str = "VirtualMachineInstance";

pub struct StandIn {
    store: Arc<Store>,
    /// Launcher pods are created through this client, admitted by the
    /// server's webhooks; None: written to the store, gated here.
    api: Option<kube::Client>,
    creating: create::Creations,
    /// While set, the scheduler binds nothing (a test holds it to let
    /// something take a node's room between placement and binding).
    held: AtomicBool,
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

impl StandIn {
    pub fn new(store: Arc<Store>) -> Arc<Self> {
        Arc::new(Self {
            store,
            api: None,
            creating: Default::default(),
            held: AtomicBool::new(false),
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
            held: AtomicBool::new(false),
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

    /// Holds (true) or lets go (false) the scheduler.
    pub fn hold_scheduling(&self, held: bool) {
        self.held.store(held, Ordering::SeqCst);
    }

    fn set_status(&self, kind: &str, obj: &Value, f: impl FnOnce(&mut Value)) {
        set_status(&self.store, kind, obj, f)
    }

    /// One pass over every VM, VMI and pod; returns how many writes it made.
    pub fn reconcile(&self) -> usize {
        let before = self.store.resource_version();
        // The kubelet: a pod marked Terminating on its node is stopped and
        // its deletion confirmed (no grace left), releasing its devices.
        gpu_claims_apiserver::kubelet::confirm_terminated_pods(&self.store);
        nvidia::publish(&self.store);
        vms::reconcile(&self.store);
        claims::reconcile(&self.store);
        let (vmis, _) = self.store.list(VMI);
        let (pods, seen) = self.store.list("Pod");
        let (nodes, _) = self.store.list("Node");
        self.creating.forget_gone(&vmis);
        for vmi in &vmis {
            if !m(vmi, "deletionTimestamp").is_empty() {
                continue;
            }
            let mine = launchers_of(&pods, vmi);
            if is_final(vmi) {
                let done = phase(vmi).to_string();
                for p in mine.iter().filter(|p| !is_final(p)) {
                    self.set_status("Pod", p, |s| pod_phase(s, &done));
                }
                continue;
            }
            if mine.is_empty() {
                self.create_launcher(vmi, seen);
                continue;
            }
            for p in &mine {
                self.step_launcher(vmi, p, &pods, &nodes);
            }
        }
        // Pods that are not launchers: scheduled and run the same way.
        for p in pods.iter().filter(|p| !is_launcher(p)) {
            self.step_pod(p, &pods, &nodes);
        }
        (self.store.resource_version() - before) as usize
    }

    /// A launcher pod's next step, and its VMI's after it.
    fn step_launcher(&self, vmi: &Value, pod: &Value, pods: &[Value], nodes: &[Value]) {
        if phase(pod) == "Failed" {
            // A launcher that failed before its VM ran fails the VMI.
            self.set_status(VMI, vmi, |s| {
                s["phase"] = "Failed".into();
                vmi_ready(s, false, "PodTerminating");
            });
            return;
        }
        self.step_pod(pod, pods, nodes);
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if node.is_empty() {
            return;
        }
        let next = match (phase(vmi), phase(pod)) {
            ("Running", _) => return,
            (_, "Running") => "Running",
            _ => "Scheduled",
        };
        let node = node.to_string();
        self.set_status(VMI, vmi, |s| {
            s["phase"] = next.into();
            s["nodeName"] = node.into();
            // virt-controller's syncReadyConditionFromPod: Ready is the
            // launcher pod's Ready once the guest runs.
            if next == "Running" {
                vmi_ready(s, true, "");
            } else {
                vmi_ready(s, false, "GuestNotRunning");
            }
        });
    }

    /// The scheduler and the kubelet for one pod: bind it, or say why
    /// not; once bound, admit its devices and run it.
    fn step_pod(&self, pod: &Value, pods: &[Value], nodes: &[Value]) {
        if is_final(pod) || !m(pod, "deletionTimestamp").is_empty() {
            return;
        }
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if !node.is_empty() {
            if phase(pod) != "Running" {
                self.run_on(pod, node, pods, nodes);
            }
            return;
        }
        let gated = pod["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| !g.is_empty());
        if gated || self.held.load(Ordering::SeqCst) {
            return;
        }
        let claims = claims::of_pod(&self.store, pod);
        let resolved = claims.as_deref().map_err(String::as_str);
        let dra = if claims.as_ref().is_ok_and(|c| !c.is_empty()) {
            self.dra_world()
        } else {
            scheduler::DraWorld::default()
        };
        match scheduler::schedule(pod, pods, nodes, resolved, &dra) {
            Ok(scheduler::Binding {
                node: chosen,
                allocations,
            }) => {
                // PreBind: the allocations the scheduler made, then every
                // claim reserved for the pod, then the bind.
                for (c, allocation) in allocations {
                    if !claims::allocate(&self.store, &c, allocation, pod) {
                        return;
                    }
                }
                for c in claims::of_pod(&self.store, pod).iter().flatten() {
                    if !claims::reserve(&self.store, c, pod) {
                        return;
                    }
                }
                let mut bound = pod.clone();
                bound["spec"]["nodeName"] = chosen.into();
                match self.store.update("Pod", bound, Subresource::Main) {
                    Ok(w) => self.set_status("Pod", &w.object, |s| pod_scheduled(s, true, None)),
                    Err(e) => tracing::debug!(error = %e, "stand-in lost a race binding a pod"),
                }
            }
            Err(why) => self.set_status("Pod", pod, |s| pod_scheduled(s, false, Some(&why))),
        }
    }

    /// What the scheduler's DRA plugin reads.
    fn dra_world(&self) -> scheduler::DraWorld {
        scheduler::DraWorld {
            slices: self
                .store
                .list("ResourceSlice")
                .0
                .into_iter()
                .filter_map(|s| serde_json::from_value(s).ok())
                .collect(),
            classes: self.store.list("DeviceClass").0,
            claims: self.store.list(claims::CLAIM).0,
            taint_rules: self.store.list("DeviceTaintRule").0,
        }
    }

    /// The kubelet on `node`: the device manager admits the pod's devices
    /// or rejects the pod; an admitted pod runs.
    fn run_on(&self, pod: &Value, node: &str, pods: &[Value], nodes: &[Value]) {
        let Some(n) = nodes.iter().find(|n| m(n, "name") == node) else {
            return;
        };
        // The kubelet prepares a pod's claims only once each is allocated
        // and reserved for it; until then the pod does not start.
        let uid = m(pod, "uid");
        let prepared = claims::of_pod(&self.store, pod).is_ok_and(|cs| {
            cs.iter()
                .all(|c| c["status"]["allocation"].is_object() && claims::reserved_for(c, uid))
        });
        if !prepared {
            return;
        }
        match scheduler::admit_devices(pod, n, pods) {
            Ok(()) => self.set_status("Pod", pod, |s| pod_phase(s, "Running")),
            Err(message) => self.set_status("Pod", pod, |s| {
                s["phase"] = "Failed".into();
                s["reason"] = "UnexpectedAdmissionError".into();
                s["message"] = message.into();
            }),
        }
    }

    /// Whether a VMI asks for GPUs (docs/design.md, "Objects"), for a stand-in without the
    /// webhook: its annotations, or devices of a resource a class serves.
    fn asks_for_gpus(&self, vmi: &Value) -> bool {
        let a = &vmi["metadata"]["annotations"];
        let named = [CLAIMS_ANNOTATION, CLASS_ANNOTATION]
            .iter()
            .any(|k| a[*k].as_str().is_some_and(|v| !v.trim().is_empty()));
        let served: Vec<String> = self
            .store
            .list("GPUClass")
            .0
            .iter()
            .filter_map(|c| c["spec"]["resourceName"].as_str().map(str::to_string))
            .collect();
        // DRA VMIs, as the webhook's matchConditions gate their pods:
        // any `spec.resourceClaims` while a class of DeviceClass exists.
        let dra = vmi["spec"]["resourceClaims"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
            && self
                .store
                .list("GPUClass")
                .0
                .iter()
                .any(|c| c["spec"]["deviceClassName"].is_string());
        named || dra || render::devices(vmi).keys().any(|d| served.contains(d))
    }

    fn create_launcher(&self, vmi: &Value, seen: u64) {
        let gated = self.api.is_none() && self.asks_for_gpus(vmi);
        let pod = render::launcher_pod(vmi, gated);
        if let Some(api) = &self.api {
            return self
                .creating
                .create_through(&self.store, api.clone(), vmi, pod, seen);
        }
        match self.store.create("Pod", pod) {
            Ok(_) => self.set_status(VMI, vmi, |s| s["phase"] = "Scheduling".into()),
            Err(e) => {
                tracing::warn!(error = %e, vmi = %format!("{}/{}", m(vmi, "namespace"), m(vmi, "name")), "stand-in could not create a launcher")
            }
        }
    }
}

/// A virt-launcher pod controlled by a VMI.
fn is_launcher(p: &Value) -> bool {
    p["metadata"]["labels"][gpu_claims_actors::api::LAUNCHER_LABEL]
        == gpu_claims_actors::api::LAUNCHER_LABEL_VALUE
}

#[cfg(test)]
mod tests;
