//! VMs as the stand-in makes them: a VMI's spec as Cozystack's
//! vm-instance writes it (cores, `resources.requests.memory`, one
//! `gpus[]` entry per GPU with its `deviceName`), and KubeVirt's VM
//! controller as its `syncRunStrategy` plays each runStrategy: Always
//! keeps a VMI made from its template, made again when it is deleted or
//! has ended (what brings a VM back after G7, L12 or E2 deleted its VMI);
//! Once starts a VMI that is missing and leaves an ended one; RerunOnFailure
//! starts one first, deletes an ended one and starts another only after a
//! failure, never after someone else deleted it; Manual starts nothing by
//! itself; Halted shuts its VMI down. The VM's `status.runStrategy` (the
//! strategy a VMI last ran under) and `printableStatus` are kept as
//! upstream keeps them.

use crate::memory::store::{Store, Subresource};
use gpu_claims_actors::api::VMI_API_VERSION;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

pub const VM: &str = "VirtualMachine";
const VMI: &str = "VirtualMachineInstance";

/// What a VM is: its size, GPUs (device name and how many) and annotations.
#[derive(Clone, Debug, PartialEq)]
pub struct VmSpec {
    pub cpus: u32,
    pub memory: String,
    pub gpus: Vec<(String, u32)>,
    /// GPUs asked through DRA, as KubeVirt's DRA guide writes it.
    pub dra: Option<DraGpus>,
    pub annotations: BTreeMap<String, String>,
    /// O1: the PriorityClass the VM's set is ordered by.
    pub priority_class: Option<String>,
}

/// Where a VM's DRA GPUs come from: a ResourceClaimTemplate's name and
/// the request of it a `gpus[]` entry names, or a ResourceClaim's name.
#[derive(Clone, Debug, PartialEq)]
pub enum DraGpus {
    Template { template: String, request: String },
    Claim(String),
}

impl Default for VmSpec {
    fn default() -> Self {
        Self::sized(1, "1Gi")
    }
}

impl VmSpec {
    pub fn sized(cpus: u32, memory: &str) -> Self {
        Self {
            cpus,
            memory: memory.into(),
            gpus: Vec::new(),
            dra: None,
            annotations: BTreeMap::new(),
            priority_class: None,
        }
    }

    /// `n` GPUs of `device` in its spec.
    pub fn gpus(mut self, device: &str, n: u32) -> Self {
        if n > 0 {
            self.gpus.push((device.into(), n));
        }
        self
    }

    /// GPUs through the ResourceClaimTemplate `template`, whose request
    /// `request` its `gpus[]` entry names (`GPUsWithDRA`).
    pub fn gpus_through_template(mut self, template: &str, request: &str) -> Self {
        self.dra = Some(DraGpus::Template {
            template: template.into(),
            request: request.into(),
        });
        self
    }

    /// GPUs through the ResourceClaim `claim` made beforehand (a named
    /// GPUClaim's backing claim), its request `gpu` (D5).
    pub fn gpus_through_claim(mut self, claim: &str) -> Self {
        self.dra = Some(DraGpus::Claim(claim.into()));
        self
    }

    /// `spec.priorityClassName`.
    pub fn priority(mut self, class: &str) -> Self {
        self.priority_class = Some(class.into());
        self
    }

    pub fn annotate(mut self, k: &str, v: &str) -> Self {
        self.annotations.insert(k.into(), v.into());
        self
    }

    /// The VMI's `spec`, as vm-instance renders it.
    pub fn spec(&self) -> Value {
        let mut gpus = Vec::new();
        for (device, n) in &self.gpus {
            for _ in 0..*n {
                gpus.push(json!({"name": format!("gpu{}", gpus.len() + 1), "deviceName": device}));
            }
        }
        let mut spec = json!({"domain": {
            "cpu": {"cores": self.cpus, "sockets": 1, "threads": 1},
            "resources": {"requests": {"memory": self.memory}},
            "devices": {"gpus": gpus},
        }});
        if let Some(c) = &self.priority_class {
            spec["priorityClassName"] = c.as_str().into();
        }
        let (entry, request) = match &self.dra {
            None => return spec,
            Some(DraGpus::Template { template, request }) => (
                json!({"name": "gpu", "resourceClaimTemplateName": template}),
                request.as_str(),
            ),
            Some(DraGpus::Claim(claim)) => (
                json!({"name": claim, "resourceClaimName": claim}),
                gpu_claims_actors::rules::BACKING_REQUEST,
            ),
        };
        if let Some(g) = spec["domain"]["devices"]["gpus"].as_array_mut() {
            g.push(json!({"name": format!("gpu{}", g.len() + 1),
                "claimName": entry["name"], "requestName": request}));
        }
        spec["resourceClaims"] = json!([entry]);
        spec
    }

    pub fn metadata(&self) -> Value {
        json!({"annotations": self.annotations})
    }
}

fn m<'a>(v: &'a Value, f: &str) -> &'a str {
    v["metadata"][f].as_str().unwrap_or_default()
}

/// A VMI of `spec`, owned by `owner` (a VirtualMachine) when there is one.
pub fn vmi_of(ns: &str, name: &str, template: &Value, owner: Option<&Value>) -> Value {
    let mut meta: Map<String, Value> = template["metadata"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    meta.insert("namespace".into(), ns.into());
    meta.insert("name".into(), name.into());
    if let Some(vm) = owner {
        meta.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": VMI_API_VERSION, "kind": VM, "name": name,
                "uid": m(vm, "uid"), "controller": true, "blockOwnerDeletion": true}]),
        );
    }
    json!({
        "apiVersion": VMI_API_VERSION, "kind": VMI,
        "metadata": meta,
        "spec": template["spec"],
    })
}

/// The template a VirtualMachine is made with.
pub fn vm_of(ns: &str, name: &str, spec: &VmSpec) -> Value {
    json!({
        "apiVersion": VMI_API_VERSION, "kind": VM,
        "metadata": {"namespace": ns, "name": name},
        "spec": {"runStrategy": "Always",
            "template": {"metadata": spec.metadata(), "spec": spec.spec()}},
    })
}

fn run_strategy(vm: &Value) -> &str {
    match vm["spec"]["runStrategy"].as_str() {
        Some(s) => s,
        None if vm["spec"]["running"] == true => "Always",
        None => "Halted",
    }
}

fn is_final(v: &Value) -> bool {
    matches!(v["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

fn owned_by(v: &Value, vm: &Value) -> bool {
    v["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|r| r.iter().any(|r| r["uid"] == vm["metadata"]["uid"]))
}

/// Starts the VM's VMI; whether it did.
fn start(store: &Store, ns: &str, name: &str, vm: &Value) -> bool {
    let v = vmi_of(ns, name, &vm["spec"]["template"], Some(vm));
    let Ok(w) = store.create(VMI, v) else {
        return false;
    };
    let mut o = w.object;
    o["status"] = json!({"phase": "Pending"});
    let _ = store.update(VMI, o, Subresource::Status);
    true
}

/// Deletes the VM's ended VMI (once); whether it did.
fn clear(store: &Store, ns: &str, name: &str, v: &Value) -> bool {
    m(v, "deletionTimestamp").is_empty() && store.delete(VMI, ns, name).is_ok()
}

/// The VM's `printableStatus`, as upstream's `setPrintableStatus` orders
/// its checks (those the stand-in can come to).
fn printable_status(vm: &Value, vmi: Option<&Value>) -> &'static str {
    if !m(vm, "deletionTimestamp").is_empty() {
        return "Terminating";
    }
    let Some(v) = vmi else {
        return "Stopped";
    };
    let phase = v["status"]["phase"].as_str().unwrap_or_default();
    match phase {
        _ if !m(v, "deletionTimestamp").is_empty() && !is_final(v) => "Stopping",
        "Running" => "Running",
        "Succeeded" | "Failed" => "Stopped",
        _ => "Starting",
    }
}

/// One pass of the VM controller; returns whether it wrote.
pub fn reconcile(store: &Store) -> bool {
    let mut wrote = false;
    for vm in store.list(VM).0 {
        if !m(&vm, "deletionTimestamp").is_empty() {
            continue;
        }
        let (ns, name) = (m(&vm, "namespace"), m(&vm, "name"));
        let vmi = store
            .get(VMI, ns, name)
            .filter(|v| owned_by(v, &vm) || !m(v, "deletionTimestamp").is_empty());
        let strategy = run_strategy(&vm).to_string();
        // The strategy a VMI last ran under: RerunOnFailure starts a
        // missing VMI only when it was just switched to.
        let ran_under = vm["status"]["runStrategy"].as_str().unwrap_or_default();
        // A start request as upstream queues it (`stateChangeRequests`).
        let start_requested = vm["status"]["stateChangeRequests"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["action"] == "Start"));
        let acted = match (strategy.as_str(), &vmi) {
            ("Always" | "Once", None) => start(store, ns, name, &vm),
            ("RerunOnFailure", None) if start_requested || ran_under != "RerunOnFailure" => {
                start(store, ns, name, &vm)
            }
            // Always restarts a VM whose VMI ended: the old one goes first.
            ("Always", Some(v)) if is_final(v) => clear(store, ns, name, v),
            // RerunOnFailure deletes an ended VMI, and starts another only
            // after a failure.
            ("RerunOnFailure", Some(v)) if is_final(v) => {
                if v["status"]["phase"] == "Failed" {
                    let start = json!([{"action": "Start"}]);
                    set_status(store, ns, name, "stateChangeRequests", start);
                }
                clear(store, ns, name, v)
            }
            // Halted: no VMI under any circumstances (upstream's
            // `stopVMI` deletes it, whatever its phase).
            ("Halted", Some(v)) => clear(store, ns, name, v),
            _ => false,
        };
        wrote |= acted;
        // What the VM shows: the strategy a VMI runs under, a start
        // request answered, the printable status.
        let vmi = store.get(VMI, ns, name);
        let Some(latest) = store.get(VM, ns, name) else {
            continue;
        };
        let mut status = latest["status"].clone();
        if !status.is_object() {
            status = json!({});
        }
        // A live VMI answers a start request.
        if vmi.as_ref().is_some_and(|v| !is_final(v)) {
            status["runStrategy"] = strategy.as_str().into();
            if let Some(o) = status.as_object_mut() {
                o.remove("stateChangeRequests");
            }
        }
        status["printableStatus"] = printable_status(&latest, vmi.as_ref()).into();
        // Ready as the VMI's Ready condition says (the VM controller
        // copies it), False without a VMI.
        let ready = vmi.as_ref().is_some_and(|v| {
            v["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
        status["ready"] = ready.into();
        status["conditions"] = json!([{"type": "Ready",
            "status": if ready { "True" } else { "False" }}]);
        if latest["status"] != status {
            let mut o = latest;
            o["status"] = status;
            wrote |= store.update(VM, o, Subresource::Status).is_ok();
        }
    }
    wrote
}

/// Sets one field of a VirtualMachine's status.
fn set_status(store: &Store, ns: &str, name: &str, field: &str, value: Value) {
    if let Some(mut vm) = store.get(VM, ns, name) {
        if !vm["status"].is_object() {
            vm["status"] = json!({});
        }
        vm["status"][field] = value;
        let _ = store.update(VM, vm, Subresource::Status);
    }
}

/// Sets a VirtualMachine's runStrategy.
pub fn set_run_strategy(store: &Store, ns: &str, name: &str, strategy: &str) {
    if let Some(mut vm) = store.get(VM, ns, name) {
        vm["spec"]["runStrategy"] = strategy.into();
        let _ = store.update(VM, vm, Subresource::Main);
    }
}
