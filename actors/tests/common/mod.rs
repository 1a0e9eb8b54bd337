//! The harness for actor tests: a simulated cluster, the real actors, and
//! the invariants I1-I5 checked after every step.
#![allow(dead_code)]

use gpu_claims_actors::api::{CLAIMS_ANNOTATION, ClaimPhase, GPUClaim, GPUClass};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef, WriteError};
use gpu_claims_testbed::memory::Entry;
use gpu_claims_testbed::memory::invariants::Checker;
use gpu_claims_testbed::memory::sim::{Sim, run_sim};
use gpu_claims_testbed::memory::store::Subresource;
use std::time::Duration;

pub use gpu_claims_testbed::fixtures::*;
mod dra;
#[allow(unused_imports)]
pub use dra::*;
pub mod random;

pub const H200: &str = "nvidia.com/GH100_H200";

pub struct TestCluster {
    pub sim: Sim,
    checker: Checker,
    seen: usize,
}

/// Runs a test against a cluster holding `objects`, on a simulated clock.
pub fn with_world<F, Fut>(config: Config, objects: Vec<Obj>, f: F)
where
    F: FnOnce(TestCluster) -> Fut,
    Fut: Future<Output = ()>,
{
    run_sim(|| async move {
        let mut checker = Checker::for_config(&config);
        let sim = Sim::start(config, &objects, None);
        // A baseline look before the controller writes (I10 judges a
        // delete by what was there before it).
        checker.check(&sim.cluster);
        f(TestCluster {
            sim,
            checker,
            seen: 0,
        })
        .await
    })
}

/// Settles a cluster of `objects` (default config), checks I1-I5, and
/// returns the controller's effective writes.
pub fn settled_writes(objects: Vec<Obj>) -> Vec<String> {
    settled(Config::default(), objects, |t| t.writes())
}

/// Settles a cluster of `objects` under `config`, checks I1-I5, and
/// hands it to `look`, which asserts what the test shows of it.
pub fn settled<T>(
    config: Config,
    objects: Vec<Obj>,
    look: impl FnOnce(&mut TestCluster) -> T,
) -> T {
    run_sim(|| async move {
        let mut checker = Checker::for_config(&config);
        let sim = Sim::start(config, &objects, None);
        checker.check(&sim.cluster);
        let mut t = TestCluster {
            checker,
            sim,
            seen: 0,
        };
        t.settle().await;
        look(&mut t)
    })
}

/// The phase claim `key` settles in, in a world of `objects` (default
/// config; I1-I5 checked).
pub fn settled_phase(objects: Vec<Obj>, key: &str) -> ClaimPhase {
    settled(Config::default(), objects, |t| {
        t.claim(key)
            .unwrap_or_else(|| panic!("{key} exists"))
            .phase()
    })
}

/// The same, with a watch that trails writes by `lag`.
pub fn with_lagging_world<F, Fut>(lag: Duration, objects: Vec<Obj>, f: F)
where
    F: FnOnce(TestCluster) -> Fut,
    Fut: Future<Output = ()>,
{
    run_sim(|| async move {
        let sim = Sim::start(Config::default(), &objects, Some(lag));
        f(TestCluster {
            sim,
            checker: Checker::default(),
            seen: 0,
        })
        .await
    })
}

/// A run of the world `start` makes, its process killed after `cut`
/// writes, then restarted and brought on by `after_restart`: the sim as
/// it ends, and the invariants I1-I5 it broke (checked after the kill and
/// at the end). Call inside [`run_sim`].
pub async fn killed_after(
    cut: i64,
    start: impl FnOnce() -> Sim,
    after_restart: impl AsyncFnOnce(&Sim),
) -> (Sim, Vec<String>) {
    let mut sim = start();
    let mut checker = Checker::default();
    sim.die_after(cut);
    sim.settle().await;
    let mut v = checker.check(&sim.cluster);
    sim.restart();
    after_restart(&sim).await;
    v.extend(checker.check(&sim.cluster));
    (sim, v)
}

/// For every write of the settled world `world()` makes, a run killed
/// after it, restarted and settled: `end` judges how each ends (its
/// violations, the cut named), beside the invariants the kill broke and
/// any write made twice (more effective writes than the run without a cut).
pub fn after_every_cut(world: impl Fn() -> Vec<Obj>, end: impl Fn(i64, &Sim) -> Vec<String>) {
    let total = run_sim(|| async {
        let sim = Sim::start(Config::default(), &world(), None);
        sim.settle().await;
        sim.cluster.journal().effective().count()
    });
    for cut in 0..total as i64 {
        let v = run_sim(|| async {
            let start = || Sim::start(Config::default(), &world(), None);
            let (sim, mut v) = killed_after(cut, start, async |sim| sim.settle().await).await;
            v.extend(end(cut, &sim));
            // Never more: no write is made twice (a restart may skip an
            // intermediate class status).
            let writes = sim.cluster.journal().effective().count();
            if writes > total {
                v.push(format!(
                    "cut {cut}: {writes} writes, {total} without the cut"
                ));
            }
            v
        });
        assert!(v.is_empty(), "{v:#?}");
    }
}

/// For every write of the settled run `start` makes, a run killed after
/// it, restarted and settled, each judged by `ended` (the cut named) and by
/// I1-I5; the run without a cut must end well too. Its number of writes.
pub fn every_cut_resumes(start: fn() -> Sim, ended: fn(&Sim) -> Vec<String>) -> usize {
    let total = run_sim(|| async {
        let sim = start();
        sim.settle().await;
        assert!(ended(&sim).is_empty(), "{:?}", ended(&sim));
        sim.cluster.journal().effective().count()
    });
    for cut in 0..total as i64 {
        let v = run_sim(|| async {
            let (sim, mut v) = killed_after(cut, start, async |sim| sim.settle().await).await;
            v.extend(ended(&sim).into_iter().map(|e| format!("cut {cut}: {e}")));
            v
        });
        assert!(v.is_empty(), "{v:#?}");
    }
    total
}

/// Runs a test against a cluster holding `objects`, settled first (I1-I5
/// checked).
pub fn after_settling<F, Fut>(config: Config, objects: Vec<Obj>, f: F)
where
    F: FnOnce(TestCluster) -> Fut,
    Fut: Future<Output = ()>,
{
    with_world(config, objects, |mut t| async move {
        t.settle().await;
        f(t).await
    });
}

/// Claim `t/a` Bound on n1 and attached to `vmi`, a VMI that does not
/// exist: settled under `config`, then handed to `f` (L6's grace for it
/// runs from the start).
pub fn attached_to_an_absent_vmi<F, Fut>(config: Config, vmi: &str, f: F)
where
    F: FnOnce(TestCluster) -> Fut,
    Fut: Future<Output = ()>,
{
    after_settling(config, holding(bound_to(vmi), []), f);
}

/// Claim `t/a` of `objects` waits with `reason` (G5) until `change` is
/// made; then its set is placed on n1 and it is Attached, waiting no more.
pub fn waits_until(objects: Vec<Obj>, reason: &str, change: impl FnOnce(&TestCluster)) {
    with_world(Config::default(), objects, |mut t| async move {
        t.settle().await;
        assert_eq!(t.waiting("t/a").map(|w| w.0).as_deref(), Some(reason));
        change(&t);
        t.settle().await;
        let c = t.claim("t/a").unwrap();
        assert_eq!(
            (c.phase(), c.node_name(), waiting_reason(&c)),
            (ClaimPhase::Attached, Some("n1"), None)
        );
    });
}

pub fn off() -> Config {
    let mut c = Config::default();
    c.kubevirt.enabled = false;
    c
}

/// A class, its node with 8 GPUs, and these objects.
pub fn world(objs: impl IntoIterator<Item = Obj>) -> Vec<Obj> {
    let mut v = vec![class("h200", H200).obj(), node("n1").gpus(H200, 8).obj()];
    v.extend(objs);
    v
}

impl TestCluster {
    /// Settles, then checks I1-I5.
    pub async fn settle(&mut self) {
        self.sim.settle().await;
        self.check();
    }

    pub fn check(&mut self) {
        let v = self.checker.check(&self.sim.cluster);
        assert!(v.is_empty(), "invariants violated: {v:#?}");
    }

    /// I5: a restart of the settled controller writes nothing.
    pub async fn restart_writes_nothing(&mut self) {
        assert_eq!(
            self.writes_on_restart().await,
            Vec::<String>::new(),
            "I5: a restart writes nothing"
        );
    }

    /// Restarts and settles: the writes of the new process.
    pub async fn writes_on_restart(&mut self) -> Vec<String> {
        self.writes();
        self.sim.restart();
        self.settle().await;
        self.writes()
    }

    /// Nothing is written until `after` has passed from now (to the
    /// second); then exactly `want`.
    pub async fn writes_only_after(&mut self, after: Duration, want: &[&str]) {
        self.writes();
        self.advance(after - secs(1)).await;
        assert_eq!(
            self.writes(),
            Vec::<String>::new(),
            "nothing before {after:?}"
        );
        self.advance(secs(1)).await;
        assert_eq!(self.writes(), want, "at {after:?}");
    }

    /// Reloads the default config changed by `change`, and settles.
    pub async fn reload(&mut self, change: impl FnOnce(&mut Config)) {
        let mut config = Config::default();
        change(&mut config);
        self.checker.reloaded(&self.sim.cluster, &config);
        self.sim.reload(config);
        self.settle().await;
    }

    /// L4: claim `t/a` is Lost; n1 comes back (8 GPUs, Ready) and the
    /// claim is Attached again.
    pub async fn attached_again_once_n1_is_back(&mut self) {
        assert_eq!(self.phase("t/a"), ClaimPhase::Lost);
        self.user_update(node("n1").gpus(H200, 8).obj());
        self.settle().await;
        assert_eq!(self.phase("t/a"), ClaimPhase::Attached);
    }

    pub async fn advance(&mut self, d: Duration) {
        self.sim.advance(d).await;
        self.check();
    }

    pub fn claim(&self, ns_name: &str) -> Option<GPUClaim> {
        let (ns, name) = ns_name.split_once('/').unwrap();
        match self
            .sim
            .cluster
            .get(&ObjRef::new(Kind::Claim, Some(ns), name))
        {
            Some(Obj::Claim(c)) => Some(c),
            _ => None,
        }
    }

    /// The phase of claim `ns_name`, which must exist.
    /// Why the claim's set waits (G5): its Waiting condition's reason and
    /// message, if it is waiting.
    pub fn waiting(&self, ns_name: &str) -> Option<(String, String)> {
        let c = self.claim(ns_name)?;
        c.waiting().map(|w| (w.reason.clone(), w.message.clone()))
    }

    pub fn phase(&self, ns_name: &str) -> ClaimPhase {
        self.claim(ns_name)
            .unwrap_or_else(|| panic!("{ns_name} exists"))
            .phase()
    }

    pub fn class(&self, name: &str) -> Option<GPUClass> {
        match self.sim.cluster.get(&ObjRef::new(Kind::Class, None, name)) {
            Some(Obj::Class(c)) => Some(c),
            _ => None,
        }
    }

    pub fn exists(&self, kind: Kind, ns: Option<&str>, name: &str) -> bool {
        self.sim.cluster.get(&ObjRef::new(kind, ns, name)).is_some()
    }

    /// The controller's effective writes since the last call, as
    /// `op Kind name rule`.
    pub fn writes(&mut self) -> Vec<String> {
        let j = self.sim.cluster.journal();
        let new: Vec<String> = j.entries[self.seen..]
            .iter()
            .filter(|e| e.changed && e.error.is_none())
            .map(fmt)
            .collect();
        self.seen = j.entries.len();
        new
    }

    pub fn all_entries(&self) -> Vec<Entry> {
        self.sim.cluster.journal().entries.clone()
    }

    /// A user (or KubeVirt) changes an object; status kinds get both parts written.
    pub fn user_update(&self, obj: Obj) {
        let store = &self.sim.store;
        let kind = obj.kind().name();
        let mut v = gpu_claims_actors::api::to_json(&obj);
        v["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        store.update(kind, v.clone(), Subresource::Main).unwrap();
        if v.get("status").is_some() && kind != "GPUAllocation" {
            store.update(kind, v, Subresource::Status).unwrap();
        }
    }

    pub fn user_delete(&self, kind: Kind, ns: Option<&str>, name: &str) {
        self.sim
            .store
            .delete(kind.name(), ns.unwrap_or_default(), name)
            .unwrap();
    }

    pub fn user_create(&self, obj: Obj) {
        self.sim.cluster.seed(&obj);
    }

    pub fn fail_writes(&self, errors: impl IntoIterator<Item = Option<WriteError>>) {
        self.sim.cluster.faults().fail_writes.extend(errors);
    }

    /// The next writes of `kind` fail with `errors`, in order.
    pub fn fail_writes_of(&self, kind: Kind, errors: impl IntoIterator<Item = WriteError>) {
        self.sim
            .cluster
            .faults()
            .fail_kind
            .entry(kind)
            .or_default()
            .extend(errors);
    }
}

fn fmt(e: &Entry) -> String {
    format!("{} {} {} {}", e.op, e.kind, e.name, e.rule)
}

/// A VMI `ns/name` of `uid` starting (Scheduling) with these annotations,
/// and its launcher pod `virt-launcher-<name>` at the gate, shaped by `pod`.
pub fn at_the_gate(
    ns: &str,
    name: &str,
    uid: &str,
    annotations: &[(&str, &str)],
    pod: impl FnOnce(PodBuilder) -> PodBuilder,
) -> Vec<Obj> {
    let mut v = vmi(ns, name).uid(uid).phase("Scheduling");
    for (k, val) in annotations {
        v = v.annotate(k, val);
    }
    let launcher = launcher(ns, &format!("virt-launcher-{name}"), name, uid);
    vec![v.obj(), pod(launcher.gated()).obj()]
}

/// A VMI of `t` starting (Scheduling) with these annotations, and its
/// launcher pod `virt-launcher-<name>` at the gate.
pub fn gated_vmi(name: &str, uid: &str, annotations: &[(&str, &str)]) -> Vec<Obj> {
    at_the_gate("t", name, uid, annotations, |pod| pod)
}

/// A VMI `ns/name` (uid `u-<ns>-<name>`) naming `claims`, with its
/// launcher pod at the gate.
pub fn naming(ns: &str, name: &str, claims: &str) -> Vec<Obj> {
    let uid = format!("u-{ns}-{name}");
    at_the_gate(ns, name, &uid, &[(CLAIMS_ANNOTATION, claims)], |pod| pod)
}

/// The launcher pod `t/virt-launcher-vm1` of VMI vm1 (u1).
pub fn vm1_launcher() -> PodBuilder {
    launcher("t", "virt-launcher-vm1", "vm1", "u1")
}

/// VMI vm1 (u1) naming `claims`, at the gate.
pub fn vm1_naming(claims: &str) -> Vec<Obj> {
    vm1_naming_and(claims, |pod| pod)
}

/// VMI vm1 (u1, Scheduling) naming `claims`, and its launcher pod at the
/// gate shaped by `pod`.
pub fn vm1_naming_and(claims: &str, pod: impl FnOnce(PodBuilder) -> PodBuilder) -> Vec<Obj> {
    at_the_gate("t", "vm1", "u1", &[(CLAIMS_ANNOTATION, claims)], pod)
}

/// A Lost claim `a` on n1 (NotReady), attached to vm1, shaped by `shape`.
pub fn lost_on_a_failed_node(shape: impl FnOnce(ClaimBuilder) -> ClaimBuilder) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).ready(false).obj(),
    ];
    objs.extend(shape(claim("t", "a").lost("n1").attached("vm1")).with_allocation(H200));
    objs
}

/// Class h200, n1 with 8 GPUs NotReady and n2 with 8, claim `c` with its
/// allocation, and vm1 naming claim `a` at the gate.
pub fn failed_n1_and_vm1_at_the_gate(c: ClaimBuilder) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 8).ready(false).obj(),
        node("n2").gpus(H200, 8).obj(),
    ];
    objs.extend(c.with_allocation(H200));
    objs.extend(vm1_naming("a"));
    objs
}

/// Claim `t/a`, which has moved to n2 and is Attached there.
pub fn attached_on_n2(t: &TestCluster) -> GPUClaim {
    let c = t.claim("t/a").unwrap();
    assert_eq!(
        (c.phase(), c.node_name()),
        (ClaimPhase::Attached, Some("n2"))
    );
    c
}

/// The effective writes whose description contains `needle`.
pub fn writes_about(t: &mut TestCluster, needle: &str) -> Vec<String> {
    t.writes()
        .into_iter()
        .filter(|w| w.contains(needle))
        .collect()
}

/// Claim `t/a` Bound on n1, naming `vmi` as the VMI it is attached to.
pub fn bound_to(vmi: &str) -> ClaimBuilder {
    claim("t", "a").bound("n1").attached(vmi)
}

/// Claim `t/a` Attached on n1 to `vmi`.
pub fn attached_to(vmi: &str) -> ClaimBuilder {
    claim("t", "a").attached_phase("n1").attached(vmi)
}

/// The class, n1 with 8 GPUs, claim `c` with its allocation, and `more`.
pub fn holding(c: ClaimBuilder, more: impl IntoIterator<Item = Obj>) -> Vec<Obj> {
    let mut objs = world(c.with_allocation(H200));
    objs.extend(more);
    objs
}

/// Class h200 deleting, n1 with 8 GPUs, and claim `c` with its allocation.
pub fn deleting_class_and(c: ClaimBuilder) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).deleting().obj(),
        node("n1").gpus(H200, 8).obj(),
    ];
    objs.extend(c.with_allocation(H200));
    objs
}

/// VMI `t/<name>` of `uid`, running.
pub fn live_vmi(name: &str, uid: &str) -> Obj {
    vmi("t", name).uid(uid).obj()
}

/// VMI `t/vm1` of u1 in `phase`.
pub fn vm1_in(phase: &str) -> Obj {
    vmi("t", "vm1").uid("u1").phase(phase).obj()
}

/// Whether claim `t/a` is gone.
pub fn released(t: &TestCluster) -> bool {
    t.claim("t/a").is_none()
}

pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// The reason of a claim's Waiting condition, if it is waiting (G5).
pub fn waiting_reason(c: &GPUClaim) -> Option<String> {
    c.waiting().map(|w| w.reason.clone())
}

/// A small deterministic generator (xorshift): the seed is the test case.
pub struct Rng(pub u64);
impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
