//! Network coordinates: a point per node such that the distance between two
//! nodes' points predicts their round-trip time, so that the pairs nobody
//! probes (bounded peer sets, `crate::peers`) still get an RTT estimate,
//! with an error estimate beside it.
//!
//! The method is Vivaldi with height vectors (Dabek et al., SIGCOMM 2004),
//! as Serf and Consul run it: 8 dimensions, a height per node for its access
//! link (what every path to it pays), an adaptive step weighted by each
//! side's confidence, a per-node adjustment (the mean residual over its
//! last samples, which absorbs what a Euclidean space cannot), and a weak
//! gravity towards the origin so that the whole system does not drift.
//! Serf's nodes each move their own point after each probe; the collector
//! sees every measured median, so it moves both ends of each pair.
//!
//! Pure: RTTs in, coordinates out, no clock; the order of samples is the
//! caller's, and the one source of chance (a direction for two nodes at the
//! same point) is a hash of their numbers.

use foldhash::{HashMap, HashMapExt};
use thiserror::Error;

/// Dimensions of the Euclidean part (Serf's default).
pub const DIMENSIONS: usize = 8;

/// Vivaldi's constants, with Serf's defaults in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VivaldiConfig {
    /// Largest (and starting) relative error of a coordinate.
    pub error_max: f64,
    /// How fast a node's error estimate follows new samples.
    pub ce: f64,
    /// How far a node moves towards a sample's answer (its step).
    pub cc: f64,
    /// Least height (ms): every path pays something to leave a node.
    pub height_min_ms: f64,
    /// Samples in each node's adjustment window.
    pub adjustment_window: usize,
    /// Distance (ms) at which the pull to the origin equals a 1 ms step.
    pub gravity_rho_ms: f64,
}

impl Default for VivaldiConfig {
    fn default() -> Self {
        Self {
            error_max: 1.5,
            ce: 0.25,
            cc: 0.25,
            height_min_ms: 0.01,
            adjustment_window: 20,
            gravity_rho_ms: 150_000.0,
        }
    }
}

/// Largest RTT a sample may carry: anything longer is not a network path.
pub const MAX_SAMPLE_MS: f64 = 60_000.0;

/// A sample the coordinates cannot use.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum BadSample {
    /// Not a finite positive time below [`MAX_SAMPLE_MS`].
    #[error("an RTT of {0} ms is not a usable sample")]
    Rtt(f64),
    /// A node probing itself.
    #[error("a node's RTT to itself")]
    SelfPair,
}

/// One node's place.
#[derive(Debug, Clone, PartialEq)]
pub struct Coordinate {
    /// The Euclidean part (ms).
    pub vec: [f64; DIMENSIONS],
    /// Its relative error estimate, in (0, error_max].
    pub error: f64,
    /// The height (ms): the node's own share of every path.
    pub height: f64,
    /// The correction to distances from this node (ms).
    pub adjustment: f64,
}

impl Coordinate {
    fn origin(config: &VivaldiConfig) -> Self {
        Self {
            vec: [0.0; DIMENSIONS],
            error: config.error_max,
            height: config.height_min_ms,
            adjustment: 0.0,
        }
    }

    /// Distance without the adjustments: Euclidean part plus both heights.
    fn raw_distance(&self, other: &Self) -> f64 {
        magnitude(&difference(&self.vec, &other.vec)) + self.height + other.height
    }

    /// The RTT (ms) these coordinates predict between the two nodes.
    pub fn rtt_ms(&self, other: &Self) -> f64 {
        let raw = self.raw_distance(other);
        let adjusted = raw + self.adjustment + other.adjustment;
        if adjusted > 0.0 { adjusted } else { raw }
    }

    /// How far (ms) the prediction may be off: the prediction times the
    /// mean of both nodes' relative errors.
    pub fn error_ms(&self, other: &Self) -> f64 {
        self.rtt_ms(other) * (self.error + other.error) / 2.0
    }

    /// The RTT these coordinates predict between the two nodes, and how
    /// far it may be off.
    pub fn estimate(&self, other: &Self) -> RttEstimate {
        RttEstimate {
            rtt_ms: self.rtt_ms(other),
            error_ms: self.error_ms(other),
        }
    }

    fn is_finite(&self) -> bool {
        self.vec.iter().all(|v| v.is_finite())
            && self.error.is_finite()
            && self.height.is_finite()
            && self.adjustment.is_finite()
    }
}

/// An RTT estimate between two nodes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RttEstimate {
    /// Predicted RTT (ms).
    pub rtt_ms: f64,
    /// How far it may be off (ms).
    pub error_ms: f64,
}

/// One end of a pair: a node and its zone, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    /// The node.
    pub node: usize,
    /// Its zone.
    pub zone: usize,
}

#[derive(Debug, Clone)]
struct NodeState {
    coordinate: Coordinate,
    /// Recent residuals (measured - raw distance), a ring.
    residuals: Vec<f64>,
    next_residual: usize,
}

/// The coordinates of every node seen in a sample, by name.
#[derive(Debug, Clone)]
pub struct Coordinates {
    config: VivaldiConfig,
    index: HashMap<String, usize>,
    nodes: Vec<NodeState>,
}

impl Default for Coordinates {
    fn default() -> Self {
        Self::new(VivaldiConfig::default())
    }
}

impl Coordinates {
    /// No nodes yet.
    pub fn new(config: VivaldiConfig) -> Self {
        Self {
            config,
            index: HashMap::new(),
            nodes: Vec::new(),
        }
    }

    /// Nodes with a coordinate.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node has one.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `name`'s coordinate, if it was in a sample.
    pub fn coordinate(&self, name: &str) -> Option<&Coordinate> {
        self.index.get(name).map(|&i| &self.nodes[i].coordinate)
    }

    /// The predicted RTT between two nodes, if both have coordinates.
    pub fn estimate(&self, a: &str, b: &str) -> Option<RttEstimate> {
        Some(self.coordinate(a)?.estimate(self.coordinate(b)?))
    }

    /// Moves both nodes after a measured RTT (ms) between them: each
    /// towards where the other's point says it should be.
    pub fn observe(&mut self, a: &str, b: &str, rtt_ms: f64) -> Result<(), BadSample> {
        if !(rtt_ms.is_finite() && rtt_ms > 0.0 && rtt_ms <= MAX_SAMPLE_MS) {
            return Err(BadSample::Rtt(rtt_ms));
        }
        if a == b {
            return Err(BadSample::SelfPair);
        }
        let (a, b) = (self.node(a), self.node(b));
        let (before_a, before_b) = (
            self.nodes[a].coordinate.clone(),
            self.nodes[b].coordinate.clone(),
        );
        self.update(a, &before_b, rtt_ms, (a, b));
        self.update(b, &before_a, rtt_ms, (b, a));
        Ok(())
    }

    /// Keeps only the nodes `keep` says yes to (the others left the
    /// cluster).
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        if self.index.keys().all(|name| keep(name)) {
            return;
        }
        let mut kept: Vec<(String, NodeState)> = std::mem::take(&mut self.index)
            .into_iter()
            .filter(|(name, _)| keep(name))
            .map(|(name, i)| (name, self.nodes[i].clone()))
            .collect();
        kept.sort_by(|a, b| a.0.cmp(&b.0));
        self.nodes = Vec::with_capacity(kept.len());
        for (name, state) in kept {
            self.index.insert(name, self.nodes.len());
            self.nodes.push(state);
        }
    }

    fn node(&mut self, name: &str) -> usize {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.nodes.len();
        self.index.insert(name.to_owned(), i);
        self.nodes.push(NodeState {
            coordinate: Coordinate::origin(&self.config),
            residuals: vec![0.0; self.config.adjustment_window],
            next_residual: 0,
        });
        i
    }

    /// One Vivaldi step of node `i` against `other`, then its adjustment
    /// and gravity (Serf's `Client.Update`).
    fn update(&mut self, i: usize, other: &Coordinate, rtt_ms: f64, pair: (usize, usize)) {
        let config = self.config;
        let node = &mut self.nodes[i];
        let before = node.coordinate.clone();
        let mut c = before.clone();
        let distance = c.raw_distance(other);
        let wrongness = (distance - rtt_ms).abs() / rtt_ms;
        let total_error = (c.error + other.error).max(f64::EPSILON);
        let weight = c.error / total_error;
        c.error = (config.ce * weight * wrongness + c.error * (1.0 - config.ce * weight))
            .clamp(f64::EPSILON, config.error_max);
        let force = config.cc * weight * (rtt_ms - distance);
        apply_force(&config, &mut c, force, other, pair);
        if let Some(slot) = node.residuals.get_mut(node.next_residual) {
            *slot = rtt_ms - c.raw_distance(other);
            node.next_residual = (node.next_residual + 1) % node.residuals.len();
            c.adjustment = node.residuals.iter().sum::<f64>() / (2.0 * node.residuals.len() as f64);
        }
        let origin = Coordinate::origin(&config);
        let from_origin = c.raw_distance(&origin);
        let pull = -(from_origin / config.gravity_rho_ms).powi(2);
        apply_force(&config, &mut c, pull, &origin, pair);
        // A sample that broke the arithmetic leaves the node where it was.
        node.coordinate = if c.is_finite() { c } else { before };
    }
}

/// Moves `c` by `force` (ms) along the line from `other` to `c`, and its
/// height by the same share.
fn apply_force(
    config: &VivaldiConfig,
    c: &mut Coordinate,
    force: f64,
    other: &Coordinate,
    pair: (usize, usize),
) {
    let away = difference(&c.vec, &other.vec);
    let length = magnitude(&away);
    let unit = if length > 1e-9 {
        away.map(|v| v / length)
    } else {
        direction(pair)
    };
    for (v, u) in c.vec.iter_mut().zip(unit) {
        *v += u * force;
    }
    if length > 1e-9 {
        c.height =
            ((c.height + other.height) * force / length + c.height).max(config.height_min_ms);
    }
}

pub(crate) fn difference(a: &[f64; DIMENSIONS], b: &[f64; DIMENSIONS]) -> [f64; DIMENSIONS] {
    std::array::from_fn(|k| a[k] - b[k])
}

pub(crate) fn magnitude(v: &[f64; DIMENSIONS]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// A unit vector that depends on the pair only: two nodes at the same
/// point are pushed apart the same way every time (splitmix64).
fn direction((a, b): (usize, usize)) -> [f64; DIMENSIONS] {
    let mut state = (a as u64) << 32 ^ b as u64;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / u64::MAX as f64 - 0.5
    };
    let v: [f64; DIMENSIONS] = std::array::from_fn(|_| next());
    let length = magnitude(&v).max(1e-12);
    v.map(|x| x / length)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Points in a plane plus a height each: a space Vivaldi can embed.
    fn synthetic(n: usize, seed: u64) -> Vec<([f64; 2], f64)> {
        let mut state = seed;
        let mut next = move || {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        (0..n)
            .map(|_| ([next() * 40.0, next() * 40.0], 0.05 + next() * 0.5))
            .collect()
    }

    fn truth(points: &[([f64; 2], f64)], a: usize, b: usize) -> f64 {
        let (pa, ha) = points[a];
        let (pb, hb) = points[b];
        ((pa[0] - pb[0]).powi(2) + (pa[1] - pb[1]).powi(2)).sqrt() + ha + hb
    }

    fn name(i: usize) -> String {
        format!("n{i}")
    }

    #[test]
    fn converges_on_a_metric_space_and_predicts_pairs_never_sampled() {
        let n = 60;
        let points = synthetic(n, 7);
        let mut coordinates = Coordinates::default();
        // Each node samples 8 others (a stride of its own); the other
        // pairs are never seen.
        let peers = |a: usize| (1..=8).map(move |k| (a + k * (1 + a % 7)) % n);
        let sampled = |a: usize, b: usize| peers(a).any(|p| p == b) || peers(b).any(|p| p == a);
        for _ in 0..100 {
            for a in 0..n {
                for b in peers(a).filter(|&b| b != a) {
                    coordinates
                        .observe(&name(a), &name(b), truth(&points, a, b))
                        .expect("a good sample");
                }
            }
        }
        let mut errors: Vec<f64> = (0..n)
            .flat_map(|a| (0..n).map(move |b| (a, b)))
            .filter(|&(a, b)| a != b && !sampled(a, b))
            .map(|(a, b)| {
                let estimate = coordinates.estimate(&name(a), &name(b)).expect("both");
                (estimate.rtt_ms - truth(&points, a, b)).abs() / truth(&points, a, b)
            })
            .collect();
        errors.sort_by(f64::total_cmp);
        let median = errors[errors.len() / 2];
        assert!(median < 0.15, "median relative error {median}");
    }

    #[test]
    fn bad_samples_are_refused_and_change_nothing() {
        let mut coordinates = Coordinates::default();
        coordinates.observe("a", "b", 1.0).expect("good");
        let before = coordinates.coordinate("a").cloned();
        for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e9] {
            assert!(matches!(
                coordinates.observe("a", "b", bad),
                Err(BadSample::Rtt(_))
            ));
        }
        assert_eq!(coordinates.observe("a", "a", 1.0), Err(BadSample::SelfPair));
        assert_eq!(coordinates.coordinate("a").cloned(), before);
        assert!(coordinates.estimate("a", "c").is_none());
    }

    #[test]
    fn a_forgotten_node_is_gone_and_the_others_keep_theirs() {
        let mut coordinates = Coordinates::default();
        for (a, b) in [("a", "b"), ("b", "c"), ("c", "a")] {
            coordinates.observe(a, b, 2.0).expect("good");
        }
        let c = coordinates.coordinate("c").cloned();
        coordinates.retain(|name| name != "a");
        assert!(coordinates.coordinate("a").is_none());
        assert_eq!(coordinates.coordinate("c").cloned(), c);
        assert_eq!(coordinates.len(), 2);
    }

    proptest! {
        #[test]
        fn coordinates_stay_finite_and_bounded_whatever_the_samples(
            samples in proptest::collection::vec((0usize..6, 0usize..6, 0.001f64..60_000.0), 1..300),
        ) {
            let mut coordinates = Coordinates::default();
            let config = VivaldiConfig::default();
            for (a, b, rtt) in samples {
                let _ = coordinates.observe(&name(a), &name(b), rtt);
            }
            for i in 0..6 {
                if let Some(c) = coordinates.coordinate(&name(i)) {
                    prop_assert!(c.is_finite());
                    prop_assert!(c.error > 0.0 && c.error <= config.error_max);
                    prop_assert!(c.height >= config.height_min_ms);
                    // No point strays past the longest sample by much.
                    prop_assert!(magnitude(&c.vec) < 10.0 * MAX_SAMPLE_MS);
                }
                for j in 0..6 {
                    if let Some(e) = coordinates.estimate(&name(i), &name(j)) {
                        prop_assert!(e.rtt_ms.is_finite() && e.rtt_ms >= 0.0);
                        prop_assert!(e.error_ms.is_finite() && e.error_ms >= 0.0);
                    }
                }
            }
        }
    }
}
