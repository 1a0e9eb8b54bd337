//! E2: what this process knows of each restart beyond the mark its node
//! keeps, one value per restart (by the uid of the VMI it deletes), with
//! the transitions its writes make. The node's marks are the truth (a
//! controller that restarts counts from them alone, I10); a value here
//! only covers what the node watch does not show yet, and what was said.

use crate::api::RestartMark;
use std::collections::BTreeMap;

/// Where this process's write of a restart's mark stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum MarkWrite {
    /// Nothing of ours outstanding: the node's mark, as the watch shows
    /// it, is the whole truth.
    Seen,
    /// Being written (`Some`) or removed (`None`): the write is under way.
    Writing(Option<RestartMark>),
    /// Written (or removed) at the node's resourceVersion, which the node
    /// watch has not reached yet.
    Written(Option<RestartMark>, u64),
}

/// Whether the restart's VMI delete is this process's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Delete {
    /// Not made by this process (or made and failed).
    NotOurs,
    /// Made, or being made: a cache that still shows the VMI live lags.
    Issued,
}

/// One restart as this process knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Restart {
    /// The node it moves off, which keeps its mark.
    pub node: String,
    pub mark: MarkWrite,
    pub delete: Delete,
    /// Whether its timeout, with its set still waiting, was said.
    pub timeout_said: bool,
}

impl Restart {
    fn on(node: &str) -> Self {
        Self {
            node: node.to_string(),
            mark: MarkWrite::Seen,
            delete: Delete::NotOurs,
            timeout_said: false,
        }
    }

    /// The mark this process wrote or writes, if any (None: removes it,
    /// or has nothing outstanding).
    fn outstanding(&self) -> Option<Option<&RestartMark>> {
        match &self.mark {
            MarkWrite::Seen => None,
            MarkWrite::Writing(m) | MarkWrite::Written(m, _) => Some(m.as_ref()),
        }
    }
}

/// The marks as placement counts them, by the uid of the VMI deleted:
/// the node each is on, and its mark (None: on the node, unreadable).
pub(super) type Marks = BTreeMap<String, (String, Option<RestartMark>)>;

/// Every restart this process knows something of, by VMI uid.
#[derive(Default)]
pub(super) struct Restarts(BTreeMap<String, Restart>);

impl Restarts {
    fn entry(&mut self, uid: &str, node: &str) -> &mut Restart {
        self.0
            .entry(uid.to_string())
            .or_insert_with(|| Restart::on(node))
    }

    #[cfg(test)]
    pub fn get(&self, uid: &str) -> Option<&Restart> {
        self.0.get(uid)
    }

    /// A restart begins, or resumes: its mark to write (None: the node
    /// keeps it as it should be), and its delete made by this process. It
    /// counts from now, not from the write's answer, so that a change that
    /// comes while the write is under way decides nothing twice.
    pub fn begin(&mut self, uid: &str, node: &str, mark: Option<RestartMark>) {
        let r = self.entry(uid, node);
        r.node = node.to_string();
        if let Some(m) = mark {
            r.mark = MarkWrite::Writing(Some(m));
        }
        r.delete = Delete::Issued;
    }

    /// Its mark to be removed: the restart is over, or never began.
    pub fn end(&mut self, uid: &str, node: &str) {
        let r = self.entry(uid, node);
        r.node = node.to_string();
        r.mark = MarkWrite::Writing(None);
    }

    /// A mark written or removed, at the node's resourceVersion `rv`.
    pub fn landed(&mut self, uid: &str, rv: u64) {
        if let Some(r) = self.0.get_mut(uid)
            && let MarkWrite::Writing(m) | MarkWrite::Written(m, _) = &r.mark
        {
            r.mark = MarkWrite::Written(m.clone(), rv);
        }
    }

    /// A mark's write or removal that did not land: the node's mark, as
    /// the watch shows it, counts again.
    pub fn write_failed(&mut self, uid: &str) {
        if let Some(r) = self.0.get_mut(uid) {
            r.mark = MarkWrite::Seen;
        }
    }

    /// The delete did not land. With its mark on the node (`marked`), the
    /// next look judges the mark again; without, no restart began.
    pub fn delete_failed(&mut self, uid: &str, marked: bool) {
        if let Some(r) = self.0.get_mut(uid) {
            r.delete = Delete::NotOurs;
            if !marked {
                r.mark = MarkWrite::Seen;
            }
        }
    }

    /// Not deleted, as its VM would not start it again: its delete is not
    /// ours, and a mark not yet written never will be (the VM is read
    /// before the mark is written).
    pub fn kept(&mut self, uid: &str) {
        if let Some(r) = self.0.get_mut(uid) {
            r.delete = Delete::NotOurs;
            if matches!(r.mark, MarkWrite::Writing(Some(_))) {
                r.mark = MarkWrite::Seen;
            }
        }
    }

    /// Its timeout said: true the first time only.
    pub fn say_timeout(&mut self, uid: &str, node: &str) -> bool {
        let r = self.entry(uid, node);
        !std::mem::replace(&mut r.timeout_said, true)
    }

    /// The nodes' marks overlaid with this process's writes the node watch
    /// does not show yet (`seen`: how far it has come). Writes it has
    /// passed count as seen; a restart whose mark is gone forgets its
    /// delete and what was said, and is forgotten once nothing of ours
    /// about it is outstanding.
    pub fn overlay(&mut self, on_nodes: Marks, seen: u64) -> Marks {
        let mut out = on_nodes;
        for (uid, r) in &mut self.0 {
            if matches!(r.mark, MarkWrite::Written(_, rv) if rv <= seen) {
                r.mark = MarkWrite::Seen;
            }
            match r.outstanding() {
                Some(Some(m)) => {
                    out.insert(uid.clone(), (r.node.clone(), Some(m.clone())));
                }
                Some(None) => {
                    out.remove(uid);
                }
                None => {}
            }
        }
        self.0.retain(|uid, r| {
            if !out.contains_key(uid) {
                r.delete = Delete::NotOurs;
                r.timeout_said = false;
            }
            r.mark != MarkWrite::Seen || out.contains_key(uid)
        });
        out
    }

    /// The marks `node` keeps as this process knows them: the node's own
    /// (`on_node`, as the watch shows them), with this process's writes
    /// and removals the watch does not show yet.
    pub fn marked_on(
        &self,
        node: &str,
        on_node: std::collections::BTreeSet<String>,
    ) -> std::collections::BTreeSet<String> {
        let mut marked = on_node;
        for (uid, r) in self.0.iter().filter(|(_, r)| r.node == node) {
            match r.outstanding() {
                Some(Some(_)) => {
                    marked.insert(uid.clone());
                }
                Some(None) => {
                    marked.remove(uid);
                }
                None => {}
            }
        }
        marked
    }

    /// The mark this process wrote or writes for `uid`, if any.
    pub fn own_mark(&self, uid: &str) -> Option<RestartMark> {
        self.0
            .get(uid)
            .and_then(|r| r.outstanding().flatten().cloned())
    }

    /// Whether its mark's write is under way.
    pub fn writing(&self, uid: &str) -> bool {
        self.0
            .get(uid)
            .is_some_and(|r| matches!(r.mark, MarkWrite::Writing(_)))
    }

    /// Whether its delete is this process's.
    pub fn issued(&self, uid: &str) -> bool {
        self.0.get(uid).is_some_and(|r| r.delete == Delete::Issued)
    }

    /// How many restarts this process knows something of.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn mark(vm: &str) -> RestartMark {
        RestartMark {
            vm: vm.into(),
            at: Time(k8s_openapi::jiff::Timestamp::from_second(1_000).unwrap()),
        }
    }

    fn on_node(uid: &str, vm: &str) -> Marks {
        Marks::from([(uid.to_string(), ("n1".to_string(), Some(mark(vm))))])
    }

    #[test]
    fn e2_a_restart_counts_from_its_decision_until_the_node_watch_shows_its_mark() {
        let mut r = Restarts::default();
        r.begin("u1", "n1", Some(mark("t/vm")));
        assert!(r.writing("u1") && r.issued("u1"));
        // The watch has not shown it: it counts all the same.
        assert_eq!(r.overlay(Marks::new(), 10), on_node("u1", "t/vm"));
        r.landed("u1", 12);
        assert!(!r.writing("u1"));
        assert_eq!(r.overlay(Marks::new(), 11), on_node("u1", "t/vm"));
        // The watch passed the write and shows the mark: the node's is the truth.
        assert_eq!(r.overlay(on_node("u1", "t/vm"), 12), on_node("u1", "t/vm"));
        assert_eq!(r.get("u1").map(|x| &x.mark), Some(&MarkWrite::Seen));
        assert!(r.issued("u1"), "its delete is ours while its mark stands");
        // The mark gone from the node (another replica removed it): forgotten.
        assert_eq!(r.overlay(Marks::new(), 13), Marks::new());
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn e2_a_removal_under_way_hides_the_mark_the_cache_still_shows() {
        let mut r = Restarts::default();
        r.end("u1", "n1");
        assert_eq!(r.overlay(on_node("u1", "t/vm"), 5), Marks::new());
        r.landed("u1", 7);
        assert_eq!(r.overlay(on_node("u1", "t/vm"), 6), Marks::new());
        // Watched past the removal, and the node shows no mark: nothing left.
        assert_eq!(r.overlay(Marks::new(), 7), Marks::new());
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn e2_a_removal_that_did_not_land_lets_the_nodes_mark_count_again() {
        let mut r = Restarts::default();
        r.end("u1", "n1");
        r.write_failed("u1");
        assert_eq!(r.overlay(on_node("u1", "t/vm"), 5), on_node("u1", "t/vm"));
    }

    #[test]
    fn e2_a_delete_that_failed_without_its_mark_began_no_restart() {
        let mut r = Restarts::default();
        r.begin("u1", "n1", Some(mark("t/vm")));
        r.delete_failed("u1", false);
        assert!(!r.issued("u1"));
        assert_eq!(r.overlay(Marks::new(), 0), Marks::new());
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn e2_a_delete_that_failed_with_its_mark_written_leaves_the_mark_to_judge() {
        let mut r = Restarts::default();
        r.begin("u1", "n1", Some(mark("t/vm")));
        r.landed("u1", 3);
        r.delete_failed("u1", true);
        assert!(!r.issued("u1"));
        assert_eq!(r.overlay(Marks::new(), 2), on_node("u1", "t/vm"));
    }

    #[test]
    fn e2_a_vm_kept_from_its_restart_never_gets_the_mark_it_was_to_have() {
        let mut r = Restarts::default();
        r.begin("u1", "n1", Some(mark("t/vm")));
        r.kept("u1");
        assert!(!r.issued("u1"));
        assert_eq!(r.overlay(Marks::new(), 0), Marks::new());
        // Resumed on a mark the node keeps: kept leaves that mark to judge.
        r.begin("u2", "n1", None);
        r.kept("u2");
        assert_eq!(r.overlay(on_node("u2", "t/vm"), 0), on_node("u2", "t/vm"));
    }

    #[test]
    fn e2_a_timeout_is_said_once_while_its_mark_stands_and_again_after() {
        let mut r = Restarts::default();
        let marks = on_node("u1", "t/vm");
        r.overlay(marks.clone(), 0);
        assert!(r.say_timeout("u1", "n1"));
        assert!(!r.say_timeout("u1", "n1"));
        r.overlay(marks.clone(), 0);
        assert!(!r.say_timeout("u1", "n1"));
        // The mark went and came back (another restart of the same VMI
        // uid cannot be, but a mark written by hand can): said anew.
        r.overlay(Marks::new(), 0);
        r.overlay(marks, 0);
        assert!(r.say_timeout("u1", "n1"));
    }

    #[test]
    fn e2_a_resume_writes_a_fresh_mark_only_where_it_changes() {
        let mut r = Restarts::default();
        r.begin("u1", "n1", Some(mark("t/vm")));
        assert_eq!(r.own_mark("u1"), Some(mark("t/vm")));
        r.landed("u1", 4);
        r.overlay(on_node("u1", "t/vm"), 4);
        assert_eq!(
            r.own_mark("u1"),
            None,
            "the node's mark is the one to compare"
        );
    }
}
