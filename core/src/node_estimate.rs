//! What a pair nobody probes is taken to be, from what is known of each of
//! its ends: the nodes' network coordinates for its delay, each node's own
//! links for its loss and goodput.
//!
//! With bounded peer sets most pairs of a large zone are not probed at any
//! moment. Their zone pair's average ([`crate::estimate`]) makes every such
//! pair alike, so a node with a slow NIC or a lossy port looks like its
//! zone-mates on every pair nobody probes. Here each end counts:
//!
//! - delay: the RTT the coordinates put between the two ends, corrected by
//!   what they got wrong on the measured pairs (each node's mean residual
//!   towards the other end's zone, else the zone pair's, as the `Estimate`
//!   call corrects: [`crate::residuals::Residuals`]), scored with the
//!   delay term;
//! - loss: each end's own loss ([`crate::node_health`]: the lower median
//!   over its links inside its zone), combined, and at least the median
//!   loss of the zone pair's measured pairs (the path's own);
//! - goodput: the least of each end's usual goodput and the zone pair's
//!   median.
//!
//! Every such term pays a share of [`Fallback::penalty`]
//! ([`crate::score::ESTIMATE_PENALTY_SHARE`]), so an estimate never beats a
//! measured pair of the same figures, and its source is
//! [`Source::Estimated`]. A term with nothing to go on at either end falls
//! back to the zone pair's average.
//!
//! Placement counts the pairs nobody probes between a node and a set of
//! nodes (the placed workers of a zone, or a whole zone), not pair by pair
//! (5,000 candidates times a zone of 500 would be millions per call), so
//! one end may be a [`Group`]: its nodes' centroid with their spread (the
//! distance to a group is the root mean square distance to its nodes),
//! their mean height, and their median loss and goodput. Everything here
//! is built from the scored matrix alone, so a consumer of the collector's
//! matrix works out the same estimates.

use crate::coordinates::{self, Coordinate, DIMENSIONS, difference, magnitude};
use crate::estimate::Estimate;
use crate::node_health::NodeHealth;
use crate::residuals::{self, Residuals};
use crate::score::{Fallback, Source, Terms};
use crate::scored_pair::ScoredPair;
use crate::stats::lower_median;

/// One end of a pair nobody probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum End<'g> {
    /// A node, by index into the matrix's nodes.
    Node(usize),
    /// Nodes of one zone taken together ([`EndEstimates::group`]).
    Group(&'g Group),
}

/// Nodes of one zone taken together as one end of their pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    zone: usize,
    /// The members, when few enough to read each one's residuals; a
    /// zone's whole group goes by its zone pairs' residuals instead.
    members: Vec<usize>,
    /// Where the members with coordinates sit; `None` when none has one.
    shape: Option<Shape>,
    loss: Option<f64>,
    goodput_bps: Option<f64>,
}

impl Group {
    /// The zone of its members.
    pub fn zone(&self) -> usize {
        self.zone
    }
}

/// Where a set of nodes sits in the coordinate space: a node's point (no
/// spread), or a group's centroid with the mean squared distance of its
/// members from it, so that the distance to the group is the root mean
/// square distance to its members.
#[derive(Debug, Clone, PartialEq)]
struct Shape {
    centroid: [f64; DIMENSIONS],
    spread: f64,
    height: f64,
    adjustment: f64,
}

impl Shape {
    fn of_node(coordinate: &Coordinate) -> Self {
        Self {
            centroid: coordinate.vec,
            spread: 0.0,
            height: coordinate.height,
            adjustment: coordinate.adjustment,
        }
    }

    /// The shapes taken together: the mean of their centroids, spread by
    /// how far each lies from it and by its own spread.
    fn of<'s>(shapes: impl Iterator<Item = &'s Shape>) -> Option<Self> {
        let shapes: Vec<&Shape> = shapes.collect();
        if shapes.is_empty() {
            return None;
        }
        let count = shapes.len() as f64;
        let mean = |f: &dyn Fn(&Shape) -> f64| shapes.iter().map(|s| f(s)).sum::<f64>() / count;
        let centroid = std::array::from_fn(|k| mean(&|s| s.centroid[k]));
        Some(Self {
            spread: mean(&|s| magnitude(&difference(&s.centroid, &centroid)).powi(2) + s.spread),
            height: mean(&|s| s.height),
            adjustment: mean(&|s| s.adjustment),
            centroid,
        })
    }

    /// The RTT (ms) between two shapes, as [`Coordinate::rtt_ms`] computes
    /// it between two nodes.
    fn rtt_ms(&self, other: &Shape) -> f64 {
        let squared = magnitude(&difference(&self.centroid, &other.centroid)).powi(2);
        let raw = (squared + self.spread + other.spread).sqrt() + self.height + other.height;
        let adjusted = raw + self.adjustment + other.adjustment;
        if adjusted > 0.0 { adjusted } else { raw }
    }
}

/// What is known of one node.
#[derive(Debug, Clone, Default)]
struct NodeEnd {
    zone: Option<usize>,
    shape: Option<Shape>,
    loss: Option<f64>,
    goodput_bps: Option<f64>,
}

/// What the measured pairs of one zone pair say.
#[derive(Debug, Clone, Default)]
struct Path {
    /// Median loss of the fresh pairs.
    loss: Option<f64>,
    /// Median fresh goodput.
    goodput_bps: Option<f64>,
}

/// Each node's figures, each zone's as a group, and each zone pair's:
/// built once per scored matrix, read for every pair placement estimates.
#[derive(Debug, Clone, Default)]
pub struct EndEstimates {
    zones: usize,
    nodes: Vec<NodeEnd>,
    /// Each zone's nodes as a group.
    zone_groups: Vec<Group>,
    /// Indexed by `src_zone * zones + dst_zone`.
    paths: Vec<Path>,
    /// What the coordinates got wrong on the measured pairs.
    residuals: Residuals,
}

impl EndEstimates {
    /// The figures of `zones` zones whose nodes have the given zones (by
    /// node index), coordinates and health, from the scored pairs.
    pub fn of(
        zones: usize,
        node_zones: &[usize],
        coordinates: &[Option<&Coordinate>],
        health: &[NodeHealth],
        pairs: &[ScoredPair],
    ) -> Self {
        let nodes: Vec<NodeEnd> = (0..node_zones.len())
            .map(|i| NodeEnd {
                zone: Some(node_zones[i]).filter(|&z| z < zones),
                shape: coordinates.get(i).copied().flatten().map(Shape::of_node),
                loss: health
                    .get(i)
                    .and_then(|h| h.loss)
                    .filter(|l| (0.0..=1.0).contains(l)),
                goodput_bps: health
                    .get(i)
                    .and_then(|h| h.goodput_bps)
                    .filter(|g| g.is_finite() && *g >= 0.0),
            })
            .collect();
        let mut estimates = Self {
            zones,
            nodes,
            zone_groups: Vec::new(),
            paths: Vec::new(),
            residuals: Residuals::new(zones),
        };
        let mut members: Vec<Vec<usize>> = vec![Vec::new(); zones];
        for (i, node) in estimates.nodes.iter().enumerate() {
            if let Some(zone) = node.zone {
                members[zone].push(i);
            }
        }
        estimates.zone_groups = members
            .into_iter()
            .enumerate()
            .map(|(zone, members)| Group {
                members: Vec::new(),
                ..estimates.group(zone, members.into_iter())
            })
            .collect();
        (estimates.paths, estimates.residuals) = estimates.paths_of(pairs);
        estimates
    }

    /// `members` (node indices, of `zone`) taken together as one end.
    pub fn group(&self, zone: usize, members: impl Iterator<Item = usize>) -> Group {
        let indices: Vec<usize> = members.filter(|&i| i < self.nodes.len()).collect();
        let members: Vec<&NodeEnd> = indices.iter().map(|&i| &self.nodes[i]).collect();
        let median = |f: fn(&NodeEnd) -> Option<f64>| {
            lower_median(&mut members.iter().filter_map(|n| f(n)).collect::<Vec<_>>())
        };
        Group {
            zone,
            members: indices,
            shape: Shape::of(members.iter().filter_map(|n| n.shape.as_ref())),
            loss: median(|n| n.loss),
            goodput_bps: median(|n| n.goodput_bps),
        }
    }

    /// Nothing known of any node or zone pair: every estimate is its zone
    /// pair's average.
    pub fn zone_averages_only(zones: usize) -> Self {
        Self {
            zones,
            zone_groups: (0..zones)
                .map(|zone| Group {
                    zone,
                    members: Vec::new(),
                    shape: None,
                    loss: None,
                    goodput_bps: None,
                })
                .collect(),
            ..Self::default()
        }
    }

    /// A zone's nodes taken together.
    pub fn zone_group(&self, zone: usize) -> Option<&Group> {
        self.zone_groups.get(zone)
    }

    fn paths_of(&self, pairs: &[ScoredPair]) -> (Vec<Path>, Residuals) {
        #[derive(Default, Clone)]
        struct Gathered {
            losses: Vec<f64>,
            goodputs: Vec<f64>,
        }
        let mut gathered = vec![Gathered::default(); self.zones * self.zones];
        let mut residuals = Residuals::new(self.zones);
        residuals.reserve(pairs.len());
        for pair in pairs.iter().filter(|p| !p.stale && !p.terms.dead) {
            let (Some(src_zone), Some(dst_zone)) = (
                self.zone(End::Node(pair.src)),
                self.zone(End::Node(pair.dst)),
            ) else {
                continue;
            };
            let slot = &mut gathered[src_zone * self.zones + dst_zone];
            if let Some(loss) = pair.summary.loss_ratio.filter(|l| (0.0..=1.0).contains(l)) {
                slot.losses.push(loss);
            }
            if let Some(goodput) = pair.fresh_goodput().filter(|g| g.is_finite() && *g >= 0.0) {
                slot.goodputs.push(goodput);
            }
            if pair.terms.delay_source != Source::Measured {
                continue;
            }
            if let (Some(measured), Some(predicted)) = (
                effective_rtt_ms(pair),
                self.coordinate_rtt(End::Node(pair.src), End::Node(pair.dst)),
            ) {
                let end = |node, zone| coordinates::End { node, zone };
                residuals.add(
                    end(pair.src, src_zone),
                    end(pair.dst, dst_zone),
                    measured,
                    predicted,
                );
            }
        }
        let paths = gathered
            .into_iter()
            .map(|mut g| Path {
                loss: lower_median(&mut g.losses),
                goodput_bps: lower_median(&mut g.goodputs),
            })
            .collect();
        (paths, residuals)
    }

    /// An end's mean residual towards the nodes of `zone`: a node's own, a
    /// small group's members' mean; `None` for a zone's whole group, which
    /// its zone pair's residual stands for.
    fn towards(&self, end: End<'_>, zone: usize) -> Option<f64> {
        match end {
            End::Node(node) => self.residuals.towards(node, zone),
            End::Group(group) => {
                let known: Vec<f64> = group
                    .members
                    .iter()
                    .filter_map(|&m| self.residuals.towards(m, zone))
                    .collect();
                (!known.is_empty()).then(|| known.iter().sum::<f64>() / known.len() as f64)
            }
        }
    }

    fn zone(&self, end: End<'_>) -> Option<usize> {
        match end {
            End::Node(node) => self.nodes.get(node)?.zone,
            End::Group(group) => (group.zone < self.zones).then_some(group.zone),
        }
    }

    fn shape<'s>(&'s self, end: End<'s>) -> Option<&'s Shape> {
        match end {
            End::Node(node) => self.nodes.get(node)?.shape.as_ref(),
            End::Group(group) => group.shape.as_ref(),
        }
    }

    /// An end's own loss and goodput: a node's from its links, a group's
    /// median node's.
    fn figures(&self, end: End<'_>) -> (Option<f64>, Option<f64>) {
        match end {
            End::Node(node) => self
                .nodes
                .get(node)
                .map_or((None, None), |n| (n.loss, n.goodput_bps)),
            End::Group(group) => (group.loss, group.goodput_bps),
        }
    }

    /// The coordinates' RTT between two ends, uncorrected.
    fn coordinate_rtt(&self, src: End<'_>, dst: End<'_>) -> Option<f64> {
        Some(self.shape(src)?.rtt_ms(self.shape(dst)?))
    }

    /// The RTT (ms) between the ends as a pair of nodes is estimated: the
    /// additive model's where that predicts their zone pair better
    /// ([`Residuals::host_model`]; a group's delay is its members' mean),
    /// else what the coordinates put between them, corrected by the
    /// residuals as [`Residuals::correct`] corrects a pair of nodes.
    pub fn rtt_ms(&self, src: End<'_>, dst: End<'_>) -> Option<f64> {
        let predicted = self.coordinate_rtt(src, dst)?;
        let (src_zone, dst_zone) = (self.zone(src)?, self.zone(dst)?);
        if let Some(rtt) = self.host_model_rtt(src, dst, src_zone, dst_zone) {
            return Some(rtt);
        }
        let shift = Residuals::shift(
            self.towards(src, dst_zone),
            self.towards(dst, src_zone),
            || self.residuals.zone_pair(src_zone, dst_zone),
        );
        let rtt = shift.map_or(predicted, |shift| residuals::corrected(predicted, shift));
        rtt.is_finite().then_some(rtt)
    }

    /// The additive model's RTT between the ends, where it predicts their
    /// zone pair better than the coordinates: a node as itself, a group as
    /// a member of its zone with its members' mean delay.
    fn host_model_rtt(
        &self,
        src: End<'_>,
        dst: End<'_>,
        src_zone: usize,
        dst_zone: usize,
    ) -> Option<f64> {
        // Judged on a stand-in of each end (a group's delay is added below).
        let stand_in = |end: End<'_>, zone| coordinates::End {
            node: match end {
                End::Node(node) => node,
                End::Group(_) => usize::MAX,
            },
            zone,
        };
        let base = self
            .residuals
            .host_model(stand_in(src, src_zone), stand_in(dst, dst_zone))?
            .rtt_ms;
        let model = self.residuals.host_model_fit();
        let group_delay = |end: End<'_>| match end {
            End::Node(_) => 0.0,
            End::Group(group) => {
                let delays: Vec<f64> = group
                    .members
                    .iter()
                    .filter_map(|&m| model.delay(m))
                    .collect();
                crate::stats::mean(&delays).unwrap_or(0.0)
            }
        };
        Some(base + group_delay(src) + group_delay(dst))
    }

    fn path(&self, src: End<'_>, dst: End<'_>) -> Option<&Path> {
        let (src_zone, dst_zone) = (self.zone(src)?, self.zone(dst)?);
        self.paths.get(src_zone * self.zones + dst_zone)
    }

    /// The pair src -> dst, nobody probing it: each term estimated from
    /// its ends where they say enough, else `zone_average`'s.
    pub fn estimate(
        &self,
        src: End<'_>,
        dst: End<'_>,
        zone_average: &Estimate,
        fallback: &Fallback,
    ) -> Estimate {
        let average = &zone_average.terms;
        let Some(path) = self.path(src, dst) else {
            return *zone_average;
        };
        let estimated = |term: f64| (fallback.estimated(term), Source::Estimated);
        let delay = match self.rtt_ms(src, dst) {
            Some(rtt) => estimated(fallback.delay_term(rtt)),
            None => (average.delay, average.delay_source),
        };
        let ((src_loss, src_goodput), (dst_loss, dst_goodput)) =
            (self.figures(src), self.figures(dst));
        let loss = match (src_loss, dst_loss) {
            (Some(a), Some(b)) => {
                let ends = 1.0 - (1.0 - a) * (1.0 - b);
                estimated(fallback.loss_term(path.loss.map_or(ends, |p| p.max(ends))))
            }
            _ => (average.loss, average.loss_source),
        };
        let throughput = match (src_goodput, dst_goodput) {
            (Some(a), Some(b)) => {
                let ends = a.min(b);
                estimated(fallback.throughput_term(path.goodput_bps.map_or(ends, |p| p.min(ends))))
            }
            _ => (average.throughput, average.throughput_source),
        };
        let terms = Terms::of(delay, loss, throughput, false);
        Estimate {
            quality: fallback.quality(&terms),
            terms,
        }
    }
}

/// A pair's median plus jitter: what its delay term was scored on (only
/// figures that make sense: a matrix may come from the wire).
fn effective_rtt_ms(pair: &ScoredPair) -> Option<f64> {
    let median = pair.summary.rtt_median_ms?;
    let effective = median + pair.summary.jitter_ms.unwrap_or(0.0);
    (effective.is_finite() && effective >= 0.0).then_some(effective)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::{JobRequest, PlacementConfig, Placer};
    use crate::scored::ScoredMatrix;
    use crate::scored::tests::{scored, with_coordinates};
    use proptest::prelude::*;

    const ZONE: [(&str, &str); 6] = [
        ("a1", "a"),
        ("a2", "a"),
        ("a3", "a"),
        ("a4", "a"),
        ("a5", "a"),
        ("a6", "a"),
    ];

    /// A node at `x` on the first axis with `height` (ms).
    fn at(x: f64, height: f64) -> Coordinate {
        let mut vec = [0.0; DIMENSIONS];
        vec[0] = x;
        Coordinate {
            vec,
            error: 0.1,
            height,
            adjustment: 0.0,
        }
    }

    /// Each node of `ZONE` probing the next two in a ring, with the RTT
    /// and loss `figures` gives the pair.
    /// Each node probes its two neighbours on a ring, so that each pair of
    /// neighbours is measured both ways and no other pair either way.
    fn ring(figures: impl Fn(&str, &str) -> (f64, f64)) -> ScoredMatrix {
        let mut measured = Vec::new();
        for (i, (src, _)) in ZONE.iter().enumerate() {
            for step in [1, ZONE.len() - 1] {
                let dst = ZONE[(i + step) % ZONE.len()].0;
                let (rtt, loss) = figures(src, dst);
                measured.push((*src, dst, rtt, loss));
            }
        }
        scored(&ZONE, &measured, 10_000)
    }

    fn first_worker_terms(matrix: &ScoredMatrix) -> Vec<(String, f64)> {
        let job = JobRequest {
            size: 1,
            ..JobRequest::default()
        };
        let placer = Placer::new(matrix.clone(), PlacementConfig::default());
        let ranking = placer.rank(&job);
        ranking
            .nodes
            .iter()
            .map(|n| (n.name.to_owned(), n.terms.delay))
            .collect()
    }

    #[test]
    fn a_slow_node_is_told_apart_on_the_pairs_nobody_probes() {
        // a6's host adds 0.5 ms to each of its paths; the others 0.05.
        let height = |name: &str| if name == "a6" { 0.5 } else { 0.05 };
        let matrix = ring(|src, dst| (height(src) + height(dst), 0.0));
        let coordinates = with_coordinates(&matrix, |name| Some(at(0.0, height(name))));
        let gap = |matrix: &ScoredMatrix| {
            let terms = first_worker_terms(matrix);
            let slow = terms.iter().find(|(n, _)| n == "a6").unwrap().1;
            let best = terms.iter().map(|(_, d)| *d).fold(0.0, f64::max);
            best - slow
        };
        let with_ends = gap(&coordinates);
        let zone_averages_only =
            gap(
                &with_coordinates(&matrix, |name| Some(at(0.0, height(name))))
                    .with_zone_averages_only(),
            );
        // Each node measures 4 of its 10 pairs; the other 6 tell a6 apart
        // only through its coordinate.
        assert!(with_ends > 0.0 && zone_averages_only > 0.0);
        assert!(
            with_ends > 1.5 * zone_averages_only,
            "{with_ends} vs {zone_averages_only}"
        );
        let a6 = coordinates.index_of("a6").unwrap();
        let a1 = coordinates.index_of("a1").unwrap();
        let a4 = coordinates.index_of("a4").unwrap();
        // a1 -> a4 is not probed: the coordinates put it at 0.1 ms.
        assert!(coordinates.pair(a1, a4).is_none());
        let rtt = coordinates
            .estimated_rtt_ms(End::Node(a1), End::Node(a4))
            .unwrap();
        assert!(crate::rings::is_kept_as(rtt, 0.1), "{rtt}");
        let estimate = coordinates.estimate(a1, a4);
        assert_eq!(estimate.terms.delay_source, Source::Estimated);
        assert!(coordinates.pair(a6, a4).is_none());
        assert!(coordinates.estimate(a6, a4).terms.delay < estimate.terms.delay);
    }

    #[test]
    fn a_lossy_node_carries_its_loss_to_the_pairs_nobody_probes() {
        let lossy = |name: &str| name == "a3";
        let matrix = ring(|src, dst| (0.2, if lossy(src) || lossy(dst) { 0.2 } else { 0.0 }));
        let index = |name| matrix.index_of(name).unwrap();
        // Neither pair is probed; only a3's own links say it loses.
        let (from_lossy, clean) = (
            matrix.estimate(index("a3"), index("a6")),
            matrix.estimate(index("a1"), index("a4")),
        );
        assert!(matrix.pair(index("a3"), index("a6")).is_none());
        assert!(matrix.pair(index("a1"), index("a4")).is_none());
        assert_eq!(from_lossy.terms.loss_source, Source::Estimated);
        assert_eq!(from_lossy.terms.loss, 0.0);
        let penalty = matrix.fallback().penalty * crate::score::ESTIMATE_PENALTY_SHARE;
        assert!((clean.terms.loss - (1.0 - penalty)).abs() < 1e-9);
        // Without coordinates the delay is the zone pair's average.
        assert_eq!(clean.terms.delay_source, Source::ZoneAverage);
    }

    proptest! {
        /// However the measured pairs look, an estimated pair with the same
        /// figures scores below them: the penalty is paid on every term.
        #[test]
        fn an_estimate_never_beats_a_measured_pair_of_the_same_figures(
            rtt in 0.01f64..50.0,
            loss in 0.0f64..0.2,
            share in 0.0f64..4.0,
        ) {
            // Coordinates off by up to a factor of 4 (a correction takes
            // an RTT back to a tenth of the prediction at most).
            let height = rtt * share;
            let matrix = ring(|_, _| (rtt, loss));
            let matrix = with_coordinates(&matrix, |_| Some(at(0.0, height)));
            let measured = matrix.pairs().iter().map(|p| p.quality).fold(f64::INFINITY, f64::min);
            for src in 0..ZONE.len() {
                for dst in (0..ZONE.len()).filter(|&dst| dst != src) {
                    if matrix.pair(src, dst).is_some() {
                        continue;
                    }
                    let estimate = matrix.estimate(src, dst);
                    prop_assert_eq!(estimate.terms.delay_source, Source::Estimated);
                    // The coordinates' error is corrected away: the same RTT.
                    let rtt_estimate = matrix.estimated_rtt_ms(End::Node(src), End::Node(dst)).unwrap();
                    prop_assert!((rtt_estimate - rtt).abs() < 1e-6 * rtt.max(1.0));
                    prop_assert!(estimate.quality < measured, "{} vs {}", estimate.quality, measured);
                }
            }
        }
    }
}
