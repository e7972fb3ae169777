//! The summary statistics every part of netaware uses: quantiles by the
//! nearest-rank method, the two medians of an even count, and the mean.
//!
//! One module, so that a "p99" or a "median" means the same thing in an
//! agent's window, the collector's node health, the measured topology, the
//! simulator and the benchmarks' reports.

/// The nearest-rank `q` quantile (0 to 1) of sorted, non-empty values: the
/// smallest value with at least a share `q` of the values at or below it.
///
/// # Panics
///
/// On an empty slice: callers check for emptiness first, since what an
/// empty sample means differs from one to another.
pub fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The nearest-rank `q` quantile of `values` in any order; `None` when
/// there are none. Sorts a copy.
pub fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(nearest_rank(&sorted, q))
}

/// The nearest-rank `q` quantile of integer samples (latencies in
/// microseconds, say), in any order; `None` when there are none.
pub fn quantile_u32(values: &[u32], q: f64) -> Option<u32> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The lower of the two middle values (the middle one for an odd count),
/// sorting `values` in place; `None` when empty. Where a median decides
/// whether a node fails, the lower one leans towards the healthier half.
pub fn lower_median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len().checked_sub(1)? / 2).copied()
}

/// The higher of the two middle values (the middle one for an odd count),
/// sorting `values` in place; `None` when empty.
pub fn upper_median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied()
}

/// The mean; `None` for no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nearest_rank_quantiles() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&values, 0.5), 50.0);
        assert_eq!(nearest_rank(&values, 0.99), 99.0);
        assert_eq!(nearest_rank(&values, 0.0), 1.0);
        assert_eq!(nearest_rank(&values, 1.0), 100.0);
        assert_eq!(nearest_rank(&[7.0], 0.9), 7.0);
        assert_eq!(quantile(&[5.0, 1.0, 4.0, 2.0, 3.0], 0.9), Some(5.0));
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(quantile_u32(&[30, 10, 20], 0.5), Some(20));
        assert_eq!(quantile_u32(&[], 0.5), None);
    }

    #[test]
    fn medians_of_even_and_odd_counts() {
        assert_eq!(lower_median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(upper_median(&mut [4.0, 1.0, 3.0, 2.0]), Some(3.0));
        assert_eq!(lower_median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(upper_median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(lower_median(&mut []), None);
        assert_eq!(upper_median(&mut []), None);
        assert_eq!(mean(&[1.0, 2.0, 6.0]), Some(3.0));
        assert_eq!(mean(&[]), None);
    }

    proptest! {
        #[test]
        fn quantiles_are_members_and_ordered(
            values in prop::collection::vec(-1e6f64..1e6, 1..100),
            a in 0.0f64..1.0,
            b in 0.0f64..1.0,
        ) {
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            let ql = quantile(&values, low).unwrap();
            let qh = quantile(&values, high).unwrap();
            prop_assert!(values.contains(&ql) && values.contains(&qh));
            prop_assert!(ql <= qh);
            // At least a share q of the values lies at or below it.
            let at_or_below = values.iter().filter(|v| **v <= qh).count() as f64;
            prop_assert!(at_or_below >= high * values.len() as f64 - 1e-9);
            let mut copy = values.clone();
            let lower = lower_median(&mut copy).unwrap();
            let upper = upper_median(&mut copy).unwrap();
            prop_assert!(lower <= upper);
        }
    }
}
