//! What the network coordinates get wrong on the measured pairs, and how a
//! pair nobody measured is estimated from that: the coordinates'
//! prediction corrected by its two ends' residuals, or, on a zone pair the
//! coordinates cannot be corrected into telling apart, the additive model
//! of the measured pairs ([`crate::host_model`]).

use foldhash::{HashMap, HashMapExt};

use crate::coordinates::{End, RttEstimate};
use crate::host_model::HostModel;

/// What coordinates get wrong, learnt from the pairs that were measured:
/// the mean of (measured - predicted) of each node towards each zone, and
/// of each zone pair. A Euclidean space with heights cannot hold every
/// network: where three zones break the triangle inequality (fibre that
/// detours, A to C longer than A to B to C), the coordinates settle on a
/// compromise that is off by about the same amount for every pair of two
/// zones, and each node's point is off towards a far zone by about the same
/// amount for every node there. Bounded peer sets give every node measured
/// pairs with every zone, so the residuals are there to correct with.
///
/// A pair's residual is taken as the sum of what its zone pair gets wrong
/// and what each of its two ends gets wrong on its own (a node whose
/// height or point is off is off for every pair it is in). A node's mean
/// residual towards a zone holds its own error and the zone pair's (and
/// that zone's nodes' on average, which the zone pair's mean holds too), so
/// a pair's shift is the sum of its two ends' residuals towards each
/// other's zone less their zone pair's, counted once ([`Residuals::shift`]):
/// the mean of the two ends would correct half of one node's own error.
///
/// Where the coordinates cannot be corrected into telling a zone pair's
/// pairs apart, an additive model of them stands in
/// ([`Residuals::host_model`]).
#[derive(Debug, Clone, Default)]
pub struct Residuals {
    zones: usize,
    /// Indexed by `src_zone * zones + dst_zone`.
    zone_pairs: Vec<Mean>,
    /// By (node, the other end's zone).
    node_zones: HashMap<(usize, usize), Mean>,
    /// By zone pair, both directions in one (`min * zones + max`): how far
    /// the coordinates miss its measured pairs.
    spreads: Vec<Spread>,
    /// The measured pairs, for the additive model.
    measured: Vec<(End, End, f64)>,
    /// The additive model of them, fitted on first use.
    host_model: std::sync::OnceLock<HostModel>,
}

/// How a pair nobody measured is estimated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// The two nodes' coordinates, corrected by the residuals.
    Coordinates,
    /// Its zone pair's base plus each end's own delay
    /// ([`crate::host_model`]): where that misses the zone pair's measured
    /// pairs by less than the coordinates do ([`Residuals::host_model`]).
    HostDelays,
}

/// Fewest measured pairs of a zone pair that [`Residuals::host_model`]
/// judges the coordinates on: fewer say too little.
pub const MIN_PAIRS_TO_JUDGE: u32 = 3;

/// The measured pairs of one zone pair: what the coordinates got wrong on
/// them.
#[derive(Debug, Clone, Copy, Default)]
struct Spread {
    count: u32,
    residual: Moments,
}

/// Sums for a mean and a variance.
#[derive(Debug, Clone, Copy, Default)]
struct Moments {
    sum: f64,
    squares: f64,
}

impl Moments {
    fn add(&mut self, value: f64) {
        self.sum += value;
        self.squares += value * value;
    }

    fn mean(&self, count: u32) -> f64 {
        self.sum / f64::from(count.max(1))
    }

    fn variance(&self, count: u32) -> f64 {
        let mean = self.mean(count);
        (self.squares / f64::from(count.max(1)) - mean * mean).max(0.0)
    }
}

/// A running mean.
#[derive(Debug, Clone, Copy, Default)]
struct Mean {
    sum: f64,
    count: u32,
}

impl Mean {
    fn add(&mut self, value: f64) {
        self.sum += value;
        self.count += 1;
    }

    fn value(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / f64::from(self.count))
    }
}

impl Residuals {
    /// No residuals yet, for `zones` zones.
    pub fn new(zones: usize) -> Self {
        Self {
            zones,
            zone_pairs: vec![Mean::default(); zones * zones],
            node_zones: HashMap::new(),
            spreads: vec![Spread::default(); zones * zones],
            measured: Vec::new(),
            host_model: std::sync::OnceLock::new(),
        }
    }

    /// Room for `pairs` more measured pairs: a whole matrix's, taken in
    /// one allocation, holds a third less than the same grown by doubling
    /// (40 bytes a pair; 13 MB rather than 21 at 320,000 pairs, in every
    /// warm snapshot).
    pub fn reserve(&mut self, pairs: usize) {
        self.measured.reserve_exact(pairs);
    }

    /// Adds a measured pair and what the coordinates predicted for it.
    pub fn add(&mut self, src: End, dst: End, measured_ms: f64, predicted_ms: f64) {
        let residual = measured_ms - predicted_ms;
        if src.zone >= self.zones || dst.zone >= self.zones || !residual.is_finite() {
            return;
        }
        let spread = &mut self.spreads[undirected(self.zones, src.zone, dst.zone)];
        spread.count += 1;
        spread.residual.add(residual);
        self.measured.push((src, dst, measured_ms));
        self.host_model = std::sync::OnceLock::new();
        self.zone_pairs[src.zone * self.zones + dst.zone].add(residual);
        self.node_zones
            .entry((src.node, dst.zone))
            .or_default()
            .add(residual);
        self.node_zones
            .entry((dst.node, src.zone))
            .or_default()
            .add(residual);
    }

    /// `node`'s mean residual towards the nodes of `zone`.
    pub fn towards(&self, node: usize, zone: usize) -> Option<f64> {
        self.node_zones.get(&(node, zone)).and_then(Mean::value)
    }

    /// The mean residual of the pairs from `src_zone` to `dst_zone`.
    pub fn zone_pair(&self, src_zone: usize, dst_zone: usize) -> Option<f64> {
        (src_zone < self.zones && dst_zone < self.zones)
            .then(|| self.zone_pairs[src_zone * self.zones + dst_zone].value())
            .flatten()
    }

    /// The shift of a pair's prediction, from its two ends' residuals
    /// towards each other's zone and its zone pair's: both ends' less the
    /// zone pair's (each end's holds the zone pair's error too, which is
    /// counted once); one end's alone (it holds the zone pair's); or else
    /// the zone pair's.
    pub fn shift(
        src_towards: Option<f64>,
        dst_towards: Option<f64>,
        zone_pair: impl FnOnce() -> Option<f64>,
    ) -> Option<f64> {
        match (src_towards, dst_towards) {
            (Some(a), Some(b)) => Some(match zone_pair() {
                Some(pair) => a + b - pair,
                // Two ends that measured each other's zone give it one.
                None => (a + b) / 2.0,
            }),
            (Some(one), None) | (None, Some(one)) => Some(one),
            (None, None) => zone_pair(),
        }
    }

    /// The additive model's estimate of `src` -> `dst` (its zone pair's
    /// base plus each end's own delay, [`crate::host_model`]), with the
    /// root mean square of what it misses on the zone pair's measured
    /// pairs as its error, where it misses them by less than the
    /// coordinates do (their residuals shifted by their own mean); `None`
    /// with fewer than [`MIN_PAIRS_TO_JUDGE`] measured pairs.
    ///
    /// Where a few nodes probe few peers each across zones whose RTTs no
    /// plane holds (the lab: 3 zones of 3 nodes, 3 peers each, 5 + 20 < 30
    /// ms), the coordinates wander as the peer sets rotate, and their
    /// predictions of one zone pair's pairs scatter by a millisecond or
    /// more where the pairs themselves differ by tens of microseconds; no
    /// correction from a node's one or two measured pairs can take that
    /// scatter out of a pair nobody measured, but a base per zone pair and
    /// a delay per node fit them. On a large fabric the coordinates follow
    /// racks and hosts closer, and keep the estimate.
    pub fn host_model(&self, src: End, dst: End) -> Option<RttEstimate> {
        if src.zone >= self.zones || dst.zone >= self.zones {
            return None;
        }
        let model = self.host_model_fit();
        let (count, miss) = model.misses(src.zone, dst.zone)?;
        let spread = self.spreads[undirected(self.zones, src.zone, dst.zone)];
        let coordinates_miss = spread.residual.variance(spread.count);
        if count < MIN_PAIRS_TO_JUDGE
            || spread.count < MIN_PAIRS_TO_JUDGE
            || miss >= coordinates_miss
        {
            return None;
        }
        Some(RttEstimate {
            rtt_ms: model.predict(src, dst)?,
            error_ms: miss.sqrt(),
        })
    }

    /// The additive model of the measured pairs.
    pub fn host_model_fit(&self) -> &HostModel {
        self.host_model
            .get_or_init(|| HostModel::fit(self.zones, &self.measured))
    }

    /// The estimate of a pair nobody measured, from what the coordinates
    /// predict of it: the additive model's where that predicts its zone
    /// pair's measured pairs better ([`Residuals::host_model`]), else the
    /// prediction corrected ([`Residuals::correct`]); and which it is.
    pub fn estimate(&self, src: End, dst: End, predicted: RttEstimate) -> (RttEstimate, Model) {
        match self.host_model(src, dst) {
            Some(estimate) => (estimate, Model::HostDelays),
            None => (self.correct(src, dst, predicted), Model::Coordinates),
        }
    }

    /// `estimate` of the pair, corrected by the residuals (at most back to a
    /// tenth of the prediction: a correction never makes an RTT vanish),
    /// its error bound widened by the correction's size.
    pub fn correct(&self, src: End, dst: End, estimate: RttEstimate) -> RttEstimate {
        let Some(shift) = Self::shift(
            self.towards(src.node, dst.zone),
            self.towards(dst.node, src.zone),
            || self.zone_pair(src.zone, dst.zone),
        ) else {
            return estimate;
        };
        RttEstimate {
            rtt_ms: corrected(estimate.rtt_ms, shift),
            error_ms: estimate.error_ms.max(shift.abs() / 2.0),
        }
    }
}

/// The index of the zone pair {a, b}, whichever way.
fn undirected(zones: usize, a: usize, b: usize) -> usize {
    a.min(b) * zones + a.max(b)
}

/// A prediction shifted by a residual, at most back to a tenth of it.
pub fn corrected(predicted_ms: f64, shift_ms: f64) -> f64 {
    (predicted_ms + shift_ms).max(predicted_ms / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residuals_take_back_what_a_broken_triangle_costs() {
        let end = |node, zone| End { node, zone };
        let estimate = RttEstimate {
            rtt_ms: 7.0,
            error_ms: 0.5,
        };
        // Node 0 (zone 0) measured 5 ms to node 1 (zone 1) where the
        // coordinates said 7.2, and node 2 (zone 0) 5.1 to node 3 where
        // they said 6.9.
        let mut residuals = Residuals::new(3);
        residuals.add(end(0, 0), end(1, 1), 5.0, 7.2);
        residuals.add(end(2, 0), end(3, 1), 5.1, 6.9);
        // Nodes 0 and 3, never measured together: each one's own residual
        // towards the other's zone (-2.2 and -1.8).
        let corrected = residuals.correct(end(0, 0), end(3, 1), estimate);
        assert!((corrected.rtt_ms - 5.0).abs() < 1e-9, "{corrected:?}");
        assert!((corrected.error_ms - 1.0).abs() < 1e-9);
        // A node with no pair towards zone 1: the zone pair's mean (-2.0).
        let corrected = residuals.correct(end(4, 0), end(5, 1), estimate);
        assert!((corrected.rtt_ms - 5.0).abs() < 1e-9, "{corrected:?}");
        // Nothing known between zones 1 and 2, or of a zone out of range.
        assert_eq!(residuals.correct(end(6, 1), end(7, 2), estimate), estimate);
        assert_eq!(residuals.correct(end(6, 7), end(7, 0), estimate), estimate);
        // Never below a tenth of the prediction.
        residuals.add(end(8, 2), end(9, 2), 0.1, 50.0);
        assert_eq!(
            residuals.correct(end(8, 2), end(10, 2), estimate).rtt_ms,
            0.7
        );
    }
}
