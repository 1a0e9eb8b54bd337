//! The one log of writes over HTTP: who made each (the server's
//! `writes()`, by which terms and fences are judged) and, when the server
//! keeps one, the journal a test's checker reads. Both are told here, in
//! the order the writes took effect (the caller holds the write order).

use crate::auth::identity::WriteRecord;
use crate::{ApiServer, JournaledWrite, Target};

/// One write, applied or refused.
pub(crate) struct LoggedWrite<'a> {
    pub user: &'a str,
    pub target: &'a Target,
    pub op: &'static str,
    pub name: String,
    pub applied: bool,
    /// False for a write that changed nothing.
    pub changed: bool,
    /// A Lease's holder after the write.
    pub holder: Option<String>,
    /// Why it was refused.
    pub error: Option<String>,
    /// Refused as invalid (422).
    pub invalid: bool,
    /// The resourceVersion the write made (0: refused, or not known).
    pub resource_version: u64,
}

impl ApiServer {
    pub(crate) fn log_write(&self, w: LoggedWrite<'_>) {
        let elapsed = self.started.elapsed();
        {
            let mut log = self
                .identities
                .log
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let seq = log.len() as u64;
            log.push(WriteRecord {
                seq,
                at_s: elapsed.as_secs_f64(),
                user: w.user.to_string(),
                op: w.op,
                kind: w.target.resource.kind,
                namespace: w.target.namespace.clone(),
                name: w.name.clone(),
                applied: w.applied,
                holder: w.holder,
            });
        }
        if let Some(j) = &self.journal {
            j.wrote(JournaledWrite {
                user: w.user.to_string(),
                elapsed,
                op: w.op,
                kind: w.target.resource.kind,
                namespace: w.target.namespace.clone(),
                name: w.name,
                changed: w.changed,
                error: w.error,
                invalid: w.invalid,
                resource_version: w.resource_version,
            });
        }
    }
}
