//! D3: the selectors of tenants' requests (ResourceClaimTemplates), each
//! compiled once and its answer remembered per device for as long as the
//! device's slice is the same object: a slice that changes is a new
//! object, so its devices are asked again. Placement asks the same
//! devices again and again (a search tries a device for several picks,
//! a set waiting is looked at again at every change of its nodes); a
//! selector may cost a tenth of a second on each, so each is asked once.
//!
//! Bounded: at most `MAX_EXPRESSIONS` selectors and `MAX_ANSWERS`
//! answers are kept; the selectors least recently asked go first.

use super::DeviceId;
use crate::dra::{Selector, SelectorError};
use k8s_openapi::api::resource::v1::ResourceSlice;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

const MAX_EXPRESSIONS: usize = 4096;
const MAX_ANSWERS: usize = 2_000_000;

/// One request selector and what it answered.
pub struct RememberedSelector {
    selector: Selector,
    /// Per device: the slice it was asked on, and the answer (an error on
    /// the device takes it not, as before).
    answers: Mutex<HashMap<DeviceId, (Weak<ResourceSlice>, bool)>>,
    used: AtomicU64,
    /// The answers every selector keeps together (`Selections`').
    kept: Arc<AtomicUsize>,
}

impl std::fmt::Debug for RememberedSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RememberedSelector")
            .field(&self.selector.expression())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RememberedSelector {
    /// Its answer for device `id` of `slice`, if asked there before.
    pub(super) fn remembered(&self, id: &DeviceId, slice: &Arc<ResourceSlice>) -> Option<bool> {
        let answers = lock(&self.answers);
        let (on, answer) = answers.get(id)?;
        // The same slice object: the device is as it was when asked.
        (on.as_ptr() == Arc::as_ptr(slice)).then_some(*answer)
    }

    /// Remembers an answer; past `MAX_ANSWERS` kept in all, this
    /// selector's are dropped first (devices gone, pools come and go: an
    /// answer is asked again, never kept forever).
    pub(super) fn remember(&self, id: &DeviceId, slice: &Arc<ResourceSlice>, answer: bool) {
        let mut answers = lock(&self.answers);
        if self.kept.load(Ordering::Relaxed) >= MAX_ANSWERS {
            self.kept.fetch_sub(answers.len(), Ordering::Relaxed);
            answers.clear();
        }
        let fresh = answers
            .insert(id.clone(), (Arc::downgrade(slice), answer))
            .is_none();
        if fresh {
            self.kept.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    fn answers(&self) -> usize {
        lock(&self.answers).len()
    }
}

/// The request selectors placement asks, by expression.
#[derive(Default)]
pub struct Selections {
    by_expression: Mutex<HashMap<String, Arc<RememberedSelector>>>,
    clock: AtomicU64,
    /// The answers kept, every selector's together.
    kept: Arc<AtomicUsize>,
}

impl Selections {
    /// The selector of `expression`, compiled once; its error as upstream
    /// says it (one that does not compile, or is too complex).
    pub fn get(&self, expression: &str) -> Result<Arc<RememberedSelector>, SelectorError> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = lock(&self.by_expression).get(expression) {
            r.used.store(now, Ordering::Relaxed);
            return Ok(r.clone());
        }
        // Compiled outside the lock: another thread may ask meanwhile.
        let selector = Selector::compile(expression)?;
        let r = Arc::new(RememberedSelector {
            selector,
            answers: Mutex::default(),
            used: AtomicU64::new(now),
            kept: self.kept.clone(),
        });
        let mut all = lock(&self.by_expression);
        all.insert(expression.to_string(), r.clone());
        self.bound(&mut all, expression);
        Ok(r)
    }

    /// Drops the selectors least recently asked (never `keep`, just
    /// asked) until the bounds hold.
    fn bound(&self, all: &mut HashMap<String, Arc<RememberedSelector>>, keep: &str) {
        loop {
            if all.len() <= MAX_EXPRESSIONS && self.kept.load(Ordering::Relaxed) <= MAX_ANSWERS {
                return;
            }
            let oldest = all
                .iter()
                .filter(|(e, _)| e.as_str() != keep)
                .min_by_key(|(_, r)| r.used.load(Ordering::Relaxed))
                .map(|(e, _)| e.clone());
            match oldest.and_then(|e| all.remove(&e)) {
                Some(gone) => {
                    self.kept.fetch_sub(gone.answers(), Ordering::Relaxed);
                }
                None => return,
            };
        }
    }
}

impl crate::world::World {
    /// D3: a tenant's request selector, compiled once, its answers
    /// remembered (`Selections`).
    pub fn request_selector(
        &self,
        expression: &str,
    ) -> Result<Arc<RememberedSelector>, crate::dra::SelectorError> {
        self.selections.get(expression)
    }

    /// D3: whether every selector of a request takes the device (an
    /// error on it, or a device not published, takes it not). A selector
    /// not asked of this device as it is now is evaluated within the
    /// decision's budget (`dra::budget`); past it, the device is taken
    /// not, and the decision is not acted on.
    pub fn device_selected(&self, id: &DeviceId, selectors: &[Arc<RememberedSelector>]) -> bool {
        let d = self.devices.read();
        let Some(placed) = d.placed(id) else {
            return false;
        };
        let Some(device) = placed.device() else {
            return false;
        };
        let var = crate::dra::DeviceVar::new(&id.driver, device);
        selectors.iter().all(|s| {
            if let Some(answer) = s.remembered(id, &placed.slice) {
                return answer;
            }
            if !crate::dra::budget::charge(s.selector().cost()) {
                return false;
            }
            let answer = s.selector().matches_var(&var) == Ok(true);
            s.remember(id, &placed.slice, answer);
            answer
        })
    }
}
