//! E2's look at the marks: what each stands for now (`judge_mark`, with
//! this process's writes the node watch does not show yet), which count
//! against `maxConcurrent`, which are over (with the Event that says why),
//! and which restart to resume.

use super::told::{self, node_event};
use super::{Evacuation, Found};
use crate::api::{Kind, RestartMark};
use crate::controller::Env;
use crate::controller::placement::write::EndRestarts;
use crate::rules::{MarkState, Restart, judge_mark, timed_out_at};
use k8s_openapi::jiff::Timestamp;

/// How a restart whose mark goes ended, for its Event.
enum End {
    Ran,
    TimedOut,
    Other,
}

impl Evacuation {
    /// What each mark stands for now, and the Events of the restarts that
    /// are over.
    pub(super) fn look_at_marks(
        &mut self,
        env: &Env,
        now: Timestamp,
        timeout: std::time::Duration,
    ) -> Found {
        let w = &env.world;
        let on_nodes = w
            .restart_marks()
            .into_iter()
            .map(|(node, uid, m)| (uid, (node, m)))
            .collect();
        let marks = self.restarts.overlay(on_nodes, w.observed_rv(Kind::Node));
        let mut found = Found::default();
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
            let (writing, issued) = (self.restarts.writing(&uid), self.restarts.issued(&uid));
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
                    if self.restarts.say_timeout(&uid, &node) {
                        let message = format!(
                            "E2: VM {vm} has not run again within {took}; no longer counted as under way, and its set still waits at the gate"
                        );
                        let about = Some((vm.as_str(), uid.as_str()));
                        told::publish_on_node(
                            env,
                            &node,
                            about,
                            true,
                            "EvacuationTimedOut",
                            message,
                        );
                    }
                    found.restarted.insert(vm.clone(), restart);
                    None
                }
                MarkState::NotBegun(_) if self.kept.contains_key(&uid) => Some((
                    true,
                    format!("E2: VM {vm} was not restarted: {}", self.kept[&uid].0),
                )),
                state @ (MarkState::UnderWay | MarkState::NotBegun(_)) => {
                    if let MarkState::NotBegun(e) = state
                        && !issued
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
                let event = told::logged(node_event(w, &node, about, warning, reason, message));
                let end = found
                    .ends
                    .entry(node.clone())
                    .or_insert_with(|| EndRestarts {
                        node: node.clone(),
                        uids: Vec::new(),
                        events: Vec::new(),
                        release: false,
                    });
                end.uids.push(uid);
                end.events.push(event);
            }
        }
        found
    }
}
