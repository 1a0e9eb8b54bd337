//! What the gate tells a VMI: a Warning Event when its GPU request cannot
//! be used or its set's claims do not match it, once per version of the
//! VMI and message.

use crate::api::{Kind, ObjRef, RequestError, Vmi};
use crate::controller::Env;
use crate::ports::Event;
use crate::rules::RuleId;
use crate::world::split_key;
use std::collections::HashMap;

/// What each VMI was last told: its version and the message.
#[derive(Default)]
pub(super) struct Told(HashMap<String, (String, String)>);

impl Told {
    /// A VMI's GPU request cannot be used: its pods stay at the gate, and
    /// the VMI gets a Warning Event saying what is wrong.
    pub fn bad_request(&mut self, env: &Env, k: &str, v: &Vmi, error: &RequestError) {
        let message = format!("{error}; its launcher pods stay at the gate until it is fixed");
        self.warn(env, k, v, "InvalidGPURequest", RuleId::Annotations, message);
    }

    /// A Warning Event on the VMI, once per version of the VMI and
    /// message: a decision made again on the same VMI tells nothing new.
    pub fn warn(
        &mut self,
        env: &Env,
        k: &str,
        v: &Vmi,
        reason: &str,
        rule: RuleId,
        message: String,
    ) {
        let rv = v.metadata.resource_version.clone().unwrap_or_default();
        let said = (rv, message);
        if self.0.get(k) == Some(&said) {
            return;
        }
        tracing::warn!(vmi = %k, rule = %rule, reason, "{}", said.1);
        let (ns, name) = split_key(k);
        crate::controller::events::publish(
            env,
            Event {
                regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
                uid: v.metadata.uid.clone(),
                warning: true,
                reason: reason.into(),
                message: said.1.clone(),
                rule,
                related: None,
            },
        );
        self.0.insert(k.to_string(), said);
    }

    pub fn forget(&mut self, k: &str) {
        self.0.remove(k);
    }
}
