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
pub fn seven_digits(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let exponent = x.abs().log10().floor() as i32;
    let scale = 10f64.powi(6 - exponent);
    let rounded = (x * scale).round() / scale;
    if rounded.is_finite() { rounded } else { x }
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

    proptest! {
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
