//! Where the supervisor stands, as one state (as kube-runtime's watcher
//! keeps its `State`): no actor decides until every watched kind has
//! listed once, so that no rule acts on a half-listed world, and while
//! another process leads.

use crate::ports::Kind;
use std::collections::BTreeSet;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Readiness {
    /// These watched kinds have not listed yet; `leading`: whether this
    /// process will decide once they have.
    Syncing {
        waiting_for: BTreeSet<Kind>,
        leading: bool,
    },
    /// Every watched kind has listed; another process leads (or none
    /// yet): the caches stay warm, nothing is decided.
    Standby,
    /// Every watched kind has listed and this process leads: actors decide.
    Deciding,
}

impl Readiness {
    /// A supervisor that waits for `watched` to list, leading or not.
    pub(super) fn new(watched: &[Kind], leading: bool) -> Self {
        Readiness::Syncing {
            waiting_for: watched.iter().copied().collect(),
            leading,
        }
        .settled()
    }

    /// `kind`'s watch has listed (again: a relist changes nothing).
    pub(super) fn listed(self, kind: Kind) -> Self {
        match self {
            Readiness::Syncing {
                mut waiting_for,
                leading,
            } => {
                waiting_for.remove(&kind);
                Readiness::Syncing {
                    waiting_for,
                    leading,
                }
                .settled()
            }
            synced => synced,
        }
    }

    /// This process leads now, or no longer.
    pub(super) fn leading(self, leading: bool) -> Self {
        match self {
            Readiness::Syncing { waiting_for, .. } => Readiness::Syncing {
                waiting_for,
                leading,
            },
            _ if leading => Readiness::Deciding,
            _ => Readiness::Standby,
        }
    }

    /// Syncing with nothing left to wait for is synced.
    fn settled(self) -> Self {
        match self {
            Readiness::Syncing {
                waiting_for,
                leading,
            } if waiting_for.is_empty() => {
                if leading {
                    Readiness::Deciding
                } else {
                    Readiness::Standby
                }
            }
            other => other,
        }
    }

    pub(super) fn deciding(&self) -> bool {
        *self == Readiness::Deciding
    }

    pub(super) fn synced(&self) -> bool {
        !matches!(self, Readiness::Syncing { .. })
    }

    pub(super) fn is_leading(&self) -> bool {
        match self {
            Readiness::Syncing { leading, .. } => *leading,
            Readiness::Standby => false,
            Readiness::Deciding => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every transition, as a table: (from, event, to).
    #[test]
    fn actors_decide_only_once_every_kind_listed_and_while_this_process_leads() {
        enum Ev {
            Listed(Kind),
            Leading(bool),
        }
        let syncing = |kinds: &[Kind], leading| Readiness::Syncing {
            waiting_for: kinds.iter().copied().collect(),
            leading,
        };
        let both = [Kind::Claim, Kind::Node];
        let cases = [
            (
                "one kind listed: still syncing",
                syncing(&both, true),
                Ev::Listed(Kind::Claim),
                syncing(&[Kind::Node], true),
            ),
            (
                "the last kind listed, leading: deciding",
                syncing(&[Kind::Node], true),
                Ev::Listed(Kind::Node),
                Readiness::Deciding,
            ),
            (
                "the last kind listed, not leading: standby",
                syncing(&[Kind::Node], false),
                Ev::Listed(Kind::Node),
                Readiness::Standby,
            ),
            (
                "a kind not waited for changes nothing",
                syncing(&[Kind::Node], true),
                Ev::Listed(Kind::Claim),
                syncing(&[Kind::Node], true),
            ),
            (
                "leading while syncing: still syncing",
                syncing(&both, false),
                Ev::Leading(true),
                syncing(&both, true),
            ),
            (
                "a relist while deciding: deciding",
                Readiness::Deciding,
                Ev::Listed(Kind::Claim),
                Readiness::Deciding,
            ),
            (
                "leading from standby: deciding",
                Readiness::Standby,
                Ev::Leading(true),
                Readiness::Deciding,
            ),
            (
                "leadership lost: standby",
                Readiness::Deciding,
                Ev::Leading(false),
                Readiness::Standby,
            ),
            (
                "still not leading: standby",
                Readiness::Standby,
                Ev::Leading(false),
                Readiness::Standby,
            ),
        ];
        for (what, from, ev, want) in cases {
            let got = match ev {
                Ev::Listed(k) => from.listed(k),
                Ev::Leading(l) => from.leading(l),
            };
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn nothing_to_watch_is_synced_from_the_start() {
        assert_eq!(Readiness::new(&[], true), Readiness::Deciding);
        assert_eq!(Readiness::new(&[], false), Readiness::Standby);
        let r = Readiness::new(&[Kind::Claim], false);
        assert!(!r.synced() && !r.is_leading() && !r.deciding());
    }
}
