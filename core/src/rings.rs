//! The recent windows of every pair of the matrix, in one flat vector of
//! plain structs: each pair owns `capacity` consecutive places, holding its
//! windows oldest first. No pair has a heap allocation of its own; with
//! the matrix keeping a window's RTT figures as `f32`, at 320,000 measured
//! pairs this is what makes a pair cost a few hundred bytes rather than a
//! kilobyte (BENCHMARKS.md, "What a measured pair costs in memory").
//!
//! `f32` keeps 24 bits of mantissa: a figure comes back within a relative
//! 6e-8 of what the agent sent (0.06 ns of a 1 ms RTT, 4 us of the
//! longest RTT the matrix takes). Rounding is monotonic, so quantiles stay
//! in order. A pair's summary is worked out from the kept figures, so the
//! snapshot, the saves and a restored state all read the same numbers; its
//! RTT figures are given to seven significant digits ([`seven_digits`]),
//! so that a figure sent as 0.2 ms reads 0.2, not 0.20000000298, and stay
//! within [`RELATIVE_ERROR`] of what was sent.

use crate::UnixMillis;

/// How far a kept RTT figure may be from the one recorded, relative to it:
/// `f32`'s rounding (half its epsilon, 6e-8) and seven significant digits
/// (5e-7).
pub const RELATIVE_ERROR: f64 = f32::EPSILON as f64 / 2.0 + 5e-7;

/// `x` to seven significant digits: what `f32` keeps, written back as the
/// shortest decimal such a figure is sent as.
///
/// Every scored term goes through here (three per pair of a snapshot,
/// three per estimate placement reads), so the decimal exponent and the
/// scale are looked up rather than worked out with `log10` and `powi`:
/// that was half of what an estimate cost.
pub fn seven_digits(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = power_of_ten(6 - decimal_exponent(x.abs()));
    let rounded = round_half_away(x * scale) / scale;
    if rounded.is_finite() { rounded } else { x }
}

/// The powers of ten exact in binary (up to 10^22) and their reciprocals,
/// from `10^-POWERS_REACH` up: each as `10f64.powi` gives it.
const POWERS_REACH: i32 = 22;
const POWERS_OF_TEN: [f64; 45] = {
    let mut powers = [1.0; 45];
    let mut k = 1;
    while k <= POWERS_REACH as usize {
        let power = powers[POWERS_REACH as usize + k - 1] * 10.0;
        powers[POWERS_REACH as usize + k] = power;
        powers[POWERS_REACH as usize - k] = 1.0 / power;
        k += 1;
    }
    powers
};

/// `10^k`, as `10f64.powi(k)` gives it.
fn power_of_ten(k: i32) -> f64 {
    if (-POWERS_REACH..=POWERS_REACH).contains(&k) {
        POWERS_OF_TEN[(k + POWERS_REACH) as usize]
    } else {
        10f64.powi(k)
    }
}

/// `floor(log10(a))` for a finite `a > 0`: from its binary exponent
/// (times 1233/4096, log10 2 to five digits), then a step either way
/// against the powers of ten.
fn decimal_exponent(a: f64) -> i32 {
    let binary = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    // Beyond the exact powers (or subnormal, whose binary exponent says
    // little).
    if !(-60..=60).contains(&binary) {
        return a.log10().floor() as i32;
    }
    let mut exponent = (binary * 1233) >> 12;
    if a < power_of_ten(exponent) {
        exponent -= 1;
    }
    if a >= power_of_ten(exponent + 1) {
        exponent += 1;
    }
    exponent
}

/// `v.round()` (halves away from zero) by the hardware's truncation where
/// `v` is a whole number of units (below 2^52): the call `round` compiles
/// to otherwise is most of what [`seven_digits`] costs.
fn round_half_away(v: f64) -> f64 {
    if v.abs() >= 4_503_599_627_370_496.0 {
        return v.round();
    }
    let truncated = v as i64 as f64;
    let rest = v - truncated;
    if rest >= 0.5 {
        truncated + 1.0
    } else if rest <= -0.5 {
        truncated - 1.0
    } else {
        truncated
    }
}

/// Whether `kept` is `recorded` as the matrix keeps it: within
/// [`RELATIVE_ERROR`].
pub fn is_kept_as(kept: f64, recorded: f64) -> bool {
    (kept - recorded).abs() <= recorded.abs() * RELATIVE_ERROR
}

/// A fixed-capacity ring of windows for every slot, ordered by end.
#[derive(Debug, Clone)]
pub(crate) struct Rings<T> {
    capacity: usize,
    items: Vec<T>,
    lens: Vec<u32>,
}

/// What a ring holds: something with an end.
pub(crate) trait Ended: Copy + Default {
    /// When it ended.
    fn end(&self) -> UnixMillis;
}

impl<T: Ended> Rings<T> {
    /// Rings of `capacity` items each (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            items: Vec::new(),
            lens: Vec::new(),
        }
    }

    /// Adds an empty ring at the end.
    pub(crate) fn push_empty(&mut self) {
        self.items
            .extend(std::iter::repeat_n(T::default(), self.capacity));
        self.lens.push(0);
    }

    /// The items of ring `slot`, oldest first.
    pub(crate) fn get(&self, slot: usize) -> &[T] {
        let len = self.lens.get(slot).map_or(0, |&len| len as usize);
        let start = slot * self.capacity;
        self.items.get(start..start + len).unwrap_or(&[])
    }

    /// Empties ring `slot`.
    pub(crate) fn clear(&mut self, slot: usize) {
        if let Some(len) = self.lens.get_mut(slot) {
            *len = 0;
        }
    }

    /// Puts `item` in its place by end in ring `slot`, the oldest out when
    /// the ring is full. An item whose end is already there is that item
    /// again (a saved state and its journal may both hold it) and changes
    /// nothing; one older than every item of a full ring is not kept.
    pub(crate) fn insert(&mut self, slot: usize, item: T) {
        let capacity = self.capacity;
        let Some(len) = self.lens.get_mut(slot) else {
            return;
        };
        let start = slot * capacity;
        let Some(ring) = self.items.get_mut(start..start + capacity) else {
            return;
        };
        let held = *len as usize;
        let at = ring[..held].partition_point(|kept| kept.end() <= item.end());
        if at > 0 && ring[at - 1].end() == item.end() {
            return;
        }
        if held < capacity {
            ring.copy_within(at..held, at + 1);
            ring[at] = item;
            *len += 1;
        } else if at > 0 {
            ring.copy_within(1..at, 0);
            ring[at - 1] = item;
        }
    }

    /// Keeps the rings whose `keep` is true, in order.
    pub(crate) fn retain(&mut self, keep: &[bool]) {
        let mut kept = 0;
        for (slot, keep) in keep.iter().enumerate().take(self.lens.len()) {
            if *keep {
                let from = slot * self.capacity;
                self.items
                    .copy_within(from..from + self.capacity, kept * self.capacity);
                self.lens[kept] = self.lens[slot];
                kept += 1;
            }
        }
        self.lens.truncate(kept);
        self.items.truncate(kept * self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone, Copy, Default, PartialEq)]
    struct At(UnixMillis);
    impl Ended for At {
        fn end(&self) -> UnixMillis {
            self.0
        }
    }

    fn ends(rings: &Rings<At>, slot: usize) -> Vec<UnixMillis> {
        rings.get(slot).iter().map(|a| a.0).collect()
    }

    #[test]
    fn each_ring_keeps_its_newest_in_order_apart_from_the_others() {
        let mut rings = Rings::new(3);
        rings.push_empty();
        rings.push_empty();
        for end in [30, 10, 20, 20, 40] {
            rings.insert(0, At(end));
        }
        rings.insert(1, At(5));
        // Full, and older than everything kept: not kept.
        rings.insert(0, At(1));
        assert_eq!(ends(&rings, 0), vec![20, 30, 40]);
        assert_eq!(ends(&rings, 1), vec![5]);
        rings.clear(0);
        assert_eq!(ends(&rings, 0), Vec::<UnixMillis>::new());
        rings.insert(0, At(7));
        rings.retain(&[false, true]);
        assert_eq!(ends(&rings, 0), vec![5]);
        assert!(rings.get(1).is_empty());
        // Slots that do not exist hold nothing and take nothing.
        rings.insert(9, At(1));
        assert!(rings.get(9).is_empty());
    }

    #[test]
    fn a_figure_kept_as_f32_reads_as_it_was_sent() {
        for sent in [0.2, 0.9, 0.1, 0.35, 1.5, 0.123_456_7, 59_999.99, 0.000_8] {
            let kept = f64::from(sent as f32);
            assert_eq!(seven_digits(kept), sent, "{kept}");
        }
        assert_eq!(seven_digits(0.0), 0.0);
    }

    /// What [`seven_digits`] gives, worked out with `log10` and `powi`.
    fn seven_digits_by_logarithm(x: f64) -> f64 {
        if x == 0.0 || !x.is_finite() {
            return x;
        }
        let exponent = x.abs().log10().floor() as i32;
        let scale = 10f64.powi(6 - exponent);
        let rounded = (x * scale).round() / scale;
        if rounded.is_finite() { rounded } else { x }
    }

    /// Whether two roundings of one figure are the same within the last
    /// bit or two: where a power of ten is not exact in binary, a figure
    /// a hair under it may be scaled by the next power instead.
    fn same_figure(a: f64, b: f64) -> bool {
        a == b || (a - b).abs() <= a.abs().max(b.abs()) * 4.0 * f64::EPSILON
    }

    #[test]
    fn seven_digits_by_lookup_are_those_by_logarithm_at_the_powers_of_ten() {
        for k in -80..=80 {
            let power = 10f64.powi(k);
            for x in [power, power.next_down(), power.next_up(), -power] {
                let (lookup, logarithm) = (seven_digits(x), seven_digits_by_logarithm(x));
                assert!(
                    same_figure(lookup, logarithm),
                    "{x:e}: {lookup:e} {logarithm:e}"
                );
                // Where the scale is a whole power of ten, exact in
                // binary (terms and milliseconds live here), to the bit.
                if (-9..=6).contains(&k) {
                    assert_eq!(lookup, logarithm, "{x:e}");
                }
            }
        }
        for x in [f64::MIN_POSITIVE, 5e-324, f64::MAX, 1e300, 0.123_456_789] {
            assert!(
                same_figure(seven_digits(x), seven_digits_by_logarithm(x)),
                "{x:e}"
            );
        }
    }

    proptest! {
        #[test]
        fn seven_digits_by_lookup_are_those_by_logarithm(
            mantissa in 1.0f64..10.0,
            exponent in -70i32..70,
        ) {
            let x = mantissa * 10f64.powi(exponent);
            let (lookup, logarithm) = (seven_digits(x), seven_digits_by_logarithm(x));
            prop_assert!(same_figure(lookup, logarithm), "{:e}: {:e} {:e}", x, lookup, logarithm);
        }

        #[test]
        fn rounding_by_truncation_is_rounding(v in -1e16f64..1e16) {
            prop_assert_eq!(round_half_away(v), v.round());
            let half = (v as i64 as f64) + 0.5;
            prop_assert_eq!(round_half_away(half), half.round());
        }

        #[test]
        fn seven_digits_stay_within_the_stated_error(x in 1e-6f64..60_000.0) {
            let kept = f64::from(x as f32);
            prop_assert!(is_kept_as(seven_digits(kept), x));
        }

        #[test]
        fn a_ring_holds_the_newest_distinct_ends_in_order(
            ends_in in prop::collection::vec(0u64..40, 0..60),
            capacity in 1usize..8,
        ) {
            let mut rings = Rings::new(capacity);
            rings.push_empty();
            let mut reference: Vec<u64> = Vec::new();
            for end in ends_in {
                rings.insert(0, At(end));
                // What a sorted list of distinct ends cut to its newest
                // `capacity` would hold, inserting one at a time.
                if !reference.contains(&end) {
                    reference.push(end);
                    reference.sort_unstable();
                    if reference.len() > capacity {
                        reference.remove(0);
                    }
                }
            }
            prop_assert_eq!(ends(&rings, 0), reference);
        }
    }
}
