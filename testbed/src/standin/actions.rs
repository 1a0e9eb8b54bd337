//! What the demo and the tests do to the cluster through the stand-in:
//! VMs started (as Cozystack's vm-instance writes them), stopped, run by
//! a VirtualMachine or halted, pods outside gpu-claims, nodes failing.

use super::{StandIn, VMI, VmSpec, vms};
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, COUNT_ANNOTATION};
use serde_json::{Value, json};

impl StandIn {
    /// The resource a class serves, as the store has it.
    fn resource_of(&self, class: &str) -> Option<String> {
        let c = self.store.get("GPUClass", "", class)?;
        c["spec"]["resourceName"].as_str().map(str::to_string)
    }

    /// Starts a VM that asks for `count` GPUs of `class` (a template claim),
    /// its spec listing them as vm-instance does.
    pub fn start_vm(&self, ns: &str, name: &str, class: &str, count: u32) {
        let mut spec = VmSpec::default()
            .annotate(CLASS_ANNOTATION, class)
            .annotate(COUNT_ANNOTATION, &count.to_string());
        if let Some(r) = self.resource_of(class) {
            spec = spec.gpus(&r, count);
        }
        self.create_vmi(ns, name, &spec);
    }

    /// Starts a VM that uses existing claims by name, its spec listing
    /// their GPUs.
    pub fn start_vm_with_claims(&self, ns: &str, name: &str, claims: &[&str]) {
        let mut spec = VmSpec::default().annotate(CLAIMS_ANNOTATION, &claims.join(","));
        for c in claims {
            let Some(claim) = self.store.get("GPUClaim", ns, c) else {
                continue;
            };
            let class = claim["spec"]["className"].as_str().unwrap_or_default();
            if let Some(r) = self.resource_of(class) {
                let count = claim["spec"]["count"].as_u64().unwrap_or(1);
                spec = spec.gpus(&r, count as u32);
            }
        }
        self.create_vmi(ns, name, &spec);
    }

    /// Starts a VM that asks for no GPUs.
    pub fn start_vm_without_gpus(&self, ns: &str, name: &str) {
        self.create_vmi(ns, name, &VmSpec::default());
    }

    /// Starts a VM of `spec` (a VMI with no VirtualMachine: nothing makes
    /// it again once it is gone).
    pub fn create_vmi(&self, ns: &str, name: &str, spec: &VmSpec) {
        let template = json!({"metadata": {"annotations": spec.annotations}, "spec": spec.spec()});
        match self
            .store
            .create(VMI, vms::vmi_of(ns, name, &template, None))
        {
            Ok(w) => self.set_status(VMI, &w.object, |s| s["phase"] = "Pending".into()),
            Err(e) => tracing::warn!(error = %e, "stand-in could not create a VMI"),
        }
    }

    /// A VirtualMachine of `spec` with runStrategy Always: its VMI is made,
    /// and made again whenever it is deleted or ends.
    pub fn run_vm(&self, ns: &str, name: &str, spec: &VmSpec) {
        if let Err(e) = self.store.create(vms::VM, vms::vm_of(ns, name, spec)) {
            tracing::warn!(error = %e, "stand-in could not create a VirtualMachine");
        }
        self.reconcile();
    }

    /// A VirtualMachine's runStrategy becomes Halted: its VMI shuts down.
    pub fn halt_vm(&self, ns: &str, name: &str) {
        vms::set_run_strategy(&self.store, ns, name, "Halted");
        self.reconcile();
    }

    /// A pod outside gpu-claims (a CUDA job, a test pod) with these
    /// requests, scheduled like any other; bound to `node` at once when given.
    pub fn run_pod(&self, ns: &str, name: &str, node: Option<&str>, requests: &[(&str, &str)]) {
        let r: serde_json::Map<String, Value> = requests
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        let mut pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name},
            "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/cuda:12.4.0-base",
                "resources": {"requests": r.clone(), "limits": r}}]},
        });
        if let Some(n) = node {
            pod["spec"]["nodeName"] = n.into();
        }
        if let Err(e) = self.store.create("Pod", pod) {
            tracing::warn!(error = %e, "stand-in could not create a pod");
        }
    }

    fn finish_vm(&self, ns: &str, name: &str, how: &str) {
        if let Some(v) = self.store.get(VMI, ns, name) {
            self.set_status(VMI, &v, |s| {
                s["phase"] = how.into();
                super::vmi_ready(s, false, "PodTerminating");
            });
            self.reconcile();
        }
    }

    /// The VM is shut down: its VMI and pods are Succeeded.
    pub fn stop_vm(&self, ns: &str, name: &str) {
        self.finish_vm(ns, name, "Succeeded");
    }

    /// The VMI object is deleted (its pods follow by garbage collection).
    pub fn delete_vm(&self, ns: &str, name: &str) {
        let _ = self.store.delete(VMI, ns, name);
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
