//! I11, judged from the cluster alone: at each check the checker finds,
//! on a world freshly listed from the store, which waiting set leads each
//! class (O2: `decide_gate`'s `lead`, the first in O1's order), and since
//! which check it has. A record written since the last check for a set
//! after a head that had led longer than `queueing.headOfLineAfter` (and
//! the controller's watch lag) before the write, and still waits, on a
//! node that could hold that head (for a head over budget: anywhere, from
//! its class) breaks I11. The controller's own bookkeeping (its claims'
//! `QueueHead` conditions) is not trusted: a broken order there is what
//! this is to catch.

use super::{MemCluster, fresh::world_of};
use gpu_claims_actors::api::{CONDITION_QUEUE_HEAD, GPUAllocation, GPUClaim};
use gpu_claims_actors::rules::queueing::{HeadAsk, Held, OrderKey, order_key};
use gpu_claims_actors::rules::{GateStep, Lead, WrittenAllocations, at_the_gate, decide_gate};
use gpu_claims_actors::world::{World, key, split_key};
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// A class's head as the checks saw it.
#[derive(Clone)]
struct Head {
    vmi: String,
    key: OrderKey,
    ask: Arc<HeadAsk>,
    over_budget: bool,
    /// The first check that saw it lead (the cluster's time).
    since: Duration,
}

#[derive(Default)]
pub(super) struct Heads {
    /// `queueing.headOfLineAfter` (None: off).
    after: Option<Duration>,
    heads: HashMap<String, Head>,
}

impl Heads {
    pub(super) fn with(after: Option<Duration>) -> Self {
        Self {
            after,
            heads: HashMap::new(),
        }
    }

    pub(super) fn reloaded(&mut self, after: Option<Duration>) {
        self.after = after;
    }

    /// I11 for the records written since the last check (`written`: their
    /// keys, with when each was written), then the heads as of now.
    pub(super) fn check(
        &mut self,
        c: &MemCluster,
        records: &[GPUAllocation],
        written: &BTreeMap<String, Duration>,
        v: &mut Vec<String>,
    ) {
        let w = world_of(c);
        let now = heads_now(&w, &self.heads, c.elapsed());
        if let Some(after) = self.after {
            let allowance = c.watch_allowance();
            for r in records {
                let k = key(
                    r.metadata.namespace.as_deref().unwrap_or_default(),
                    r.metadata.name.as_deref().unwrap_or_default(),
                );
                let Some(at) = written.get(&k) else { continue };
                self.judge(&w, &now, r, *at, after + allowance, v);
            }
        }
        self.heads = now;
    }

    /// I11 for one record written at `at`.
    /// A head that no longer leads now (its set placed, gone, or waiting
    /// for what leads nothing, such as its tenant's quota) may have
    /// stopped before the write: only one that leads still is judged.
    fn judge(
        &self,
        w: &World,
        now: &HashMap<String, Head>,
        r: &GPUAllocation,
        at: Duration,
        hold: Duration,
        v: &mut Vec<String>,
    ) {
        let class = &r.spec.class_name;
        let Some(h) = self.heads.get(class) else {
            return;
        };
        if now.get(class).is_none_or(|n| n.vmi != h.vmi) {
            return;
        }
        let ns = r.metadata.namespace.as_deref().unwrap_or_default();
        let Some(set) = set_of(w, &key(ns, r.metadata.name.as_deref().unwrap_or_default())) else {
            return;
        };
        if set == h.vmi || at <= h.since + hold {
            return;
        }
        let Some(vmi) = w.vmi(&set) else { return };
        if order_key(&vmi, w) <= h.key {
            return;
        }
        let node = &r.spec.node_name;
        let took = if h.over_budget {
            Some(format!("GPUs of {class}'s budget"))
        } else {
            w.node(node)
                .filter(|n| h.ask.could_hold(w, n))
                .map(|_| format!("GPUs of {class} on {node}, which could hold it"))
        };
        if let Some(took) = took {
            v.push(format!(
                "I11: the set of VMI {set} took {took}, while VMI {} (before it in O1's order) had led {class} since {:?}",
                h.vmi, h.since
            ));
        }
    }
}

/// The VMI whose set a record's claim belongs to: the one it is attached
/// to, or the VMI a template claim was made for.
fn set_of(w: &World, claim: &str) -> Option<String> {
    let c: Arc<GPUClaim> = w.claim(claim)?;
    let (ns, _) = split_key(claim);
    let vmi = c
        .attached_vmi_name()
        .map(str::to_string)
        .or_else(|| gpu_claims_actors::api::vmi_owner(&c.metadata).map(|(n, _)| n.to_string()))?;
    Some(key(ns, &vmi))
}

/// Who leads each class now: per class, the first in O1's order of the
/// sets at the gate that could lead it; a head that stays keeps the check
/// that first saw it.
fn heads_now(w: &World, before: &HashMap<String, Head>, now: Duration) -> HashMap<String, Head> {
    fresh_heads(w)
        .into_iter()
        .map(|(class, (vmi, key, lead))| {
            let since = before
                .get(&class)
                .filter(|h| h.vmi == vmi)
                .map_or(now, |h| h.since);
            let head = Head {
                vmi,
                key,
                ask: lead.ask,
                over_budget: lead.over_budget,
                since,
            };
            (class, head)
        })
        .collect()
}

/// The heads a controller started afresh would hold `vmi`'s set back for
/// (O2), knowing only the objects: per class of its claims, the first set
/// in O1's order that could lead it, once it has led `after` since its
/// claims' `QueueHead` condition says (a head no condition names leads
/// from now, as a fresh controller's does).
pub(super) fn fresh_holding(
    w: &World,
    vmi: &str,
    after: Option<Duration>,
    now: Timestamp,
) -> Vec<Held> {
    let Some(after) = after else {
        return Vec::new();
    };
    let Some(v) = w.vmi(vmi) else {
        return Vec::new();
    };
    let mine = order_key(&v, w);
    let classes = classes_of(w, vmi);
    let mut out = Vec::new();
    for (class, (head, key, lead)) in fresh_heads(w) {
        if head == vmi || key >= mine || !classes.contains(&class) {
            continue;
        }
        let since = led_since(w, &head, &class).unwrap_or(now);
        let waited: Duration = since.duration_until(now).try_into().unwrap_or_default();
        if waited >= after {
            out.push(Held {
                class,
                head,
                since,
                over_budget: lead.over_budget,
                ask: lead.ask,
            });
        }
    }
    out
}

/// The classes of the claims `vmi`'s set names.
fn classes_of(w: &World, vmi: &str) -> Vec<String> {
    let Some(v) = w.vmi(vmi) else {
        return Vec::new();
    };
    let ns = split_key(vmi).0;
    gpu_claims_actors::rules::requested_claims(&v, w)
        .iter()
        .filter_map(|n| w.claim(&key(ns, n)))
        .map(|c| c.spec.class_name.clone())
        .collect()
}

/// Per class, the set that leads it in a fresh world: the first in O1's
/// order of the sets at the gate that could lead it.
fn fresh_heads(w: &World) -> HashMap<String, (String, OrderKey, Lead)> {
    let written = WrittenAllocations::default();
    let mut heads: HashMap<String, (String, OrderKey, Lead)> = HashMap::new();
    for k in w.keys(gpu_claims_actors::ports::Kind::Vmi) {
        let Some(v) = w.vmi(&k) else { continue };
        if !at_the_gate(&v, w) {
            continue;
        }
        let GateStep::Wait {
            lead: Some(lead), ..
        } = decide_gate(&v, w, &written)
        else {
            continue;
        };
        let order = order_key(&v, w);
        for class in &lead.classes {
            if heads.get(class).is_none_or(|h| order < h.1) {
                heads.insert(class.clone(), (k.clone(), order.clone(), lead.clone()));
            }
        }
    }
    heads
}

/// Since when the claims of `vmi`'s set of class `class` say it leads
/// that class: their `QueueHead` condition that names the VMI's uid.
fn led_since(w: &World, vmi: &str, class: &str) -> Option<Timestamp> {
    let v = w.vmi(vmi)?;
    let ns = split_key(vmi).0;
    let phrase = format!("(uid {})", v.uid());
    gpu_claims_actors::rules::requested_claims(&v, w)
        .iter()
        .filter_map(|n| w.claim(&key(ns, n)))
        .filter(|c| c.spec.class_name == class)
        .filter_map(|c| {
            c.conditions()
                .iter()
                .find(|x| {
                    x.type_ == CONDITION_QUEUE_HEAD
                        && x.status == "True"
                        && x.message.contains(&phrase)
                })
                .map(|x| x.last_transition_time.0)
        })
        .min()
}
