//! E2 in placement: the restarts under way as the nodes keep them (a
//! `RestartMark` written on the node before each delete, removed once the
//! restart is over), overlaid with this process's mark writes that the
//! node watch does not show yet; the timer that wakes E2 when one times
//! out; and what the nodes were told (an Event at each step: a VM
//! restarted, one kept for want of a VM owner, the evacuation blocked by a
//! VM that waits at the gate). Nothing of the count lives only here: a
//! controller that restarts, or a replica that takes over, counts the
//! restarts under way from the marks (I10).

mod answers;
mod told;

use told::{node_event, restart};

use super::Placement;
use super::write::{EndRestarts, Write};
use crate::api::{Kind, RestartMark};
use crate::rules::{
    EvacuationCounts, Evacuee, MarkState, Restart, decide_evacuation, judge_mark, timed_out_at,
};
use crate::world::World;
use actix::prelude::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashMap, HashSet};
use tokio::time::Instant;

/// A mark this process writes (Some) or removes (None), until the node
/// watch shows the write.
struct Pending {
    node: String,
    mark: Option<RestartMark>,
    /// The node's resourceVersion the write returned; None while the
    /// write is under way.
    rv: Option<u64>,
}

#[derive(Default)]
pub(super) struct Evacuation {
    /// By the uid of the VMI the mark is about.
    pending: BTreeMap<String, Pending>,
    /// The VMIs (by uid) whose delete this process makes or made: a mark
    /// whose VMI the cache still shows live is then no restart to resume.
    issued: HashSet<String>,
    /// The timer that wakes E2 when the first restart times out.
    timer: Option<(Instant, SpawnHandle)>,
    /// VMIs without a VM owner already reported, by uid.
    told_bare: HashSet<String>,
    /// The block last reported (VM, why), so it is said once.
    told_blocked: Option<(String, String)>,
    /// Restarts whose timeout was already said, by uid.
    told_timed_out: HashSet<String>,
    /// VMIs (by uid) whose VM, read live, would not start them again once
    /// deleted: why, and when it was read (read again after
    /// `REREAD_KEPT`, as a VM's runStrategy may change).
    kept: HashMap<String, (String, Instant)>,
}

/// How long a VM read as one that would not start its VMI again is
/// believed before it is read again.
const REREAD_KEPT: std::time::Duration = std::time::Duration::from_secs(60);

impl Evacuation {
    /// A mark write decided (Some: the mark written, None: removed): it
    /// counts from now, not from the write's answer, so a change that
    /// comes while the write is under way decides nothing twice.
    fn writing(&mut self, uid: &str, node: &str, mark: Option<RestartMark>) {
        let p = Pending {
            node: node.to_string(),
            mark,
            rv: None,
        };
        self.pending.insert(uid.to_string(), p);
    }

    /// The write that removes these marks, each noted as being removed.
    fn end(&mut self, ends: Vec<EndRestarts>) -> Write {
        for end in &ends {
            for uid in &end.uids {
                self.writing(uid, &end.node, None);
            }
        }
        Write::EndRestarts(ends)
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

/// The marks as placement counts them, by the uid of the VMI deleted:
/// the nodes', with this process's writes the watch does not show yet.
fn marks(w: &World, evac: &mut Evacuation) -> BTreeMap<String, (String, Option<RestartMark>)> {
    let seen = w.observed_rv(Kind::Node);
    evac.pending.retain(|_, p| p.rv.is_none_or(|rv| rv > seen));
    let mut out: BTreeMap<String, (String, Option<RestartMark>)> = w
        .restart_marks()
        .into_iter()
        .map(|(node, uid, m)| (uid, (node, m)))
        .collect();
    for (uid, p) in &evac.pending {
        match &p.mark {
            Some(m) => out.insert(uid.clone(), (p.node.clone(), Some(m.clone()))),
            None => out.remove(uid),
        };
    }
    out
}

/// How a restart whose mark goes ended, for its Event.
enum End {
    Ran,
    TimedOut,
    Other,
}

/// What one look at the marks found.
#[derive(Default)]
struct Marks {
    /// Restarts that count or block, by VM.
    restarted: BTreeMap<String, Restart>,
    /// How many count against `maxConcurrent`, and per node.
    counting: usize,
    by_node: BTreeMap<String, usize>,
    /// Marks to remove, per node.
    ends: BTreeMap<String, EndRestarts>,
    /// A restart whose delete is to be made again.
    resume: Option<Evacuee>,
    /// When the first restart that counts times out.
    first_timeout: Option<Timestamp>,
}

impl Placement {
    /// E2 across the cluster: removes the marks of restarts that are over,
    /// resumes a restart whose delete did not happen, else the next VMI to
    /// delete, if any; more are asked for after each write lands.
    pub(super) fn decide_evacuation(&mut self, ctx: &mut Context<Self>) -> Option<Write> {
        let w = self.env.world.clone();
        let cfg = w.config();
        let timeout = cfg.evacuation.timeout;
        let most = cfg.evacuation.max_concurrent;
        let now = self.env.clock.wall();
        let found = self.look_at_marks(&w, now, timeout);
        if !found.ends.is_empty() {
            return Some(self.evac.end(found.ends.into_values().collect()));
        }
        self.wake_for_timeout(found.first_timeout, now, ctx);
        let clock = self.env.clock.now();
        self.evac
            .kept
            .retain(|_, (_, at)| clock.saturating_duration_since(*at) < REREAD_KEPT);
        let kept: HashMap<String, String> = self
            .evac
            .kept
            .iter()
            .map(|(uid, (why, _))| (uid.clone(), why.clone()))
            .collect();
        let step = decide_evacuation(
            &w,
            &EvacuationCounts {
                restarted: &found.restarted,
                under_way: found.counting,
                under_way_by_node: &found.by_node,
                max_concurrent: most,
                would_not_restart: &kept,
            },
        );
        self.warn_of_bare_vmis(&step);
        if step.blocked != self.evac.told_blocked {
            if let Some((vm, why)) = &step.blocked
                && let Some(r) = found.restarted.get(vm)
            {
                let message = format!(
                    "E2: no further VM is stopped while VM {vm}, restarted, waits at the gate: {why}"
                );
                let about = Some((vm.as_str(), r.old_uid.as_str()));
                self.event_on_node(&r.node, about, true, "EvacuationBlocked", message);
            }
            self.evac.told_blocked = step.blocked.clone();
        }
        self.report_evacuation(&step, &found);
        if let Some(e) = found.resume.clone() {
            return Some(self.resume(&w, e, &step, &found, most, now));
        }
        let e = step.restart.into_iter().next()?;
        let mark = new_mark(e.vm.clone()?, now);
        self.evac.writing(&e.uid, &e.node, Some(mark.clone()));
        self.evac.issued.insert(e.uid.clone());
        Some(restart(
            &w,
            e,
            Some(mark),
            found.counting + 1,
            Some(step.left),
            most,
        ))
    }

    /// A restart marked whose VMI was not deleted (a controller stopped
    /// between the two writes, or the delete met a newer VMI): made now,
    /// its mark written afresh (its timeout counts from now), where a new
    /// restart could be; else its mark goes, as nothing was stopped.
    fn resume(
        &mut self,
        w: &World,
        e: Evacuee,
        step: &crate::rules::EvacuationStep,
        found: &Marks,
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
            let event = node_event(w, &e.node, about, false, "EvacuationStep", message);
            return self.evac.end(vec![EndRestarts {
                node: e.node,
                uids: vec![e.uid],
                events: vec![event],
            }]);
        }
        let mark = new_mark(vm, now);
        // Written afresh only where it would change (a write that changes
        // nothing is a write too many, I5).
        let kept = self
            .evac
            .pending
            .get(&e.uid)
            .and_then(|p| p.mark.clone())
            .or_else(|| {
                w.node(&e.node)
                    .and_then(|n| n.restarts.get(&e.uid).cloned().flatten())
            });
        self.evac.issued.insert(e.uid.clone());
        if kept.as_ref() == Some(&mark) {
            return restart(w, e, None, found.counting, None, most);
        }
        self.evac.writing(&e.uid, &e.node, Some(mark.clone()));
        restart(w, e, Some(mark), found.counting, None, most)
    }

    /// What each mark stands for now (`judge_mark`), and the Events of the
    /// restarts that are over.
    fn look_at_marks(&mut self, w: &World, now: Timestamp, timeout: std::time::Duration) -> Marks {
        let marks = marks(w, &mut self.evac);
        self.evac.issued.retain(|u| marks.contains_key(u));
        self.evac.told_timed_out.retain(|u| marks.contains_key(u));
        let mut found = Marks::default();
        let took = humantime::format_duration(timeout);
        for (uid, (node, m)) in marks {
            let vm = m.as_ref().map(|m| m.vm.clone()).unwrap_or_default();
            let restart = Restart {
                old_uid: uid.clone(),
                node: node.clone(),
            };
            let mut state = judge_mark(w, &node, &uid, m.as_ref(), now, timeout);
            // A mark being written, or whose delete this process made and
            // the VMI watch does not show yet, is under way whatever the
            // cache says of its VMI: ending it now would count it out while
            // its VM stops.
            let writing = self.evac.pending.get(&uid).is_some_and(|p| p.rv.is_none());
            let issued = self.evac.issued.contains(&uid);
            if m.is_some()
                && (writing
                    || (issued && matches!(state, MarkState::Abandoned | MarkState::NotBegun(_))))
            {
                state = MarkState::UnderWay;
            }
            let state_of_end = match &state {
                MarkState::Ran => End::Ran,
                MarkState::TimedOut { .. } => End::TimedOut,
                _ => End::Other,
            };
            let ended = match state {
                MarkState::Unreadable => Some((
                    true,
                    format!(
                        "E2: the restart mark {} on node {node} cannot be read (its value is not {{\"vm\":\"<namespace>/<name>\",\"at\":\"<RFC 3339>\"}}): it counts for nothing and is removed",
                        RestartMark::annotation(&uid)
                    ),
                )),
                MarkState::Abandoned => Some((
                    false,
                    format!(
                        "E2: VM {vm} was not restarted: its VMI was not deleted and no longer holds GPUs on a node being evacuated"
                    ),
                )),
                MarkState::Ran => Some((false, format!("E2: VM {vm} runs again elsewhere"))),
                MarkState::TimedOut { waits: false } => Some((
                    true,
                    format!(
                        "E2: VM {vm} has not run again within {took}; no longer counted as under way"
                    ),
                )),
                MarkState::TimedOut { waits: true } => {
                    if self.evac.told_timed_out.insert(uid.clone()) {
                        let message = format!(
                            "E2: VM {vm} has not run again within {took}; no longer counted as under way, and its set still waits at the gate"
                        );
                        let about = Some((vm.as_str(), uid.as_str()));
                        self.event_on_node(&node, about, true, "EvacuationTimedOut", message);
                    }
                    found.restarted.insert(vm.clone(), restart);
                    None
                }
                MarkState::NotBegun(_) if self.evac.kept.contains_key(&uid) => Some((
                    true,
                    format!("E2: VM {vm} was not restarted: {}", self.evac.kept[&uid].0),
                )),
                state @ (MarkState::UnderWay | MarkState::NotBegun(_)) => {
                    if let MarkState::NotBegun(e) = state
                        && !self.evac.issued.contains(&uid)
                        && found.resume.is_none()
                    {
                        found.resume = Some(e);
                    }
                    found.counting += 1;
                    *found.by_node.entry(node.clone()).or_default() += 1;
                    // A restart not begun is timed from its resume.
                    if let Some(m) = m
                        .as_ref()
                        .filter(|_| found.resume.as_ref().is_none_or(|e| e.uid != uid))
                    {
                        let at = timed_out_at(m, timeout);
                        found.first_timeout = Some(found.first_timeout.map_or(at, |t| t.min(at)));
                    }
                    found.restarted.insert(vm.clone(), restart);
                    None
                }
            };
            if let Some((warning, message)) = ended {
                // About the VMI it ended with: the new one for a VM that
                // runs again, else the one deleted. A timeout has a reason
                // of its own: the recorder folds Events of one reason
                // about one object into a series.
                let running = w.vmi(&vm).map(|v| v.uid().to_string());
                let (about_uid, reason) = match &state_of_end {
                    End::Ran => (running.unwrap_or_else(|| uid.clone()), "EvacuationStep"),
                    End::TimedOut => (uid.clone(), "EvacuationTimedOut"),
                    End::Other => (uid.clone(), "EvacuationStep"),
                };
                let about = (!vm.is_empty()).then_some((vm.as_str(), about_uid.as_str()));
                let event = node_event(w, &node, about, warning, reason, message);
                let end = found
                    .ends
                    .entry(node.clone())
                    .or_insert_with(|| EndRestarts {
                        node: node.clone(),
                        uids: Vec::new(),
                        events: Vec::new(),
                    });
                end.uids.push(uid);
                end.events.push(event);
            }
        }
        found
    }
}
