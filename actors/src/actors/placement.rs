//! The placement actor: the VMI-level work, one write at a time across the
//! whole cluster. Placements compete for node capacity shared across
//! classes, so they are serialized here rather than per class. It creates
//! template claims (G2) and deletes records whose claim is gone.

use super::{Backoff, Env};
use crate::api::is_deleting;
use crate::ports::{Kind, Obj, ObjRef, Preconditions, Why, WriteError};
use crate::rules::{RuleId, TemplateStep, decide_template, record_is_orphan};
use actix::prelude::*;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

/// What the placement actor looks at next.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Message)]
#[rtype(result = "()")]
pub enum PlacementPoke {
    /// A VMI (namespace/name) whose request, life or pods changed.
    Vmi(String),
    /// A record (namespace/name) whose claim may be gone.
    Record(String),
}

pub struct Placement {
    env: Arc<Env>,
    queue: VecDeque<PlacementPoke>,
    queued: HashSet<PlacementPoke>,
    busy: bool,
    /// Template claims we created that the cache may not show yet: key -> VMI uid.
    created: HashMap<String, String>,
    /// Records we deleted that the cache may still show: their uids.
    deleted: HashSet<String>,
    /// The VMI versions whose unreadable request was already reported.
    reported: HashMap<String, String>,
    backoff: Backoff,
}

/// One write and what to remember when it succeeds.
enum Write {
    CreateClaim {
        key: String,
        vmi_uid: String,
        obj: Box<Obj>,
    },
    DeleteRecord {
        key: String,
        uid: String,
    },
}

impl Placement {
    pub fn new(env: Arc<Env>) -> Self {
        Self {
            env,
            queue: VecDeque::new(),
            queued: HashSet::new(),
            busy: false,
            created: HashMap::new(),
            deleted: HashSet::new(),
            reported: HashMap::new(),
            backoff: Backoff::default(),
        }
    }

    fn next(&mut self, ctx: &mut Context<Self>) {
        while !self.busy {
            let Some(work) = self.queue.pop_front() else {
                return;
            };
            self.queued.remove(&work);
            if let Some(write) = self.decide(&work) {
                self.write(work, write, ctx);
            }
        }
    }

    fn decide(&mut self, work: &PlacementPoke) -> Option<Write> {
        let w = &self.env.world;
        match work {
            PlacementPoke::Vmi(k) => {
                let v = w.vmi(k)?;
                match decide_template(&v, w) {
                    TemplateStep::Create(claim) => {
                        let key = crate::world::key(
                            claim.metadata.namespace.as_deref()?,
                            claim.metadata.name.as_deref()?,
                        );
                        // Created already, and the watch has not shown it yet.
                        if self.created.get(&key).is_some_and(|uid| uid == v.uid()) {
                            return None;
                        }
                        Some(Write::CreateClaim {
                            key,
                            vmi_uid: v.uid().to_string(),
                            obj: Box::new(Obj::Claim(*claim)),
                        })
                    }
                    TemplateStep::BadRequest(error) => {
                        let rv = v.metadata.resource_version.clone().unwrap_or_default();
                        if self.reported.insert(k.clone(), rv.clone()).as_ref() != Some(&rv) {
                            tracing::warn!(vmi = %k, %error, "the VMI's GPU request cannot be read; nothing is created for it");
                        }
                        None
                    }
                    TemplateStep::Nothing | TemplateStep::WaitForOld => {
                        self.created.retain(|key, _| !w.claims.contains_key(key));
                        None
                    }
                }
            }
            PlacementPoke::Record(k) => {
                let r = w.record(k)?;
                let uid = r.metadata.uid.clone()?;
                (record_is_orphan(&r, w)
                    && !is_deleting(&r.metadata)
                    && !self.deleted.contains(&uid))
                .then(|| Write::DeleteRecord {
                    key: k.clone(),
                    uid,
                })
            }
        }
    }

    fn write(&mut self, work: PlacementPoke, write: Write, ctx: &mut Context<Self>) {
        let env = self.env.clone();
        self.busy = true;
        self.env.activity.begin_io();
        let fut = async move {
            let r = match &write {
                Write::CreateClaim { key, obj, .. } => {
                    tracing::info!(claim = %key, rule = "G2", intent = "create-claim", "writing");
                    env.writer
                        .create(Obj::clone(obj), Why(RuleId::G2))
                        .await
                        .map(|_| ())
                }
                Write::DeleteRecord { key, uid } => {
                    let (ns, name) = crate::world::split_key(key);
                    let what = ObjRef::new(Kind::Record, Some(ns), name);
                    // Watches of different kinds are not ordered: the claim can be
                    // seen gone before its record, which L8 deleted first. Only a
                    // record the server still has is deleted.
                    match env.reader.get(what.clone()).await {
                        Ok(Some(live)) if live.meta().uid.as_ref() == Some(uid) => {
                            tracing::info!(record = %key, rule = "records", intent = "delete-record", "writing");
                            let pre = Preconditions {
                                uid: Some(uid.clone()),
                                resource_version: None,
                            };
                            env.writer
                                .delete(what, pre, Why(RuleId::Records))
                                .await
                                .map(|_| ())
                        }
                        Ok(_) => Ok(()),
                        Err(e) => Err(WriteError::Other(e.to_string())),
                    }
                }
            };
            (write, r)
        };
        ctx.spawn(fut.into_actor(self).map(move |(write, r), act, ctx| {
            act.env.activity.end_io();
            act.busy = false;
            match (write, r) {
                // AlreadyExists: someone made it; the watch will show it.
                (Write::CreateClaim { key, vmi_uid, .. }, Ok(()) | Err(WriteError::Conflict(_))) => {
                    act.created.insert(key, vmi_uid);
                    act.backoff.reset();
                }
                (Write::DeleteRecord { uid, .. }, Ok(()) | Err(WriteError::NotFound) | Err(WriteError::Conflict(_))) => {
                    act.deleted.insert(uid);
                    act.backoff.reset();
                }
                (_, Err(error)) => {
                    let wait = act.backoff.next_wait();
                    tracing::warn!(%error, ?work, retry_in = %humantime::format_duration(wait), "placement write failed");
                    ctx.run_later(wait, move |act, ctx| act.enqueue(work, ctx));
                }
            }
            act.next(ctx);
        }));
    }

    fn enqueue(&mut self, work: PlacementPoke, ctx: &mut Context<Self>) {
        if self.queued.insert(work.clone()) {
            self.queue.push_back(work);
        }
        self.next(ctx);
    }
}

impl Actor for Placement {
    type Context = Context<Self>;
}

impl Handler<PlacementPoke> for Placement {
    type Result = ();
    fn handle(&mut self, work: PlacementPoke, ctx: &mut Context<Self>) {
        self.env.activity.tick();
        // Records of claims that come back are no longer ours to remember.
        if let PlacementPoke::Record(k) = &work
            && self.env.world.record(k).is_none()
        {
            let w = &self.env.world;
            self.deleted.retain(|uid| {
                w.records
                    .iter()
                    .any(|r| r.metadata.uid.as_ref() == Some(uid))
            });
        }
        self.enqueue(work, ctx);
    }
}
