//! What placement remembers of its own writes until the watches show them:
//! allocations that hold capacity, template claims made, allocations
//! deleted, and the claims and pods written. I6: none of it may outlive
//! what it is about, so each is let go once its watch has passed the write
//! (whatever the cache then shows), not once the cache shows it.

use super::super::pacer::KeyedFreshness;
use crate::api::{GPUAllocationSpec, Kind};
use crate::rules::WrittenAllocations;
use crate::world::World;
use std::collections::HashMap;

#[derive(Default)]
pub struct OwnWrites {
    /// Allocations written: they hold capacity and budget until the cache counts them.
    pub allocations: WrittenAllocations,
    /// Template claims created: key -> (VMI uid, the resourceVersion our
    /// create returned, or found after AlreadyExists).
    created: HashMap<String, (String, u64)>,
    /// Allocations deleted that the cache may still show: key -> uid.
    deleted: HashMap<String, String>,
    pub claims: KeyedFreshness,
    pub pods: KeyedFreshness,
    /// D4: ResourceClaims made or allocated, until their watch shows it
    /// (a restore decided meanwhile would make one again, to a 409).
    pub resource_claims: KeyedFreshness,
}

impl OwnWrites {
    /// Lets go of what the watches have passed.
    pub fn prune(&mut self, w: &World) {
        let (claims, pods) = (w.observed_rv(Kind::Claim), w.observed_rv(Kind::Pod));
        self.created.retain(|_, (_, rv)| *rv > claims);
        self.claims.prune(claims);
        self.pods.prune(pods);
        self.resource_claims
            .prune(w.observed_rv(Kind::ResourceClaim));
        self.allocations.prune(w);
    }

    pub fn wrote_allocation(&mut self, key: String, spec: GPUAllocationSpec, rv: u64) {
        self.allocations.wrote(key, spec, rv);
    }

    pub fn created(&mut self, key: String, vmi_uid: String, rv: u64) {
        self.created.insert(key, (vmi_uid, rv));
    }

    /// A template claim for this VMI was created and the cache does not show it yet.
    pub fn created_for(&self, key: &str, vmi_uid: &str) -> bool {
        self.created.get(key).is_some_and(|(uid, _)| uid == vmi_uid)
    }

    pub fn creating(&self, key: &str) -> bool {
        self.created.contains_key(key)
    }

    /// After the claims watch relisted: creating a template claim again at
    /// worst meets AlreadyExists.
    pub fn forget_created(&mut self) {
        self.created.clear();
    }

    pub fn deleted_allocation(&mut self, key: String, uid: String) {
        self.deleted.insert(key, uid);
    }

    /// Whether we deleted the allocation the cache still shows at `key`
    /// (`cached_uid`); forgets one the cache no longer shows.
    pub fn deleting(&mut self, key: &str, cached_uid: Option<&String>) -> bool {
        if self.deleted.get(key) != cached_uid {
            self.deleted.remove(key);
        }
        self.deleted.contains_key(key)
    }
}
