//! E2, placement's evacuation part: the restarts under way as the nodes
//! keep them (a `RestartMark` written on the node before each delete,
//! removed once the restart is over), overlaid with this process's mark
//! writes that the node watch does not show yet (`restarts`, one typed
//! value per restart); the VMs read as ones that would not start again;
//! and what the nodes were told (an Event at each step: a VM restarted,
//! one kept for want of a VM owner, the evacuation blocked by a VM that
//! waits at the gate). Nothing of the count lives only here: a controller
//! that restarts, or a replica that takes over, counts the restarts under
//! way from the marks (I10).
//!
//! It owns no timer and no mailbox: `decide` says when E2 must look again
//! (the first restart to time out, the first VM to read again), and
//! `written` what the actor's writes changed; the actor keeps the timer.

mod answers;
mod marks;
mod restarts;
mod told;

pub(super) use answers::Again;

use super::write::{EndRestarts, Write};
use crate::api::RestartMark;
use crate::controller::Env;
use crate::rules::{EvacuationCounts, EvacuationStep, Evacuee, decide_evacuation};
use crate::world::World;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use restarts::Restarts;
use std::collections::{BTreeMap, HashMap};
use tokio::time::Instant;
use told::{Said, restart};

/// E2's state in placement.
#[derive(Default)]
pub(super) struct Evacuation {
    /// What this process knows of each restart beyond its node's mark.
    restarts: Restarts,
    /// VMIs (by uid) whose VM, read live, would not start them again once
    /// deleted: why, and when it was read (read again after
    /// `REREAD_KEPT`, as a VM's runStrategy may change).
    kept: HashMap<String, (String, Instant)>,
    /// What was said, so that it is said once.
    said: Said,
    /// Some VM was kept for want of anywhere to go: any change that may
    /// make room looks again.
    nowhere: bool,
    /// Nodes whose E2 finalizer this process takes off: None while the
    /// write is under way, else the node's resourceVersion it returned
    /// (the node watch shows it from there), so that a lagging watch asks
    /// for no second write.
    releasing: HashMap<String, Option<u64>>,
}

/// What one look at the marks found.
#[derive(Default)]
pub(super) struct Found {
    /// Restarts that count or block, by VM.
    pub restarted: BTreeMap<String, crate::rules::Restart>,
    /// How many count against `maxConcurrent`, and per node.
    pub counting: usize,
    pub by_node: BTreeMap<String, usize>,
    /// Marks to remove, per node.
    pub ends: BTreeMap<String, EndRestarts>,
    /// A restart whose delete is to be made again.
    pub resume: Option<Evacuee>,
    /// When the first restart that counts times out.
    pub first_timeout: Option<Timestamp>,
}

/// How long a VM read as one that would not start its VMI again is
/// believed before it is read again.
const REREAD_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

/// What one look decided: the write to make, if any, and when E2 must
/// look again though nothing changes (None: only a change wakes it).
pub(super) struct Decision {
    pub write: Option<Write>,
    pub wake: Option<Instant>,
}

impl Evacuation {
    /// Whether a VM is kept running for want of anywhere to go (E2):
    /// room made anywhere is a reason to look again.
    pub(super) fn waits_for_room(&self) -> bool {
        self.nowhere
    }

    /// E2 across the cluster: removes the marks of restarts that are over,
    /// resumes a restart whose delete did not happen, else the next VMI to
    /// delete, if any; more are asked for after each write lands.
    pub(super) fn decide(&mut self, env: &Env) -> Decision {
        let w = env.world.clone();
        let cfg = w.config();
        let (timeout, most) = (cfg.evacuation.timeout, cfg.evacuation.max_concurrent);
        let now = env.clock.wall();
        let clock = env.clock.now();
        let mut found = self.look_at_marks(env, now, timeout);
        self.kept
            .retain(|_, (_, at)| clock.saturating_duration_since(*at) < REREAD_KEPT);
        let wake = self.next_wake(found.first_timeout, now, clock);
        let mut ends = std::mem::take(&mut found.ends);
        for node in self.strays(&w) {
            ends.entry(node.clone()).or_insert_with(|| EndRestarts {
                node,
                uids: Vec::new(),
                events: Vec::new(),
                release: true,
            });
        }
        if !ends.is_empty() {
            let write = self.end(&w, ends.into_values().collect());
            return Decision {
                write: Some(write),
                wake,
            };
        }
        let kept: HashMap<String, String> = self
            .kept
            .iter()
            .map(|(uid, (why, _))| (uid.clone(), why.clone()))
            .collect();
        let could_move = |e: &Evacuee| -> Result<(), String> {
            let v = w.vmi(&e.vmi).ok_or_else(|| "the VMI is gone".to_string())?;
            crate::rules::could_move_off(&v, &w, &e.node).map(|_| ())
        };
        let step = decide_evacuation(
            &w,
            &EvacuationCounts {
                restarted: &found.restarted,
                under_way: found.counting,
                under_way_by_node: &found.by_node,
                max_concurrent: most,
                would_not_restart: &kept,
                could_move: &could_move,
            },
        );
        self.nowhere = !step.nowhere.is_empty();
        self.said.bare_vmis(env, &step);
        self.said.nowhere(env, &step);
        self.said.blocked(env, &step, &found);
        told::report(env, &step, &found);
        let write = match found.resume.clone() {
            Some(e) => Some(self.resume(&w, e, &step, &found, most, now)),
            None => step.restart.into_iter().next().and_then(|e| {
                let mark = new_mark(e.vm.clone()?, now);
                self.restarts.begin(&e.uid, &e.node, Some(mark.clone()));
                Some(restart(
                    &w,
                    e,
                    Some(mark),
                    found.counting + 1,
                    Some(step.left),
                    most,
                ))
            }),
        };
        Decision { write, wake }
    }

    /// The first instant E2 must look again by itself: a restart's
    /// timeout, or a kept VM's time to be read again.
    fn next_wake(
        &self,
        first_timeout: Option<Timestamp>,
        now: Timestamp,
        clock: Instant,
    ) -> Option<Instant> {
        let timeout = first_timeout.map(|t| {
            let wait: std::time::Duration = now.duration_until(t).try_into().unwrap_or_default();
            clock + wait
        });
        let reread = self.kept.values().map(|(_, at)| *at + REREAD_KEPT).min();
        timeout.into_iter().chain(reread).min()
    }

    /// The write that removes these marks, each noted as being removed;
    /// where no mark is left on its node after them, E2's finalizer comes
    /// off in the same patch.
    fn end(&mut self, w: &World, mut ends: Vec<EndRestarts>) -> Write {
        for end in &mut ends {
            let on_node = w
                .node(&end.node)
                .map(|n| n.restarts.keys().cloned().collect())
                .unwrap_or_default();
            let left = self.restarts.marked_on(&end.node, on_node);
            end.release |= left.iter().all(|uid| end.uids.contains(uid));
            if end.release {
                self.releasing.insert(end.node.clone(), None);
            }
            for uid in &end.uids {
                self.restarts.end(uid, &end.node);
            }
        }
        Write::EndRestarts(ends)
    }

    /// Nodes whose E2 finalizer outlived their marks (a mark removed by
    /// hand): taken off, once, as nothing of this process's is on its way
    /// to them.
    fn strays(&mut self, w: &World) -> Vec<String> {
        let seen = w.observed_rv(crate::api::Kind::Node);
        self.releasing.retain(|_, rv| rv.is_none_or(|rv| rv > seen));
        w.evacuation_finalizer_without_marks()
            .into_iter()
            .filter(|n| !self.releasing.contains_key(n))
            .filter(|n| self.restarts.marked_on(n, Default::default()).is_empty())
            .collect()
    }

    /// E2's finalizer taken off these nodes (at the resourceVersion each
    /// write returned), or not (looked at again).
    pub(super) fn released(&mut self, landed: &[(String, u64)], failed: &[String]) {
        for (node, rv) in landed {
            self.releasing.insert(node.clone(), Some(*rv));
        }
        for node in failed {
            self.releasing.remove(node);
        }
    }

    /// A restart marked whose VMI was not deleted (a controller stopped
    /// between the two writes, or the delete met a newer VMI): made now,
    /// its mark written afresh (its timeout counts from now), where a new
    /// restart could be; else its mark goes, as nothing was stopped.
    fn resume(
        &mut self,
        w: &World,
        e: Evacuee,
        step: &EvacuationStep,
        found: &Found,
        most: u32,
        now: Timestamp,
    ) -> Write {
        let node_limit = w.node(&e.node).and_then(|n| n.evacuation_limit);
        let on_node = found.by_node.get(&e.node).copied().unwrap_or(0);
        let over =
            found.counting > most as usize || node_limit.is_some_and(|l| on_node > l as usize);
        let vm = e.vm.clone().unwrap_or_default();
        let held = match (&step.blocked, over) {
            (Some((waiting, why)), _) => Some(format!(
                "no further VM is stopped while VM {waiting}, restarted, waits at the gate: {why}"
            )),
            (None, true) => Some("more restarts are under way than may be".to_string()),
            (None, false) => None,
        };
        if let Some(why) = held {
            let message = format!(
                "E2: VM {vm} was not restarted (its VMI was not deleted): {why}; it is restarted in its turn"
            );
            let about = Some((vm.as_str(), e.uid.as_str()));
            let event = told::logged(told::node_event(
                w,
                &e.node,
                about,
                false,
                "EvacuationStep",
                message,
            ));
            return self.end(
                w,
                vec![EndRestarts {
                    node: e.node,
                    uids: vec![e.uid],
                    events: vec![event],
                    release: false,
                }],
            );
        }
        let mark = new_mark(vm, now);
        // Written afresh only where it would change (a write that changes
        // nothing is a write too many, I5).
        let kept = self.restarts.own_mark(&e.uid).or_else(|| {
            w.node(&e.node)
                .and_then(|n| n.restarts.get(&e.uid).cloned().flatten())
        });
        let mark = (kept.as_ref() != Some(&mark)).then_some(mark);
        self.restarts.begin(&e.uid, &e.node, mark.clone());
        let counting = found.counting;
        restart(w, e, mark, counting, None, most)
    }
}

/// A new mark for `vm`, restarted `now`: its time rounded up to the whole
/// second a Kubernetes time keeps, so that a restart never stops counting
/// early.
fn new_mark(vm: String, now: Timestamp) -> RestartMark {
    let at = if now.subsec_nanosecond() == 0 {
        now
    } else {
        Timestamp::from_second(now.as_second().saturating_add(1)).unwrap_or(now)
    };
    RestartMark { vm, at: Time(at) }
}
