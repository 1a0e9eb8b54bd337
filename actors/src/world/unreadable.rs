//! Objects the watch brought that cannot be read (issue 33, item 3): an
//! object the controller cannot read is never treated as absent. A
//! GPUQuota stored before its schema bounded it (`{l40s: 4294967296}` under
//! an older CRD, which Helm does not upgrade) would otherwise count as no
//! quota, and placement would go past it (I8). Kept per namespace, so Q1
//! asks about its set's namespace alone; normally empty.

use super::{World, split_key};
use crate::api::Kind;
use std::collections::BTreeMap;

impl World {
    /// The object `key` of `kind` cannot be read (`why`), or can again, or
    /// is gone (`None`). Only GPUQuotas are kept: they are the kind whose
    /// absence lets placement do more. Returns whether anything changed.
    pub(in crate::world) fn set_unreadable(
        &self,
        kind: Kind,
        key: &str,
        why: Option<String>,
    ) -> bool {
        if kind != Kind::Quota {
            return false;
        }
        let (ns, name) = split_key(key);
        let mut e = self.unreadable_quotas.entry(ns.to_string()).or_default();
        let changed = match why {
            Some(w) => e.insert(name.to_string(), w.clone()).as_ref() != Some(&w),
            None => e.remove(name).is_some(),
        };
        let empty = e.is_empty();
        drop(e);
        if empty {
            self.unreadable_quotas.remove_if(ns, |_, m| m.is_empty());
        }
        changed
    }

    /// A list of `kind` found exactly these objects unreadable (`key`,
    /// `why`): the rest are readable or gone. Returns the namespaces whose
    /// unreadable objects changed.
    pub(in crate::world) fn relisted_unreadable(
        &self,
        kind: Kind,
        now: &[(String, String)],
    ) -> Vec<String> {
        if kind != Kind::Quota {
            return Vec::new();
        }
        let mut before: Vec<String> = Vec::new();
        for e in self.unreadable_quotas.iter() {
            before.extend(e.value().keys().map(|n| super::key(e.key(), n)));
        }
        let mut changed = Vec::new();
        for k in before.iter().filter(|k| !now.iter().any(|(n, _)| n == *k)) {
            if self.set_unreadable(kind, k, None) {
                changed.push(split_key(k).0.to_string());
            }
        }
        for (k, why) in now {
            if self.set_unreadable(kind, k, Some(why.clone())) {
                changed.push(split_key(k).0.to_string());
            }
        }
        changed.sort();
        changed.dedup();
        changed
    }

    /// The GPUQuotas of namespace `ns` that cannot be read, by name, with why.
    pub fn unreadable_quotas_in(&self, ns: &str) -> BTreeMap<String, String> {
        self.unreadable_quotas
            .get(ns)
            .map(|m| m.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn an_unreadable_quota_is_kept_until_it_can_be_read_again_or_is_gone() {
        let w = World::new(Config::default());
        assert!(w.set_unreadable(Kind::Quota, "t/q", Some("too large".into())));
        assert!(!w.set_unreadable(Kind::Quota, "t/q", Some("too large".into())));
        assert_eq!(w.unreadable_quotas_in("t").len(), 1);
        assert!(w.unreadable_quotas_in("u").is_empty());
        assert!(!w.set_unreadable(Kind::Claim, "t/c", Some("bad".into())));
        assert!(w.set_unreadable(Kind::Quota, "t/q", None));
        assert!(w.unreadable_quotas_in("t").is_empty());
    }

    #[test]
    fn a_relist_keeps_exactly_the_quotas_it_found_unreadable() {
        let w = World::new(Config::default());
        w.set_unreadable(Kind::Quota, "t/gone", Some("bad".into()));
        w.set_unreadable(Kind::Quota, "u/stays", Some("bad".into()));
        let changed = w.relisted_unreadable(
            Kind::Quota,
            &[
                ("u/stays".into(), "bad".into()),
                ("v/new".into(), "bad".into()),
            ],
        );
        assert_eq!(changed, ["t", "v"]);
        assert!(w.unreadable_quotas_in("t").is_empty());
        assert_eq!(w.unreadable_quotas_in("u").len(), 1);
        assert_eq!(w.unreadable_quotas_in("v").len(), 1);
    }
}
