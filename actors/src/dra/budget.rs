//! How much selector evaluation one decision may spend (issue: a tenant's
//! selector must not stall placement for every tenant).
//!
//! Placement decides one set at a time for every tenant. A tenant's
//! ResourceClaimTemplate may carry a selector that costs up to
//! `SELECTOR_MAX_COST` (upstream's limit, about a tenth of a second) on
//! each device, and a decision may ask it of every device of every
//! candidate node. So a decision runs within a budget of evaluations,
//! charged at each selector's estimated cost: answers remembered from
//! before are free; once the budget is spent, no further selector is
//! evaluated, the decision is thrown away, and the set is looked at again
//! behind the other tenants' work, where what it evaluated is remembered.
//! The budget is the decision's, on the thread that makes it: a decision
//! runs on one thread, start to end.

use std::cell::Cell;

/// A decision's budget, in cel-go's cost units.
#[derive(Clone, Copy)]
struct Turn {
    left: u64,
    /// Whether it evaluated anything yet: the first evaluation of a turn
    /// always runs, however dear, so every turn makes progress.
    spent: bool,
    exhausted: bool,
}

thread_local! {
    static TURN: Cell<Option<Turn>> = const { Cell::new(None) };
}

/// Runs `decide` with `limit` to spend on evaluating selectors; also says
/// whether it ran out (its answer then rests on evaluations skipped, and
/// must not be acted on).
pub fn within<T>(limit: u64, decide: impl FnOnce() -> T) -> (T, bool) {
    let outer = TURN.with(|t| {
        t.replace(Some(Turn {
            left: limit,
            spent: false,
            exhausted: false,
        }))
    });
    let out = decide();
    let turn = TURN.with(|t| t.replace(outer));
    (out, turn.is_some_and(|t| t.exhausted))
}

/// Asks to evaluate a selector of estimated cost `cost`: true to go on;
/// false once the turn's budget is spent (outside a turn, always true).
pub fn charge(cost: u64) -> bool {
    TURN.with(|t| {
        let Some(mut turn) = t.get() else {
            return true;
        };
        let go = if turn.exhausted {
            false
        } else if !turn.spent || cost <= turn.left {
            turn.left = turn.left.saturating_sub(cost);
            turn.spent = true;
            true
        } else {
            turn.exhausted = true;
            false
        };
        t.set(Some(turn));
        go
    })
}

#[cfg(test)]
mod tests {
    use super::{charge, within};

    #[test]
    fn a_turn_spends_its_budget_then_stops_and_says_so() {
        let ((), exhausted) = within(10, || {
            assert!(charge(4));
            assert!(charge(6));
            assert!(!charge(1));
            assert!(!charge(0), "nothing more once exhausted");
        });
        assert!(exhausted);
    }

    #[test]
    fn the_first_evaluation_of_a_turn_runs_however_dear() {
        let (went, exhausted) = within(10, || charge(1_000_000));
        assert!(went && !exhausted);
    }

    #[test]
    fn outside_a_turn_nothing_is_counted() {
        assert!(charge(u64::MAX));
        let (_, exhausted) = within(1, || ());
        assert!(!exhausted);
        assert!(charge(u64::MAX));
    }
}
