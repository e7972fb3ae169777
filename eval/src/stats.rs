//! The evaluation's summaries: bootstrap intervals of a mean, and the
//! core's statistics ([`netaware_core::stats`]) with an empty sample
//! read as 0, as the evaluation's tables print it.

use netaware_core::stats;
use rand::Rng;

/// The mean; 0 for an empty sample.
pub fn mean(values: &[f64]) -> f64 {
    stats::mean(values).unwrap_or(0.0)
}

/// The `q` quantile (0 to 1) by the nearest-rank method; 0 for an empty
/// sample.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    stats::quantile(values, q).unwrap_or(0.0)
}

/// The median.
pub fn median(values: &[f64]) -> f64 {
    quantile(values, 0.5)
}

/// A 95% percentile-bootstrap interval of the mean of `values`: the
/// 2.5th and 97.5th percentiles of the means of `resamples` resamples
/// drawn with replacement. One value gives a point.
pub fn bootstrap_mean_interval(values: &[f64], resamples: usize, rng: &mut impl Rng) -> (f64, f64) {
    if values.len() < 2 {
        let only = mean(values);
        return (only, only);
    }
    let means: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            let sum: f64 = (0..values.len())
                .map(|_| values[rng.random_range(0..values.len())])
                .sum();
            sum / values.len() as f64
        })
        .collect();
    (quantile(&means, 0.025), quantile(&means, 0.975))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_bootstrap_interval_holds_the_mean_and_narrows_with_more_values() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let few: Vec<f64> = (0..10).map(|i| f64::from(i % 5)).collect();
        let many: Vec<f64> = (0..1_000).map(|i| f64::from(i % 5)).collect();
        let (lo, hi) = bootstrap_mean_interval(&few, 2_000, &mut rng);
        assert!(lo < mean(&few) && mean(&few) < hi, "{lo} {hi}");
        let (lo_many, hi_many) = bootstrap_mean_interval(&many, 2_000, &mut rng);
        assert!(hi_many - lo_many < (hi - lo) / 5.0);
        assert_eq!(bootstrap_mean_interval(&[3.0], 100, &mut rng), (3.0, 3.0));
    }

    #[test]
    fn quantiles_by_nearest_rank() {
        let values = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(median(&values), 3.0);
        assert_eq!(quantile(&values, 0.9), 5.0);
        assert_eq!(quantile(&values, 0.0), 1.0);
        assert_eq!(mean(&values), 3.0);
        assert_eq!(mean(&[]), 0.0);
    }
}
