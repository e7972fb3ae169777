//! What a pair nobody measured (or measured long ago) is taken to be when
//! nothing is known of its ends ([`crate::node_estimate`] says more where
//! something is): per term, the average of the fresh measured pairs of its
//! zone pair less a penalty, or 0 when the zone pair has none. Missing data
//! is never treated as good.
//!
//! The collector keeps and scores measured pairs only; every other pair is
//! estimated here when placement asks for it, never materialised as N x N.
//! The estimates depend on the measured pairs and the [`Fallback`] alone,
//! so a consumer of the collector's matrix works out the very same ones.

use crate::score::{Fallback, MeasuredTerms, Source, Terms};
use crate::scored_pair::ScoredPair;

/// A running mean.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Mean {
    sum: f64,
    count: u32,
}

impl Mean {
    pub(crate) fn add(&mut self, value: f64) {
        self.sum += value;
        self.count += 1;
    }

    pub(crate) fn value(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / f64::from(self.count))
    }

    pub(crate) fn count(&self) -> u32 {
        self.count
    }
}

/// Per zone pair (by zone indices), the means of the fresh measured terms.
#[derive(Debug, Clone, Default)]
pub(crate) struct ZoneAverages {
    zones: usize,
    /// delay, loss, throughput; indexed by `src_zone * zones + dst_zone`.
    means: Vec<[Mean; 3]>,
}

impl ZoneAverages {
    pub(crate) fn new(zones: usize) -> Self {
        Self {
            zones,
            means: vec![[Mean::default(); 3]; zones * zones],
        }
    }

    fn slot(&self, src_zone: usize, dst_zone: usize) -> Option<&[Mean; 3]> {
        (src_zone < self.zones && dst_zone < self.zones)
            .then(|| &self.means[src_zone * self.zones + dst_zone])
    }

    /// Adds the terms that a pair between the zones measured.
    pub(crate) fn add(&mut self, src_zone: usize, dst_zone: usize, measured: &MeasuredTerms) {
        if src_zone >= self.zones || dst_zone >= self.zones {
            return;
        }
        let means = &mut self.means[src_zone * self.zones + dst_zone];
        for (mean, value) in
            means
                .iter_mut()
                .zip([measured.delay, measured.loss, measured.throughput])
        {
            if let Some(value) = value {
                mean.add(value);
            }
        }
    }

    /// A pair's terms: its own where measured, else its zone pair's average
    /// less the penalty, else 0 and `Unknown`.
    pub(crate) fn fill(
        &self,
        src_zone: usize,
        dst_zone: usize,
        measured: &MeasuredTerms,
        fallback: &Fallback,
    ) -> Terms {
        let means = self.slot(src_zone, dst_zone);
        let term = |own: Option<f64>, which: usize| match own {
            Some(value) => (value, Source::Measured),
            None => match means.and_then(|m| m[which].value()) {
                Some(avg) => ((avg - fallback.penalty).max(0.0), Source::ZoneAverage),
                None => (0.0, Source::Unknown),
            },
        };
        Terms::of(
            term(measured.delay, 0),
            term(measured.loss, 1),
            term(measured.throughput, 2),
            measured.dead,
        )
    }
}

/// The terms of an estimated pair, and its quality.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Each term from its zone pair's average (or unknown).
    pub terms: Terms,
    /// The quality those terms give.
    pub quality: f64,
}

impl Default for Estimate {
    /// Nothing known: every term 0 and `Unknown`.
    fn default() -> Self {
        Self {
            terms: Terms {
                delay: 0.0,
                loss: 0.0,
                throughput: 0.0,
                delay_source: Source::Unknown,
                loss_source: Source::Unknown,
                throughput_source: Source::Unknown,
                dead: false,
            },
            quality: 0.0,
        }
    }
}

/// The estimate of an unmeasured pair for every zone pair.
#[derive(Debug, Clone, Default)]
pub struct ZoneEstimates {
    zones: usize,
    /// Indexed by `src_zone * zones + dst_zone`.
    table: Vec<Estimate>,
}

impl ZoneEstimates {
    /// The estimates that `pairs` support between `zones` zones, where
    /// `zone_of` gives each node's zone index. Only the terms the pairs
    /// measured themselves count.
    pub fn of(
        zones: usize,
        zone_of: impl Fn(usize) -> usize,
        pairs: &[ScoredPair],
        fallback: &Fallback,
    ) -> Self {
        let mut averages = ZoneAverages::new(zones);
        for pair in pairs {
            let measured =
                |value: f64, source: Source| (source == Source::Measured).then_some(value);
            let terms = &pair.terms;
            let own = MeasuredTerms {
                delay: measured(terms.delay, terms.delay_source),
                loss: measured(terms.loss, terms.loss_source),
                throughput: measured(terms.throughput, terms.throughput_source),
                dead: false,
            };
            averages.add(zone_of(pair.src), zone_of(pair.dst), &own);
        }
        let estimate = |src: usize, dst: usize| {
            let terms = averages.fill(src, dst, &MeasuredTerms::default(), fallback);
            Estimate {
                quality: fallback.quality(&terms),
                terms,
            }
        };
        let table = (0..zones * zones)
            .map(|k| estimate(k / zones, k % zones))
            .collect();
        Self { zones, table }
    }

    /// The estimate for a pair from zone `src_zone` to zone `dst_zone`.
    pub fn get(&self, src_zone: usize, dst_zone: usize) -> Estimate {
        if src_zone < self.zones && dst_zone < self.zones {
            self.table[src_zone * self.zones + dst_zone]
        } else {
            Estimate::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::PairSummary;

    fn measured_pair(src: usize, dst: usize, delay: f64, loss: f64) -> ScoredPair {
        let terms = Terms {
            delay,
            loss,
            throughput: 0.0,
            delay_source: Source::Measured,
            loss_source: Source::Measured,
            throughput_source: Source::Unknown,
            dead: false,
        };
        ScoredPair {
            src,
            dst,
            summary: PairSummary::default(),
            age_ms: Some(0),
            stale: false,
            quality: Fallback::default().quality(&terms),
            terms,
        }
    }

    #[test]
    fn an_unmeasured_pair_is_its_zone_pairs_average_less_the_penalty() {
        // Nodes 0, 1 in zone 0; node 2 in zone 1.
        let zone_of = |i: usize| usize::from(i == 2);
        let pairs = [measured_pair(0, 1, 0.9, 1.0), measured_pair(1, 0, 0.7, 1.0)];
        let fallback = Fallback::default();
        let estimates = ZoneEstimates::of(2, zone_of, &pairs, &fallback);
        let inside = estimates.get(0, 0);
        assert!((inside.terms.delay - (0.8 - fallback.penalty)).abs() < 1e-12);
        assert_eq!(inside.terms.delay_source, Source::ZoneAverage);
        assert_eq!(inside.terms.throughput_source, Source::Unknown);
        // Never as good as the pairs it comes from.
        assert!(pairs.iter().all(|p| p.quality > inside.quality));
        // Between the zones nothing was measured: nothing is known.
        let between = estimates.get(0, 1);
        assert_eq!(between.quality, 0.0);
        assert_eq!(between.terms.delay_source, Source::Unknown);
        assert_eq!(estimates.get(7, 0).quality, 0.0);
    }
}
