//! The one description of a write over HTTP (`WriteRecord`): the server
//! keeps every one (`ApiServer::writes`, by which a test judges leader
//! terms and fences) and tells each to a `WriteJournal` when it has one
//! (a test's invariant checker), in the order the writes took effect (the
//! caller holds the write order while it applies and logs a write).

use crate::{ApiServer, Target};
use std::time::Duration;

/// One write over HTTP, as the server applied or refused it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct WriteRecord {
    /// The order in which the server logged the writes, from 0.
    pub seq: u64,
    /// Since the server started (in seconds, `at_s`, as JSON).
    #[serde(rename = "at_s", serialize_with = "seconds")]
    pub elapsed: Duration,
    /// Who wrote (the token's user; `system:anonymous` without one).
    pub user: String,
    /// create, update, update_status, add_finalizer, remove_finalizer,
    /// update_pod, patch, delete.
    pub op: &'static str,
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    /// False for a write that changed nothing (or was refused).
    pub changed: bool,
    /// For a Lease written: its holder after the write.
    pub holder: Option<String>,
    /// Why it was refused; None: it took effect.
    pub error: Option<String>,
    /// Refused as invalid (422): a write Kubernetes would refuse too.
    pub invalid: bool,
    /// The store's resourceVersion the write made (0 for a refused write):
    /// what the objects were just before it is `objects_at(rv - 1)`.
    pub resource_version: u64,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl WriteRecord {
    /// The write took effect (or changed nothing); false: refused.
    pub fn applied(&self) -> bool {
        self.error.is_none()
    }

    /// A write by `user` of `name` in `target`, before what came of it is
    /// known: `seq` and `elapsed` are set when it is logged.
    pub(crate) fn of(user: &str, target: &Target, op: &'static str, name: String) -> Self {
        Self {
            seq: 0,
            elapsed: Duration::ZERO,
            user: user.to_string(),
            op,
            kind: target.resource.kind,
            namespace: target.namespace.clone(),
            name,
            changed: false,
            holder: None,
            error: None,
            invalid: false,
            resource_version: 0,
        }
    }

    /// The same write, refused: `error` says why.
    pub(crate) fn refused(self, error: String, invalid: bool) -> Self {
        Self {
            error: Some(error),
            invalid,
            ..self
        }
    }
}

/// `#seq at user op Kind namespace/name`, and why it was refused.
impl std::fmt::Display for WriteRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.namespace.as_deref().map(|n| format!("{n}/"));
        write!(
            f,
            "#{} {:.3}s {} {} {} {}{}",
            self.seq,
            self.elapsed.as_secs_f64(),
            self.user,
            self.op,
            self.kind,
            ns.unwrap_or_default(),
            self.name
        )?;
        match &self.error {
            Some(e) => write!(f, " (refused: {e})"),
            None => Ok(()),
        }
    }
}

/// Where a server tells each write over HTTP (a test's checker).
pub trait WriteJournal: Send + Sync {
    fn wrote(&self, w: &WriteRecord);
}

impl ApiServer {
    /// Logs `w` as the next write, and tells the journal.
    pub(crate) fn log_write(&self, mut w: WriteRecord) {
        w.elapsed = self.started.elapsed();
        {
            let mut log = self.written.lock().unwrap_or_else(|e| e.into_inner());
            w.seq = log.len() as u64;
            log.push(w.clone());
        }
        if let Some(j) = &self.journal {
            j.wrote(&w);
        }
    }

    /// Every write over HTTP so far, in the order logged: writes that took
    /// effect in the order they did (each is logged under the write order).
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.written
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
