//! Adding up amounts that tenants and nodes write. Every one of them is
//! hostile: a pod may request `9223372036854775807` GPUs in two containers,
//! a node may advertise a cpu past anything a machine has. A sum that
//! wrapped would read as a small number and promise GPUs twice, so every
//! sum saturates, and a running sum (kept as pods and nodes come and go)
//! counts in 128 bits, so that taking a huge amount away again leaves the
//! rest exact.

/// The largest amount Kubernetes itself can count: a quantity's value is
/// an int64 (`Quantity.Value`, `MilliValue`). A pod's request past it is
/// read as it ("more than any node has"); a node's allocatable past it
/// cannot be read (kube-scheduler's `MilliValue` wraps it negative there,
/// so the scheduler places nothing on it that needs it: no room).
pub const MOST: u64 = i64::MAX as u64;

/// The sum of `amounts`, saturating at `u64::MAX` (never wrapping).
pub fn total(amounts: impl IntoIterator<Item = u64>) -> u64 {
    amounts.into_iter().fold(0, u64::saturating_add)
}

/// Adds `amount` to `key`'s sum in `sums`, saturating.
pub fn add_to<K: Ord>(sums: &mut std::collections::BTreeMap<K, u64>, key: K, amount: u64) {
    let sum = sums.entry(key).or_default();
    *sum = sum.saturating_add(amount);
}

/// A sum kept as amounts are added and taken away. 128 bits hold the sum
/// of any number of u64 amounts a cluster can have, so removing one is
/// exact even after the sum passed `u64::MAX`; it reads saturated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tally(u128);

impl Tally {
    pub fn add(&mut self, amount: u64) {
        self.0 = self.0.saturating_add(u128::from(amount));
    }

    /// Takes `amount` away; never below zero (a removal of what was never
    /// added is a bug elsewhere, not a reason to wrap).
    pub fn sub(&mut self, amount: u64) {
        self.0 = self.0.saturating_sub(u128::from(amount));
    }

    /// Adds `amount` when `add`, takes it away otherwise.
    pub fn shift(&mut self, amount: u64, add: bool) {
        if add {
            self.add(amount)
        } else {
            self.sub(amount)
        }
    }

    /// The sum, saturated at `u64::MAX`.
    pub fn get(self) -> u64 {
        u64::try_from(self.0).unwrap_or(u64::MAX)
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

impl FromIterator<u64> for Tally {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        let mut t = Tally::default();
        iter.into_iter().for_each(|a| t.add(a));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_total_of_the_largest_amounts_saturates_instead_of_wrapping_to_small() {
        assert_eq!(total([MOST, MOST, MOST]), u64::MAX);
        assert_eq!(total([u64::MAX, 1]), u64::MAX);
        assert_eq!(total([3, 4]), 7);
        assert_eq!(total([]), 0);
    }

    #[test]
    fn a_tally_past_u64_reads_saturated_and_is_exact_again_once_the_huge_amount_goes() {
        let mut t = Tally::default();
        t.add(u64::MAX);
        t.add(4);
        assert_eq!(t.get(), u64::MAX);
        t.sub(u64::MAX);
        assert_eq!(t.get(), 4, "the 4 GPUs another pod holds are still counted");
        t.sub(10);
        assert!(t.is_zero());
    }
}
