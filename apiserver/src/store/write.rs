//! The store's writes: create, update (main or status) and delete, each
//! either applied or, for the API server's `dryRun=All`, only decided:
//! every check runs and the answer is the object as it would be, but
//! nothing is stored, versioned or published.

use super::{
    EventType, Inner, Key, MODIFIED, Store, StoreError, Subresource, Written, finalizers, meta,
    meta_str, set_meta, strip_nulls, uid,
};
use serde_json::{Value, json};

/// Whether a write takes effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Apply {
    #[default]
    Commit,
    /// `dryRun=All`: decided, answered, not stored.
    DryRun,
}

/// The object without what a spec change ignores: its metadata, and its
/// status where the kind has a status subresource.
fn spec_of(o: &Value, has_status: bool) -> Value {
    let mut o = o.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        if has_status {
            m.remove("status");
        }
    }
    o
}

impl Store {
    pub fn create(&self, kind: &str, obj: Value) -> Result<Written, StoreError> {
        self.create_with(kind, obj, Apply::Commit)
    }

    pub fn create_with(&self, kind: &str, obj: Value, how: Apply) -> Result<Written, StoreError> {
        let mut obj = obj;
        // A create does not write a status subresource's `status`.
        if self.has_status(kind)
            && let Some(o) = obj.as_object_mut()
        {
            o.remove("status");
        }
        self.create_prepared(kind, obj, how)
    }

    /// A create whose status the caller has prepared (the HTTP handler:
    /// the API's rule that a create does not write the status applied,
    /// then what the kind's registry sets on create, a Pod's phase).
    pub fn create_prepared(
        &self,
        kind: &str,
        obj: Value,
        how: Apply,
    ) -> Result<Written, StoreError> {
        let mut obj = strip_nulls(obj);
        let mut g = self.lock();
        if meta_str(&obj, "name").is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(StoreError::Invalid(
                    "metadata.name or metadata.generateName is required".into(),
                ));
            }
            let suffix = format!("{:05x}", (g.uids + 1) * 7919 % 0xfffff);
            set_meta(&mut obj, "name", json!(format!("{prefix}{suffix}")));
        }
        let k = (
            kind.to_string(),
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        if g.objects.contains_key(&k) {
            return Err(StoreError::AlreadyExists(format!("{kind} {}/{}", k.1, k.2)));
        }
        set_meta(&mut obj, "uid", json!(uid(g.uids + 1)));
        set_meta(&mut obj, "creationTimestamp", json!(self.now()));
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("deletionTimestamp");
            m.remove("generation");
            m.remove("resourceVersion");
        }
        if self.has_generation(kind) {
            set_meta(&mut obj, "generation", json!(1));
        }
        if how == Apply::DryRun {
            return Ok(Written::changed(obj));
        }
        // Judged as stored, with its resourceVersion; serialized once, for
        // etcd's bound and the history's bytes.
        let rv = g.rv + 1;
        set_meta(&mut obj, "resourceVersion", json!(rv.to_string()));
        let len = super::json_len(&obj);
        if super::too_large_for_etcd(&obj, len) {
            return Err(StoreError::TooLarge);
        }
        g.rv = rv;
        g.uids += 1;
        g.objects.insert(k, obj.clone());
        Self::publish_sized(&mut g, kind, EventType::Added, &obj, len, None);
        Ok(Written::changed(obj))
    }

    /// PUT: the object's resourceVersion, when set, must be the current one.
    pub fn update(&self, kind: &str, obj: Value, sub: Subresource) -> Result<Written, StoreError> {
        self.update_with(kind, obj, sub, Apply::Commit)
    }

    pub fn update_with(
        &self,
        kind: &str,
        obj: Value,
        sub: Subresource,
        how: Apply,
    ) -> Result<Written, StoreError> {
        let mut g = self.lock();
        let k = (
            kind.to_string(),
            meta_str(&obj, "namespace").to_string(),
            meta_str(&obj, "name").to_string(),
        );
        let what = format!("{kind} {}/{}", k.1, k.2);
        let Some(old) = g.objects.get(&k).cloned() else {
            return Err(StoreError::NotFound(what));
        };
        let rv = meta_str(&obj, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(&old, "resourceVersion") {
            return Err(StoreError::Conflict(MODIFIED.into()));
        }
        let uid = meta_str(&obj, "uid");
        if !uid.is_empty() && uid != meta_str(&old, "uid") {
            return Err(StoreError::Conflict(
                "the UID of the object does not match".into(),
            ));
        }
        let new = match sub {
            Subresource::Status => {
                let mut n = old.clone();
                n["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
                n
            }
            Subresource::Main => self.main_update(kind, &what, &old, obj)?,
        };
        let new = strip_nulls(new);
        if new == old {
            return Ok(Written::unchanged(old));
        }
        let deleting = !meta_str(&new, "deletionTimestamp").is_empty();
        let removed = deleting && finalizers(&new).is_empty();
        if how == Apply::DryRun {
            return Ok(Written::changed_or_removed(new, removed));
        }
        let rv = g.rv + 1;
        let mut new = new;
        set_meta(&mut new, "resourceVersion", json!(rv.to_string()));
        let len = super::json_len(&new);
        if !removed && super::too_large_for_etcd(&new, len) {
            return Err(StoreError::TooLarge);
        }
        g.rv = rv;
        if removed {
            g.objects.remove(&k);
            Self::publish_sized(&mut g, kind, EventType::Deleted, &new, len, Some(old));
        } else {
            g.objects.insert(k, new.clone());
            Self::publish_sized(&mut g, kind, EventType::Modified, &new, len, Some(old));
        }
        Ok(Written::changed_or_removed(new, removed))
    }

    /// The object a main update stores: what the server owns kept from the
    /// old one (uid, timestamps, versions, status), the generation bumped
    /// when the spec changed, no finalizer added while deleting.
    fn main_update(
        &self,
        kind: &str,
        what: &str,
        old: &Value,
        obj: Value,
    ) -> Result<Value, StoreError> {
        let mut n = obj;
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ] {
            match meta(old).get(f) {
                Some(v) => set_meta(&mut n, f, v.clone()),
                None => {
                    if let Some(m) = n["metadata"].as_object_mut() {
                        m.remove(f);
                    }
                }
            }
        }
        let has_status = self.has_status(kind);
        if has_status {
            n["status"] = old.get("status").cloned().unwrap_or(Value::Null);
        }
        let deleting = !meta_str(old, "deletionTimestamp").is_empty();
        // A set: a body may carry a million finalizers.
        let before: std::collections::HashSet<String> = finalizers(old).into_iter().collect();
        if deleting && finalizers(&n).iter().any(|f| !before.contains(f)) {
            return Err(StoreError::Invalid(format!(
                "{what}: no new finalizers can be added if the object is being deleted"
            )));
        }
        if self.has_generation(kind)
            && spec_of(&strip_nulls(n.clone()), has_status) != spec_of(old, has_status)
        {
            bump_generation(&mut n, old);
        }
        Ok(n)
    }

    /// DELETE, with no preconditions.
    pub fn delete(&self, kind: &str, ns: &str, name: &str) -> Result<Written, StoreError> {
        self.delete_with(kind, ns, name, None, None, Apply::Commit)
    }

    /// DELETE with optional uid and resourceVersion preconditions.
    pub fn delete_with(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        rv: Option<&str>,
        how: Apply,
    ) -> Result<Written, StoreError> {
        let mut g = self.lock();
        let (k, _, old) = existing(&g, kind, ns, name, uid)?;
        if rv.is_some_and(|r| r != meta_str(&old, "resourceVersion")) {
            return Err(StoreError::Conflict(
                "Precondition failed: resourceVersion in precondition does not match the object"
                    .into(),
            ));
        }
        if !finalizers(&old).is_empty() {
            // Held by finalizers: marked deleting, no grace.
            return Ok(self.mark_deleting_in(&mut g, k, kind, old, 0, how, |_| {}));
        }
        if how == Apply::DryRun {
            return Ok(Written::removed(old));
        }
        g.rv += 1;
        let mut gone = old.clone();
        set_meta(&mut gone, "resourceVersion", json!(g.rv.to_string()));
        g.objects.remove(&k);
        Self::publish(&mut g, kind, EventType::Deleted, &gone, Some(old));
        Ok(Written::removed(gone))
    }
}

impl Store {
    /// A graceful deletion the store itself does not finish: the object
    /// gets its deletionTimestamp (and `edit`, e.g. a Terminating phase)
    /// and stays until whoever finishes it (the namespace controller, a
    /// kubelet) deletes it again. Nothing changes if it is already deleting.
    #[allow(clippy::too_many_arguments)]
    pub fn mark_deleting(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
        uid: Option<&str>,
        grace_seconds: u64,
        how: Apply,
        edit: impl FnOnce(&mut Value),
    ) -> Result<Written, StoreError> {
        let mut g = self.lock();
        let (k, _, old) = existing(&g, kind, ns, name, uid)?;
        Ok(self.mark_deleting_in(&mut g, k, kind, old, grace_seconds, how, edit))
    }

    /// Marks `old` (stored at `k`) deleting under the held lock; nothing
    /// changes if it already is.
    #[allow(clippy::too_many_arguments)]
    fn mark_deleting_in(
        &self,
        g: &mut Inner,
        k: Key,
        kind: &str,
        old: Value,
        grace_seconds: u64,
        how: Apply,
        edit: impl FnOnce(&mut Value),
    ) -> Written {
        if !meta_str(&old, "deletionTimestamp").is_empty() {
            return Written::unchanged(old);
        }
        let mut new = old.clone();
        let at = (self.wall)() + std::time::Duration::from_secs(grace_seconds);
        set_meta(
            &mut new,
            "deletionTimestamp",
            json!(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
        );
        set_meta(&mut new, "deletionGracePeriodSeconds", json!(grace_seconds));
        // As the API server's markAsDeleting: a deletion is a change the
        // object's controllers must observe.
        if self.has_generation(kind) {
            bump_generation(&mut new, &old);
        }
        edit(&mut new);
        if how == Apply::DryRun {
            return Written::changed(new);
        }
        g.rv += 1;
        set_meta(&mut new, "resourceVersion", json!(g.rv.to_string()));
        g.objects.insert(k, new.clone());
        Self::publish(g, kind, EventType::Modified, &new, Some(old));
        Written::changed(new)
    }

    /// Every stored object, with its kind.
    pub fn everything(&self) -> Vec<(String, Value)> {
        self.lock()
            .objects
            .iter()
            .map(|((k, _, _), o)| (k.clone(), o.clone()))
            .collect()
    }

    /// Every namespaced object in `ns`, of any kind: (kind, name, deleting).
    pub fn in_namespace(&self, ns: &str) -> Vec<(String, String, bool)> {
        self.lock()
            .objects
            .iter()
            .filter(|((_, n, _), _)| n == ns)
            .map(|((k, _, name), o)| {
                (
                    k.clone(),
                    name.clone(),
                    !meta_str(o, "deletionTimestamp").is_empty(),
                )
            })
            .collect()
    }
}

/// The stored object a delete is about, its key and how errors name it;
/// NotFound, or Conflict when the uid precondition fails.
fn existing(
    g: &Inner,
    kind: &str,
    ns: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<(Key, String, Value), StoreError> {
    let k = (kind.to_string(), ns.to_string(), name.to_string());
    let what = format!("{kind} {ns}/{name}");
    let Some(old) = g.objects.get(&k).cloned() else {
        return Err(StoreError::NotFound(what));
    };
    if uid.is_some_and(|u| u != meta_str(&old, "uid")) {
        return Err(StoreError::Conflict(
            "Precondition failed: UID in precondition does not match the object".into(),
        ));
    }
    Ok((k, what, old))
}

fn bump_generation(new: &mut Value, old: &Value) {
    let g = meta(old)["generation"].as_i64().unwrap_or(0);
    set_meta(new, "generation", json!(g + 1));
}
