//! The tenants and the platform around the controller, at random: VMs
//! start (asking for GPUs of a class, or naming claims) and stop or are
//! deleted, nodes fail and return, claims and a class are deleted while
//! held (and the class made again once it is gone). Written straight to
//! the store, as the stand-in writes: they are the cluster, not a replica.

use crate::demo::{A, B, L40S};
use crate::fixtures::{MetaBuilder, claim, class};
use crate::memory::store::Store;
use crate::standin::StandIn;
use gpu_claims_actors::api::to_json;
use gpu_claims_actors::ports::Obj;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The nodes that fail and return (the demo's usable ones).
const NODES: [&str; 3] = ["gpu-node-1", "gpu-node-2", "gpu-node-3"];
/// At most this many VMs live at once.
const MAX_VMS: usize = 8;

pub struct Churn {
    rng: fastrand::Rng,
    store: Arc<Store>,
    standin: Arc<StandIn>,
    n: u64,
    /// The node that is down, if any.
    down: Option<String>,
    /// How many of each action were taken.
    pub actions: BTreeMap<&'static str, usize>,
}

fn m<'a>(v: &'a Value, f: &str) -> &'a str {
    v["metadata"][f].as_str().unwrap_or_default()
}

impl Churn {
    pub fn new(seed: u64, store: Arc<Store>, standin: Arc<StandIn>) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            store,
            standin,
            n: 0,
            down: None,
            actions: BTreeMap::new(),
        }
    }

    fn did(&mut self, what: &'static str) {
        *self.actions.entry(what).or_default() += 1;
    }

    fn ns(&mut self) -> &'static str {
        if self.rng.bool() { A } else { B }
    }

    /// Creates an object as a client would (a new uid, no version).
    fn create(&self, obj: Obj) {
        let kind = obj.obj_ref().kind.name();
        let mut v = to_json(&obj);
        if let Some(meta) = v["metadata"].as_object_mut() {
            meta.remove("uid");
            meta.remove("resourceVersion");
            meta.remove("creationTimestamp");
        }
        if let Err(e) = self.store.create(kind, v) {
            tracing::debug!(error = %e, "churn: not created");
        }
    }

    fn vmis(&self) -> Vec<Value> {
        self.store.list("VirtualMachineInstance").0
    }

    fn live_vms(&self) -> Vec<Value> {
        self.vmis()
            .into_iter()
            .filter(|v| !matches!(v["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .collect()
    }

    /// How long until the next action: 0.4 to 1 s.
    pub fn pause(&mut self) -> std::time::Duration {
        std::time::Duration::from_millis(self.rng.u64(400..1000))
    }

    /// One action, chosen at random.
    pub fn step(&mut self) {
        match self.rng.u32(0..100) {
            0..40 => self.start_vm(),
            40..60 => self.stop_vm(),
            60..70 => self.delete_vm(),
            70..80 => self.node_fails_or_returns(),
            80..92 => self.delete_claim(),
            _ => self.delete_or_make_class(),
        }
    }

    /// A VM starts: for GPUs of a class (a template claim), or with a claim of its own.
    pub fn start_vm(&mut self) {
        if self.live_vms().len() >= MAX_VMS {
            return self.stop_vm();
        }
        self.n += 1;
        let (ns, name) = (self.ns(), format!("vm-{}", self.n));
        match self.rng.u32(0..10) {
            0..6 => {
                let count = self.rng.u32(1..=2);
                self.standin.start_vm(ns, &name, "h200", count);
            }
            6..8 => self.standin.start_vm(ns, &name, "l40s", 1),
            _ => {
                let c = format!("c-{}", self.n);
                let cls = if self.rng.bool() { "h200" } else { "l40s" };
                self.create(claim(ns, &c).class(cls).no_finalizer().obj());
                self.standin.start_vm_with_claims(ns, &name, &[&c]);
            }
        }
        self.did("start_vm");
    }

    fn pick(&mut self, mut from: Vec<Value>) -> Option<Value> {
        if from.is_empty() {
            return None;
        }
        let i = self.rng.usize(0..from.len());
        Some(from.swap_remove(i))
    }

    fn stop_vm(&mut self) {
        if let Some(v) = self.pick(self.live_vms()) {
            self.standin.stop_vm(m(&v, "namespace"), m(&v, "name"));
            self.did("stop_vm");
        }
    }

    fn delete_vm(&mut self) {
        if let Some(v) = self.pick(self.vmis()) {
            self.standin.delete_vm(m(&v, "namespace"), m(&v, "name"));
            self.did("delete_vm");
        }
    }

    fn node_fails_or_returns(&mut self) {
        match self.down.take() {
            Some(n) => {
                self.standin.set_node_ready(&n, true);
                self.did("node_returns");
            }
            None => {
                let n = NODES[self.rng.usize(0..NODES.len())];
                self.standin.set_node_ready(n, false);
                self.down = Some(n.to_string());
                self.did("node_fails");
            }
        }
    }

    /// A tenant deletes a claim it made (maybe while a VM holds it).
    fn delete_claim(&mut self) {
        let own: Vec<Value> = self
            .store
            .list("GPUClaim")
            .0
            .into_iter()
            .filter(|c| !m(c, "name").ends_with("-gpu"))
            .collect();
        if let Some(c) = self.pick(own) {
            let _ = self
                .store
                .delete("GPUClaim", m(&c, "namespace"), m(&c, "name"));
            self.did("delete_claim");
        }
    }

    /// The platform deletes class l40s (it waits for its claims), or makes it again once gone.
    fn delete_or_make_class(&mut self) {
        if self.store.get("GPUClass", "", "l40s").is_some() {
            let _ = self.store.delete("GPUClass", "", "l40s");
            self.did("delete_class");
        } else {
            self.create(class("l40s", L40S).no_finalizer().obj());
            self.did("make_class");
        }
    }

    /// The end of the churn: every node Ready again.
    pub fn settle(&mut self) {
        if let Some(n) = self.down.take() {
            self.standin.set_node_ready(&n, true);
        }
    }
}
