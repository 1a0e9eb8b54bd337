//! O2 in placement: per class, the waiting sets that could lead it in
//! O1's order (`candidates`), and its head (the first of them) since when.
//! A head's start is kept on its claims too (the `QueueHead` condition's
//! lastTransitionTime), so a controller that restarts, or a replica that
//! takes over, goes on counting from it. O(log sets) per decision.

use crate::rules::Lead;
use crate::rules::queueing::{HeadAsk, Held, OrderKey};
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// A set that could lead a class.
#[derive(Clone, Debug)]
struct Candidate {
    ask: Arc<HeadAsk>,
    over_budget: bool,
}

/// A class's head: its VMI, and since when it leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub vmi: String,
    pub key: OrderKey,
    pub since: Timestamp,
}

/// A class whose head changed: the one before, and the one now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadMoved {
    pub class: String,
    pub old: Option<Head>,
    pub new: Option<Head>,
}

#[derive(Default)]
pub(super) struct Heads {
    candidates: HashMap<String, BTreeMap<OrderKey, Candidate>>,
    /// Each candidate set's key and the classes it could lead.
    of_vmi: HashMap<String, (OrderKey, Vec<String>)>,
    heads: HashMap<String, Head>,
}

impl Heads {
    /// The set of `vmi` (at `key`) was decided: it could lead `lead`'s
    /// classes, or none. `restored`: per class, since when its claims say
    /// it leads (a head before a restart). The classes whose head moved.
    pub fn decided(
        &mut self,
        vmi: &str,
        key: OrderKey,
        lead: Option<Lead>,
        restored: &BTreeMap<String, Timestamp>,
        now: Timestamp,
    ) -> Vec<HeadMoved> {
        let mut touched = self.remove(vmi);
        if let Some(lead) = lead {
            let candidate = Candidate {
                ask: lead.ask,
                over_budget: lead.over_budget,
            };
            for class in &lead.classes {
                self.candidates
                    .entry(class.clone())
                    .or_default()
                    .insert(key.clone(), candidate.clone());
                touched.push(class.clone());
            }
            self.of_vmi.insert(vmi.to_string(), (key, lead.classes));
        }
        touched.sort();
        touched.dedup();
        touched
            .into_iter()
            .filter_map(|c| self.elect(&c, restored, now))
            .collect()
    }

    /// The set of `vmi` is placed, gone, or no longer waits: it leads
    /// nothing. The classes whose head moved.
    pub fn forget(&mut self, vmi: &str, now: Timestamp) -> Vec<HeadMoved> {
        let touched = self.remove(vmi);
        touched
            .into_iter()
            .filter_map(|c| self.elect(&c, &BTreeMap::new(), now))
            .collect()
    }

    fn remove(&mut self, vmi: &str) -> Vec<String> {
        let Some((key, classes)) = self.of_vmi.remove(vmi) else {
            return Vec::new();
        };
        for c in &classes {
            if let Some(set) = self.candidates.get_mut(c) {
                set.remove(&key);
                if set.is_empty() {
                    self.candidates.remove(c);
                }
            }
        }
        classes
    }

    /// The head of `class` again: the first candidate. A head that stays
    /// keeps its start; a new one starts now, or where its claims say.
    fn elect(
        &mut self,
        class: &str,
        restored: &BTreeMap<String, Timestamp>,
        now: Timestamp,
    ) -> Option<HeadMoved> {
        let first = self
            .candidates
            .get(class)
            .and_then(|set| set.keys().next())
            .cloned();
        let old = self.heads.get(class).cloned();
        let new = match (first, &old) {
            (None, _) => None,
            (Some(key), Some(o)) if o.vmi == key.vmi => Some(Head { key, ..o.clone() }),
            (Some(key), _) => Some(Head {
                vmi: key.vmi.clone(),
                since: restored
                    .get(class)
                    .copied()
                    .unwrap_or_else(|| to_the_second(now))
                    .min(now),
                key,
            }),
        };
        match &new {
            Some(h) => self.heads.insert(class.to_string(), h.clone()),
            None => self.heads.remove(class),
        };
        (old.as_ref().map(|h| &h.vmi) != new.as_ref().map(|h| &h.vmi)).then(|| HeadMoved {
            class: class.to_string(),
            old,
            new,
        })
    }

    /// The classes that have a head.
    pub fn led_classes(&self) -> impl Iterator<Item = &String> {
        self.heads.keys()
    }

    /// The head of `class`, if any.
    pub fn head(&self, class: &str) -> Option<&Head> {
        self.heads.get(class)
    }

    /// The classes `vmi` leads, with since when.
    pub fn led_by(&self, vmi: &str) -> BTreeMap<String, Timestamp> {
        let classes = self
            .of_vmi
            .get(vmi)
            .map(|(_, c)| c.as_slice())
            .unwrap_or_default();
        classes
            .iter()
            .filter_map(|c| {
                let h = self.heads.get(c)?;
                (h.vmi == vmi).then(|| (c.clone(), h.since))
            })
            .collect()
    }

    /// Whether the head of `class` waits over the class's budget (and so
    /// holds the budget, not nodes).
    pub fn over_budget(&self, class: &str) -> bool {
        let Some(h) = self.heads.get(class) else {
            return false;
        };
        self.candidates
            .get(class)
            .and_then(|c| c.get(&h.key))
            .is_some_and(|c| c.over_budget)
    }

    /// O2: the heads of `classes` that hold back the set at `key`: those
    /// before it in O1's order that have led for `after` by `now`.
    pub fn holding(
        &self,
        classes: &[String],
        key: &OrderKey,
        after: Option<Duration>,
        now: Timestamp,
    ) -> Vec<Held> {
        let Some(after) = after else {
            return Vec::new();
        };
        classes
            .iter()
            .filter_map(|class| {
                let h = self.heads.get(class)?;
                if h.key >= *key || !holds_at(h.since, after, now) {
                    return None;
                }
                let c = self.candidates.get(class)?.get(&h.key)?;
                Some(Held {
                    class: class.clone(),
                    head: h.vmi.clone(),
                    since: h.since,
                    over_budget: c.over_budget,
                    ask: c.ask.clone(),
                })
            })
            .collect()
    }
}

/// Whether a head that leads since `since` holds others back at `now`.
/// `t` as the API keeps a condition's time, to the second: a controller
/// that restarts reads back the start it wrote, and says the same.
fn to_the_second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

pub fn holds_at(since: Timestamp, after: Duration, now: Timestamp) -> bool {
    let waited: Duration = since.duration_until(now).try_into().unwrap_or_default();
    waited >= after
}

#[cfg(test)]
mod tests;
