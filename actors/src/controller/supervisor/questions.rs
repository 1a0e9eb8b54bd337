//! What the supervisor is told (world changes, a new config, leadership)
//! and asked (a claim's trace, its counts, whether it has settled).

use super::super::claim::ClaimTrace;
use crate::config::Config;
use crate::ports::{Kind, Obj};
use actix::prelude::*;

/// A change a watch saw.
#[derive(Message, Debug)]
#[rtype(result = "()")]
pub enum WorldEvent {
    Apply(Obj),
    Delete(Obj),
    /// A watch listed (or relisted) a kind: these are all its objects now,
    /// as of `list_rv` when the lister knows it (the watch of that kind has
    /// then passed every change up to it).
    Relisted {
        kind: Kind,
        objects: Vec<Obj>,
        list_rv: Option<u64>,
        /// The objects the list found that cannot be read (`ns/name`, why):
        /// never taken as absent (a GPUQuota among them stops placement in
        /// its namespace).
        unreadable: Vec<(String, crate::api::DecodeError)>,
    },
    /// The API server does not serve this kind (an optional one: a
    /// GPUQuota CRD not installed, a cluster without DRA): none of it
    /// exists, and what needs it says so.
    NotServed {
        kind: Kind,
    },
    /// An object that could not be read; the cached version (if any)
    /// stays. `gone`: it was deleted (a Delete that could not be read).
    Unreadable {
        kind: Kind,
        name: String,
        error: crate::api::DecodeError,
        gone: bool,
    },
}

impl WorldEvent {
    /// A watch event of `kind` as read: the object (applied, or deleted
    /// when `gone`), or its key (`ns/name`, or its name) and why it cannot
    /// be read, said as such and never dropped (an unreadable object is
    /// not an absent one).
    pub fn read(
        kind: Kind,
        read: Result<Obj, (String, crate::api::DecodeError)>,
        gone: bool,
    ) -> Self {
        match read {
            Ok(obj) if gone => WorldEvent::Delete(obj),
            Ok(obj) => WorldEvent::Apply(obj),
            Err((name, error)) => WorldEvent::Unreadable {
                kind,
                name,
                error,
                gone,
            },
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct ConfigChanged(pub Config);

#[derive(Message)]
#[rtype(result = "Option<ClaimTrace>")]
pub struct GetClaimTrace(pub String);

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub claims: usize,
    pub claim_actors: usize,
    pub class_actors: usize,
    pub synced: bool,
    /// Whether this process leads (always, without leader election).
    pub leading: bool,
}

/// Leader election's verdict: only a leader decides and writes; a standby
/// keeps its caches warm so that it can take over at once.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Leading(pub bool);

#[derive(Message)]
#[rtype(result = "Stats")]
pub struct StatsQuery;

/// Whether this process leads and its actors have settled: each has
/// handled everything sent to it (twice over, so that what an actor sent
/// itself while handling is handled too) and no I/O is in flight. Work
/// that waits on a timer (a backoff, a grace period) is not counted. What
/// a test waits on where it would otherwise sleep.
#[derive(Message)]
#[rtype(result = "bool")]
pub struct Settled;
