//! The world's one writer, by type. [`WorldWriter::new`] is the only way
//! to make a world, and the writer it returns the only value whose methods
//! change one: whoever holds it (the supervisor, as watches bring
//! changes; a test building its world) writes, and everyone else gets an
//! `Arc<World>` from [`WorldWriter::reader`], which only reads. It is
//! kube-runtime's `reflector::store()` split into `Writer` and `Store`,
//! for the whole cache at once.
//!
//! A reader cannot write, by type:
//!
//! ```compile_fail
//! use gpu_claims_actors::{config::Config, world::WorldWriter};
//! let world = WorldWriter::new(Config::default()).reader();
//! world.set_config(Config::default()); // private to the world
//! ```
//!
//! ```
//! use gpu_claims_actors::{config::Config, world::WorldWriter};
//! let writer = WorldWriter::new(Config::default());
//! writer.set_config(Config::default());
//! assert_eq!(writer.reader().claim_count(), 0);
//! ```

use super::World;
use crate::api::{Kind, Obj};
use crate::config::Config;
use crate::world::Change;
use crate::world::devices::DevicesChange;
use std::sync::Arc;

/// The one handle that changes the world; not `Clone`.
pub struct WorldWriter {
    world: Arc<World>,
}

impl WorldWriter {
    /// A world, empty, under `config`, with its writer.
    pub fn new(config: Config) -> Self {
        Self {
            world: Arc::new(World::new(config)),
        }
    }

    /// A read-only handle on the world this writer changes.
    pub fn reader(&self) -> Arc<World> {
        self.world.clone()
    }

    /// Whether `world` is the one this writer changes.
    pub fn writes(&self, world: &Arc<World>) -> bool {
        Arc::ptr_eq(&self.world, world)
    }

    /// A change a watch brought; `deleted` for its deletion.
    pub fn apply(&self, obj: Obj, deleted: bool) -> Change {
        self.world.apply(obj, deleted)
    }

    /// An object a relist no longer shows (deleted while the watch was
    /// down).
    pub fn forget(&self, kind: Kind, k: &str) -> Change {
        self.world.forget(kind, k)
    }

    /// An object as a list brings it, indexes and all.
    pub fn load(&self, obj: Obj) {
        self.world.load(obj)
    }

    /// The watch of `kind` listed (as of `list_rv`, when known).
    pub fn relisted(&self, kind: Kind, list_rv: Option<u64>) {
        self.world.relisted(kind, list_rv)
    }

    /// The config in force from now on.
    pub fn set_config(&self, config: Config) {
        self.world.set_config(config)
    }

    /// Whether the API server serves `kind` (a DRA kind may not be).
    pub fn set_served(&self, kind: Kind, served: bool) -> DevicesChange {
        self.world.set_served(kind, served)
    }

    /// D7 set again from the config and what the API server said of our
    /// rules (`refused`).
    pub fn set_exclusive(&self, refused: Option<String>) -> DevicesChange {
        self.world.set_exclusive(refused)
    }

    /// The object `key` of `kind` cannot be read (`why`), or can again.
    pub fn set_unreadable(&self, kind: Kind, key: &str, why: Option<String>) -> bool {
        self.world.set_unreadable(kind, key, why)
    }

    /// A list of `kind` found exactly these objects unreadable.
    pub fn relisted_unreadable(&self, kind: Kind, now: &[(String, String)]) -> Vec<String> {
        self.world.relisted_unreadable(kind, now)
    }
}

/// Reads through the writer as through any handle: a test that builds a
/// world passes `&writer` where `&World` is asked for.
impl std::ops::Deref for WorldWriter {
    type Target = World;
    fn deref(&self) -> &World {
        &self.world
    }
}
