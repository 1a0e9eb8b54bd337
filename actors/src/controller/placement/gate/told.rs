//! What the gate tells a VMI: a Warning Event when its GPU request cannot
//! be used (once per version of the VMI and message), and one each time
//! its set starts waiting for another reason (G5): why, and what would
//! help. The claims' Waiting condition keeps the current message; the
//! VMI, which its owner looks at, says each new reason once.

use crate::api::{Kind, ObjRef, RequestError, Vmi};
use crate::controller::Env;
use crate::ports::Event;
use crate::rules::{RuleId, WaitReason};
use crate::world::split_key;
use std::collections::HashMap;

/// What each VMI was last told: its version and the message of a bad
/// request; the reason its set waits for.
#[derive(Default)]
pub(super) struct Told {
    said: HashMap<String, (String, String)>,
    waits: HashMap<String, WaitReason>,
}

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
        if self.said.get(k) == Some(&said) {
            return;
        }
        tracing::warn!(vmi = %k, rule = %rule, reason, "{}", said.1);
        on_vmi(env, k, v, true, reason, rule, said.1.clone());
        self.said.insert(k.to_string(), said);
    }

    /// G5: the VMI's set waits for `reason`. Said when the reason is new:
    /// the message, and what would help.
    pub fn wait(&mut self, env: &Env, k: &str, v: &Vmi, reason: WaitReason, message: &str) {
        if self.waits.get(k) == Some(&reason) {
            return;
        }
        self.waits.insert(k.to_string(), reason);
        let Some(warning) = reason.told_on_the_vmi() else {
            return;
        };
        let message = format!("{message}; {}", reason.what_helps());
        // Waiting is the gate at work: logged at info, the Event says it.
        tracing::info!(vmi = %k, rule = %RuleId::G5, reason = reason.as_str(), "{message}");
        let reason = reason.event_reason();
        on_vmi(env, k, v, warning, reason, RuleId::G5, message);
    }

    /// The VMI's set waits no more: a later wait is said again.
    pub fn placed(&mut self, k: &str) {
        self.waits.remove(k);
    }

    pub fn forget(&mut self, k: &str) {
        self.said.remove(k);
        self.waits.remove(k);
    }
}

/// An Event about the VMI `k`.
fn on_vmi(env: &Env, k: &str, v: &Vmi, warning: bool, reason: &str, rule: RuleId, message: String) {
    let (ns, name) = split_key(k);
    crate::controller::events::publish(
        env,
        Event {
            regarding: ObjRef::new(Kind::Vmi, Some(ns), name),
            uid: v.metadata.uid.clone(),
            warning,
            reason: reason.into(),
            message,
            rule,
            related: None,
        },
    );
}
