//! The messages between the supervisor and its actors, apart from both so
//! that neither side's module depends on the other's: the actors reach the
//! supervisor through `Recipient`s of these.

use crate::api::Kind;
use actix::prelude::*;
use tokio::time::Instant;

/// The world changed for this actor: decide again.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Reconcile {
    /// When the change behind it entered the supervisor.
    pub since: Instant,
}

/// Answered once the actor has handled every message sent to it before:
/// how the supervisor tells that its actors have settled.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Ping;

/// An actor ended (its object is gone): the supervisor forgets it, unless
/// a newer actor (of a later generation) has taken its key meanwhile.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ActorStopped {
    pub kind: Kind,
    pub key: String,
    pub generation: u64,
}

/// L8 released a claim of `class`, which the cache may not show yet: its
/// class's L11 counts it as gone.
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct ClaimReleased {
    pub class: String,
    pub key: String,
    pub uid: String,
}

/// Where an actor reports to the supervisor.
#[derive(Clone)]
pub struct ToSupervisor {
    pub stopped: Recipient<ActorStopped>,
    pub released: Recipient<ClaimReleased>,
}

impl ToSupervisor {
    /// The actor of `kind` for `key`, of `generation`, ends.
    pub fn ended(&self, kind: Kind, key: &str, generation: u64) {
        let key = key.to_string();
        self.stopped.do_send(ActorStopped {
            kind,
            key,
            generation,
        });
    }
}
