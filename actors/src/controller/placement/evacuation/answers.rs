//! What came of E2's writes: a restart's delete landed, failed or was kept
//! from, marks written or removed; each moves its restart on, and says
//! when E2 looks again.

use super::Evacuation;
use crate::controller::placement::write::RestartsDone;
use tokio::time::Instant;

/// When E2 looks again after a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::controller::placement) enum Again {
    /// At once, behind the work queued before.
    Now,
    /// After a conflict's wait (the node or VMI changed under the write).
    AfterConflict,
}

impl Evacuation {
    /// What a write did to the restarts (`failed`: the write stopped on an
    /// error, whose work is looked at again after its backoff), and when
    /// E2 looks again.
    pub(in crate::controller::placement) fn written(
        &mut self,
        done: &RestartsDone,
        failed: bool,
        now: Instant,
    ) -> Vec<Again> {
        let mut again = Vec::new();
        for (uid, rv) in &done.marks {
            self.restarts.landed(uid, *rv);
        }
        for uid in &done.marks_failed {
            self.restarts.write_failed(uid);
        }
        self.released(&done.released, &done.released_failed);
        if let Some((vm, _)) = &done.restarted {
            // Under way (since its decision): the next may follow where
            // there is room.
            tracing::debug!(vm, rule = "E2", "restart under way");
            again.push(Again::Now);
        }
        if let Some((uid, why)) = &done.kept {
            // Kept, and said, until the VM is read again (`decide` wakes
            // for it).
            self.restarts.kept(uid);
            self.kept.insert(uid.clone(), (why.clone(), now));
            again.push(Again::Now);
        }
        if let Some((uid, marked)) = &done.failed {
            self.restarts.delete_failed(uid, *marked);
            again.push(Again::AfterConflict);
        }
        // Marks removed: the evacuation looks again (an error is looked at
        // again after its wait; marks whose removal met a newer node,
        // after a conflict's).
        if !done.marks.is_empty() && done.restarted.is_none() && !failed {
            again.push(Again::Now);
        }
        if !done.marks_failed.is_empty() && !failed {
            again.push(Again::AfterConflict);
        }
        again.dedup();
        again
    }
}
